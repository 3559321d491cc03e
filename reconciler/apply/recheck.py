"""Re-run the scale-down test on live state before draining (DESIGN §3 rule 5). Pure.

An approval is for the cluster as it was when the proposal was written. Before apply drains an
approved instance, the planner judges it again on what runs now, as if it were an ordinary
candidate that has waited long enough: at or below its threshold, nothing on it that forbids a drain,
every pod still placeable on the nodes that stay after the pending pods took their places. The whole
planner runs, not a copy of its rules, so apply and plan can never disagree about what is safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import replace
from datetime import datetime, timedelta

from reconciler.config.settings import Config
from reconciler.domain.inventory import Inventory, build_inventory
from reconciler.domain.model import OWN_DRAIN_TAINT, Node
from reconciler.planning.baseline import baseline
from reconciler.planning.plan import make_plan
from reconciler.planning.types import CommittedGroup, PlanInputs, PlannerMemory

# Old enough for every unneeded-time setting: the timer was the proposal's business, not apply's.
_LONG_AGO = timedelta(days=3650)


def approved_verdicts(
    config: Config,
    now: datetime,
    inventory: Inventory,
    committed: Mapping[str, CommittedGroup],
    only: Iterable[str] | None = None,
) -> dict[str, str | None]:
    """`recheck` for every approved removal still in its ASG (or just `only` of them) on `inventory`."""
    keep = None if only is None else set(only)
    groups = {g.name: g for g in inventory.groups}
    approved: dict[str, set[str]] = {}
    for name, entry in committed.items():
        if name in groups:
            present = baseline(groups[name].group, entry).approved_present
            chosen = {i for i in present if keep is None or i in keep}
            if chosen:
                approved[name] = chosen
    if not approved:
        return {}
    return recheck(PlanInputs(inventory=inventory, config=config, now=now, committed=committed), approved)


def recheck(inputs: PlanInputs, approved: Mapping[str, Set[str]]) -> dict[str, str | None]:
    """For each approved instance (per group) still in the ASG: None when it may go now, else why not.

    The approved removals are handed back to the planner as ordinary capacity (desired counting them,
    nothing listed), their nodes marked unneeded long ago and preferred, and the per-plan cap lifted;
    an instance passes when the resulting plan removes it.
    """
    committed = dict(inputs.committed)
    for group, ids in approved.items():
        entry = committed.get(group)
        if entry is not None:
            committed[group] = CommittedGroup(desired=entry.desired + len(ids), hold=entry.hold)
    nodes = {
        inst: node.name
        for g in inputs.inventory.groups
        for node in g.nodes
        if (inst := node.instance_id) and any(inst in ids for ids in approved.values())
    }
    since = inputs.now - _LONG_AGO
    memory = PlannerMemory(
        unneeded_since={**inputs.memory.unneeded_since, **dict.fromkeys(nodes.values(), since)},
        backoffs=inputs.memory.backoffs,
        last_scale_up={},
    )
    wanted = frozenset(i for ids in approved.values() for i in ids)
    inventory = _without_own_taint(inputs.inventory, wanted)
    config = inputs.config
    cap = config.scale_down.max_nodes_per_plan + len(wanted)  # approved ones are tried first
    uncapped = replace(config, scale_down=replace(config.scale_down, max_nodes_per_plan=cap))
    plan = make_plan(
        replace(
            inputs, inventory=inventory, committed=committed, memory=memory, proposed=wanted, config=uncapped
        )
    )
    removed = {r.instance_id for g in plan.groups for r in g.removals}
    kept = {u.node: u.reason for u in plan.unremovable}
    verdicts: dict[str, str | None] = {}
    for group, ids in approved.items():
        held = committed.get(group, CommittedGroup(0)).hold
        for instance in sorted(ids):
            if instance in removed:
                verdicts[instance] = None
            elif held:
                verdicts[instance] = "the group is on hold in the manifest"
            else:
                node = nodes.get(instance)
                found = kept.get(node) if node else None
                # the planner lists every candidate it keeps, except busy nodes (as CA)
                verdicts[instance] = found or "busy again: above its scale-down utilisation threshold"
    return verdicts


def _without_own_taint(inventory: Inventory, instances: frozenset[str]) -> Inventory:
    """A node of an approved instance may carry our drain taint from a run that crashed before
    terminating it: that drain is to be resumed, so the taint must not make the planner keep the
    node ("being drained by asg-reconciler")."""
    nodes = inventory.state.nodes
    if not any(n.instance_id in instances and _own(n) for n in nodes):
        return inventory
    cleaned = tuple(
        replace(n, taints=tuple(t for t in n.taints if t.key != OWN_DRAIN_TAINT))
        if n.instance_id in instances
        else n
        for n in nodes
    )
    return build_inventory(replace(inventory.state, nodes=cleaned), tuple(g.group for g in inventory.groups))


def _own(node: Node) -> bool:
    return any(t.key == OWN_DRAIN_TAINT for t in node.taints)
