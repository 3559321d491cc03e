"""Our drain taint, everywhere: every node carrying it that this run is not removing serves again
(DESIGN §3 rule 6), at the start (its approval is gone) and at the end (whatever the gates said:
busy again, approval expired, a give-back that failed earlier). Only our taint is ever removed: a
person's cordon (`spec.unschedulable`) is theirs.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.apply.effects import Effects
from reconciler.apply.inputs import ApplyInputs
from reconciler.domain.errors import ReconcilerError
from reconciler.domain.inventory import GroupInventory
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
        if instance_of.get(node) in approved or _suspended(inputs, node) or _going_away(effects, node):
            continue
        _release(inputs, effects, node, commit, "no longer an approved removal", given_back, stuck)


def sweep(
    inputs: ApplyInputs, effects: Effects, terminated_nodes: set[str], given_back: list[str], stuck: list[str]
) -> None:
    """At the end: every node still carrying our taint that this run did not terminate serves again,
    whatever the gates said (busy again, approval expired, a failed give-back earlier)."""
    for node, commit in sorted(_marked(effects, stuck).items()):
        if node not in terminated_nodes and not _suspended(inputs, node) and not _going_away(effects, node):
            _release(inputs, effects, node, commit, "not removed by this run", given_back, stuck)


def _suspended(inputs: ApplyInputs, node: str) -> bool:
    """A node of a group the kill switch suspends is not written, not even to give it back."""
    return inputs.inventory.group_of_node.get(node) in inputs.suspended


def _going_away(effects: Effects, node: str) -> bool:
    """A node whose instance is terminating or gone (an earlier run terminated it; its node object
    lingers until the cloud controller deletes it; or AWS took it meanwhile) keeps our taint: given
    back, it would take pods its machine is about to kill. Asked of AWS now, not of the inventory
    read at the start; a node with no AWS instance behind it is given back."""
    try:
        instance = effects.drainer.instance_of(node)
    except ReconcilerError:
        return True  # cannot look: leave it for the next run
    if instance is None:
        return True  # the node is gone: nothing to give back
    return bool(instance) and effects.going_away(instance)


def release_strays(effects: Effects) -> tuple[list[str], list[str]]:
    """Every node carrying our taint whose machine is not going away serves again: for runs refused
    before they reach the groups (main rewritten, a broken manifest, cluster-autoscaler live), so a
    push cannot keep a crashed run's taint in place. Returns (given back, stuck)."""
    given_back: list[str] = []
    stuck: list[str] = []
    for node, commit in sorted(_marked(effects, stuck).items()):
        if not _going_away(effects, node):
            _unmark(effects, node, commit, "this run was refused before it acted", given_back, stuck)
    return given_back, stuck


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
    _unmark(effects, node, commit, why, given_back, stuck)


def _unmark(
    effects: Effects, node: str, commit: str, why: str, given_back: list[str], stuck: list[str]
) -> None:
    try:
        effects.drainer.unmark(node)
    except ReconcilerError as exc:
        stuck.append(f"{node}: still carries the drain taint ({exc}); the next apply gives it back")
        return
    given_back.append(f"{node}: given back ({why}; drain taint from {commit[:12] or 'unknown'})")
