"""`asg-reconciler status`: what is there now, per node group, and what to worry about. Read-only."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from reconciler.inventory import GroupInventory, Inventory
from reconciler.model import CPU, MEMORY
from reconciler.output import table
from reconciler.quantity import format_bytes, format_cpu


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


@dataclass(frozen=True)
class StatusReport:
    cluster: str
    read_at: datetime | None
    groups: tuple[GroupStatus, ...]
    pending_pods: tuple[str, ...]
    unmanaged_nodes: tuple[str, ...]
    warnings: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["read_at"] = self.read_at.isoformat() if self.read_at else None
        return data


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


def build_status(cluster: str, inventory: Inventory) -> StatusReport:
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
        groups.append(
            GroupStatus(
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
            )
        )
    warnings = []
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
    )


def _share(requested: int, allocatable: int) -> str:
    return f"{100 * requested / allocatable:.0f}%" if allocatable else "-"


def render_status_table(report: StatusReport) -> str:
    rows = [
        (
            g.name,
            f"{g.min_size}/{g.max_size}",
            g.desired,
            f"{g.ready}/{g.registered}",
            g.unregistered,
            g.instance_type or "?",
            f"{format_cpu(g.cpu_requested)}/{format_cpu(g.cpu_allocatable)} "
            f"({_share(g.cpu_requested, g.cpu_allocatable)})",
            f"{format_bytes(g.memory_requested)}/{format_bytes(g.memory_allocatable)} "
            f"({_share(g.memory_requested, g.memory_allocatable)})",
        )
        for g in report.groups
    ]
    text = f"cluster {report.cluster}\n\n"
    text += table(
        rows,
        [
            "GROUP",
            "MIN/MAX",
            "DESIRED",
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
