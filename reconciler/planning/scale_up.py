"""Scale-up: which groups grow, by how many nodes, for the pending pods nothing else can hold.

Unlike cluster-autoscaler, which expands one group per loop, this keeps choosing until every
helpable pod is placed: each round estimates every candidate group for the pods still waiting, lets
the expander chain pick one option, books its new nodes into the pool, and goes again with what is
left. Caps come from the group (max size, unapplied increases, backoff), `scaleUp.maxStep` and the
cluster-wide `limits`. Pods are served in tiers of priority, highest first (as kube-scheduler's queue
serves them), so those caps are spent on the pods that matter most: cluster-autoscaler weighs every
pending pod alike in its options, and fifty priority-0 pods could use up `maxNodesTotal` before a
priority-100000 one that needs another group is looked at.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.config.settings import Config
from reconciler.domain.model import CPU, HOSTNAME_LABEL, MEMORY, NodeTemplate, Pod
from reconciler.planning.equivalence import ClassKey, group_pods
from reconciler.planning.estimator import Estimate, estimate
from reconciler.planning.expanders import build_chain
from reconciler.planning.expanders.base import Option
from reconciler.planning.limit_costs import NodeCost
from reconciler.planning.placement import Demand, NodePool
from reconciler.planning.predicates import PredicateContext, check, fits_besides_resources
from reconciler.planning.simnode import SimNode

GIB = 2**30


@dataclass
class Candidate:
    """A group as scale-up sees it. `blocked` says why it cannot grow at all in this plan."""

    name: str
    template: NodeTemplate | None
    base: SimNode | None  # an empty new node of the group (DaemonSet pods on it), None: no template
    room: int  # nodes it may still add: max size and maxStep against its baseline
    size: int = 0  # capacity before this plan's additions, for balancing similar groups
    blocked: str = ""
    added: int = 0
    hourly_price: float | None = None  # one new node, USD an hour (None: no price known)
    limit_cost: NodeCost | None = None  # one new node against `limits`, at worst (None: its template)
    memo: dict[ClassKey, str | None] = field(default_factory=dict)


@dataclass
class Limits:
    """What is left under `limits` for the whole cluster; None = unlimited."""

    nodes: int | None
    cpu_milli: int | None
    memory: int | None

    @staticmethod
    def headroom(config: Config, nodes: int, cpu_milli: int, memory: int) -> Limits:
        limits = config.limits
        return Limits(
            None if not limits.max_nodes_total else limits.max_nodes_total - nodes,
            None if not limits.cores_max else limits.cores_max * 1000 - cpu_milli,
            None if not limits.memory_max_gb else limits.memory_max_gb * GIB - memory,
        )

    def cap(self, template: NodeTemplate, cost: NodeCost | None = None) -> tuple[int | None, str]:
        """How many nodes of `template` fit under the limits, and the limit that binds first. Counted
        in node capacity, as the totals are (`counted`): allocatable is less (kube-reserved, the
        eviction threshold), and dividing by it would let a plan grow past the limits. `cost`: what
        one node may cost at worst (a mixed-instances group may launch a larger override; with
        WeightedCapacity one node is several units), as apply counts it (planning/limit_costs.py)."""
        machines, cpu, memory = _per_node(template, cost)
        caps: list[tuple[int, str]] = []
        if self.nodes is not None:
            caps.append((self.nodes // max(machines, 1), "limits.maxNodesTotal"))
        if self.cpu_milli is not None and cpu:
            caps.append((self.cpu_milli // cpu, "limits.cores"))
        if self.memory is not None and memory:
            caps.append((self.memory // memory, "limits.memory"))
        if not caps:
            return None, ""
        count, name = min(caps)
        return max(count, 0), name

    def book(self, template: NodeTemplate, count: int, cost: NodeCost | None = None) -> None:
        machines, cpu, memory = _per_node(template, cost)
        if self.nodes is not None:
            self.nodes -= machines * count
        if self.cpu_milli is not None:
            self.cpu_milli -= cpu * count
        if self.memory is not None:
            self.memory -= memory * count


def _per_node(template: NodeTemplate, cost: NodeCost | None) -> tuple[int, int, int]:
    if cost is not None:
        return cost.machines, cost.cpu, cost.memory
    return 1, counted(template, CPU), counted(template, MEMORY)


def counted(template: NodeTemplate, resource: str) -> int:
    """What one node of `template` counts against `limits`: its capacity of `resource` (as
    cluster-autoscaler's resource manager counts a node), its allocatable when capacity is unknown."""
    return template.capacity.get(resource) or template.allocatable.get(resource)


@dataclass(frozen=True)
class ScaleUpResult:
    new_nodes: Mapping[str, int]  # group -> nodes added by this plan
    helped: Mapping[str, str]  # pod key -> group whose new nodes hold it
    pods_by_group: Mapping[str, int]
    not_helped: Mapping[str, str]  # pod key -> why no group helps
    # pod key -> a node that existed before this plan and takes the pod once other groups have
    # grown (a spread minimum rose, an affinity match arrived)
    fits_after: Mapping[str, str] = field(default_factory=dict)
    # every pending pod booked in this scale-up and its node, for the re-checks of later removals
    placements: tuple[tuple[Pod, str], ...] = ()


def plan_scale_up(
    pods: Sequence[Pod],
    candidates: Sequence[Candidate],
    pool: NodePool,
    limits: Limits,
    config: Config,
    exclude: Collection[str] = (),
) -> ScaleUpResult:
    """`exclude`: nodes pending pods may not go to (NotReady, approved removals), as for placement
    on existing capacity."""
    chain = build_chain(config.expander, config.expander_options)
    by_name = {c.name: c for c in candidates}
    remaining = list(pods)
    helped: dict[str, str] = {}
    fits_after: dict[str, str] = {}
    topology = pool.ctx.topology
    if topology is not None:
        topology.set_extras(c.base for c in candidates if c.base is not None and not c.blocked and c.room > 0)
    refusals: dict[ClassKey, dict[str, str]] = {}  # pod class -> group -> why not there
    limit_hit: dict[str, str] = {}  # group -> the limit that stopped it
    new_names: set[str] = set()  # nodes this plan adds
    placements: list[tuple[Pod, str]] = []  # pending pod -> node, in booking order
    round_number = 0
    shapes = _shapes(candidates)

    def settle(pods: list[Pod]) -> list[Pod]:
        """`pods` onto any node that takes them now (new nodes' spare room included); the rest."""
        late = pool.place(pods, exclude=exclude)
        placements.extend(late.placed)
        for pod, node_name in late.placed:
            target = pool.get(node_name)
            if target is not None and node_name in new_names:
                helped[pod.key] = target.group
            else:
                fits_after[pod.key] = node_name
        moved = {id(p) for p, _ in late.placed}
        return [p for p in pods if id(p) not in moved]

    waiting: list[Pod] = []  # pods of the tiers done that no group could take
    held: list[Pod] = []  # unpromised pods whose room new nodes keep (estimator): not estimated again
    for tier_number, tier in enumerate(_by_priority(remaining)):
        # Higher priorities first, as the scheduler serves them: what bounds growth (limits, max
        # sizes, maxStep) is spent on them before a lower tier is looked at; a lower tier first
        # takes the room the nodes added for higher ones left, then grows what is still allowed.
        remaining = settle(tier) if tier_number else tier
        while remaining:
            round_number += 1
            classes = group_pods(remaining, pool.classifier)
            options: list[Option] = []
            estimates: dict[str, Estimate] = {}
            # Groups alike in all a pod can see (shape, labels, taints, zones) and with the same room get
            # the same estimate: one per round, unless a class names nodes (matchFields).
            shared: dict[tuple[object, ...], Estimate] = {}
            rooms: dict[str, int] = {}
            by_name_matters = any(
                t.match_fields
                for cls in classes
                for t in cls.representative.scheduling.required_node_affinity
            )
            for candidate in candidates:
                if candidate.blocked or candidate.base is None or candidate.template is None:
                    continue
                room = candidate.room - candidate.added
                limit_cap, limit_name = limits.cap(candidate.template, candidate.limit_cost)
                if limit_cap is not None and limit_cap < room:
                    room = limit_cap
                    if room <= 0:
                        limit_hit[candidate.name] = limit_name
                if room <= 0:
                    continue
                memo = candidate.memo
                if all(memo.get(cls.key) is not None for cls in classes):
                    continue  # every class still waiting was refused by this shape (reasons kept)
                rooms[candidate.name] = room
                key = (shapes[candidate.name], room)
                found = None if by_name_matters else shared.get(key)
                if found is None:
                    found = shared[key] = estimate(
                        classes,
                        candidate.base,
                        room,
                        pool.ctx,
                        name_prefix=f"{candidate.name}-new{round_number}",
                        fit_memo=candidate.memo,
                    )
                result = found
                for cls, reason in (*result.refused, *result.limited):
                    refusals.setdefault(cls.key, {})[candidate.name] = reason
                if result.helped:
                    estimates[candidate.name] = result
                    options.append(
                        Option(
                            candidate.name,
                            result.node_count,
                            result.placed,
                            candidate.template,
                            candidate.hourly_price,
                        )
                    )
            best = chain.best(options)
            if best is None:
                break
            chosen = estimates[best.group]
            winner = by_name[best.group]
            if chosen.nodes and not chosen.nodes[0].name.startswith(f"{winner.name}-new{round_number}-"):
                assert winner.base is not None  # an estimate shared with a group alike: its own nodes
                chosen = estimate(
                    classes,
                    winner.base,
                    rooms[winner.name],
                    pool.ctx,
                    name_prefix=f"{winner.name}-new{round_number}",
                    fit_memo=winner.memo,
                )
            owners = (
                balance(chosen.nodes, by_name[best.group], candidates, pool.ctx)
                if config.scale_up.balance_similar_node_groups
                else [by_name[best.group]] * len(chosen.nodes)
            )
            for node, owner in zip(chosen.nodes, owners, strict=True):
                if owner.name != best.group:
                    node = _moved_to(node, owner)
                node.group = owner.name
                owner.added += 1
                assert owner.template is not None  # a group without one has no base and is never chosen
                limits.book(owner.template, 1, owner.limit_cost)
                pool.add_node(node)
                new_names.add(node.name)
                for pod in node.pods:
                    if not (pod.is_daemonset or pod.is_mirror):  # the new node's own pods
                        helped[pod.key] = owner.name
                        placements.append((pod, node.name))
            held.extend(chosen.held)
            placed = {id(p) for p in (*chosen.placed, *chosen.held)}
            remaining = [p for p in remaining if id(p) not in placed]
            # Pods held back by a domain-wide constraint may fit now that these nodes count (the
            # spread minimum rose, an affinity match arrived): onto any node, before another group grows.
            touched = [p for p in remaining if not pool.sticky(p)]
            if touched:
                unmoved = {id(p) for p in settle(touched)}
                remaining = [p for p in remaining if pool.sticky(p) or id(p) in unmoved]

        waiting.extend(remaining)
    remaining = [*waiting, *held]

    pods_by_group: dict[str, int] = {}
    for group in helped.values():
        pods_by_group[group] = pods_by_group.get(group, 0) + 1
    classify = pool.classifier.key
    not_helped = {
        pod.key: _why_not(pod, candidates, refusals.get(classify(pod), {}), limit_hit) for pod in remaining
    }
    return ScaleUpResult(
        new_nodes={c.name: c.added for c in candidates if c.added},
        helped=helped,
        pods_by_group=pods_by_group,
        not_helped=not_helped,
        fits_after=fits_after,
        placements=tuple(placements),
    )


def _by_priority(pods: Sequence[Pod]) -> list[list[Pod]]:
    """`pods` in tiers of equal priority, highest first, each in the order given."""
    tiers: dict[int, list[Pod]] = {}
    for pod in pods:
        tiers.setdefault(pod.priority, []).append(pod)
    return [tiers[priority] for priority in sorted(tiers, reverse=True)]


def _shapes(candidates: Sequence[Candidate]) -> dict[str, tuple[object, ...]]:
    """What of a group a pod can see, for sharing estimates: its new node's labels (hostname aside),
    taints, allocatable and zones; groups alike share one fit memo too."""
    found: dict[str, tuple[object, ...]] = {}
    memos: dict[tuple[object, ...], dict[ClassKey, str | None]] = {}
    for c in candidates:
        base = c.base
        if base is None:
            continue
        shape = (
            tuple(
                tuple(sorted((k, v) for k, v in labels.items() if k != HOSTNAME_LABEL))
                for labels in base.label_variants
            ),
            base.taints,
            tuple(sorted(base.allocatable.values.items())),
            base.zones,
            tuple(
                sorted(
                    (
                        p.namespace,
                        p.owner.kind if p.owner else "",
                        p.owner.name if p.owner else p.name,
                        *sorted(p.requests.values.items()),
                    )
                    for p in base.pods
                )
            ),
        )
        found[c.name] = shape
        c.memo = memos.setdefault(shape, c.memo)
    return found


def _why_not(
    pod: Pod,
    candidates: Sequence[Candidate],
    refusals: Mapping[str, str],
    limit_hit: Mapping[str, str],
) -> str:
    """One line a person can act on: each group's reason, the most telling first."""
    if not candidates:
        return "no node groups are configured"
    reasons: list[str] = []
    for candidate in candidates:
        if candidate.name in refusals:
            reasons.append(f"{candidate.name}: {refusals[candidate.name]}")
        elif candidate.blocked:
            reasons.append(candidate.blocked)
        elif candidate.name in limit_hit:
            reasons.append(f"{limit_hit[candidate.name]} reached")
        elif candidate.base is None:
            reasons.append(f"{candidate.name}: no node template")
        elif candidate.room - candidate.added <= 0:
            reasons.append(f"{candidate.name} has no room left (max size or scaleUp.maxStep)")
        else:
            reasons.append(f"{candidate.name}: no room left after placing other pods")
    unique = list(dict.fromkeys(reasons))
    shown = unique[:4]
    more = f"; and {len(unique) - len(shown)} more" if len(unique) > len(shown) else ""
    return "no node group can help: " + "; ".join(shown) + more + _single_zone_hint(refusals, candidates)


_ONLY_ZONES = re.compile(r"; only (.+?) would do, and AWS picks the zone of a new node")


def _single_zone_hint(refusals: Mapping[str, str], candidates: Sequence[Candidate]) -> str:
    """A multi-AZ group refused the pod because it needs particular zones: name the single-AZ groups
    in those zones (they can place it; if they did not, their own reasons above say why)."""
    zones: set[str] = set()
    for reason in refusals.values():
        match = _ONLY_ZONES.search(reason)
        if match:
            zones.update(match.group(1).split(", "))
    if not zones:
        return ""
    helpers = sorted(
        c.name
        for c in candidates
        if c.base is not None and len(c.base.zones) == 1 and c.base.zones[0] in zones
    )
    where = ", ".join(sorted(zones))
    if helpers:
        return f". A multi-AZ group cannot promise a zone; single-AZ groups in {where}: {', '.join(helpers)}"
    return f". A multi-AZ group cannot promise a zone, and no single-AZ group serves {where}: one would help"


# Labels that differ between otherwise identical groups (zone, machine, provider bookkeeping), as
# cluster-autoscaler's AWS nodegroup-set comparator ignores them.
IGNORED_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/zone",
        "topology.ebs.csi.aws.com/zone",
        "topology.k8s.aws/zone-id",
        "eks.amazonaws.com/nodegroup",
        "alpha.eksctl.io/nodegroup-name",
        "alpha.eksctl.io/instance-id",
        "k8s.amazonaws.com/eniConfig",
        "lifecycle",
    }
)
MEMORY_TOLERANCE = 0.015  # as cluster-autoscaler: allocatable memory may differ by 1.5%


def similar(a: NodeTemplate, b: NodeTemplate) -> bool:
    """Same shape and scheduling surface, zones aside (`scaleUp.balanceSimilarNodeGroups`)."""
    if a.taints != b.taints:
        return False
    if {k: v for k, v in a.labels.items() if k not in IGNORED_LABELS} != {
        k: v for k, v in b.labels.items() if k not in IGNORED_LABELS
    }:
        return False
    left, right = a.allocatable.values, b.allocatable.values
    if {k: v for k, v in left.items() if k != MEMORY} != {k: v for k, v in right.items() if k != MEMORY}:
        return False
    larger = max(left.get(MEMORY, 0), right.get(MEMORY, 0)) or 1
    return abs(left.get(MEMORY, 0) - right.get(MEMORY, 0)) / larger <= MEMORY_TOLERANCE


def balance(
    nodes: Sequence[SimNode], chosen: Candidate, candidates: Sequence[Candidate], ctx: PredicateContext
) -> list[Candidate]:
    """Which group each new node goes to: always the similar group that is smallest so far (ties by
    name), as cluster-autoscaler balances; a node moves only if every pod on it passes the
    predicates on that group's own template (zonal volumes and selectors stay safe)."""
    assert chosen.template is not None
    peers = [
        c
        for c in candidates
        if c is chosen
        or (
            not c.blocked
            and c.base is not None
            and c.template is not None
            and similar(c.template, chosen.template)
        )
    ]
    planned = {c.name: 0 for c in peers}
    owners: list[Candidate] = []
    for node in nodes:
        order = sorted(peers, key=lambda c: (c.size + c.added + planned[c.name], c.name))
        owner = next(
            (
                c
                for c in order
                if c is chosen or (c.room - c.added - planned[c.name] > 0 and _holds(c, node, ctx))
            ),
            chosen,
        )
        planned[owner.name] += 1
        owners.append(owner)
    return owners


def _moved_to(node: SimNode, owner: Candidate) -> SimNode:
    """A new node balancing gives to another group: that group's node (its labels, zone, taints,
    own pods) with the pending pods the chosen group's estimate put on it."""
    assert owner.base is not None
    moved = owner.base.copy(node.name)
    for pod in node.pods:
        if not (pod.is_daemonset or pod.is_mirror):
            moved.add(pod)
    for pod in node.held:
        moved.hold(pod)
    return moved


def _holds(candidate: Candidate, node: SimNode, ctx: PredicateContext) -> bool:
    assert candidate.base is not None
    trial = candidate.base.copy(node.name)
    topology = ctx.topology
    for pod in node.pods:
        if pod.is_daemonset or pod.is_mirror:
            continue
        if topology is not None and not (topology.untouched(pod) and not topology.counted(pod)):
            return False  # placed against, or counted in, the chosen group's domains: it stays there
        if check(pod, trial, ctx) is not None:
            return False
        trial.add(pod)
    for pod in node.held:
        if not (Demand(pod).fits_resources(trial) and fits_besides_resources(pod, trial, ctx, domains=False)):
            return False
        trial.hold(pod)
    return True
