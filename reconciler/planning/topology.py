"""Constraints the scheduler judges over a whole topology domain, not one node: topology spread on
any key (the hostname too), required pod affinity on any key, and required pod anti-affinity on any
key but the hostname — the pod's own terms and the terms of pods already placed against it.

The scheduler answers these from counts over every node (its PreFilter step); so does `Topology`,
which keeps those counts in step with the NodePool as pods are booked, taken back, and nodes are added,
vacated or retired, and with the trial nodes an estimate opens and closes. Each distinct need (a
spread constraint of one controller, an affinity term set, ...) gets one `Counter`, made the first
time a pod with that need is checked and filled from an index of the pool's pods by namespace and
label map (pods of one controller share one), so a plan pays per distinct need; the spread counters
of one node filter share a `DomainSet` (which domains exist).

Counts are kept twice where a new node's zone is not known (a multi-AZ group: AWS picks the zone):
`hi` counts a pod in every zone its node may be in, `lo` only where it certainly is. Every check
takes the side that refuses more: conflicts and the node's own domain from `hi`, existence (affinity)
and the emptiest domain (spread) from `lo`. Hostname anti-affinity stays a per-node check in
predicates.py; hostname spread and affinity are counted here by node name for new nodes (they share a
placeholder hostname label).

The domains and counters themselves are topology_counts.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reconciler.domain.model import (
    HOSTNAME_LABEL,
    Pod,
    PodAffinityTerm,
    Scheduling,
    TopologySpreadConstraint,
)
from reconciler.planning.selectors import (
    label_selector_matches,
)
from reconciler.planning.topology_counts import (
    DO_NOT_SCHEDULE,
    EMPTY_SELECTOR,
    HONOR,
    Counter,
    Domain,
    DomainSet,
    Match,
    NodeFilter,
    PodIndex,
    counted_pods,
    node_values,
    per_zone,
    with_label_keys,
    zone_hint,
)

if TYPE_CHECKING:
    from reconciler.planning.simnode import SimNode

# ---------------------------------------------------------------------------------- needs


@dataclass(frozen=True, slots=True)
class SpreadRule:
    counter: Counter
    key: str
    max_skew: int
    min_domains: int
    self_match: bool


@dataclass(frozen=True, slots=True)
class AffinityRule:
    counter: Counter
    keys: tuple[str, ...]
    self_match: bool  # the pod matches all its own terms: it may be the first of a self-affine set


@dataclass(frozen=True, slots=True)
class AntiRule:
    counter: Counter
    key: str


@dataclass(frozen=True, slots=True)
class Needs:
    """What one kind of pod (scheduling, namespace, labels) asks of domains."""

    spreads: tuple[SpreadRule, ...]
    affinity: AffinityRule | None
    antis: tuple[AntiRule, ...]

    @property
    def monotone(self) -> bool:
        """Whether adding pods can only turn a yes into a no (anti-affinity); spread and affinity can
        turn a no into a yes (the minimum rises, a matching pod arrives)."""
        return not self.spreads and self.affinity is None


def has_domain_needs(s: Scheduling) -> bool:
    """Whether a pod with this scheduling asks anything of Topology (its own side)."""
    if s.pod_affinity:
        return True
    if any(t.topology_key != HOSTNAME_LABEL for t in s.pod_anti_affinity):
        return True
    return any(c.when_unsatisfiable == DO_NOT_SCHEDULE for c in s.topology_spread)


class _Entry:
    """The required anti-affinity terms of placed pods that are alike (same namespaces, selector and
    key), with where such pods are: a pod the term selects may not go to those domains."""

    __slots__ = ("_memo", "counts", "key", "match")

    def __init__(self, match: Match, key: str) -> None:
        self.match = match
        self.key = key
        self.counts: dict[str, int] = {}
        self._memo: dict[tuple[str, int], tuple[Mapping[str, str], bool]] = {}

    def selects(self, pod: Pod) -> bool:
        key = (pod.namespace, id(pod.labels))
        hit = self._memo.get(key)
        if hit is None or hit[0] is not pod.labels:
            hit = (pod.labels, self.match.matches(pod))
            self._memo[key] = hit
        return hit[1]


class Topology:
    """Domain-wide counts for one plan, kept in step with a NodePool (which calls the `node_*` and
    `pod_*` hooks) and with trial nodes the estimator books (`book`/`unbook`, `open`/`close`)."""

    def __init__(self, namespace_labels: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self.namespace_labels = namespace_labels
        self._live: dict[int, SimNode] = {}  # id -> node counted (in the pool, or an estimate's)
        self._ghosts: dict[int, SimNode] = {}  # id -> vacated node: a domain still, no pods
        self._index: PodIndex | None = None  # built when the first Counter is
        self._trials: dict[int, SimNode] = {}  # id -> an estimate's node: counted, not indexed
        # the spots of nodes, one memo per (keys, filter): counters of many controllers share one
        self._spot_memos: dict[tuple[object, ...], dict[int, tuple[object, list[Domain], list[Domain]]]] = {}
        self._domain_sets: dict[tuple[object, ...], DomainSet] = {}
        self._needs: dict[tuple[int, str, int], tuple[Scheduling, Mapping[str, str], Needs | None]] = {}
        self._plain: dict[int, tuple[Scheduling, bool]] = {}  # id(scheduling) -> has domain needs
        self._counters: dict[tuple[object, ...], Counter] = {}
        self._by_namespace: dict[str | None, list[Counter]] = {}
        self._anti: dict[tuple[Match, str], _Entry] = {}
        self._anti_of: dict[int, tuple[Scheduling, str, tuple[tuple[Match, str], ...]]] = {}
        self.extras: tuple[SimNode, ...] = ()  # empty new nodes of groups that may grow: their zones count
        self._extras_version = 0
        self._version = 0  # bumped by every change of a count: what a _Prepared was computed for
        self._last: _Prepared | None = None

    # ------------------------------------------------------------------------------ pool hooks

    def node_added(self, node: SimNode, *, trial: bool = False) -> None:
        """A node joins, with the pods on it; or a vacated one is back (its removal was undone). A
        `trial` node (an estimate's, gone before the estimate returns) is not indexed."""
        ghost = self._ghosts.pop(id(node), None) is not None
        self._live[id(node)] = node
        self._version += 1
        if trial:
            self._trials[id(node)] = node
        elif self._index is not None:
            for pod in counted_pods(node):
                self._index.add(pod, node, 1)
        for counter in self._counters.values():
            counter.count_pods(node, 1)
        for domains in self._domain_sets.values():
            if not ghost or domains.honours_taints:
                domains.count(node, 1)
        for pod in counted_pods(node):
            self._anti_count(pod, node, 1)

    def node_vacated(self, node: SimNode) -> None:
        """Its pods are being moved off: they stop counting, but the node stays a domain, as
        cluster-autoscaler's removal simulation keeps a pod-less copy tainted ToBeDeleted (a spread
        constraint honouring taints does not count it)."""
        if self._live.pop(id(node), None) is None:
            return
        self._version += 1
        self._ghosts[id(node)] = node
        if self._index is not None and id(node) not in self._trials:
            for pod in counted_pods(node):
                self._index.add(pod, node, -1)
        for counter in self._counters.values():
            counter.count_pods(node, -1)
        for domains in self._domain_sets.values():
            if domains.honours_taints:
                domains.count(node, -1)
        for pod in counted_pods(node):
            self._anti_count(pod, node, -1)

    def node_removed(self, node: SimNode) -> None:
        """Gone for good (retired, or a trial node of the estimator): nothing of it counts."""
        if id(node) in self._live:
            self.node_vacated(node)
        self._trials.pop(id(node), None)
        if self._ghosts.pop(id(node), None) is not None:
            self._version += 1
            for domains in self._domain_sets.values():
                if not domains.honours_taints:
                    domains.count(node, -1)

    def pod_added(self, pod: Pod, node: SimNode) -> None:
        """`pod` was booked on `node` (counted only while the node is)."""
        if id(node) in self._live:
            self._version += 1
            if self._index is not None and id(node) not in self._trials:
                self._index.add(pod, node, 1)
            for counter in self._counters_for(pod.namespace):
                counter.count(pod, node, 1)
            self._anti_count(pod, node, 1)

    def pod_removed(self, pod: Pod, node: SimNode) -> None:
        if id(node) in self._live:
            self._version += 1
            if self._index is not None and id(node) not in self._trials:
                self._index.add(pod, node, -1)
            for counter in self._counters_for(pod.namespace):
                counter.count(pod, node, -1)
            self._anti_count(pod, node, -1)

    def set_extras(self, bases: Iterable[SimNode]) -> None:
        """The empty new nodes of the groups that may grow in this plan: their zones are domains."""
        self.extras = tuple(bases)
        self._extras_version += 1
        self._version += 1

    def _counters_for(self, namespace: str) -> list[Counter]:
        found = self._by_namespace.get(namespace)
        everywhere = self._by_namespace.get(None)
        if found is None:
            return everywhere or []
        return found + everywhere if everywhere else found

    # ------------------------------------------------------------------------------ anti-affinity index

    def _anti_terms(self, pod: Pod) -> tuple[tuple[Match, str], ...]:
        s = pod.scheduling
        if not s.pod_anti_affinity:
            return ()
        marker = id(s)
        hit = self._anti_of.get(marker)
        if hit is not None and hit[0] is s and hit[1] == pod.namespace:
            return hit[2]
        terms = tuple(
            (self._match(t, pod), t.topology_key)
            for t in s.pod_anti_affinity
            if t.topology_key != HOSTNAME_LABEL
        )
        if not any(t.match_label_keys or t.mismatch_label_keys for t in s.pod_anti_affinity):
            self._anti_of[marker] = (s, pod.namespace, terms)
        return terms

    def _anti_count(self, pod: Pod, node: SimNode, delta: int) -> None:
        for match, key in self._anti_terms(pod):
            entry = self._anti.get((match, key))
            if entry is None:
                entry = self._anti[(match, key)] = _Entry(match, key)
            for value in node_values(node, key):
                if value is not None:
                    entry.counts[value] = entry.counts.get(value, 0) + delta

    # ------------------------------------------------------------------------------ needs

    def needs(self, pod: Pod) -> Needs | None:
        """The pod's own domain needs, or None (the common case, answered from one memo lookup)."""
        s = pod.scheduling
        plain = self._plain.get(id(s))
        if plain is None or plain[0] is not s:
            plain = (s, has_domain_needs(s))
            self._plain[id(s)] = plain
        if not plain[1]:
            return None
        key = (id(s), pod.namespace, id(pod.labels))
        hit = self._needs.get(key)
        if hit is None or hit[0] is not s or hit[1] is not pod.labels:
            hit = (s, pod.labels, self._resolve(pod))
            self._needs[key] = hit
        return hit[2]

    def unmodelled(self, pod: Pod) -> str | None:
        """What of the pod's constraints cannot be judged: a namespace selector, when namespaces (and
        their labels) were not read."""
        if self.namespace_labels is not None:
            return None
        s = pod.scheduling
        for kind, terms in (("affinity", s.pod_affinity), ("anti-affinity", s.pod_anti_affinity)):
            for term in terms:
                if term.namespace_selector is not None and term.namespace_selector != EMPTY_SELECTOR:
                    return (
                        f"required pod {kind} with a namespace selector is not modelled (namespaces were "
                        "not read: include `kubectl get namespaces -o json` in a snapshot, or grant list on "
                        "namespaces)"
                    )
        return None

    def _namespaces(self, term: PodAffinityTerm, own: str) -> frozenset[str] | None:
        """The scheduler's merge: listed namespaces plus those the selector picks; neither means the
        pod's own; an empty selector means all. Unknown namespace labels: all (refuses more)."""
        selector = term.namespace_selector
        if selector is None:
            return frozenset(term.namespaces) if term.namespaces else frozenset((own,))
        if selector == EMPTY_SELECTOR or self.namespace_labels is None:
            return None
        picked = {
            name for name, labels in self.namespace_labels.items() if label_selector_matches(selector, labels)
        }
        return frozenset(picked | set(term.namespaces))

    def _match(self, term: PodAffinityTerm, pod: Pod) -> Match:
        selector = with_label_keys(
            term.label_selector, pod.labels, term.match_label_keys, term.mismatch_label_keys
        )
        return Match(self._namespaces(term, pod.namespace), selector)

    def _resolve(self, pod: Pod) -> Needs:
        s = pod.scheduling
        spread_keys = tuple(
            dict.fromkeys(
                c.topology_key for c in s.topology_spread if c.when_unsatisfiable == DO_NOT_SCHEDULE
            )
        )
        spreads = tuple(
            self._spread(pod, c, spread_keys)
            for c in s.topology_spread
            if c.when_unsatisfiable == DO_NOT_SCHEDULE
        )
        affinity = None
        if s.pod_affinity:
            matches = tuple(self._match(t, pod) for t in s.pod_affinity)
            keys = tuple(dict.fromkeys(t.topology_key for t in s.pod_affinity))
            counter = self._counter(matches, keys, None, skip_deleting=False)
            affinity = AffinityRule(counter, keys, all(m.matches(pod) for m in matches))
        antis = tuple(
            AntiRule(
                self._counter((self._match(t, pod),), (t.topology_key,), None, skip_deleting=False),
                t.topology_key,
            )
            for t in s.pod_anti_affinity
            if t.topology_key != HOSTNAME_LABEL
        )
        return Needs(spreads, affinity, antis)

    def _spread(self, pod: Pod, c: TopologySpreadConstraint, keys: tuple[str, ...]) -> SpreadRule:
        selector = with_label_keys(c.label_selector, pod.labels, c.match_label_keys)
        match = Match(frozenset((pod.namespace,)), selector)
        honour_affinity = c.node_affinity_policy != "Ignore"
        honour_taints = c.node_taints_policy == HONOR
        node_filter = NodeFilter.of(keys, pod.scheduling, honour_affinity, honour_taints)
        counter = self._counter((match,), (c.topology_key,), node_filter, skip_deleting=True)
        return SpreadRule(counter, c.topology_key, c.max_skew, c.min_domains or 1, match.matches(pod))

    def _counter(
        self,
        matches: tuple[Match, ...],
        keys: tuple[str, ...],
        node_filter: NodeFilter | None,
        *,
        skip_deleting: bool,
    ) -> Counter:
        identity = (matches, keys, node_filter, skip_deleting)
        counter = self._counters.get(identity)
        if counter is None:
            counter = self._counters[identity] = Counter(matches, keys, node_filter, skip_deleting)
            counter.share_spots(self._spot_memos.setdefault((keys, node_filter), {}))
            if self._index is None:
                self._index = PodIndex()
                for node in self._live.values():
                    if id(node) not in self._trials:
                        self._index.add_all(node)
            self._index.fill(counter)
            for node in self._trials.values():
                counter.count_pods(node, 1)
            if node_filter is not None:
                counter.join(self._domains(keys, node_filter, counter))
            if counter.namespaces is None:
                self._by_namespace.setdefault(None, []).append(counter)
            else:
                for namespace in counter.namespaces:
                    self._by_namespace.setdefault(namespace, []).append(counter)
        return counter

    def _domains(self, keys: tuple[str, ...], node_filter: NodeFilter, counter: Counter) -> DomainSet:
        domains = self._domain_sets.get((keys, node_filter))
        if domains is None:
            domains = self._domain_sets[(keys, node_filter)] = DomainSet(counter.spots, node_filter.taints)
            for node in self._live.values():
                domains.count(node, 1)
            if not node_filter.taints:
                for node in self._ghosts.values():
                    domains.count(node, 1)
        return domains

    # ------------------------------------------------------------------------------ verdicts

    def lasting(self, pod: Pod) -> bool:
        """Whether a domain-wide refusal of this pod lasts until a pod leaves or the growing groups
        change: anti-affinity only, or spread whose minimum is held at 0 by a domain with nothing in
        it (adding pods then only raises counts)."""
        needs = self.needs(pod)
        if needs is None or needs.monotone:
            return True
        if needs.affinity is not None:
            return False
        return all(
            s.lowest == 0 and s.count >= s.rule.min_domains and s.pinned for s in self._prepared(pod).spreads
        )

    @property
    def extras_version(self) -> int:
        return self._extras_version

    def counted(self, pod: Pod) -> bool:
        """Whether some domain-wide rule counts this pod (another pod's spread or affinity selects it):
        moving it to another domain changes what others were judged against."""
        return any(counter.selects(pod) for counter in self._counters_for(pod.namespace)) or bool(
            self._anti_terms(pod)
        )

    def untouched(self, pod: Pod) -> bool:
        """No domain-wide rule bears on this pod: no needs of its own, no placed pod's anti-affinity
        term selects it. Its verdicts then depend on the node alone."""
        if self.needs(pod) is not None:
            return False
        return not any(entry.selects(pod) for entry in self._anti.values())

    def check(self, pod: Pod, node: SimNode) -> str | None:
        """Why the scheduler would refuse `pod` on `node` for a domain-wide reason, or None. On a new
        node of a multi-AZ group (AWS picks the zone) every zone must do; the reason then says which
        would."""
        reason = self._check(pod, node)
        if reason is None or len(node.label_variants) < 2:
            return reason
        good = [z for z, single in per_zone(node) if self._check(pod, single) is None]
        return reason + zone_hint(good)

    def impossible(self, pod: Pod) -> bool:
        """Whether no node at all can take the pod for a domain-wide reason known without looking at
        nodes (required affinity with no matching pod anywhere, and not the first of its set)."""
        return self._prepared(pod).nowhere is not None

    def _prepared(self, pod: Pod) -> _Prepared:
        """What the checks of one pod share while no count changes: a scan asks about one pod on
        many nodes in a row."""
        prepared = self._last
        if prepared is not None and prepared.pod is pod and prepared.version == self._version:
            return prepared
        prepared = self._last = _Prepared(pod, self._version)
        needs = self.needs(pod)
        if needs is not None:
            prepared.spreads = [self._spread_state(rule) for rule in needs.spreads]
            for spread in prepared.spreads:
                # no counted node's domain has room under maxSkew: no node of the pool can take it
                # (every counted domain holds at least min(hist); only a minimum held below that by an
                # empty domain elsewhere can refuse them all)
                sr = spread.rule
                own, hist = (1 if sr.self_match else 0), sr.counter.hist
                if hist and min(hist) + own - spread.lowest > sr.max_skew:
                    prepared.nowhere = f"topology spread on {sr.key}: every domain is at maxSkew"
                    break
            rule = needs.affinity
            if rule is not None:
                prepared.affinity = rule
                if rule.self_match and rule.counter.total() == 0:
                    prepared.anywhere = True  # the first of a set with affinity to itself (scheduler)
                else:
                    for key in rule.keys:
                        if prepared.nowhere is None and not any(
                            n > 0 for (k, _), n in rule.counter.lo.items() if k == key
                        ):
                            prepared.nowhere = f"required pod affinity on {key}: no matching pod in any {key}"
                            break
            prepared.antis = [(anti.key, anti.counter.hi) for anti in needs.antis]
        prepared.foreign = [
            (entry.key, entry.counts) for entry in self._anti.values() if entry.counts and entry.selects(pod)
        ]
        return prepared

    def _spread_state(self, rule: SpreadRule) -> _Spread:
        """The rule's known domains (counted nodes, and zones groups may add nodes in) and the
        emptiest of them; a node in none of them brings a domain of its own with nothing in it."""
        key, counter = rule.key, rule.counter
        exists = counter.exists
        # The groups that may grow add domains: their zones, and for the hostname a new node, which
        # holds none of the pods until something is placed there (so the minimum is 0 while any
        # group may grow: packing to a higher minimum would break once another group's empty node
        # joins, as cluster-autoscaler's estimator assumes too).
        version, extra = counter.extra_domains
        if version != self._extras_version:
            extra = frozenset(self._domains_of(counter, key, self.extras))
            counter.extra_domains = (self._extras_version, extra)
        fresh = sorted(v for v in extra if v not in exists)  # per growing group: a few, not per node
        pinned = bool(fresh)  # an empty domain no booking can fill: the minimum stays 0
        count = len(exists) + len(fresh)
        if count < rule.min_domains:
            lowest, where = 0, f"fewer than minDomains {rule.min_domains} domains"
        elif fresh:
            lowest, where = 0, fresh[0]
        elif counter.hist:
            lowest = min(counter.hist)
            where = (
                "the emptiest node"
                if key == HOSTNAME_LABEL
                else min(v for v in exists if counter.lo.get((key, v), 0) == lowest)
            )
        else:
            lowest, where = 0, "no domain"
        return _Spread(rule, extra, count, lowest, where, pinned)

    def _check(self, pod: Pod, node: SimNode) -> str | None:
        prepared = self._prepared(pod)
        for spread in prepared.spreads:
            reason = _spread_check(spread, node)
            if reason is not None:
                return reason
        rule = prepared.affinity
        if rule is not None:
            reason = _affinity_check(rule, prepared, node)
            if reason is not None:
                return reason
        for key, counts in prepared.antis:
            for value in node_values(node, key):
                if value is not None and counts.get((key, value), 0) > 0:
                    return f"anti-affinity with a pod in {key}={value}"
        for key, foreign in prepared.foreign:
            for value in node_values(node, key):
                if value is not None and foreign.get(value, 0) > 0:
                    return f"anti-affinity of a pod in {key}={value}"
        return None

    @staticmethod
    def _domains_of(counter: Counter, key: str, nodes: Iterable[SimNode]) -> set[str]:
        found: set[str] = set()
        node_filter = counter.node_filter
        if node_filter is None:
            return found
        for node in nodes:
            for i in node_filter.variants(node):
                value = (
                    node.name if key == HOSTNAME_LABEL and node.is_new else node.label_variants[i].get(key)
                )
                if value is not None:
                    found.add(value)
        return found


class _Spread:
    """A spread rule's domains as they stand (see Topology._spread_state)."""

    __slots__ = ("count", "extra", "lowest", "pinned", "rule", "where")

    def __init__(
        self, rule: SpreadRule, extra: frozenset[str], count: int, lowest: int, where: str, pinned: bool
    ) -> None:
        self.rule, self.extra, self.count, self.lowest, self.where = rule, extra, count, lowest, where
        self.pinned = pinned


class _Prepared:
    """One pod's domain-wide rules with the counts they read, valid for one version of the counts."""

    __slots__ = ("affinity", "antis", "anywhere", "foreign", "nowhere", "pod", "spreads", "version")

    def __init__(self, pod: Pod, version: int) -> None:
        self.pod = pod
        self.version = version
        self.spreads: list[_Spread] = []
        self.affinity: AffinityRule | None = None
        self.anywhere = False
        self.nowhere: str | None = None
        self.antis: list[tuple[str, dict[Domain, int]]] = []
        self.foreign: list[tuple[str, dict[str, int]]] = []


def _spread_check(spread: _Spread, node: SimNode) -> str | None:
    """matching pods in the node's domain + the pod itself - the emptiest domain <= maxSkew."""
    rule = spread.rule
    key = rule.key
    values = node_values(node, key)
    own = 1 if rule.self_match else 0
    hi = rule.counter.hi
    for value in values:
        if value is None:
            return f"topology spread on {key}: node has no {key} label"
        if value in spread.extra or value in rule.counter.exists:
            lowest, where = spread.lowest, spread.where
        else:
            lowest, where = 0, value  # a domain of its own, with nothing in it yet
        here = hi.get((key, value), 0)
        if here + own - lowest > rule.max_skew:
            maybe = here - rule.counter.lo.get((key, value), 0)
            note = f" ({maybe} on new nodes whose zone AWS picks)" if maybe > 0 else ""
            return (
                f"topology spread on {key}: {value} would hold {_pods(here + own)} with this one{note}, "
                f"{where} holds {lowest}: skew {here + own - lowest} > maxSkew {rule.max_skew}"
            )
    return None


def _pods(count: int) -> str:
    return f"{count} matching pod{'' if count == 1 else 's'}"


def _affinity_check(rule: AffinityRule, prepared: _Prepared, node: SimNode) -> str | None:
    """A pod matching every term in the node's domain of every term's key (certainly: not on a node
    whose zone AWS has yet to pick), unless the pod is the first of a set with affinity to itself."""
    lo = rule.counter.lo
    missing = ""
    for key in rule.keys:
        values = node_values(node, key)
        if any(v is None for v in values):
            return f"required pod affinity on {key}: node has no {key} label"
        if not missing and (len(values) > 1 or lo.get((key, values[0] or ""), 0) <= 0):
            missing = key
    if not missing or prepared.anywhere:
        return None
    values = node_values(node, missing)
    where = values[0] if len(values) == 1 else "every zone this node may launch in"
    return f"required pod affinity on {missing}: no matching pod in {where}"
