"""How many new nodes of one shape would hold these pods: first-fit decreasing bin-packing.

As cluster-autoscaler's binpacking estimator: each class is first tried on one empty new node (a
class that does not fit there can never be helped by this group, and the reason says why); the rest
are sorted by size, largest first, size being the pod's CPU share plus memory share of the node;
each pod goes on the first new node that takes it, and a further node is opened when none does,
until `max_nodes` (the caller's min of max size, scaleUp.maxStep and the limits) is reached.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.domain.model import Pod
from reconciler.planning.equivalence import ClassKey, EquivalenceClass
from reconciler.planning.freeindex import ANY
from reconciler.planning.placement import Demand
from reconciler.planning.predicates import (
    NO_CONTEXT,
    PredicateContext,
    fits_besides_resources,
    node_check,
)
from reconciler.planning.simnode import SimNode


@dataclass(frozen=True, slots=True)
class Estimate:
    """The outcome for one group: `node_count` new nodes holding `placed` (`placements` says which
    node took each pod); `unfit` pods cannot run on this shape at all (with the reason an empty new
    node gives); `capped` pods would fit but `max_nodes` ran out. `nodes` are the simulated new nodes,
    DaemonSet pods included, in the order they were opened."""

    node_count: int
    placed: tuple[Pod, ...]
    placements: tuple[tuple[Pod, str], ...]
    refused: tuple[tuple[EquivalenceClass, str], ...]  # classes that fit no node of this shape
    capped: tuple[Pod, ...]
    nodes: tuple[SimNode, ...]
    # classes a domain-wide constraint stopped (wholly or after some pods): the pods not in `placed`
    # may still be helped by another group, or by this one once other groups have grown
    limited: tuple[tuple[EquivalenceClass, str], ...] = ()
    # pods of `limited` classes refused only because AWS picks a new node's zone: not promised a
    # place, but the scheduler binds them to a new node whose zone suits, so the room they would
    # take on the nodes opened is kept (`SimNode.held`) from the pods packed after them
    held: tuple[Pod, ...] = ()

    @property
    def helped(self) -> bool:
        return self.node_count > 0

    @property
    def unfit(self) -> tuple[tuple[Pod, str], ...]:
        """`refused` pod by pod; callers planning many rounds keep to `refused` (one entry a class)."""
        return tuple((pod, reason) for cls, reason in self.refused for pod in cls.pods)


def size_key(pod: Pod, node: SimNode) -> int:
    """CPU share + memory share of the node, as an exact integer (scaled by cpu * memory) so the
    order never depends on float rounding."""
    alloc_cpu = node.allocatable.cpu or 1
    alloc_mem = node.allocatable.memory or 1
    return pod.requests.cpu * alloc_mem + pod.requests.memory * alloc_cpu


def estimate(
    classes: Sequence[EquivalenceClass],
    base: SimNode,
    max_nodes: int,
    ctx: PredicateContext = NO_CONTEXT,
    *,
    name_prefix: str = "",
    fit_memo: dict[ClassKey, str | None] | None = None,
) -> Estimate:
    """Pack the classes' pods onto copies of `base` (an empty new node of the group, built with
    `SimNode.from_template`); `base` itself is not modified. New nodes are named
    `<name_prefix>-1`, `-2`, ... (default prefix: `new-<group>`); give each call its own prefix when
    the nodes of several estimates go into one pool. Same input, same output.

    `fit_memo`, kept by the caller per group across rounds of one plan (same `base`, same `ctx`,
    classes from one Classifier), remembers each class's verdict on an empty node so repeated
    estimates skip the predicates; it holds only what the node alone decides, since domain-wide
    counts (`ctx.topology`) change from round to round.

    With `ctx.topology`, the new nodes count in it while this estimate runs (each pod placed sees
    the ones before it) and leave it before it returns: a caller that takes the estimate adds
    `nodes` to its pool.
    """
    prefix = name_prefix or f"new-{base.group or base.name}"
    topology = ctx.topology
    refused: list[tuple[EquivalenceClass, str]] = []
    limited: list[tuple[EquivalenceClass, str]] = []
    sizes: dict[int, int] = {}
    for c_index, cls in enumerate(classes):
        if fit_memo is None:
            reason = node_check(cls.representative, base, ctx)
        elif cls.key in fit_memo:
            reason = fit_memo[cls.key]
        else:
            reason = fit_memo[cls.key] = node_check(cls.representative, base, ctx)
        if reason is None:
            sizes[c_index] = size_key(cls.representative, base)  # same requests across the class
        else:
            refused.append((cls, reason))
    # Largest first; equal sizes keep class order and, within a class, pod order. A class is one
    # contiguous run of that order, so it is packed run by run.
    order = sorted(sizes, key=lambda c: (-sizes[c], c))
    demands = [Demand(classes[c].representative) for c in order]
    # Smallest CPU and memory any class from here on asks for: a node with less free can take
    # none of them and leaves the scan for good (the live list), which keeps later, smaller classes
    # from walking every full node.
    floor_cpu = [0] * len(order)
    floor_mem = [0] * len(order)
    low_cpu = low_mem = None
    for k in range(len(order) - 1, -1, -1):
        cpu = demands[k].cpu or ANY  # no request: even an overcommitted node may take it
        mem = demands[k].mem or ANY
        low_cpu = cpu if low_cpu is None else min(low_cpu, cpu)
        low_mem = mem if low_mem is None else min(low_mem, mem)
        floor_cpu[k], floor_mem[k] = low_cpu, low_mem

    nodes: list[SimNode] = []
    live: list[SimNode] = []  # opened nodes that may still take a remaining class, in open order
    placements: list[tuple[Pod, str]] = []
    capped: list[Pod] = []
    held: list[Pod] = []
    waiting: list[tuple[Pod, Demand]] = []  # pods to hold room for that found none yet
    # The group may open a node beyond those holding pods (another class, another round): an empty
    # domain for spread (the hostname above all), as for every group that may grow.
    extras = topology.extras if topology is not None else ()
    added_base = topology is not None and not any(b is base for b in extras)
    if added_base and topology is not None:
        topology.set_extras((*extras, base))
    try:
        for k, c_index in enumerate(order):
            cls = classes[c_index]
            demand = demands[k]
            fc, fm = floor_cpu[k], floor_mem[k]
            live = [n for n in live if n.pods_free > 0 and n.cpu_free >= fc and n.mem_free >= fm]
            stop = _pack(
                cls, demand, base, max_nodes, ctx, prefix, nodes, live, placements, capped, waiting, held
            )
            if stop is not None:
                limited.append((cls, stop))
                if _zone_unknown(stop, base):
                    # AWS picks the zone: in the zone it picks, the scheduler may bind these too,
                    # in the room nodes opened so far have left and in the nodes opened later
                    placed_ids = {id(p) for p, _ in placements}
                    waiting.extend((p, demand) for p in cls.pods if id(p) not in placed_ids)
                    _hold(waiting, ctx, live, held)
    finally:
        if topology is not None:
            for node in nodes:
                topology.node_removed(node)
            if added_base:
                topology.set_extras(extras)

    if not placements:  # room kept for pods no one is promised is no reason to grow
        nodes, held = [], []
    return Estimate(
        node_count=len(nodes),
        placed=tuple(pod for pod, _ in placements),
        placements=tuple(placements),
        refused=tuple(refused),
        capped=tuple(capped),
        nodes=tuple(nodes),
        limited=tuple(limited),
        held=tuple(held),
    )


def _zone_unknown(reason: str, base: SimNode) -> bool:
    """Whether a domain-wide refusal concerns a label whose value only AWS's choice of zone fixes
    (a key that differs between the zone variants of a multi-AZ group's new node)."""
    variants = base.label_variants
    if len(variants) < 2:
        return False
    keys = {k for labels in variants for k in labels if any(v.get(k) != labels[k] for v in variants)}
    return any(f" on {key}:" in reason for key in keys)


def _hold(
    waiting: list[tuple[Pod, Demand]], ctx: PredicateContext, live: Sequence[SimNode], held: list[Pod]
) -> None:
    """Keep room for pods a domain-wide rule kept off this multi-AZ group's new nodes only because
    the zone is unknown: first fit in what the `live` nodes have left, so the pods packed after them
    are not counted into room these take; those that find none wait for the next node opened (the
    scheduler serves them as it does the rest). No node is opened for them."""
    still: list[tuple[Pod, Demand]] = []
    for pod, demand in waiting:
        cpu, mem, extra = demand.cpu, demand.mem, demand.extra
        target = next(
            (
                node
                for node in live
                if node.pods_free > 0
                and (cpu <= node.cpu_free or not cpu)
                and (mem <= node.mem_free or not mem)
                and (not extra or demand.fits_extra(node))
                and fits_besides_resources(pod, node, ctx, domains=False)
            ),
            None,
        )
        if target is None:
            still.append((pod, demand))
        else:
            target.hold(pod)
            held.append(pod)
    waiting[:] = still


def _pack(
    cls: EquivalenceClass,
    demand: Demand,
    base: SimNode,
    max_nodes: int,
    ctx: PredicateContext,
    prefix: str,
    nodes: list[SimNode],
    live: list[SimNode],
    placements: list[tuple[Pod, str]],
    capped: list[Pod],
    waiting: list[tuple[Pod, Demand]],
    held: list[Pod],
) -> str | None:
    """First-fit one class's pods onto the open nodes, opening more; the domain-wide reason that
    stopped the class short, if one did. A node opened takes its first pod, then the room of the
    `waiting` pods (`_hold`), then the rest."""
    topology = ctx.topology
    pods = cls.pods
    cpu, mem, extra = demand.cpu, demand.mem, demand.extra
    s = pods[0].scheduling
    # Without host ports, spread or pod (anti-)affinity, a pod's class-mates change nothing for it
    # but free resources: as many as fit go on a node in one step, which is what one-by-one
    # first-fit would do.
    batchable = not (s.host_ports or s.topology_spread or s.pod_anti_affinity or s.pod_affinity)
    # A refusal lasts for the class only if no domain-wide rule bears on it.
    sticky = topology is None or topology.untouched(pods[0])
    cursor = 0  # nodes before it refused this class on their own merit (resources, ports, ...)
    i = 0
    while i < len(pods):
        pod = pods[i]
        target: SimNode | None = None
        advancing = True  # a refusal for counts elsewhere (spread, affinity) may not last
        opened = False
        for j in range(cursor, len(live)):
            node = live[j]
            if (
                node.pods_free > 0
                and (cpu <= node.cpu_free or not cpu)
                and (mem <= node.mem_free or not mem)
                and (not extra or demand.fits_extra(node))
                and fits_besides_resources(pod, node, ctx, domains=False)
            ):
                if sticky or topology is None or topology.check(pod, node) is None:
                    target = node
                    break
                advancing = False
            elif advancing:
                cursor = j + 1
        if target is None:
            fresh = base.copy(f"{prefix}-{len(nodes) + 1}")
            if not sticky and topology is not None:
                # Every new node of the group is in the same domains: a refusal here holds for the
                # class's remaining pods until other groups grow.
                reason = topology.check(pod, fresh)
                if reason is not None:
                    return reason
            if len(nodes) >= max_nodes:
                capped.extend(pods[i:])
                return None
            target = fresh
            opened = True
            nodes.append(target)
            live.append(target)
            if topology is not None:
                topology.node_added(target, trial=True)
            if advancing:
                cursor = len(live) - 1
        if batchable and not (opened and waiting):
            batch = pods[i : i + max(1, demand.how_many_fit(target))]  # target took pods[i]
            target.add_same(batch)
            name = target.name
            placements.extend((p, name) for p in batch)
            i += len(batch)
            if topology is not None:
                for p in batch:
                    topology.pod_added(p, target)
        else:
            target.add(pod)
            placements.append((pod, target.name))
            i += 1
            if topology is not None:
                topology.pod_added(pod, target)
        if opened and waiting:
            _hold(waiting, ctx, (target,), held)
    return None
