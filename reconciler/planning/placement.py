"""First-fit placement of pods onto nodes that exist or are coming: the "does it fit somewhere we
already have?" question of scale-up, and the rescheduling simulation of scale-down.

A NodePool keeps, per pod class, a cursor: every node before it refused that class. Predicates are
monotone (adding pods never makes room), so a refused node stays refused until a pod is removed from
it, and each class walks the node list about once per plan instead of once per pod. Within the walk
a FreeIndex jumps over nodes without enough free CPU, memory or pod slots, so a pod that fits nowhere
costs a tree descent, not a scan of 5,000 nodes. Removals go through the pool, which rewinds the
cursors past the node that gained room and refreshes the index.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from reconciler.domain.model import CPU, MEMORY, PODS, Pod
from reconciler.planning.equivalence import Classifier, ClassKey
from reconciler.planning.freeindex import ANY, FreeIndex
from reconciler.planning.predicates import NO_CONTEXT, PredicateContext, fits_besides_resources
from reconciler.planning.selectors import IN, NODE_NAME_FIELD
from reconciler.planning.simnode import SimNode

_NONE: list[int] = []


@dataclass(frozen=True, slots=True)
class Placement:
    """Where pods went (pod, node name), in placement order, and the pods no node took."""

    placed: tuple[tuple[Pod, str], ...]
    unplaced: tuple[Pod, ...]
    vacated: str | None = None  # the node whose pods this placement moved (`place(vacating=...)`)

    @property
    def complete(self) -> bool:
        return not self.unplaced


class Demand:
    """A pod's requests split for the inline resource test: CPU and memory as ints, the rest as
    pairs. One per class; computed once."""

    __slots__ = ("cpu", "extra", "mem")

    def __init__(self, pod: Pod) -> None:
        values = pod.requests.values
        self.cpu = values.get(CPU, 0)
        self.mem = values.get(MEMORY, 0)
        self.extra = tuple((k, v) for k, v in values.items() if k not in (CPU, MEMORY, PODS))

    def fits_resources(self, node: SimNode) -> bool:
        """As the scheduler: only requested resources count, so a pod requesting no CPU still fits
        an overcommitted node."""
        if node.pods_free < 1:
            return False
        if (self.cpu and self.cpu > node.cpu_free) or (self.mem and self.mem > node.mem_free):
            return False
        return not self.extra or self.fits_extra(node)

    def how_many_fit(self, node: SimNode) -> int:
        """How many pods of this demand the node's free resources and pod slots still hold."""
        count = node.pods_free
        if self.cpu > 0:
            count = min(count, node.cpu_free // self.cpu)
        if self.mem > 0:
            count = min(count, node.mem_free // self.mem)
        free = node.free
        for name, amount in self.extra:
            if amount > 0:
                count = min(count, free.get(name, 0) // amount)
        return max(count, 0)

    def fits_extra(self, node: SimNode) -> bool:
        free = node.free
        return all(amount <= free.get(name, 0) for name, amount in self.extra)


class NodePool:
    """Nodes in a fixed first-fit order, with per-class cursors and a free-capacity index. Mutate
    only through the pool (`place`, `add_pod`, `remove_pod`, `undo`, `retire`, `add_node`) or the
    cursors and the index go stale."""

    __slots__ = (
        "_by_label",
        "_cursors",
        "_demands",
        "_domain_advanced",
        "_domain_refused",
        "_extras_seen",
        "_free",
        "_index",
        "_lasting",
        "_retired",
        "_vacated",
        "classifier",
        "ctx",
        "nodes",
    )

    def __init__(
        self,
        nodes: Iterable[SimNode] = (),
        ctx: PredicateContext = NO_CONTEXT,
        classifier: Classifier | None = None,
    ) -> None:
        self.ctx = ctx
        self.nodes: list[SimNode] = list(nodes)
        self._index: dict[str, int] = {}
        for i, node in enumerate(self.nodes):
            if self._index.setdefault(node.name, i) != i:
                raise ValueError(f"node {node.name} is in the pool twice")
        self._retired: list[bool] = [False] * len(self.nodes)
        self._free = FreeIndex(self.nodes)
        self._cursors: dict[ClassKey, int] = {}
        self._demands: dict[ClassKey, Demand] = {}
        self._by_label: dict[tuple[str, str], list[int]] | None = None  # built on first need
        self._vacated: set[str] = set()
        # classes whose cursor passed nodes refused for anti-affinity elsewhere: any pod leaving may
        # lift that, so they start over then
        self._domain_advanced: set[ClassKey] = set()
        self._domain_refused = False
        self._lasting = False
        self._extras_seen = -1
        self.classifier = classifier or Classifier()
        topology = ctx.topology
        if topology is not None:
            for node in self.nodes:
                topology.node_added(node)

    # ------------------------------------------------------------------------------ nodes

    def add_node(self, node: SimNode) -> None:
        """Append a node (e.g. upcoming capacity). Appending keeps every cursor valid."""
        if node.name in self._index:
            raise ValueError(f"node {node.name} is already in the pool")
        self._index[node.name] = len(self.nodes)
        self.nodes.append(node)
        self._retired.append(False)
        self._free.append(node, self.nodes)
        if self._by_label is not None:
            self._index_labels(len(self.nodes) - 1, node)
        if self.ctx.topology is not None:
            self.ctx.topology.node_added(node)

    def get(self, name: str) -> SimNode | None:
        index = self._index.get(name)
        return None if index is None else self.nodes[index]

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __len__(self) -> int:
        return len(self.nodes)

    def retire(self, name: str) -> None:
        """Take a node out for good (it is being removed): it receives no more pods. Its own pods
        stay booked on it; the caller has moved them elsewhere with `place`."""
        index = self._index[name]
        self._retired[index] = True
        self._free.retire(index)
        self._vacated.add(name)
        self._forget_domain_refusals()
        if self.ctx.topology is not None:
            self.ctx.topology.node_removed(self.nodes[index])

    def _forget_domain_refusals(self) -> None:
        if self._domain_advanced:
            for key in self._domain_advanced:
                self._cursors[key] = 0
            self._domain_advanced.clear()

    def _vacate(self, name: str) -> None:
        """The node's pods stop counting for domain-wide constraints while they move off it."""
        self._vacated.add(name)
        self._forget_domain_refusals()
        if self.ctx.topology is not None:
            self.ctx.topology.node_vacated(self.nodes[self._index[name]])

    def _restore(self, name: str) -> None:
        if name in self._vacated and not self._retired[self._index[name]]:
            self._vacated.discard(name)
            if self.ctx.topology is not None:
                self.ctx.topology.node_added(self.nodes[self._index[name]])

    def is_retired(self, name: str) -> bool:
        return self._retired[self._index[name]]

    # ------------------------------------------------------------------------------ pods

    def add_pod(self, pod: Pod, node_name: str) -> None:
        """Book a pod on a node without checking (it is already running there). Free capacity only
        goes down, so the index's upper bounds stay valid without an update."""
        node = self.nodes[self._index[node_name]]
        node.add(pod)
        if self.ctx.topology is not None:
            self.ctx.topology.pod_added(pod, node)

    def remove_pod(self, pod: Pod, node_name: str) -> None:
        """Unbook a pod; the node may now take classes it refused, so rewind cursors past it."""
        index = self._index[node_name]
        self._unbook(pod, index)
        self._rewind(index)

    def undo(self, placement: Placement) -> None:
        """Take back every pod `placement` placed (newest first), rewinding cursors once, and count
        the node it vacated again."""
        lowest = len(self.nodes)
        for pod, node_name in reversed(placement.placed):
            index = self._index[node_name]
            self._unbook(pod, index)
            lowest = min(lowest, index)
        if placement.placed:
            self._rewind(lowest)
        if placement.vacated is not None:
            self._restore(placement.vacated)

    def _unbook(self, pod: Pod, index: int) -> None:
        node = self.nodes[index]
        node.remove(pod)
        self._free.refresh(index, node)
        self._forget_domain_refusals()
        if self.ctx.topology is not None:
            self.ctx.topology.pod_removed(pod, node)

    def recheck(self, pod: Pod, node_name: str) -> str | None:
        """Whether `pod`, booked on `node_name`, would still be let there now, for a domain-wide
        reason: a later move may have lowered a spread minimum or taken an affinity match away."""
        topology = self.ctx.topology
        if topology is None:
            return None
        node = self.nodes[self._index[node_name]]
        node.remove(pod)
        topology.pod_removed(pod, node)
        try:
            return topology.check(pod, node)
        finally:
            node.add(pod)
            topology.pod_added(pod, node)

    def first_broken(self, booked: Iterable[tuple[Pod, str]]) -> str | None:
        """The first booked pod (pod, node name) the scheduler would no longer let stay where it is,
        as `pod ns/x on node: reason`; only pods whose verdict others can change (not sticky) are
        judged."""
        for pod, node_name in booked:
            if self.sticky(pod) or node_name not in self._index or self.is_retired(node_name):
                continue
            reason = self.recheck(pod, node_name)
            if reason is not None:
                return f"pod {pod.key} on {node_name}: {reason}"
        return None

    def sticky(self, pod: Pod) -> bool:
        """Whether a refusal of this pod's class lasts until a pod leaves that node (no domain-wide
        constraint touches it), so cursors and refusal memos may keep it."""
        topology = self.ctx.topology
        return topology is None or topology.untouched(pod)

    def _rewind(self, index: int) -> None:
        cursors = self._cursors
        for key, cursor in cursors.items():
            if cursor > index:
                cursors[key] = index

    def place(
        self,
        pods: Sequence[Pod],
        *,
        exclude: Collection[str] = (),
        atomic: bool = False,
        vacating: str | None = None,
    ) -> Placement:
        """Place pods in the given order, each on the first node (pool order) that passes every
        predicate, skipping retired nodes and those named in `exclude`. Placed pods stay booked.

        With `atomic`, the first pod that fits nowhere stops the run, everything this call placed
        is taken back, and the result is `placed=()`, `unplaced=(that pod,)`: the scale-down question
        "can all of this node's pods move?" answered with the pod that cannot. Passing the pods
        largest first makes a failing node fail fast.

        `vacating` names the node the pods are leaving (it must be excluded too): from now on its
        pods and domains no longer count for domain-wide constraints, until the placement is undone
        or rolled back; `retire` makes that final.
        """
        placed: list[tuple[Pod, str]] = []
        unplaced: list[Pod] = []
        saved: dict[ClassKey, int] | None = {} if atomic else None
        vacated = None
        if vacating is not None and vacating not in self._vacated:
            self._vacate(vacating)
            vacated = vacating
        topology = self.ctx.topology
        for pod in pods:
            node = self._first_fit(pod, exclude, saved)
            if node is None:
                if saved is not None:
                    self._roll_back(placed, saved)
                    if vacated is not None:
                        self._restore(vacated)
                    return Placement((), (pod,))
                unplaced.append(pod)
                continue
            node.add(pod)
            if topology is not None:
                topology.pod_added(pod, node)
            placed.append((pod, node.name))
        return Placement(tuple(placed), tuple(unplaced), vacated)

    def _roll_back(self, placed: list[tuple[Pod, str]], saved: dict[ClassKey, int]) -> None:
        """Return to exactly the state at the start of an atomic call. A cursor may keep what it
        learnt in the call up to the first node the call changed (nodes before it are as they were),
        never less than where it started."""
        lowest = len(self.nodes)
        for pod, node_name in reversed(placed):
            index = self._index[node_name]
            self._unbook(pod, index)
            lowest = min(lowest, index)
        cursors = self._cursors
        for key, start in saved.items():
            cursors[key] = max(start, min(cursors[key], lowest))

    def fits_somewhere(self, pod: Pod, *, exclude: Collection[str] = ()) -> str | None:
        """The first node that would take `pod`, without placing it."""
        node = self._first_fit(pod, exclude)
        return None if node is None else node.name

    def _first_fit(
        self, pod: Pod, exclude: Collection[str], saved: dict[ClassKey, int] | None = None
    ) -> SimNode | None:
        key = self.classifier.key(pod)
        demand = self._demands.get(key)
        if demand is None:
            demand = self._demands[key] = Demand(pod)
        topology = self.ctx.topology
        if topology is not None and not topology.untouched(pod) and topology.impossible(pod):
            return None  # e.g. required affinity to pods that run nowhere: no node can do
        # The cursor passes only nodes refused on their own merit (resources, selectors, taints,
        # ports, hostname anti-affinity): those refusals last until a pod leaves the node. A refusal
        # for counts elsewhere (spread, affinity) stops it.
        cursor = self._cursors.get(key, 0)
        if saved is not None and key not in saved:
            saved[key] = cursor
        # A refusal for anti-affinity in a domain lasts until a pod leaves it, as a node's own do.
        if topology is not None and topology.extras_version != self._extras_seen:
            self._forget_domain_refusals()  # the growing groups changed: spread minimums may rise
            self._extras_seen = topology.extras_version
        self._lasting = topology is not None and topology.lasting(pod)
        self._domain_refused = False
        selector = pod.scheduling.node_selector
        candidates = self._pinned(pod)
        if candidates is None and selector:
            candidates = self._labelled(selector)
        if candidates is not None:
            found, cursor = self._scan_labelled(pod, demand, candidates, cursor, exclude)
        else:
            found, cursor = self._scan_free(pod, demand, cursor, exclude)
        self._cursors[key] = cursor
        if self._domain_refused:
            self._domain_advanced.add(key)
        return found

    def _scan_free(
        self, pod: Pod, demand: Demand, cursor: int, exclude: Collection[str]
    ) -> tuple[SimNode | None, int]:
        """Walk from the cursor, letting the free index jump over nodes short of CPU, memory or a
        pod slot (and retired ones): they refuse on their own merit, so the cursor passes them."""
        nodes, ctx, free_index = self.nodes, self.ctx, self._free
        topology = ctx.topology
        cpu_need = demand.cpu if demand.cpu > 0 else ANY
        mem_need = demand.mem if demand.mem > 0 else ANY
        extra = demand.extra
        advancing = True  # the cursor may pass only nodes that refused on their own merit
        position = cursor
        while True:
            i = free_index.find(position, cpu_need, mem_need)
            if i < 0:
                return None, (len(nodes) if advancing else cursor)
            if advancing:
                cursor = i
            node = nodes[i]
            position = i + 1
            if node.pods_free < 1 or cpu_need > node.cpu_free or mem_need > node.mem_free:
                free_index.refresh(i, node)  # the stored bound was stale: pods were booked since
                if advancing:
                    cursor = position
                continue
            if exclude and node.name in exclude:
                advancing = False
                continue
            if (not extra or demand.fits_extra(node)) and fits_besides_resources(
                pod, node, ctx, domains=False
            ):
                if topology is None or topology.check(pod, node) is None:
                    return node, cursor
                if self._lasting and advancing:
                    self._domain_refused = True  # anti-affinity only: lasts until a pod leaves
                    cursor = position
                else:
                    advancing = False  # refused for counts elsewhere, which may change
            elif advancing:
                cursor = position

    def _pinned(self, pod: Pod) -> list[int] | None:
        """The nodes (indices, ascending) a pod pinned by name may go to (every term of its required
        node affinity names nodes with `metadata.name In`, as the DaemonSet controller pins its pods),
        or None when it is not pinned: walking the whole pool for each of a DaemonSet's pods is
        nodes x nodes predicate checks. Every other node refuses it on its node affinity."""
        terms = pod.scheduling.required_node_affinity
        if not terms:
            return None
        names: set[str] = set()
        for term in terms:
            fields = [r for r in term.match_fields if r.key == NODE_NAME_FIELD and r.operator == IN]
            if not fields:
                return None
            allowed = set(fields[0].values)
            for other in fields[1:]:
                allowed &= set(other.values)
            names |= allowed
        index = self._index
        return sorted(index[name] for name in names if name in index)

    def _labelled(self, selector: tuple[tuple[str, str], ...]) -> list[int] | None:
        """The nodes (indices, ascending) carrying the selector's rarest label pair, or None when
        that is a large share of the pool (`kubernetes.io/os: linux`): the free index walks those
        faster."""
        if self._by_label is None:
            self._by_label = {}
            for i, node in enumerate(self.nodes):
                self._index_labels(i, node)
        candidates = min((self._by_label.get(pair, _NONE) for pair in selector), key=len)
        return candidates if len(candidates) * 4 <= len(self.nodes) else None

    def _scan_labelled(
        self,
        pod: Pod,
        demand: Demand,
        candidates: list[int],
        cursor: int,
        exclude: Collection[str],
    ) -> tuple[SimNode | None, int]:
        """A pod with a nodeSelector can only go where its rarest label pair is: walk just those
        nodes (from the cursor). Every node in between refuses on the selector."""
        nodes, retired, ctx = self.nodes, self._retired, self.ctx
        topology = ctx.topology
        advancing = True
        for i in candidates[bisect_left(candidates, cursor) :]:
            if advancing:
                cursor = i
            node = nodes[i]
            if retired[i] or not demand.fits_resources(node):
                if advancing:
                    cursor = i + 1
                continue
            if exclude and node.name in exclude:
                advancing = False
                continue
            if fits_besides_resources(pod, node, ctx, domains=False):
                if topology is None or topology.check(pod, node) is None:
                    return node, cursor
                if self._lasting and advancing:
                    self._domain_refused = True  # anti-affinity only: lasts until a pod leaves
                    cursor = i + 1
                else:
                    advancing = False  # refused for counts elsewhere, which may change
            elif advancing:
                cursor = i + 1
        return None, (len(nodes) if advancing else cursor)

    def _index_labels(self, index: int, node: SimNode) -> None:
        """Index the label pairs every zone variant of the node carries (those a selector can
        count on)."""
        assert self._by_label is not None
        variants = node.label_variants
        pairs = set(variants[0].items())
        for other in variants[1:]:
            pairs &= set(other.items())
        for pair in pairs:
            self._by_label.setdefault(pair, []).append(index)
