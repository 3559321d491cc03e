"""An independent model of kube-scheduler 1.36's PodTopologySpread and InterPodAffinity filters, used
as a test oracle for the planner's Topology. It was written from facts about the scheduler's source,
not from reconciler/planning/topology.py, and keeps none of its incremental bookkeeping: every verdict
counts from scratch over plain (name, labels, taints, pods) nodes. Single-zone nodes only.

Only label, node-selector, node-affinity and taint matching are shared with the planner
(reconciler.planning.selectors); the domain counting, minimum, minDomains, self-match and the
affinity / anti-affinity (including existing pods' anti-affinity) rules are this module's own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reconciler.domain.model import LabelSelector, Pod, PodAffinityTerm, SelectorRequirement, Taint
from reconciler.planning.selectors import (
    label_selector_matches,
    node_affinity_matches,
    node_selector_matches,
    untolerated_taint,
)
from reconciler.planning.simnode import SimNode

MAXINT = 2**31

NamespaceLabels = Mapping[str, Mapping[str, str]] | None


@dataclass
class RNode:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    pods: list[Pod]


def from_sim(sim: SimNode, hostname_unique: bool = True) -> RNode:
    """The reference's view of a single-zone SimNode; a new node gets its own hostname."""
    if len(sim.label_variants) != 1:
        raise ValueError("multi-AZ node in reference")
    labels = dict(sim.label_variants[0])
    if sim.is_new and hostname_unique:
        labels["kubernetes.io/hostname"] = sim.name
    return RNode(sim.name, labels, tuple(sim.taints), list(sim.pods))


def _sel(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    return label_selector_matches(selector, labels)


def _empty(selector: LabelSelector | None) -> bool:
    return selector is not None and not selector.match_labels and not selector.match_expressions


def _merge(
    selector: LabelSelector | None,
    pod_labels: Mapping[str, str],
    keys: Sequence[str],
    mismatch: Sequence[str] = (),
) -> LabelSelector | None:
    if selector is None:
        return None
    extra = [SelectorRequirement(k, "In", (pod_labels[k],)) for k in keys if k in pod_labels]
    extra += [SelectorRequirement(k, "NotIn", (pod_labels[k],)) for k in mismatch if k in pod_labels]
    if not extra:
        return selector
    return LabelSelector(selector.match_labels, selector.match_expressions + tuple(extra))


def spread_reason(pod: Pod, node: RNode, nodes: Sequence[RNode]) -> str | None:
    cs = [c for c in pod.scheduling.topology_spread if c.when_unsatisfiable == "DoNotSchedule"]
    if not cs:
        return None
    keys = [c.topology_key for c in cs]
    s = pod.scheduling
    counts = []
    sels = []
    for c in cs:
        sel = _merge(c.label_selector, pod.labels, c.match_label_keys)
        sels.append(sel)
        m: dict[str, int] = {}
        for n in nodes:
            if any(k not in n.labels for k in keys):
                continue
            if c.node_affinity_policy != "Ignore":
                if not node_selector_matches(s.node_selector, n.labels):
                    continue
                if not node_affinity_matches(s.required_node_affinity, n.labels, n.name):
                    continue
            if c.node_taints_policy == "Honor" and untolerated_taint(s.tolerations, n.taints) is not None:
                continue
            v = n.labels[c.topology_key]
            cnt = 0
            if not _empty(sel):
                for p in n.pods:
                    if p.deleting_since is not None or p.namespace != pod.namespace:
                        continue
                    if _sel(sel, p.labels):
                        cnt += 1
            m[v] = m.get(v, 0) + cnt
        counts.append(m)
    for c, sel, m in zip(cs, sels, counts, strict=True):
        if c.topology_key not in node.labels:
            return f"missing {c.topology_key}"
        self_match = 1 if _sel(sel, pod.labels) else 0
        low = min(m.values()) if m else MAXINT
        if len(m) < (c.min_domains or 1):
            low = 0
        skew = m.get(node.labels[c.topology_key], 0) + self_match - low
        if skew > c.max_skew:
            return f"spread {c.topology_key}: skew {skew} > {c.max_skew} (counts {m})"
    return None


def _term_ns(term: PodAffinityTerm, own: str) -> tuple[frozenset[str], LabelSelector | None]:
    if not term.namespaces and term.namespace_selector is None:
        return frozenset((own,)), None
    return frozenset(term.namespaces), term.namespace_selector


def term_matches(term: PodAffinityTerm, owner: Pod, other: Pod, ns_labels: NamespaceLabels) -> bool:
    """Whether `owner`'s affinity term selects `other` (namespaces, namespace selector, label
    selector with matchLabelKeys / mismatchLabelKeys taken from `owner`)."""
    names, nsel = _term_ns(term, owner.namespace)
    sel = _merge(term.label_selector, owner.labels, term.match_label_keys, term.mismatch_label_keys)
    in_ns = other.namespace in names
    if not in_ns and nsel is not None:
        if _empty(nsel):
            in_ns = True
        elif ns_labels is not None:
            in_ns = _sel(nsel, ns_labels.get(other.namespace, {}))
    return in_ns and _sel(sel, other.labels)


def affinity_reason(
    pod: Pod, node: RNode, nodes: Sequence[RNode], ns_labels: NamespaceLabels = None
) -> str | None:
    s = pod.scheduling
    aff: dict[tuple[str, str], int] = {}
    anti: dict[tuple[str, str], int] = {}
    existing: dict[tuple[str, str], int] = {}
    for n in nodes:
        for p in n.pods:
            if s.pod_affinity and all(term_matches(t, pod, p, ns_labels) for t in s.pod_affinity):
                for t in s.pod_affinity:
                    if t.topology_key in n.labels:
                        k = (t.topology_key, n.labels[t.topology_key])
                        aff[k] = aff.get(k, 0) + 1
            for t in s.pod_anti_affinity:
                if term_matches(t, pod, p, ns_labels) and t.topology_key in n.labels:
                    k = (t.topology_key, n.labels[t.topology_key])
                    anti[k] = anti.get(k, 0) + 1
            for t in p.scheduling.pod_anti_affinity:
                if term_matches(t, p, pod, ns_labels) and t.topology_key in n.labels:
                    k = (t.topology_key, n.labels[t.topology_key])
                    existing[k] = existing.get(k, 0) + 1
    if s.pod_affinity:
        exist = True
        for t in s.pod_affinity:
            if t.topology_key not in node.labels:
                return f"affinity: node lacks {t.topology_key}"
            if aff.get((t.topology_key, node.labels[t.topology_key]), 0) <= 0:
                exist = False
        if not exist and not (
            len(aff) == 0 and all(term_matches(t, pod, pod, ns_labels) for t in s.pod_affinity)
        ):
            return "affinity not satisfied"
    for t in s.pod_anti_affinity:
        if t.topology_key in node.labels and anti.get((t.topology_key, node.labels[t.topology_key]), 0) > 0:
            return f"anti-affinity {t.topology_key}"
    for key, value in node.labels.items():
        if existing.get((key, value), 0) > 0:
            return f"existing anti-affinity {key}={value}"
    return None


def reason(pod: Pod, node: RNode, nodes: Sequence[RNode], ns_labels: NamespaceLabels = None) -> str | None:
    """Domain-wide verdict for `pod` on `node` (pod not yet on it)."""
    return spread_reason(pod, node, nodes) or affinity_reason(pod, node, nodes, ns_labels)


def final_check(
    pool_nodes: Sequence[SimNode], pod: Pod, node_name: str, ns_labels: NamespaceLabels = None
) -> str | None:
    """Judge `pod` (booked on node_name) against the final state: remove it, judge, done."""
    nodes = [from_sim(s) for s in pool_nodes]
    target = next(n for n in nodes if n.name == node_name)
    target.pods = [p for p in target.pods if p is not pod]
    return reason(pod, target, nodes, ns_labels)
