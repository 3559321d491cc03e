"""Topology domains and the counts the scheduler's PreFilter keeps over them: which nodes a term
matches, which domain a node is in (`hi`/`lo` where AWS picks the zone), and a `Counter` per distinct
need filled from an index of the pool's pods. Topology (topology.py) keeps them in step with the pool.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reconciler.domain.model import (
    HOSTNAME_LABEL,
    ZONE_LABEL,
    LabelSelector,
    NodeSelectorTerm,
    Pod,
    Scheduling,
    SelectorRequirement,
    Toleration,
)
from reconciler.planning.selectors import (
    IN,
    NOT_IN,
    label_selector_matches,
    node_affinity_matches,
    node_selector_matches,
    untolerated_taint,
)

if TYPE_CHECKING:
    from reconciler.planning.simnode import SimNode

DO_NOT_SCHEDULE = "DoNotSchedule"
HONOR = "Honor"
EMPTY_SELECTOR = LabelSelector()

Domain = tuple[str, str]  # (topology key, value)


# ---------------------------------------------------------------------------------- matching


@dataclass(frozen=True, slots=True)
class Match:
    """Which pods a term or constraint selects: a namespace set (None: all) and a label selector."""

    namespaces: frozenset[str] | None
    selector: LabelSelector | None

    def matches(self, pod: Pod) -> bool:
        return self.matches_labels(pod.namespace, pod.labels)

    def matches_labels(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if self.namespaces is not None and namespace not in self.namespaces:
            return False
        return label_selector_matches(self.selector, labels)


def with_label_keys(
    selector: LabelSelector | None,
    labels: Mapping[str, str],
    match: Iterable[str],
    mismatch: Iterable[str] = (),
) -> LabelSelector | None:
    """`matchLabelKeys` / `mismatchLabelKeys`: the pod's own value of each key it carries joins the
    selector as `In` (`NotIn`); a key the pod lacks is ignored, as the scheduler does."""
    if selector is None:
        return None
    extra = [SelectorRequirement(k, IN, (labels[k],)) for k in match if k in labels]
    extra += [SelectorRequirement(k, NOT_IN, (labels[k],)) for k in mismatch if k in labels]
    if not extra:
        return selector
    return LabelSelector(selector.match_labels, selector.match_expressions + tuple(extra))


def node_values(node: SimNode, key: str) -> tuple[str | None, ...]:
    """The node's value of `key` in each zone it may be in (None where absent). A new node is its own
    hostname domain: its label is a placeholder shared by the group's new nodes."""
    if key == HOSTNAME_LABEL and node.is_new:
        return (node.name,)
    variants = node.label_variants
    if len(variants) == 1:
        return (variants[0].get(key),)
    return tuple(dict.fromkeys(v.get(key) for v in variants))


# ---------------------------------------------------------------------------------- counting


@dataclass(frozen=True, slots=True)
class NodeFilter:
    """Which nodes a spread constraint counts (the scheduler's node inclusion policies): nodes with
    every key the pod spreads on, matching its node selector and affinity (nodeAffinityPolicy Honor,
    the default) and tolerated (nodeTaintsPolicy Honor; Ignore by default)."""

    keys: tuple[str, ...]
    node_selector: tuple[tuple[str, str], ...]  # honoured ones only (empty when Ignore)
    node_affinity: tuple[NodeSelectorTerm, ...]
    tolerations: tuple[Toleration, ...] | None  # None: taints ignored

    @staticmethod
    def of(keys: tuple[str, ...], s: Scheduling, affinity: bool, taints: bool) -> NodeFilter:
        """Only what decides inclusion, so the constraints of many controllers share one filter (and
        its per-node answers)."""
        return NodeFilter(
            keys,
            s.node_selector if affinity else (),
            s.required_node_affinity if affinity else (),
            s.tolerations if taints else None,
        )

    @property
    def taints(self) -> bool:
        return self.tolerations is not None

    def variants(self, node: SimNode) -> list[int]:
        """Indexes of the node's zone variants this filter counts."""
        if self.tolerations is not None and untolerated_taint(self.tolerations, node.taints) is not None:
            return []
        found = []
        for i, labels in enumerate(node.label_variants):
            if any(k not in labels for k in self.keys):
                continue
            if self.node_selector and not node_selector_matches(self.node_selector, labels):
                continue
            if self.node_affinity and not node_affinity_matches(self.node_affinity, labels, node.name):
                continue
            found.append(i)
        return found


class Counter:
    """Pods matching every one of `matches`, counted per domain of each of `keys`. With a node filter
    (a spread constraint, one key), also which domains exist (eligible nodes per value) and how many
    existing domains hold each count (`hist`), so the emptiest one is found without a scan."""

    __slots__ = (
        "_by_name",
        "_memo",
        "_spot_memo",
        "domains",
        "everything",
        "extra_domains",
        "hi",
        "hist",
        "keys",
        "lo",
        "matches",
        "namespaces",
        "node_filter",
        "skip_deleting",
    )

    def __init__(
        self,
        matches: tuple[Match, ...],
        keys: tuple[str, ...],
        node_filter: NodeFilter | None,
        skip_deleting: bool,
    ) -> None:
        self.matches = matches
        self.keys = keys
        self.node_filter = node_filter
        self.skip_deleting = skip_deleting
        self.namespaces: frozenset[str] | None = None
        for match in matches:
            if match.namespaces is not None:
                self.namespaces = (
                    match.namespaces if self.namespaces is None else self.namespaces & match.namespaces
                )
        # The scheduler's spread counting skips an empty (match-everything) selector: it counts 0.
        self.everything = node_filter is not None and all(m.selector == EMPTY_SELECTOR for m in matches)
        self.hi: dict[Domain, int] = {}
        self.lo: dict[Domain, int] = {}
        self.domains: DomainSet | None = None  # the domains that exist (node_filter only)
        self.hist: dict[int, int] = {}  # lo count -> existing domains with it (node_filter only)
        self._memo: dict[tuple[str, int], tuple[Mapping[str, str], bool]] = {}
        self._spot_memo: dict[int, tuple[object, list[Domain], list[Domain]]] = {}
        self._by_name = HOSTNAME_LABEL in keys or (
            node_filter is not None and any(t.match_fields for t in node_filter.node_affinity)
        )
        self.extra_domains: tuple[int, frozenset[str]] = (-1, frozenset())  # (extras version, values)

    def share_spots(self, memo: dict[int, tuple[object, list[Domain], list[Domain]]]) -> None:
        """Use a memo of node spots shared with counters of the same keys and filter."""
        self._spot_memo = memo

    def selects(self, pod: Pod) -> bool:
        if self.skip_deleting and pod.deleting_since is not None:
            return False
        return self.selects_labels(pod.namespace, pod.labels)

    def selects_labels(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if self.everything:
            return False
        key = (namespace, id(labels))
        hit = self._memo.get(key)
        if hit is None or hit[0] is not labels:
            hit = (labels, all(m.matches_labels(namespace, labels) for m in self.matches))
            self._memo[key] = hit
        return hit[1]

    def spots(self, node: SimNode) -> tuple[list[Domain], list[Domain]]:
        """(certain, possible) domains a pod on `node` counts in (a node's labels never change). The
        new nodes of one estimate share their labels and taints, and so their spots, unless the
        node's own name matters (hostname, matchFields)."""
        if node.is_new and not self._by_name:
            shared: object = node.label_variants
            key = id(shared)
        else:
            shared = node
            key = id(node)
        hit = self._spot_memo.get(key)
        if hit is None or hit[0] is not shared:
            hit = (shared, *self._find_spots(node))
            self._spot_memo[key] = hit
        return hit[1], hit[2]

    def _find_spots(self, node: SimNode) -> tuple[list[Domain], list[Domain]]:
        allowed = None if self.node_filter is None else self.node_filter.variants(node)
        certain: list[Domain] = []
        possible: list[Domain] = []
        if allowed == []:
            return certain, possible  # not counted: the pod's node affinity (or taints) rule it out
        for key in self.keys:
            if key == HOSTNAME_LABEL and node.is_new:
                values: tuple[str | None, ...] = (node.name,)
            elif allowed is None:
                values = node_values(node, key)
            else:
                values = tuple(dict.fromkeys(node.label_variants[i].get(key) for i in allowed))
            present = [v for v in values if v is not None]
            possible.extend((key, v) for v in present)
            complete = allowed is None or len(allowed) == len(node.label_variants)
            if len(values) == 1 and present and complete:
                certain.append((key, present[0]))
        return certain, possible

    def count(self, pod: Pod, node: SimNode, delta: int) -> None:
        if self.selects(pod):
            self.add(node, delta)

    def add(self, node: SimNode, delta: int) -> None:
        certain, possible = self.spots(node)
        lo, hi = self.lo, self.hi
        tracked = self.node_filter is not None
        for domain in certain:
            before = lo.get(domain, 0)
            lo[domain] = before + delta
            if tracked and self.exists.get(domain[1], 0) > 0:
                self._move(before, before + delta)
        for domain in possible:
            hi[domain] = hi.get(domain, 0) + delta

    def _move(self, before: int, after: int) -> None:
        hist = self.hist
        left = hist[before] - 1
        if left:
            hist[before] = left
        else:
            del hist[before]
        hist[after] = hist.get(after, 0) + 1

    def count_pods(self, node: SimNode, delta: int) -> None:
        namespaces, selects = self.namespaces, self.selects
        matching = sum(
            1
            for pod in counted_pods(node)
            if (namespaces is None or pod.namespace in namespaces) and selects(pod)
        )
        if matching:
            self.add(node, delta * matching)

    @property
    def exists(self) -> dict[str, int]:
        """Domain value -> eligible nodes there (spread counters; empty otherwise)."""
        return self.domains.exists if self.domains is not None else {}

    def domain_changed(self, value: str, appeared: bool) -> None:
        """A domain came to exist or stopped existing: `hist` follows."""
        count = self.lo.get((self.keys[0], value), 0)
        hist = self.hist
        if appeared:
            hist[count] = hist.get(count, 0) + 1
        else:
            left = hist[count] - 1
            if left:
                hist[count] = left
            else:
                del hist[count]

    def join(self, domains: DomainSet) -> None:
        """Start tracking the domains of its filter (after its pods are counted)."""
        self.domains = domains
        domains.counters.append(self)
        for value in domains.exists:
            self.domain_changed(value, True)

    def total(self) -> int:
        return sum(self.hi.values())


class PodIndex:
    """The counted pods by namespace and label map (pods of one controller share one), with the
    nodes they are on and how many are terminating: what a new Counter fills itself from, in a walk
    over controllers rather than over every pod."""

    __slots__ = ("by_namespace",)

    def __init__(self) -> None:
        # namespace -> id(labels) -> (labels, id(node) -> [node, pods, terminating pods])
        self.by_namespace: dict[str, dict[int, tuple[Mapping[str, str], dict[int, list[Any]]]]] = {}

    def add(self, pod: Pod, node: SimNode, delta: int) -> None:
        groups = self.by_namespace.setdefault(pod.namespace, {})
        entry = groups.get(id(pod.labels))
        if entry is None:
            entry = groups[id(pod.labels)] = (pod.labels, {})
        slots = entry[1]
        slot = slots.get(id(node))
        if slot is None:
            slot = slots[id(node)] = [node, 0, 0]
        slot[1] += delta
        if pod.deleting_since is not None:
            slot[2] += delta
        if not slot[1]:
            del slots[id(node)]

    def add_all(self, node: SimNode) -> None:
        """`add` for every pod of the node, inlined: this indexes the whole cluster once."""
        by_namespace = self.by_namespace
        key = id(node)
        for pod in counted_pods(node):
            groups = by_namespace.get(pod.namespace)
            if groups is None:
                groups = by_namespace[pod.namespace] = {}
            labels = pod.labels
            entry = groups.get(id(labels))
            if entry is None:
                entry = groups[id(labels)] = (labels, {})
            slot = entry[1].get(key)
            if slot is None:
                slot = entry[1][key] = [node, 0, 0]
            slot[1] += 1
            if pod.deleting_since is not None:
                slot[2] += 1

    def fill(self, counter: Counter) -> None:
        for namespace, groups in self.by_namespace.items():
            if counter.namespaces is not None and namespace not in counter.namespaces:
                continue
            for labels, slots in groups.values():
                if not counter.selects_labels(namespace, labels):
                    continue
                for node, pods, terminating in slots.values():
                    count = pods - terminating if counter.skip_deleting else pods
                    if count:
                        counter.add(node, count)


def counted_pods(node: SimNode) -> list[Pod]:
    """The node's pods as the scheduler counts them: booked ones and its shadow (expendable pods)."""
    return [*node.pods, *node.shadow] if node.shadow else node.pods


def zone_hint(good: list[str]) -> str:
    """What a refusal by a new node of a multi-AZ group adds: AWS, not the planner, picks its zone."""
    if good:
        return f"; only {', '.join(good)} would do, and AWS picks the zone of a new node"
    return "; in no zone AWS may pick for a new node"


def per_zone(node: SimNode) -> list[tuple[str, SimNode]]:
    """A multi-AZ new node as one single-zone node per zone it may land in."""
    views = []
    for i, labels in enumerate(node.label_variants):
        view = node.copy()
        view.labels = labels
        view.label_variants = (labels,)
        zone = node.zones[i] if i < len(node.zones) else labels.get(ZONE_LABEL, "?")
        view.zones = (zone,)
        views.append((zone, view))
    return views


class DomainSet:
    """The domains that exist for one key and node filter (eligible nodes per value), shared by the
    spread counters of every controller with that filter: a node event updates it once, and the
    counters only hear of a domain appearing or going."""

    __slots__ = ("counters", "exists", "honours_taints", "spots")

    def __init__(
        self, spots: Callable[[SimNode], tuple[list[Domain], list[Domain]]], honours_taints: bool
    ) -> None:
        self.spots = spots
        self.honours_taints = honours_taints
        self.exists: dict[str, int] = {}
        self.counters: list[Counter] = []

    def count(self, node: SimNode, delta: int) -> None:
        exists = self.exists
        for _, value in self.spots(node)[1]:
            before = exists.get(value, 0)
            after = before + delta
            if after:
                exists[value] = after
            else:
                del exists[value]
            if (before > 0) != (after > 0):
                for counter in self.counters:
                    counter.domain_changed(value, after > 0)
