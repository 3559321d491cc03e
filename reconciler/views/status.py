"""`asg-reconciler status`: what is there now, per node group, and what to worry about. Read-only.

With `git.url` set, each group is also compared with the manifest on `git.branch` (the same baseline
arithmetic the planner uses, DESIGN §3.1): increases committed but not applied, approved removals not
applied, and an AWS desired above the manifest (changed outside the tool, or lowered by hand).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from reconciler.config.settings import ScaleUpConfig
from reconciler.domain.inventory import GroupInventory, Inventory
from reconciler.domain.model import CPU, MEMORY
from reconciler.domain.quantity import format_bytes, format_cpu
from reconciler.planning.baseline import GONE, baseline
from reconciler.planning.launch_failures import launch_failure
from reconciler.planning.types import CommittedGroup, LaunchFailure
from reconciler.planning.unknown_groups import not_node_groups
from reconciler.views.output import table, to_csv


@dataclass(frozen=True)
class GroupStatus:
    name: str
    min_size: int
    max_size: int
    desired: int
    registered: int
    ready: int
    unregistered: int
    instance_type: str
    cpu_requested: int  # millicores
    cpu_allocatable: int
    memory_requested: int  # bytes
    memory_allocatable: int
    template_source: str
    warnings: tuple[str, ...]
    # against the manifest on git.branch; None when it was not read or names no such group
    manifest_desired: int | None = None
    unapplied_increase: int = 0
    approved_removals: tuple[str, ...] = ()  # approved on main, instance still in the ASG
    # listed on main, still in the ASG, and never approvable: added by a commit with no SSH signature
    # under approval.mode signed (a proposal merged with the forge's button); not in approved_removals
    unapproved_removals: tuple[str, ...] = ()
    above_manifest: int = 0  # AWS desired minus what the manifest allows
    held: bool = False
    proposed_removals: tuple[str, ...] = ()  # named by the open scale-down proposal, not approved yet
    unfilled: int = 0  # desired AWS has no instance for yet
    launch_failure: LaunchFailure | None = None  # AWS reports it could not launch them
    backed_off: bool = False  # ... and the group is backed off for it now
    # instance type -> instances of it the group runs (a mixed-instances group runs several)
    running_types: Mapping[str, int] = field(default_factory=dict)

    @property
    def type_cell(self) -> str:
        """The template's type, and the spread the group really runs where that says more."""
        spread = ", ".join(f"{n} {t}" for t, n in sorted(self.running_types.items()))
        if not spread or list(self.running_types) == [self.instance_type]:
            return self.instance_type or "?"
        return f"{self.instance_type or '?'} (runs {spread})"

    @property
    def manifest_cell(self) -> str:
        if self.manifest_desired is None:
            return "-"
        notes = []
        if self.unapplied_increase:
            notes.append(f"+{self.unapplied_increase} to apply")
        # counts, never signed numbers: "-1 approved" read as a negative count
        if self.approved_removals:
            notes.append(f"{len(self.approved_removals)} to remove, approved")
        if self.unapproved_removals:
            notes.append(f"{len(self.unapproved_removals)} listed, not approved")
        if self.proposed_removals:
            notes.append(f"{len(self.proposed_removals)} proposed for removal")
        if self.above_manifest:
            notes.append(f"AWS +{self.above_manifest}")
        if self.held:
            notes.append("hold")
        return f"{self.manifest_desired} ({', '.join(notes)})" if notes else str(self.manifest_desired)


def group_document(g: GroupStatus) -> dict[str, Any]:
    """A group as `status --output json|yaml|csv` shows it: camelCase like Kubernetes and the plan
    (schemas/status.schema.json), the unit in the name of every quantity."""
    return {
        "name": g.name,
        "minSize": g.min_size,
        "maxSize": g.max_size,
        "desired": g.desired,
        "manifestDesired": g.manifest_desired,
        "registeredNodes": g.registered,
        "readyNodes": g.ready,
        "unregisteredInstances": g.unregistered,
        "instanceType": g.instance_type,
        "cpuRequestedMillicores": g.cpu_requested,
        "cpuAllocatableMillicores": g.cpu_allocatable,
        "memoryRequestedBytes": g.memory_requested,
        "memoryAllocatableBytes": g.memory_allocatable,
        "templateSource": g.template_source,
        "runningInstanceTypes": dict(sorted(g.running_types.items())),
        "unappliedIncrease": g.unapplied_increase,
        "approvedRemovals": list(g.approved_removals),
        "unapprovedRemovals": list(g.unapproved_removals),
        "proposedRemovals": list(g.proposed_removals),
        "aboveManifest": g.above_manifest,
        "held": g.held,
        "unfilledDesired": g.unfilled,
        "launchFailure": (
            {**g.launch_failure.to_dict(), "backedOff": g.backed_off}
            if g.launch_failure is not None
            else None
        ),
        "warnings": list(g.warnings),
    }


CSV_COLUMNS = (
    "name",
    "minSize",
    "maxSize",
    "desired",
    "manifestDesired",
    "registeredNodes",
    "readyNodes",
    "unregisteredInstances",
    "instanceType",
    "cpuRequestedMillicores",
    "cpuAllocatableMillicores",
    "memoryRequestedBytes",
    "memoryAllocatableBytes",
    "warnings",
)


@dataclass(frozen=True)
class ProposalStatus:
    """The open scale-down proposal: what it would remove, waiting for a person since when."""

    branch: str
    opened_at: datetime
    removals: Mapping[str, tuple[str, ...]]

    def waiting(self, now: datetime) -> str:
        return format_age((now - self.opened_at).total_seconds())


def format_age(seconds: float) -> str:
    minutes = max(0, int(seconds)) // 60
    days, hours = minutes // 1440, minutes // 60 % 24
    if days:
        return f"{days}d{hours}h"
    return f"{hours}h{minutes % 60:02d}m" if hours else f"{minutes}m"


@dataclass(frozen=True)
class StatusReport:
    cluster: str
    read_at: datetime | None
    groups: tuple[GroupStatus, ...]
    pending_pods: tuple[str, ...]
    unmanaged_nodes: tuple[str, ...]
    warnings: tuple[str, ...]
    manifest: str | None = None  # where the manifest was read from, when it was
    proposal: ProposalStatus | None = None
    aws_calls: Mapping[str, int] = field(default_factory=dict)  # requests per API this status made

    def to_dict(self) -> dict[str, Any]:
        """The public JSON shape (schemas/status.schema.json)."""
        proposal = self.proposal
        return {
            "cluster": self.cluster,
            "readAt": self.read_at.isoformat() if self.read_at else None,
            "manifest": self.manifest,
            "nodeGroups": [group_document(g) for g in self.groups],
            "pendingPods": list(self.pending_pods),
            "unmanagedNodes": list(self.unmanaged_nodes),
            "warnings": list(self.warnings),
            "proposal": None
            if proposal is None
            else {
                "branch": proposal.branch,
                "openedAt": proposal.opened_at.isoformat(),
                "removals": {k: list(v) for k, v in proposal.removals.items()},
            },
            "awsCalls": dict(self.aws_calls),
        }

    def to_csv(self) -> str:
        """One row per node group (cluster-wide lists are in the other formats)."""
        return to_csv([group_document(g) for g in self.groups], CSV_COLUMNS)


def manifest_warnings(status: GroupStatus) -> list[str]:
    """What a person should know about a group's manifest entry versus AWS."""
    warnings = []
    if status.approved_removals:
        warnings.append(
            f"approved removal not applied yet: {', '.join(status.approved_removals)} (apply drains them)"
        )
    if status.unapproved_removals:
        warnings.append(
            f"listed for removal on main but not approved: {', '.join(status.unapproved_removals)} (added "
            "by a commit with no SSH signature, e.g. a proposal merged with the forge's button; "
            "approval.mode signed never accepts it): apply refuses it; the next `asg-reconciler plan` "
            "withdraws it from main and proposes it again, for `asg-reconciler approve scale-down`"
        )
    if status.above_manifest:
        warnings.append(
            f"AWS desired {status.desired} is {status.above_manifest} above the manifest: changed outside "
            "the tool or lowered by hand; the next plan proposes which instances go"
        )
    return warnings


def group_warnings(entry: GroupInventory) -> list[str]:
    group = entry.group
    warnings = list(group.warnings)
    if len(group.zones) > 1 and "AZRebalance" not in group.suspended_processes:
        warnings.append(
            "AZRebalance is active on a multi-AZ group: AWS may terminate busy instances to rebalance "
            "zones (suspend the AZRebalance process)"
        )
    if group.has_scaling_policies:
        warnings.append("the ASG has scaling policies: another writer changes its desired capacity")
    if group.has_instance_refresh:
        warnings.append("an instance refresh is in progress: instances are being replaced")
    if entry.template is None:
        warnings.append(f"no node template: {group.template_error or 'no Ready node and no instance type'}")
    return warnings


def build_status(
    cluster: str,
    inventory: Inventory,
    committed: Mapping[str, CommittedGroup] | None = None,
    manifest: str | None = None,
    manifest_error: str | None = None,
    *,
    last_applied: Mapping[str, int] | None = None,
    proposal: ProposalStatus | None = None,
    scale_up: ScaleUpConfig | None = None,
    beyond_bounds: Mapping[str, str] | None = None,
    unapproved: Collection[str] = (),
) -> StatusReport:
    """`committed` is the manifest on main (None when not read: no git.url, or `manifest_error`);
    `beyond_bounds`: per group, what apply with this config would refuse of main's raises;
    `scale_up`: the backoff settings a launch failure is judged with (the plan's own arithmetic)."""
    proposed = proposal.removals if proposal is not None else {}
    settings = scale_up or ScaleUpConfig()
    groups = []
    for entry in inventory.groups:
        requested_cpu = requested_memory = allocatable_cpu = allocatable_memory = 0
        for node in entry.nodes:
            used = inventory.requested_on(node.name)
            requested_cpu += used.get(CPU)
            requested_memory += used.get(MEMORY)
            allocatable_cpu += node.allocatable.get(CPU)
            allocatable_memory += node.allocatable.get(MEMORY)
        template = entry.template
        entry_on_main = committed.get(entry.name) if committed is not None else None
        base = baseline(entry.group, entry_on_main)
        read_at = inventory.state.read_at
        failure = launch_failure(entry.group, settings, read_at) if read_at is not None else None
        status = GroupStatus(
            name=entry.name,
            min_size=entry.group.min_size,
            max_size=entry.group.max_size,
            desired=entry.group.desired,
            registered=len(entry.nodes),
            ready=len(entry.ready_nodes),
            unregistered=len(entry.unregistered),
            instance_type=(template.instance_type if template else "")
            or ",".join(entry.group.instance_types),
            cpu_requested=requested_cpu,
            cpu_allocatable=allocatable_cpu,
            memory_requested=requested_memory,
            memory_allocatable=allocatable_memory,
            template_source=template.source if template else "",
            warnings=tuple(group_warnings(entry)),
            manifest_desired=entry_on_main.desired if entry_on_main else None,
            unapplied_increase=base.unapplied_increase,
            approved_removals=tuple(i for i in base.approved_present if i not in unapproved),
            unapproved_removals=tuple(i for i in base.approved_present if i in unapproved),
            above_manifest=base.manual_decrease,
            held=base.held,
            proposed_removals=tuple(proposed.get(entry.name, ())),
            unfilled=entry.group.unfilled,
            launch_failure=failure,
            backed_off=failure is not None and (read_at is None or failure.until > read_at),
            running_types=dict(
                Counter(
                    i.instance_type or "?" for i in entry.group.instances if i.lifecycle_state not in GONE
                )
            ),
        )
        extra = manifest_warnings(status)
        if failure is not None:
            extra.insert(0, _launch_warning(status, failure))
        left = (last_applied or {}).get(entry.name)
        if left is not None and left != status.desired:
            direction = "lowered" if status.desired < left else "raised"
            extra.append(
                f"drift: desired {direction} outside the tool from {left} to {status.desired} since the "
                "last apply (apply.drift decides what apply does about it)"
            )
        if committed is not None and entry_on_main is None:
            extra.append("not in the manifest yet: the next plan writes it")
        if entry.name in (beyond_bounds or {}):
            extra.append((beyond_bounds or {})[entry.name])
        groups.append(replace(status, warnings=status.warnings + tuple(extra)))
    warnings = []
    if manifest_error is not None:
        warnings.append(f"manifest not compared: {manifest_error}")
    if committed is not None:
        warnings += not_node_groups(
            committed, [g.name for g in inventory.groups], cluster, manifest or "manifest"
        )
    presence = inventory.state.autoscaler
    if presence is not None:
        warnings.append(
            f"cluster-autoscaler is live ({presence.source}, seen {presence.last_seen.isoformat()}): "
            "apply will refuse to act while it runs"
        )
    if not inventory.groups:
        warnings.append("no node groups found: check nodeGroups in the config")
    return StatusReport(
        cluster=cluster,
        read_at=inventory.state.read_at,
        groups=tuple(groups),
        pending_pods=tuple(sorted(p.key for p in inventory.pending)),
        unmanaged_nodes=tuple(sorted(n.name for n in inventory.unmanaged_nodes)),
        warnings=tuple(warnings),
        manifest=manifest if committed is not None else None,
        proposal=proposal,
    )


def _launch_warning(status: GroupStatus, failure: LaunchFailure) -> str:
    """What the planner does about it, then AWS's own words."""
    text = (
        f"AWS could not launch {failure.unfilled} of desired {status.desired}: {failure.describe()}, "
        f"{failure.failures} failed attempt(s) since {failure.since:%H:%M}"
    )
    if status.backed_off:
        text += f"; backed off until {failure.until:%H:%M} (scale-ups go to other groups)"
    else:
        text += f"; backoff ended at {failure.until:%H:%M}"
    return text + (f"; AWS says: {failure.last.message}" if failure.last.message else "")


def _share(requested: int, allocatable: int) -> str:
    return f"{100 * requested / allocatable:.0f}%" if allocatable else "-"


def render_status_table(report: StatusReport) -> str:
    compared = report.manifest is not None
    rows = [
        (
            g.name,
            f"{g.min_size}/{g.max_size}",
            g.desired,
            *((g.manifest_cell,) if compared else ()),
            f"{g.ready}/{g.registered}",
            g.unregistered,
            g.type_cell,
            f"{format_cpu(g.cpu_requested)}/{format_cpu(g.cpu_allocatable)} "
            f"({_share(g.cpu_requested, g.cpu_allocatable)})",
            f"{format_bytes(g.memory_requested)}/{format_bytes(g.memory_allocatable)} "
            f"({_share(g.memory_requested, g.memory_allocatable)})",
        )
        for g in report.groups
    ]
    text = f"cluster {report.cluster}\n"
    if compared:
        text += f"manifest {report.manifest} (MANIFEST: its target; what differs from AWS in brackets)\n"
    if report.proposal is not None:
        named = "; ".join(f"{g}: {', '.join(ids)}" for g, ids in sorted(report.proposal.removals.items()))
        waiting = report.proposal.waiting(report.read_at) if report.read_at else "?"
        text += (
            f"scale-down proposal {report.proposal.branch}, waiting {waiting} for approval: "
            f"{named or 'names no instance'}\n"
        )
    text += "\n" + table(
        rows,
        [
            "GROUP",
            "MIN/MAX",
            "DESIRED",
            *(("MANIFEST",) if compared else ()),
            "READY/NODES",
            "UNREGISTERED",
            "TYPE",
            "CPU REQ/ALLOC",
            "MEM REQ/ALLOC",
        ],
    )
    lines = [f"  ! {g.name}: {w}" for g in report.groups for w in g.warnings]
    lines += [f"  ! {w}" for w in report.warnings]
    if lines:
        text += "\nwarnings:\n" + "\n".join(lines) + "\n"
    text += f"\npending (unschedulable) pods: {len(report.pending_pods)}"
    if report.pending_pods:
        shown = report.pending_pods[:20]
        more = len(report.pending_pods) - len(shown)
        text += "\n" + "\n".join(f"  {p}" for p in shown) + (f"\n  ... and {more} more" if more else "")
    text += f"\nunmanaged nodes (in no node group): {len(report.unmanaged_nodes)}"
    if report.unmanaged_nodes:
        text += "\n" + "\n".join(f"  {n}" for n in report.unmanaged_nodes[:20])
    return text + "\n"
