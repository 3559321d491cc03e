"""Sync one commit of main to AWS, group by group (DESIGN §2, §3 rules 2, 4, 5, 7).

Increases are SetDesiredCapacity, at most `apply.maxStep` instances per group per run. Approved
removals are drained and terminated one named instance at a time, each only after its approving
commit passed the gate, is younger than `scaleDown.proposalTTL`, and the planner, run again on live
state, still removes it. A desired above the manifest is never lowered here: the next plan names
instances for it. Every outside effect goes through three small seams (actuator, drainer, gate), so
this module holds the decisions and the tests can watch them against moto and the fake API.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from reconciler.apply.changes import Introduced
from reconciler.apply.recheck import recheck
from reconciler.config import Config
from reconciler.durations import format_duration
from reconciler.errors import OperationError, ReconcilerError, RefusedError
from reconciler.gitops.manifest import Manifest
from reconciler.gitops.plan_edits import committed_groups
from reconciler.inventory import GroupInventory, Inventory
from reconciler.kube.parse import ObjectReader
from reconciler.model import NodeGroup
from reconciler.planning.baseline import baseline
from reconciler.planning.drainability import BLOCKS, DrainContext, PdbBudget, drain_verdict
from reconciler.planning.types import CommittedGroup, PlanInputs

SCALE_UP, SCALE_DOWN, NONE, REFUSED, FAILED = "scale-up", "scale-down", "none", "refused", "failed"
IN_SERVICE = "InService"


class Actuator(Protocol):
    def raise_desired(self, name: str, expected: int, desired: int) -> object: ...
    def terminate(self, name: str, instance_id: str) -> object: ...


class Drainer(Protocol):
    def mark(self, node: str, commit: str) -> None: ...
    def drain(
        self,
        node: str,
        *,
        vet: Callable[[Sequence[Mapping[str, Any]]], str | None] | None = None,
        check: Callable[[], None] | None = None,
    ) -> DrainOutcome: ...
    def unmark(self, node: str) -> None: ...


class DrainOutcome(Protocol):
    @property
    def complete(self) -> bool: ...
    @property
    def reason(self) -> str: ...


class Gate(Protocol):
    def approves(self, commit: str) -> tuple[bool, str]: ...


@dataclass(frozen=True)
class _Effects:
    """The seams through which a run changes anything, and the check before each change."""

    actuator: Actuator
    drainer: Drainer
    gate: Gate
    guard: Callable[[], None]


@dataclass(frozen=True)
class GroupOutcome:
    name: str
    action: str  # scale-up | scale-down | none | refused | failed
    desired_before: int
    desired_after: int
    terminated: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ApplyReport:
    commit: str
    dry_run: bool
    groups: tuple[GroupOutcome, ...]
    warnings: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        """DESIGN §5.1: 1 if any group failed, else 3 if any was refused, else 0."""
        actions = {g.action for g in self.groups}
        return 1 if FAILED in actions else 3 if REFUSED in actions else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "dryRun": self.dry_run,
            "nodeGroups": [
                {
                    "name": g.name,
                    "action": g.action,
                    "desiredBefore": g.desired_before,
                    "desiredAfter": g.desired_after,
                    "terminated": list(g.terminated),
                    "notes": list(g.notes),
                }
                for g in self.groups
            ],
            "warnings": list(self.warnings),
        }


@dataclass
class _Group:
    """One group's run: what it did so far, what it noted, whether something refused or failed."""

    name: str
    before: int
    after: int
    action: str = NONE
    terminated: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    refused: bool = False
    failed: bool = False

    def did(self, action: str, note: str = "") -> None:
        if self.action == NONE:
            self.action = action
        if note:
            self.notes.append(note)

    def refuse(self, note: str) -> None:
        self.refused = True
        self.notes.append(note)

    def fail(self, note: str) -> None:
        self.failed = True
        self.notes.append(note)

    def outcome(self) -> GroupOutcome:
        action = FAILED if self.failed else REFUSED if self.refused else self.action
        return GroupOutcome(
            self.name, action, self.before, self.after, tuple(self.terminated), tuple(self.notes)
        )


@dataclass(frozen=True)
class ApplyInputs:
    config: Config
    inventory: Inventory
    manifest: Manifest
    commit: str  # the commit of main being applied
    introduced: Mapping[tuple[str, str], Introduced]  # (group, instance) -> commit that approved it
    commit_time: Callable[[str], datetime]
    now: datetime
    dry_run: bool = False
    last_desired: Mapping[str, int] = field(default_factory=dict)  # group -> as the last apply left it


def apply(
    inputs: ApplyInputs,
    actuator: Actuator,
    drainer: Drainer,
    gate: Gate,
    guard: Callable[[], None] = lambda: None,
) -> ApplyReport:
    """`guard` runs before every change (the Lease check: raises when another apply took over)."""
    presence = inputs.inventory.state.autoscaler
    if presence is not None:
        raise RefusedError(
            f"cluster-autoscaler is live on the cluster ({presence.source}, seen "
            f"{presence.last_seen.isoformat()}): two writers would fight over every group; stop it first"
        )
    committed = committed_groups(inputs.manifest)
    by_name = {g.name: g for g in inputs.inventory.groups}
    verdicts = _rechecks(inputs, by_name)
    warnings: list[str] = []
    outcomes = []
    for entry in inputs.manifest.groups:
        inventory = by_name.get(entry.name)
        if inventory is None:
            warnings.append(f"{entry.name}: in the manifest but no node group of the config; skipped")
            continue
        run = _Group(entry.name, inventory.group.desired, inventory.group.desired)
        try:
            _sync_group(
                inputs,
                inventory,
                committed[entry.name],
                verdicts,
                run,
                _Effects(actuator, drainer, gate, guard),
            )
        except RefusedError as exc:
            run.refuse(str(exc))
        except ReconcilerError as exc:
            run.fail(str(exc))
        outcomes.append(run.outcome())
    return ApplyReport(inputs.commit, inputs.dry_run, tuple(outcomes), tuple(warnings))


def _rechecks(inputs: ApplyInputs, groups: Mapping[str, GroupInventory]) -> dict[str, str | None]:
    committed = committed_groups(inputs.manifest)
    approved: dict[str, set[str]] = {}
    for name, entry in committed.items():
        if name in groups:
            present = baseline(groups[name].group, entry).approved_present
            if present:
                approved[name] = set(present)
    if not approved:
        return {}
    plan_inputs = PlanInputs(
        inventory=inputs.inventory, config=inputs.config, now=inputs.now, committed=committed
    )
    return recheck(plan_inputs, approved)


def _sync_group(
    inputs: ApplyInputs,
    inventory: GroupInventory,
    committed: CommittedGroup,
    verdicts: Mapping[str, str | None],
    run: _Group,
    effects: _Effects,
) -> None:
    group = inventory.group
    if group.has_scaling_policies:
        raise RefusedError("the ASG has scaling policies: another writer changes its desired capacity")
    if group.has_instance_refresh:
        raise RefusedError("an instance refresh is in progress: instances are being replaced")
    base = baseline(group, committed)
    intended = base.aws_desired + base.unapplied_increase
    last = inputs.last_desired.get(group.name)
    mode = inputs.config.apply.drift
    if last is not None and group.desired != last:
        direction = "lowered" if group.desired < last else "raised"
        run.notes.append(
            f"drift: desired {direction} outside the tool from {last} to {group.desired} since the last apply"
        )
        if group.desired < last and mode != "restore":
            # Only what main added since the last apply is applied on top; the rest stays as someone
            # set it (`restore` raises it back).
            intended = group.desired + max(0, intended - last)
            run.notes.append(f"apply.drift {mode}: not raised back (apply.drift restore would)")
    if base.manual_decrease:
        run.notes.append(
            f"AWS desired {group.desired} is {base.manual_decrease} above the manifest: not lowered "
            "(apply never lowers desired; the next plan names the instances to remove)"
        )
    if intended > group.desired:
        _raise(inputs, group, intended, run, effects)
    for instance in base.approved_present:
        _remove(inputs, inventory, instance, verdicts.get(instance), run, effects)


def _raise(inputs: ApplyInputs, group: NodeGroup, intended: int, run: _Group, effects: _Effects) -> None:
    step = inputs.config.apply.max_step
    ceiling = group.asg_max_size or group.max_size
    target = min(intended, group.desired + step, ceiling)
    if target < intended:
        run.notes.append(
            f"manifest wants {intended}: {target} this run (apply.maxStep {step}, max size {ceiling})"
        )
    if target <= group.desired:
        return
    run.after = target
    if inputs.dry_run:
        run.did(SCALE_UP, f"would raise desired {group.desired} -> {target}")
        return
    effects.guard()
    effects.actuator.raise_desired(group.name, group.desired, target)
    run.did(SCALE_UP, f"raised desired {group.desired} -> {target}")


def _remove(
    inputs: ApplyInputs,
    inventory: GroupInventory,
    instance: str,
    verdict: str | None,
    run: _Group,
    effects: _Effects,
) -> None:
    """One approved instance: the gate, the TTL and the re-check, then drain and terminate."""
    origin = inputs.introduced.get((inventory.name, instance))
    if origin is None:
        run.refuse(f"{instance}: no commit on the first-parent history of main lists it; not removed")
        return
    approved, why = effects.gate.approves(origin.commit)
    if not approved:
        run.refuse(f"{instance}: not approved: {why}")
        return
    ttl = inputs.config.scale_down.proposal_ttl
    age = inputs.now - inputs.commit_time(origin.commit)
    if age > ttl:
        run.refuse(
            f"{instance}: approved {format_duration(age)} ago in {origin.commit[:12]}, older than "
            f"scaleDown.proposalTTL {format_duration(ttl)}; the next plan proposes again if still unneeded"
        )
        return
    if verdict is not None:
        run.refuse(f"{instance}: no longer safe to remove: {verdict}")
        return
    group = inventory.group
    state = next((i.lifecycle_state for i in group.instances if i.instance_id == instance), "")
    if state != IN_SERVICE:
        run.refuse(f"{instance}: is {state or 'not in the group'}; only in-service instances are drained")
        return
    if run.after - 1 < group.min_size:
        run.refuse(f"{instance}: removing it would take {group.name} below its min size {group.min_size}")
        return
    node = next((n.name for n in inventory.nodes if n.instance_id == instance), None)
    if inputs.dry_run:
        run.after -= 1
        what = f"drain {node} and terminate {instance}" if node else f"terminate {instance} (no node)"
        run.did(SCALE_DOWN, f"would {what}")
        return
    drainer, marked = effects.drainer, False
    try:
        if node is not None:
            effects.guard()
            drainer.mark(node, inputs.commit)
            marked = True
            late = _LatePods(inputs)
            result = drainer.drain(node, vet=late.vet, check=effects.guard)
            if not result.complete:
                if late.refusal is not None:  # a safety rule, not a failure
                    raise RefusedError(f"drain of {node} stopped: {late.refusal}")
                raise OperationError(f"drain of {node} did not finish: {result.reason}")
        effects.guard()
        effects.actuator.terminate(group.name, instance)
    except ReconcilerError as exc:
        given_back = _give_back(drainer, node) if marked else ""
        if isinstance(exc, RefusedError):
            run.refuse(f"{instance}: {exc}{given_back}")
        else:
            run.fail(f"{instance}: {exc}{given_back}")
        return
    run.after -= 1
    run.terminated.append(instance)
    done = f"drained {node} and terminated {instance}" if node else f"terminated {instance} (no node)"
    run.did(SCALE_DOWN, done)


def _give_back(drainer: Drainer, node: str | None) -> str:
    """Take our taint off a node whose removal did not happen, so it serves again."""
    if node is None:
        return ""
    try:
        drainer.unmark(node)
    except ReconcilerError as exc:
        return f"; node {node} still carries the drain taint ({exc}): the next apply gives it back"
    return f"; node {node} given back"


class _LatePods:
    """The drain rules again, on the pods a drain is about to evict: one that arrived after the
    re-check and forbids the drain (safe-to-evict: "false", local storage, no controller, ...)
    stops it before it is evicted."""

    def __init__(self, inputs: ApplyInputs) -> None:
        self.reader = ObjectReader()
        pdbs = PdbBudget(inputs.inventory.state.pdbs)
        self.context = DrainContext(inputs.config.scale_down, inputs.now, pdbs.has_pdb)
        self.refusal: str | None = None

    def vet(self, raw_pods: Sequence[Mapping[str, Any]]) -> str | None:
        for raw in raw_pods:
            verdict = drain_verdict(self.reader.pod(raw), self.context)
            if verdict.outcome == BLOCKS:
                self.refusal = f"{verdict.reason} (arrived after the re-check)"
                return self.refusal
        return None
