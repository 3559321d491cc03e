"""Sync one commit of main to AWS, group by group (DESIGN §2, §3 rules 2, 4-7, 11).

Increases are SetDesiredCapacity, at most `apply.maxStep` instances per group per run and never past
apply's own bounds (reconciler/apply/caps.py, rule 11): the part above one is refused. Approved
removals pass the gates here — the approving commit (the one whose own diff added the instance),
`scaleDown.proposalTTL`, the planner's re-check, group settings under which a named termination
would not do what it says, apply's own records being trustworthy, `scaleDown.windows` (last, so a
removal refused for another reason takes no place in the window; one it holds back waits, still
approved, and is not a refusal) — and are then drained and terminated by
reconciler/apply/removal.py. A desired above the manifest is never lowered: the group is refused and
the next plan names instances for it. Nodes carrying our drain taint that this run does not remove
are given back (reconciler/apply/taints.py) — unless the Lease was lost: then nothing more is
written, the new holder resumes or gives back what it finds.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from reconciler.apply.caps import Caps
from reconciler.apply.effects import Effects
from reconciler.apply.inputs import ApplyInputs
from reconciler.apply.outcome import SCALE_DOWN, SCALE_UP, ApplyReport, GroupRun
from reconciler.apply.recheck import approved_verdicts
from reconciler.apply.removal import IN_SERVICE, Removal, remove_all
from reconciler.apply.taints import give_back_unapproved, sweep
from reconciler.apply.window_gate import WindowGate
from reconciler.config.settings import Config
from reconciler.domain.durations import format_duration
from reconciler.domain.errors import ReconcilerError, RefusalKind, RefusedError
from reconciler.domain.inventory import GroupInventory
from reconciler.domain.model import NodeGroup
from reconciler.gitops.plan_edits import committed_groups
from reconciler.kube.lease import LeaseLost
from reconciler.planning.baseline import GONE, Baseline, baseline
from reconciler.planning.types import CommittedGroup

AZ_REBALANCE = "AZRebalance"

# How far ahead of apply's clock an approving commit's date may be (machines' clocks differ a little).
CLOCK_SKEW = timedelta(minutes=10)


def apply(inputs: ApplyInputs, effects: Effects) -> ApplyReport:
    presence = inputs.inventory.state.autoscaler
    if presence is not None:
        raise RefusedError(
            f"cluster-autoscaler is live on the cluster ({presence.source}, seen "
            f"{presence.last_seen.isoformat()}): two writers would fight over every group; stop it first",
            kind="another-writer",
        )
    unchecked = inputs.inventory.state.autoscaler_unchecked
    if unchecked:  # not seen in kube-system is not absent: it may run in a namespace of its own
        raise RefusedError(
            "cannot tell whether cluster-autoscaler is live, and two writers would fight over every "
            f"group: {'; '.join(unchecked)}",
            kind="another-writer",
        )
    committed = committed_groups(inputs.manifest)
    by_name = {g.name: g for g in inputs.inventory.groups}
    verdicts = approved_verdicts(inputs.config, inputs.now, inputs.inventory, committed)
    given_back: list[str] = []
    stuck: list[str] = []
    runs: dict[str, GroupRun] = {}
    removals: list[Removal] = []
    window = WindowGate(inputs.config.scale_down.windows, inputs.now)
    caps = Caps.of(inputs.config, inputs.inventory)
    give_back_unapproved(inputs, by_name, committed, effects, given_back, stuck)
    for entry in inputs.manifest.groups:
        inventory = by_name.get(entry.name)
        if inventory is None:
            run = GroupRun(entry.name, entry.desired, entry.desired)
            run.refuse(
                f"not a node group of cluster {inputs.config.cluster}: no ASG of that name matches "
                "nodeGroups (autoDiscovery tags or explicit); nothing applied. Fix the name in the "
                "manifest, or tag the ASG",
                "group-settings",
            )
            runs[entry.name] = run
            continue
        run = GroupRun(entry.name, inventory.group.desired, inventory.group.desired)
        runs[entry.name] = run
        try:
            removals += _sync_group(
                inputs, inventory, committed[entry.name], verdicts, run, effects, window, caps
            )
        except RefusedError as exc:
            run.refuse(str(exc), exc.kind)
        except ReconcilerError as exc:
            run.fail(str(exc))
    terminated_nodes: set[str] = set()
    in_flight: list[str] = []
    interrupted = lost = False
    try:
        if not inputs.dry_run:
            remove_all(inputs, removals, effects, terminated_nodes, in_flight)
    except KeyboardInterrupt:  # SIGTERM or Ctrl-C: drains gave their nodes back; say what was done
        interrupted = True
    except LeaseLost:
        lost = True  # someone else's run now: its taints are not ours to sweep
        raise
    finally:
        if not inputs.dry_run and not lost:
            sweep(inputs, effects, terminated_nodes, given_back, stuck)
    return ApplyReport(
        inputs.commit,
        inputs.dry_run,
        tuple(r.outcome() for r in runs.values()),
        # and the cluster read's (e.g. namespaces it may not list), which the removals' re-check lacked
        warnings=(*_settings_warnings(inputs.config), *inputs.inventory.state.warnings, *inputs.notices),
        given_back=tuple(given_back),
        stuck=tuple(stuck),
        interrupted=interrupted,
        in_flight=tuple(in_flight),
    )


def _settings_warnings(config: Config) -> list[str]:
    grace, timeout = config.apply.max_grace_period, config.apply.drain_timeout
    if grace <= timeout:
        return []
    return [
        f"apply.maxGracePeriod {format_duration(grace)} is above apply.drainTimeout "
        f"{format_duration(timeout)}: a pod that uses its whole grace period makes the drain time out "
        "(keep drainTimeout above it)"
    ]


def _sync_group(
    inputs: ApplyInputs,
    inventory: GroupInventory,
    committed: CommittedGroup,
    verdicts: Mapping[str, str | None],
    run: GroupRun,
    effects: Effects,
    window: WindowGate,
    caps: Caps,
) -> list[Removal]:
    """Raise the group if main says so; return the removals that passed every gate, in order."""
    group = inventory.group
    if group.name in inputs.suspended:
        raise RefusedError(inputs.suspended[group.name], kind="suspended")
    if group.has_scaling_policies:
        raise RefusedError(
            "the ASG has scaling policies: another writer changes its desired capacity", kind="another-writer"
        )
    base = baseline(group, committed)
    _recover_intents(inputs, group, run)
    intended = _drift(inputs, group, base, run)
    if base.manual_decrease and not run.adopted:
        run.refuse(
            f"AWS desired {group.desired} is {base.manual_decrease} above the manifest "
            f"({group.desired - base.manual_decrease}): not applied; the next plan proposes which "
            "instances to remove (apply never lowers desired by a number, rule 2)",
            "another-writer",
        )
    if intended > group.desired or base.approved_present:
        _refuse_if_refreshing(group, effects)
    if intended > group.desired:
        _raise(inputs, inventory, intended, run, effects, caps)
    for instance in base.approved_standby:
        run.refuse(
            f"{instance}: is in Standby (taken out of service by hand): not counted in desired and not "
            "terminated; return it to service (exit standby) or drop it from removeInstances",
            "instance-changed",
        )
    if not base.approved_present:
        return []
    kind: RefusalKind = "group-settings"
    blocked = _scale_down_blocked(inputs.config, group)
    if not blocked:
        kind, blocked = "untrusted-records", _untrusted(inputs)
    if blocked:
        for instance in base.approved_present:
            run.refuse(f"{instance}: {blocked}", kind)
        return []
    chosen: list[Removal] = []
    for instance in base.approved_present:
        removal = _gate(
            inputs, inventory, instance, verdicts.get(instance), run, effects, len(chosen), window
        )
        if removal is not None:
            chosen.append(removal)
    return chosen


def _refuse_if_refreshing(group: NodeGroup, effects: Effects) -> None:
    """Asked only of a group this run would change: an instance refresh is another writer."""
    refreshing = group.has_instance_refresh
    if refreshing is None:
        refreshing = effects.refreshing(group.name)
    if refreshing:
        raise RefusedError(
            "an instance refresh is in progress: instances are being replaced", kind="another-writer"
        )


def _recover_intents(inputs: ApplyInputs, group: NodeGroup, run: GroupRun) -> None:
    """An earlier run recorded that it was about to terminate an instance and stopped before
    recording the result: if the instance is gone, that was our own termination (not drift)."""
    states = {i.instance_id: i.lifecycle_state for i in group.instances}
    for name, instance in inputs.open_intents:
        if name != group.name:
            continue
        if instance not in states or states[instance] in GONE:
            run.terminated.append(instance)
            run.did(
                SCALE_DOWN,
                f"terminated {instance}: an earlier apply recorded the intent and stopped before "
                "recording the result (completed here)",
            )


def _drift(inputs: ApplyInputs, group: NodeGroup, base: Baseline, run: GroupRun) -> int:
    """What desired should be this run, given what the last apply left (rule 7).

    A value set outside the tool and adopted by an earlier run (`apply.drift adopt`) stays while AWS
    still has it and main has not changed the group since, until the next plan commits it: a later
    run must not raise back what was adopted. A newer change on main for the group wins.
    """
    intended = base.aws_desired + base.unapplied_increase
    mode = inputs.config.apply.drift
    held = inputs.held.get(group.name)
    if held is not None and group.desired == held and mode == "adopt":
        run.adopted = True
        run.note(
            f"apply.drift adopt: {held} (set outside the tool) stays the group's capacity until the "
            "next plan commits it to main (Capacity-Source: external)"
        )
        return min(intended, group.desired)
    last = inputs.last_desired.get(group.name)
    if last is None or group.desired == last:
        return intended
    direction = "lowered" if group.desired < last else "raised"
    run.note(
        f"drift: desired {direction} outside the tool from {last} to {group.desired} since the last apply"
    )
    if mode == "adopt":
        run.adopted = True
        run.note(
            f"apply.drift adopt: {group.desired} recorded as the group's capacity; the next plan commits "
            "it to main (Capacity-Source: external)"
        )
        return group.desired if group.desired < last else intended
    if group.desired < last and mode != "restore":
        # Only what main added since the last apply is applied on top; the rest stays as someone
        # set it (`restore` raises it back).
        run.note(f"apply.drift {mode}: not raised back (apply.drift restore would)")
        return group.desired + max(0, intended - last)
    return intended


def _raise(
    inputs: ApplyInputs, inventory: GroupInventory, intended: int, run: GroupRun, effects: Effects, caps: Caps
) -> None:
    """Towards `intended`, at most `apply.maxStep` this run and never past apply's own caps (rule 11):
    up to a cap the raise goes ahead (capacity the operator allowed), the rest is refused, naming the
    cap; a desired a person set above one is left as it is (rule 2)."""
    group = inventory.group
    step = inputs.config.apply.max_step
    bound = caps.bound(inventory)
    target = min(intended, group.desired + step, bound.highest)
    if target < intended and intended <= bound.highest:
        run.note(f"manifest wants {intended}: {target} this run (apply.maxStep {step})")
    if target > group.desired:
        run.after = target
        caps.book(inventory, target - group.desired)
        if inputs.dry_run:
            run.did(SCALE_UP, f"would raise desired {group.desired} -> {target}")
        else:
            effects.guard(group.name)
            effects.actuator.raise_desired(group.name, group.desired, target)
            run.did(SCALE_UP, f"raised desired {group.desired} -> {target}")
    if intended <= bound.highest:
        return
    if target > group.desired and target < bound.highest:
        done = (
            f"raised to {target} this run (apply.maxStep {step}), to {bound.highest} in later runs, and the "
            "rest refused"
        )
    elif target > group.desired:
        done = f"raised to {target} only, the rest refused"
    elif group.desired > bound.highest:
        done = f"not raised, and AWS desired {group.desired}, above it already, is not lowered (rule 2)"
    else:
        done = "not raised"
    run.refuse(
        f"manifest wants {intended}, above {bound.what}: {done}; the manifest cannot lift apply's own "
        f"bounds ({bound.fix})",
        "limits",
    )


def _scale_down_blocked(config: Config, group: NodeGroup) -> str:
    """Group settings under which terminating a named instance does not do what it says."""
    if (
        len(group.zones) > 1
        and AZ_REBALANCE not in group.suspended_processes
        and not (config.apply.allow_az_rebalance)
    ):
        return (
            f"not removed: {group.name} spans {len(group.zones)} zones and AZRebalance is not suspended, "
            "so AWS would terminate other, busy instances to even the zones out after ours (suspend it: "
            f"aws autoscaling suspend-processes --auto-scaling-group-name {group.name} --scaling-processes "
            "AZRebalance; or set apply.allowAZRebalance: true)"
        )
    heavy = {t: w for t, w in group.instance_weights.items() if w != 1}
    if heavy:
        shown = ", ".join(f"{t} weight {w}" for t, w in sorted(heavy.items()))
        return (
            f"not removed: {group.name} has mixed-instances weights other than 1 ({shown}), so desired "
            "counts capacity units, not instances, and a terminate-with-decrement would not remove "
            "one unit per instance (set every WeightedCapacity to 1)"
        )
    return ""


def _untrusted(inputs: ApplyInputs) -> str:
    if not inputs.records_problems:
        return ""
    return "not removed: apply's own records cannot be trusted: " + "; ".join(inputs.records_problems)


def _gate(
    inputs: ApplyInputs,
    inventory: GroupInventory,
    instance: str,
    verdict: str | None,
    run: GroupRun,
    effects: Effects,
    already: int,
    window: WindowGate,
) -> Removal | None:
    """The gate, the TTL, the first re-check, the group's bounds and the scale-down window for one
    approved instance."""
    origin = inputs.introduced.get((inventory.name, instance))
    if origin is None:
        run.refuse(
            f"{instance}: no commit on the first-parent history of main lists it; not removed", "not-approved"
        )
        return None
    if origin.unreadable:
        run.refuse(
            f"{instance}: cannot tell which commit added it: the manifest at {origin.unreadable[:12]} "
            f"cannot be read ({origin.why}), so no later commit's approval covers it; withdraw it "
            "(drop it from removeInstances) and approve it again in one commit, or let the next plan "
            "propose it again",
            "not-approved",
        )
        return None
    approved, why = effects.gate.approves(origin.commit)
    if not approved:
        run.refuse(f"{instance}: not approved: {why}", "not-approved")
        return None
    ttl = inputs.config.scale_down.proposal_ttl
    age = inputs.now - inputs.commit_time(origin.commit)
    if age < -CLOCK_SKEW:  # whoever makes the commit picks its date: one ahead would never age
        run.refuse(
            f"{instance}: approved in {origin.commit[:12]}, a commit dated {format_duration(-age)} in the "
            "future (a forged date or a clock far off), so its age cannot be judged against "
            f"scaleDown.proposalTTL; approve it again in a commit with a true date",
            "expired",
        )
        return None
    if age > ttl:
        run.refuse(
            f"{instance}: approved {format_duration(age)} ago in {origin.commit[:12]}, older than "
            f"scaleDown.proposalTTL {format_duration(ttl)}; the next plan proposes again if still unneeded",
            "expired",
        )
        return None
    if verdict is not None:
        run.refuse(f"{instance}: no longer safe to remove: {verdict}", "busy")
        return None
    group = inventory.group
    state = next((i.lifecycle_state for i in group.instances if i.instance_id == instance), "")
    if state != IN_SERVICE:
        run.refuse(
            f"{instance}: is {state or 'not in the group'}; only in-service instances are drained",
            "instance-changed",
        )
        return None
    if run.after - already - 1 < group.min_size:
        run.refuse(
            f"{instance}: removing it would take {group.name} below its min size {group.min_size}", "limits"
        )
        return None
    waits = window.take()
    if waits:
        run.wait(instance, waits)
        return None
    node = next((n.name for n in inventory.nodes if n.instance_id == instance), None)
    if inputs.dry_run:
        run.after -= 1
        what = f"drain {node} and terminate {instance}" if node else f"terminate {instance} (no node)"
        run.did(SCALE_DOWN, f"would {what}")
        return None
    return Removal(run, group, instance, node)
