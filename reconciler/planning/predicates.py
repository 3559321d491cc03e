"""Scheduling predicates: would the scheduler put this pod on this node?

Each predicate is a small function `(pod, node, ctx) -> reason | None` that a person can read in a
plan ("taint dedicated=gpu:NoSchedule not tolerated"). `check` runs them all and explains the first
failure; `fits` gives the same verdict faster (resources first, predicates whose pod-side input is
empty skipped) for the bin-packing loops.

Every predicate is monotone: adding pods to a node never turns a "no" into a "yes". The placement
loops rely on that to skip nodes a pod class was already refused by. Hostname topology spread keeps
that property by assuming the emptiest domain holds 0 matching pods, which can only refuse more than
the scheduler would (the safe direction; see docs/planning.md).

Constraints outside this list are reported by `unmodelled`, never guessed at (DESIGN §3.8).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from reconciler.domain.model import (
    CPU,
    EPHEMERAL_STORAGE,
    HOSTNAME_LABEL,
    MEMORY,
    ZONE_LABEL,
    ClusterState,
    Pod,
    PodAffinityTerm,
    Scheduling,
    Taint,
)
from reconciler.planning.selectors import (
    NO_SCHEDULE,
    label_selector_matches,
    node_affinity_matches,
    node_selector_matches,
    tolerates,
    untolerated_taint,
)
from reconciler.planning.simnode import ANY_IP, SimNode
from reconciler.planning.topology import Topology
from reconciler.planning.topology_counts import DO_NOT_SCHEDULE, EMPTY_SELECTOR, with_label_keys, zone_hint

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", NO_SCHEDULE)


@dataclass(frozen=True, slots=True)
class PredicateContext:
    """Cluster-wide facts some predicates need: zones of bound volumes, by claim `namespace/name`, and
    the domain-wide counts of the pool being simulated (None: constraints that need them are
    unmodelled, see `unmodelled`)."""

    pvc_zones: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    topology: Topology | None = None


NO_CONTEXT = PredicateContext()

Predicate = Callable[[Pod, SimNode, PredicateContext], str | None]


# ---------------------------------------------------------------------------------- formatting


def format_amount(resource: str, amount: int) -> str:
    """CPU in cores, memory and storage in binary units, anything else as a count."""
    if resource == CPU:
        return _trim(amount / 1000, 3)
    if resource in (MEMORY, EPHEMERAL_STORAGE) or resource.startswith("hugepages-"):
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if abs(amount) >= size:
                return _trim(amount / size, 1) + unit
        return str(amount)
    return str(amount)


def _trim(value: float, digits: int) -> str:
    text = f"{value:.{digits}f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


# ---------------------------------------------------------------------------------- predicates


def cordoned(pod: Pod, node: SimNode, ctx: PredicateContext) -> str | None:
    """A cordoned node takes only pods tolerating its unschedulable taint (DaemonSet pods do)."""
    if node.unschedulable and not tolerates(pod.scheduling.tolerations, UNSCHEDULABLE_TAINT):
        return "node is cordoned"
    return None


def taints(pod: Pod, node: SimNode, ctx: PredicateContext) -> str | None:
    """NoSchedule and NoExecute taints must be tolerated; PreferNoSchedule is only a preference."""
    taint = untolerated_taint(pod.scheduling.tolerations, node.taints)
    return None if taint is None else f"taint {taint} not tolerated"


def node_selector(pod: Pod, node: SimNode, ctx: PredicateContext) -> str | None:
    selector = pod.scheduling.node_selector
    if not selector:
        return None
    for labels in node.label_variants:
        if not node_selector_matches(selector, labels):
            return "node selector doesn't match" + _zone_note(
                node, labels, lambda v: node_selector_matches(selector, v)
            )
    return None


def node_affinity(pod: Pod, node: SimNode, ctx: PredicateContext) -> str | None:
    terms = pod.scheduling.required_node_affinity
    if not terms:
        return None
    for labels in node.label_variants:
        if not node_affinity_matches(terms, labels, node.name):
            return "required node affinity doesn't match" + _zone_note(
                node, labels, lambda v: node_affinity_matches(terms, v, node.name)
            )
    return None


def _zone_note(node: SimNode, labels: Mapping[str, str], passes: Callable[[Mapping[str, str]], bool]) -> str:
    """On a new node of a multi-AZ group: the zone that fails, and those that would do."""
    if len(node.label_variants) < 2:
        return ""
    good = [v.get(ZONE_LABEL, "?") for v in node.label_variants if passes(v)]
    return f" in zone {labels.get(ZONE_LABEL, '?')}" + (zone_hint(good) if good else "")


def volume_zones(pod: Pod, node: SimNode, ctx: PredicateContext) -> str | None:
    """A claim bound to a zonal volume pins the pod to that zone. A new node of a multi-AZ group may
    land in any of its zones, so it fits only if every zone it could get is allowed."""
    for claim in pod.volumes.pvc_claims:
        zones = ctx.pvc_zones.get(f"{pod.namespace}/{claim}")
        if zones and (not node.zones or any(z not in zones for z in node.zones)):
            good = [z for z in node.zones if z in zones]
            hint = zone_hint(good) if len(node.zones) > 1 and good else ""
            return f"volume zone {', '.join(zones)} only{hint}"
    return None


def host_ports(pod: Pod, node: SimNode, ctx: PredicateContext) -> str | None:
    """Same protocol and port conflict unless both bind distinct specific addresses."""
    for hp in pod.scheduling.host_ports:
        if hp.port <= 0:
            continue
        protocol = hp.protocol or "TCP"
        used = node.ports.get((protocol, hp.port))
        if used:
            ip = hp.host_ip or ANY_IP
            if ip == ANY_IP or ANY_IP in used or ip in used:
                return f"host port {hp.port}/{protocol} in use"
    return None


def max_pods(pod: Pod, node: SimNode, ctx: PredicateContext) -> str | None:
    if node.pods_free < 1:
        return f"too many pods: node allows {node.pods_free + len(node.pods)}"
    return None


def resources(pod: Pod, node: SimNode, ctx: PredicateContext) -> str | None:
    """Every requested resource, extended ones included: absent on the node means zero."""
    for name, amount in pod.requests.values.items():
        free = node.free_amount(name)
        if amount > free and amount > 0:  # an unrequested resource is not compared (scheduler)
            need, have = format_amount(name, amount), format_amount(name, free)
            return f"insufficient {name}: needs {need}, free {have}"
    return None


def topology_spread(pod: Pod, node: SimNode, ctx: PredicateContext) -> str | None:
    """Without the pool's Topology (which judges spread on every key exactly): DoNotSchedule spread on
    the hostname, matching pods here (in the pod's namespace, the pod itself included) may not exceed
    maxSkew, taking the emptiest node to hold none. Other keys are unmodelled then."""
    if ctx.topology is not None:
        return None
    for c in pod.scheduling.topology_spread:
        if c.when_unsatisfiable != DO_NOT_SCHEDULE or c.topology_key != HOSTNAME_LABEL:
            continue
        selector = c.label_selector
        if selector is None:
            continue  # selects no pods: the skew is always 0
        if c.match_label_keys:
            selector = with_label_keys(selector, pod.labels, c.match_label_keys)
        count = 1 if label_selector_matches(selector, pod.labels) else 0
        namespace = pod.namespace
        for other in node.pods:
            if other.namespace == namespace and label_selector_matches(selector, other.labels):
                count += 1
        if count > c.max_skew:
            return f"topology spread on {HOSTNAME_LABEL}: {count} matching pods > maxSkew {c.max_skew}"
    return None


def anti_affinity(pod: Pod, node: SimNode, ctx: PredicateContext) -> str | None:
    """Required anti-affinity on the hostname, both ways: the pod's terms against the pods here, and
    the terms of the pods here against the pod."""
    for term in pod.scheduling.pod_anti_affinity:
        if term.topology_key != HOSTNAME_LABEL:
            continue
        namespaces = term_namespaces(term, pod.namespace)
        for other in node.pods:
            if (namespaces is None or other.namespace in namespaces) and label_selector_matches(
                term.label_selector, other.labels
            ):
                return f"anti-affinity with pod {other.key} on {HOSTNAME_LABEL}"
    for owner, term in node.anti_terms:
        namespaces = term_namespaces(term, owner.namespace)
        if (namespaces is None or pod.namespace in namespaces) and label_selector_matches(
            term.label_selector, pod.labels
        ):
            return f"anti-affinity of pod {owner.key} on {HOSTNAME_LABEL}"
    return None


def domains(pod: Pod, node: SimNode, ctx: PredicateContext) -> str | None:
    """Zone (any key) spread, pod affinity on any key, anti-affinity on keys other than the
    hostname, both ways: judged from the pool's domain-wide counts (topology.py)."""
    topology = ctx.topology
    return None if topology is None else topology.check(pod, node)


def term_namespaces(term: PodAffinityTerm, own_namespace: str) -> frozenset[str] | None:
    """The namespaces a term selects; None means all. A non-empty namespace selector needs namespace
    labels we do not read, so it is taken as all namespaces (refuses more, never less) and the pod
    is also reported by `unmodelled`."""
    if term.namespace_selector is not None:
        return None
    return frozenset(term.namespaces) if term.namespaces else frozenset((own_namespace,))


# In the order a person wants to hear about them: what the node is, then what is on it.
PREDICATES: tuple[Predicate, ...] = (
    cordoned,
    taints,
    node_selector,
    node_affinity,
    volume_zones,
    host_ports,
    max_pods,
    resources,
    topology_spread,
    anti_affinity,
    domains,
)


NODE_PREDICATES = PREDICATES[:-1]  # what the node and its own pods decide, counts elsewhere aside


def check(pod: Pod, node: SimNode, ctx: PredicateContext = NO_CONTEXT) -> str | None:
    """The reason the first failing predicate gives, or None when the pod fits."""
    for predicate in PREDICATES:
        reason = predicate(pod, node, ctx)
        if reason is not None:
            return reason
    return None


def node_check(pod: Pod, node: SimNode, ctx: PredicateContext = NO_CONTEXT) -> str | None:
    """`check` without the domain-wide predicate: a verdict that holds while only other nodes change."""
    for predicate in NODE_PREDICATES:
        reason = predicate(pod, node, ctx)
        if reason is not None:
            return reason
    return None


def fits(pod: Pod, node: SimNode, ctx: PredicateContext = NO_CONTEXT) -> bool:
    """Same verdict as `check(...) is None`, ordered for speed: the resource comparison rejects most
    nodes in a full cluster, and predicates with nothing to check on the pod's side are skipped."""
    if node.pods_free < 1:
        return False
    for name, amount in pod.requests.values.items():
        if amount <= 0:
            continue
        if name == CPU:
            if amount > node.cpu_free:
                return False
        elif name == MEMORY:
            if amount > node.mem_free:
                return False
        elif amount > node.free_amount(name):
            return False
    return fits_besides_resources(pod, node, ctx)


def fits_besides_resources(pod: Pod, node: SimNode, ctx: PredicateContext, *, domains: bool = True) -> bool:
    """Every predicate but resources and max pods (for loops that compared those inline already)."""
    s = pod.scheduling
    if node.unschedulable and cordoned(pod, node, ctx) is not None:
        return False
    if node.taints and untolerated_taint(s.tolerations, node.taints) is not None:
        return False
    if s.node_selector:
        for labels in node.label_variants:  # node_selector(), without building the reason
            if not node_selector_matches(s.node_selector, labels):
                return False
    if s.required_node_affinity:
        for labels in node.label_variants:  # node_affinity(), without building the reason
            if not node_affinity_matches(s.required_node_affinity, labels, node.name):
                return False
    if pod.volumes.pvc_claims and volume_zones(pod, node, ctx) is not None:
        return False
    if s.host_ports and node.ports and host_ports(pod, node, ctx) is not None:
        return False
    if s.topology_spread and topology_spread(pod, node, ctx) is not None:
        return False
    if (s.pod_anti_affinity or node.anti_terms) and anti_affinity(pod, node, ctx) is not None:
        return False
    topology = ctx.topology
    return not domains or topology is None or topology.check(pod, node) is None


# ---------------------------------------------------------------------------------- unmodelled


def unmodelled(pod: Pod, topology: Topology | None = None) -> str | None:
    """Why the planner cannot judge where this pod may go, or None when every constraint it has is
    modelled. Such a pod is reported not helped and pins its node for scale-down. With the pool's
    Topology, only namespace selectors without namespace labels remain; without it, every
    domain-wide constraint does."""
    if topology is not None:
        return topology.unmodelled(pod)
    return unmodelled_scheduling(pod.scheduling)


def unmodelled_scheduling(s: Scheduling) -> str | None:
    """`unmodelled` without a Topology (a bare predicate context): every domain-wide constraint."""
    for term in s.pod_affinity:
        return f"required pod affinity on {term.topology_key} is not modelled"
    for term in s.pod_anti_affinity:
        if term.topology_key != HOSTNAME_LABEL:
            return f"required pod anti-affinity on {term.topology_key} is not modelled"
        if term.namespace_selector is not None and term.namespace_selector != EMPTY_SELECTOR:
            return "required pod anti-affinity with a namespace selector is not modelled"
    for c in s.topology_spread:
        if c.when_unsatisfiable == DO_NOT_SCHEDULE and c.topology_key != HOSTNAME_LABEL:
            return f"topology spread on {c.topology_key} (DoNotSchedule) is not modelled"
    return None


# ---------------------------------------------------------------------------------- volumes


def pvc_zones(state: ClusterState) -> dict[str, tuple[str, ...]]:
    """Claim `namespace/name` -> zones of the volume bound to it, for claims bound to a zonal volume.
    Unbound claims and volumes without zone affinity put no zone constraint on a pod."""
    by_name = {pv.name: pv for pv in state.pvs}
    zones: dict[str, tuple[str, ...]] = {}
    for pvc in state.pvcs:
        pv = by_name.get(pvc.volume_name)
        if pv is not None and pv.zones:
            zones[pvc.key] = pv.zones
    for pv in state.pvs:
        if pv.claim and pv.zones:
            zones.setdefault(pv.claim, pv.zones)
    return zones
