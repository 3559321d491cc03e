"""Kubernetes matching rules: label selectors, node selector terms and tolerations.

Written out here (not borrowed from the kubernetes client) because the planner is pure and these run
millions of times per plan; the semantics follow apimachinery's `labels.Selector`, the scheduler's
node-affinity plugin and `Toleration.ToleratesTaint`, edge cases included.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from reconciler.domain.model import LabelSelector, NodeSelectorTerm, SelectorRequirement, Taint, Toleration

IN = "In"
NOT_IN = "NotIn"
EXISTS = "Exists"
DOES_NOT_EXIST = "DoesNotExist"
GT = "Gt"
LT = "Lt"

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
HARD_EFFECTS = frozenset({NO_SCHEDULE, NO_EXECUTE})

NODE_NAME_FIELD = "metadata.name"


def requirement_matches(req: SelectorRequirement, labels: Mapping[str, str]) -> bool:
    """One expression against a label map. NotIn and DoesNotExist match an absent key (as the API
    does); Gt/Lt compare integers and fail on an absent or non-integer label; unknown operators match
    nothing, so a typo never widens where a pod may go."""
    op = req.operator
    if op == IN:
        value = labels.get(req.key)
        return value is not None and value in req.values
    if op == NOT_IN:
        value = labels.get(req.key)
        return value is None or value not in req.values
    if op == EXISTS:
        return req.key in labels
    if op == DOES_NOT_EXIST:
        return req.key not in labels
    if op in (GT, LT):
        value = labels.get(req.key)
        if value is None or len(req.values) != 1:
            return False
        try:
            have, bound = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > bound if op == GT else have < bound
    return False


def label_selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """A `None` selector matches nothing; an empty one matches everything (API semantics)."""
    if selector is None:
        return False
    for key, value in selector.match_labels:
        if labels.get(key) != value:
            return False
    return all(requirement_matches(req, labels) for req in selector.match_expressions)


def _field_matches(req: SelectorRequirement, node_name: str) -> bool:
    """matchFields supports only `metadata.name` with In/NotIn, as the API validates."""
    if req.key != NODE_NAME_FIELD:
        return False
    if req.operator == IN:
        return node_name in req.values
    if req.operator == NOT_IN:
        return node_name not in req.values
    return False


def node_selector_term_matches(term: NodeSelectorTerm, labels: Mapping[str, str], node_name: str) -> bool:
    """Expressions and fields are ANDed; an empty term matches no node (API semantics)."""
    if not term.match_expressions and not term.match_fields:
        return False
    for req in term.match_expressions:
        if not requirement_matches(req, labels):
            return False
    return all(_field_matches(req, node_name) for req in term.match_fields)


def node_affinity_matches(
    terms: tuple[NodeSelectorTerm, ...], labels: Mapping[str, str], node_name: str
) -> bool:
    """Terms are ORed; no terms at all means the pod has no required node affinity."""
    if not terms:
        return True
    return any(node_selector_term_matches(term, labels, node_name) for term in terms)


def node_selector_matches(node_selector: tuple[tuple[str, str], ...], labels: Mapping[str, str]) -> bool:
    """`spec.nodeSelector`: every pair must be present with that exact value."""
    return all(labels.get(key) == value for key, value in node_selector)


def toleration_matches(toleration: Toleration, taint: Taint) -> bool:
    """`Toleration.ToleratesTaint`: empty effect matches every effect, empty key (with Exists) every
    key; Equal (or empty operator) compares values."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == EXISTS:
        return True
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return False


def tolerates(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(toleration_matches(t, taint) for t in tolerations)


def untolerated_taint(
    tolerations: tuple[Toleration, ...],
    taints: Iterable[Taint],
    effects: frozenset[str] = HARD_EFFECTS,
) -> Taint | None:
    """The first taint with one of `effects` that no toleration covers; PreferNoSchedule is only a
    preference to the scheduler, so it is not among the default effects."""
    for taint in taints:
        if taint.effect in effects and not tolerates(tolerations, taint):
            return taint
    return None
