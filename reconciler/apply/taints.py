"""Our drain taint, everywhere: every node carrying it that this run is not removing serves again
(DESIGN §3 rule 6), at the start (its approval is gone) and at the end (whatever the gates said:
busy again, approval expired, a give-back that failed earlier). Only our taint is ever removed: a
person's cordon (`spec.unschedulable`) is theirs.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.apply.effects import Effects
from reconciler.apply.inputs import ApplyInputs
from reconciler.errors import ReconcilerError
from reconciler.inventory import GroupInventory
from reconciler.planning.baseline import baseline
from reconciler.planning.types import CommittedGroup


def give_back_unapproved(
    inputs: ApplyInputs,
    groups: Mapping[str, GroupInventory],
    committed: Mapping[str, CommittedGroup],
    effects: Effects,
    given_back: list[str],
    stuck: list[str],
) -> None:
    """At the start: nodes our taint marks whose instance is no longer an approved removal at the
    target (a crash, then the approval was withdrawn) serve again now. Those still approved are
    resumed, or given back at the end if this run does not remove them."""
    approved = {
        i
        for name, entry in committed.items()
        if name in groups
        for i in baseline(groups[name].group, entry).approved_present
    }
    instance_of = {n.name: n.instance_id for n in inputs.inventory.state.nodes}
    for node, commit in sorted(_marked(effects, stuck).items()):
        if instance_of.get(node) in approved or _going_away(inputs, node):
            continue
        _release(inputs, effects, node, commit, "no longer an approved removal", given_back, stuck)


def sweep(
    inputs: ApplyInputs, effects: Effects, terminated_nodes: set[str], given_back: list[str], stuck: list[str]
) -> None:
    """At the end: every node still carrying our taint that this run did not terminate serves again,
    whatever the gates said (busy again, approval expired, a failed give-back earlier)."""
    for node, commit in sorted(_marked(effects, stuck).items()):
        if node not in terminated_nodes and not _going_away(inputs, node):
            _release(inputs, effects, node, commit, "not removed by this run", given_back, stuck)


def _going_away(inputs: ApplyInputs, node: str) -> bool:
    """A node whose instance is terminating or gone (an earlier run terminated it; its node object
    lingers until the cloud controller deletes it) keeps our taint: given back, it would take pods
    its machine is about to kill."""
    instance = next((n.instance_id for n in inputs.inventory.state.nodes if n.name == node), "")
    if not instance:
        return False  # no AWS instance behind it: nothing of ours is terminating it
    states = {i.instance_id: i.lifecycle_state for g in inputs.inventory.groups for i in g.group.instances}
    return states.get(instance, "Terminated") in _GOING


_GOING = frozenset({"Terminating", "Terminating:Wait", "Terminating:Proceed", "Terminated"})


def _marked(effects: Effects, stuck: list[str]) -> dict[str, str]:
    try:
        return effects.drainer.marked()
    except ReconcilerError as exc:
        stuck.append(f"could not list the nodes carrying the drain taint: {exc}")
        return {}


def _release(
    inputs: ApplyInputs,
    effects: Effects,
    node: str,
    commit: str,
    why: str,
    given_back: list[str],
    stuck: list[str],
) -> None:
    if inputs.dry_run:
        given_back.append(f"{node}: would be given back ({why}; drain taint from {commit[:12] or 'unknown'})")
        return
    try:
        effects.drainer.unmark(node)
    except ReconcilerError as exc:
        stuck.append(f"{node}: still carries the drain taint ({exc}); the next apply gives it back")
        return
    given_back.append(f"{node}: given back ({why}; drain taint from {commit[:12] or 'unknown'})")
