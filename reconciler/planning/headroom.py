"""Headroom: room a group keeps free for a burst, reviewed in the manifest (docs/headroom.md).

A group's `headroom: {replicas, requests}` stands for `replicas` virtual pods that select that group
only (its nodes, its upcoming nodes and the new nodes this plan gives it: the group is their node
selector, an internal constraint no real pod can carry), tolerate exactly the group's taints and have
no other constraint. They are judged after every real pod and never booked in the simulation, so a
real pod never loses room to them:

- scale-up: after the real pending pods are placed and the real scale-up is decided, each group
  counts how many virtual pods its nodes still hold (free room counts); for the rest it adds nodes,
  within what the group may still add (max size, scaleUp.maxStep, less the nodes real pods took),
  the cluster-wide limits, and not while it is held, backed off or waiting for an unapplied increase;
- scale-down: a removal that would leave a group less room than it needs (its own node going, or
  pods moving in from elsewhere) is refused, unless the group already had less and loses none.

All virtual pods of a group are alike and have no host ports, spread or affinity, so "how many fit"
is arithmetic per node (`room_on`), never a packing search. Pure.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from reconciler.domain.inventory import GroupInventory
from reconciler.domain.model import EMPTY_MAPPING, Pod, Scheduling, Taint, Toleration
from reconciler.planning.placement import Demand, NodePool
from reconciler.planning.predicates import PredicateContext, check
from reconciler.planning.scale_up import Candidate, Limits
from reconciler.planning.simnode import SimNode
from reconciler.planning.types import CommittedGroup, Headroom

OWN = "headroom of "  # how a refusal for the candidate's own group's headroom starts

# Namespace names are DNS labels: no real pod can live in this one, so no real selector counts the
# virtual pods and no report mistakes them for a workload.
NAMESPACE = "asg-reconciler.dev/headroom"


@dataclass(frozen=True)
class Need:
    """One group's headroom and the virtual pod that stands for each of its replicas."""

    group: str
    headroom: Headroom
    pod: Pod

    @property
    def replicas(self) -> int:
        return self.headroom.replicas


@dataclass(frozen=True)
class Outcome:
    """What scale-up did for one group's headroom: replicas with room, nodes added, why not all."""

    placed: int
    added: int
    reason: str = ""


def needs(groups: Sequence[GroupInventory], committed: Mapping[str, CommittedGroup]) -> list[Need]:
    """Every group with a headroom of at least one replica, in group order."""
    found = []
    for inv in groups:
        entry = committed.get(inv.name)
        headroom = entry.headroom if entry is not None else None
        if headroom is None or headroom.replicas <= 0:
            continue
        template = inv.template
        taints = template.taints if template is not None else inv.group.declared_taints
        found.append(Need(inv.name, headroom, virtual_pod(inv.name, headroom, taints)))
    return found


def virtual_pod(group: str, headroom: Headroom, taints: Sequence[Taint]) -> Pod:
    """One replica: the requests, a toleration for each of the group's own taints, nothing else.
    Node taints the group's template lacks (a person's maintenance taint, a cordon, apply's drain
    taint) are not tolerated: such a node is no room for a burst either."""
    tolerations = tuple(Toleration(t.key, "Equal", t.value, t.effect) for t in taints)
    return Pod(
        namespace=NAMESPACE,
        name=group,
        uid=f"headroom:{group}",
        requests=headroom.requests,
        node_name="",
        phase="Pending",
        created=None,
        labels=EMPTY_MAPPING,
        scheduling=Scheduling(tolerations=tolerations),
    )


def room_on(pod: Pod, node: SimNode, ctx: PredicateContext) -> int:
    """How many replicas `node` holds now: none unless the first passes every predicate, then as
    many as its free resources and pod slots allow (the replicas change nothing else for each other)."""
    if check(pod, node, ctx) is not None:
        return 0
    return Demand(pod).how_many_fit(node)


def measure(need: Need, pool: NodePool, exclude: Collection[str]) -> dict[str, int]:
    """Replicas each node of the group holds (nodes holding none left out): nodes that exist or are
    coming, not retired, not in `exclude` (NotReady nodes)."""
    found: dict[str, int] = {}
    for node in pool.nodes:
        if node.group != need.group or node.name in exclude or pool.is_retired(node.name):
            continue
        count = room_on(need.pod, node, pool.ctx)
        if count:
            found[node.name] = count
    return found


def scale_up(
    wanted: Sequence[Need],
    candidates: Mapping[str, Candidate],
    pool: NodePool,
    limits: Limits,
    exclude: Collection[str],
) -> dict[str, Outcome]:
    """Host each group's headroom on what it has, then on new nodes (added to `pool`, counted on the
    candidate and booked in `limits`), after the real scale-up took its share of both."""
    outcomes: dict[str, Outcome] = {}
    for need in wanted:
        have = min(sum(measure(need, pool, exclude).values()), need.replicas)
        short = need.replicas - have
        candidate = candidates.get(need.group)
        if short == 0 or candidate is None:
            outcomes[need.group] = Outcome(have, 0, "" if short == 0 else f"{need.group} is not a node group")
            continue
        added, why = _grow(need, short, candidate, pool, limits)
        placed = have + min(short, added * _per_new_node(need, candidate, pool.ctx))
        reason = "" if placed >= need.replicas else f"room for {placed} of {need.replicas}: {why}"
        outcomes[need.group] = Outcome(placed, added, reason)
    return outcomes


def _per_new_node(need: Need, candidate: Candidate, ctx: PredicateContext) -> int:
    """Replicas one new node of the group holds: judged as the estimator judges a fresh node (the
    pods a fresh node starts with, and the domain-wide counts of the pool), so what is added for
    headroom is what the next plan counts as its room."""
    base = candidate.base
    return 0 if base is None else room_on(need.pod, base, ctx)


def _grow(need: Need, short: int, candidate: Candidate, pool: NodePool, limits: Limits) -> tuple[int, str]:
    """Nodes added for `short` replicas, and what stopped it short of them."""
    base = candidate.base
    if candidate.blocked:
        return 0, candidate.blocked
    if base is None or candidate.template is None:
        return 0, f"{need.group}: no node template"
    per_node = _per_new_node(need, candidate, pool.ctx)
    if per_node == 0:
        why = check(need.pod, base, pool.ctx) or "no pod slot"
        return (
            0,
            f"one replica does not fit an empty {candidate.template.instance_type} of {need.group}: {why}",
        )
    want = -(-short // per_node)
    allowed = max(candidate.room - candidate.added, 0)
    cap, limit = limits.cap(candidate.template, candidate.limit_cost)
    count = min(want, allowed, want if cap is None else cap)
    why = ""
    if count < want:
        if cap is not None and cap < min(want, allowed):
            why = f"{limit} reached"
        else:
            why = f"{need.group} has no room left (max size or scaleUp.maxStep)"
    for index in range(count):
        pool.add_node(base.copy(f"{need.group}-headroom-{candidate.added + index + 1}"))
    if count:
        limits.book(candidate.template, count, candidate.limit_cost)
        candidate.added += count
    return count, why


class Keeper:
    """Scale-down's side of headroom: each group's room per node, kept current as removals are
    chosen, so a removal that would leave a group without the room it needs is refused."""

    def __init__(self, wanted: Sequence[Need], pool: NodePool, exclude: Collection[str]) -> None:
        self.pool = pool
        self.needs = {n.group: n for n in wanted}
        self.rooms = {n.group: measure(n, pool, exclude) for n in wanted}

    def judge(
        self, candidate: str, group: str, moved: Sequence[tuple[Pod, str]]
    ) -> tuple[str | None, dict[str, dict[str, int]]]:
        """Why removing `candidate` of `group` (its movers booked as `moved`) would leave a headroom
        short, or None and the room changes to `commit` if it goes ahead. A reason starting with
        OWN is about the candidate's own group's headroom."""
        if not self.needs:
            return None, {}
        changes: dict[str, dict[str, int]] = {}
        if group in self.rooms and self.rooms[group].get(candidate):
            changes[group] = {candidate: 0}
        for name in {node for _, node in moved}:
            target = self.pool.get(name)
            if target is None or target.group not in self.rooms:
                continue
            rooms = self.rooms[target.group]
            if name not in rooms:
                continue  # held none: moving pods in cannot lower that
            now = room_on(self.needs[target.group].pod, target, self.pool.ctx)
            if now != rooms[name]:
                changes.setdefault(target.group, {})[name] = now
        for owner, updates in sorted(changes.items()):
            need = self.needs[owner]
            before = sum(self.rooms[owner].values())
            after = before + sum(count - self.rooms[owner].get(name, 0) for name, count in updates.items())
            if after < need.replicas and after < before:
                left = f"only {after} of {need.headroom.describe()} would have room"
                if owner == group and candidate in updates:
                    return f"{OWN}{owner} needs this node: without it {left}", {}
                return f"moving its pods would take the headroom of {owner}: {left}", {}
        return None, changes

    def commit(self, changes: Mapping[str, Mapping[str, int]]) -> None:
        for owner, updates in changes.items():
            rooms = self.rooms[owner]
            for name, count in updates.items():
                if count:
                    rooms[name] = count
                else:
                    rooms.pop(name, None)
