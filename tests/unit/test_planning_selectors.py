"""Selector and toleration semantics, operator by operator, including the API's edge cases."""

from __future__ import annotations

import pytest

from reconciler.domain.model import LabelSelector, NodeSelectorTerm, SelectorRequirement, Taint, Toleration
from reconciler.planning.selectors import (
    label_selector_matches,
    node_affinity_matches,
    node_selector_matches,
    node_selector_term_matches,
    requirement_matches,
    toleration_matches,
    untolerated_taint,
)

LABELS = {"tier": "web", "cores": "8", "zone": "a"}


@pytest.mark.parametrize(
    ("operator", "key", "values", "expected"),
    [
        ("In", "tier", ("web", "api"), True),
        ("In", "tier", ("db",), False),
        ("In", "missing", ("web",), False),
        ("NotIn", "tier", ("db",), True),
        ("NotIn", "tier", ("web",), False),
        ("NotIn", "missing", ("web",), True),  # absent key satisfies NotIn
        ("Exists", "tier", (), True),
        ("Exists", "missing", (), False),
        ("DoesNotExist", "missing", (), True),
        ("DoesNotExist", "tier", (), False),
        ("Gt", "cores", ("4",), True),
        ("Gt", "cores", ("8",), False),
        ("Lt", "cores", ("16",), True),
        ("Lt", "cores", ("8",), False),
        ("Gt", "tier", ("4",), False),  # non-integer label
        ("Gt", "cores", ("x",), False),  # non-integer bound
        ("Gt", "missing", ("1",), False),
        ("Gt", "cores", ("1", "2"), False),  # exactly one value allowed
        ("Bogus", "tier", ("web",), False),  # unknown operators never widen
    ],
)
def test_requirement_operators(operator: str, key: str, values: tuple[str, ...], expected: bool) -> None:
    assert requirement_matches(SelectorRequirement(key, operator, values), LABELS) is expected


def test_label_selector_none_matches_nothing_and_empty_matches_everything() -> None:
    assert label_selector_matches(None, LABELS) is False
    assert label_selector_matches(LabelSelector(), LABELS) is True
    assert label_selector_matches(LabelSelector(), {}) is True


def test_label_selector_ands_labels_and_expressions() -> None:
    sel = LabelSelector(
        match_labels=(("tier", "web"),),
        match_expressions=(SelectorRequirement("zone", "In", ("a", "b")),),
    )
    assert label_selector_matches(sel, LABELS)
    assert not label_selector_matches(sel, {**LABELS, "zone": "c"})
    assert not label_selector_matches(sel, {**LABELS, "tier": "db"})


def test_node_selector_term_ands_expressions_and_fields() -> None:
    term = NodeSelectorTerm(
        match_expressions=(SelectorRequirement("tier", "In", ("web",)),),
        match_fields=(SelectorRequirement("metadata.name", "In", ("n1",)),),
    )
    assert node_selector_term_matches(term, LABELS, "n1")
    assert not node_selector_term_matches(term, LABELS, "n2")


def test_match_fields_only_on_metadata_name() -> None:
    not_in = NodeSelectorTerm(match_fields=(SelectorRequirement("metadata.name", "NotIn", ("n1",)),))
    assert node_selector_term_matches(not_in, {}, "n2")
    assert not node_selector_term_matches(not_in, {}, "n1")
    other = NodeSelectorTerm(match_fields=(SelectorRequirement("spec.x", "In", ("n1",)),))
    assert not node_selector_term_matches(other, {}, "n1")


def test_empty_term_matches_no_node() -> None:
    assert not node_selector_term_matches(NodeSelectorTerm(), LABELS, "n1")


def test_node_affinity_ors_terms_and_no_terms_means_no_constraint() -> None:
    web = NodeSelectorTerm(match_expressions=(SelectorRequirement("tier", "In", ("web",)),))
    db = NodeSelectorTerm(match_expressions=(SelectorRequirement("tier", "In", ("db",)),))
    assert node_affinity_matches((db, web), LABELS, "n1")
    assert not node_affinity_matches((db,), LABELS, "n1")
    assert node_affinity_matches((), LABELS, "n1")


def test_node_selector_needs_every_pair() -> None:
    assert node_selector_matches((("tier", "web"), ("zone", "a")), LABELS)
    assert not node_selector_matches((("tier", "web"), ("zone", "b")), LABELS)
    assert node_selector_matches((), LABELS)


GPU = Taint("dedicated", "gpu", "NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        (Toleration("dedicated", "Equal", "gpu", "NoSchedule"), True),
        (Toleration("dedicated", "Equal", "cpu", "NoSchedule"), False),
        (Toleration("dedicated", "", "gpu", "NoSchedule"), True),  # empty operator is Equal
        (Toleration("dedicated", "Exists", "", "NoSchedule"), True),
        (Toleration("dedicated", "Exists"), True),  # empty effect matches every effect
        (Toleration("dedicated", "Equal", "gpu", "NoExecute"), False),
        (Toleration("", "Exists"), True),  # empty key with Exists tolerates everything
        (Toleration("other", "Exists"), False),
        (Toleration("dedicated", "Bogus", "gpu"), False),
    ],
)
def test_toleration_matching(toleration: Toleration, expected: bool) -> None:
    assert toleration_matches(toleration, GPU) is expected


def test_untolerated_taint_ignores_prefer_no_schedule() -> None:
    soft = Taint("soft", "", "PreferNoSchedule")
    hard = Taint("hard", "", "NoExecute")
    assert untolerated_taint((), (soft,)) is None
    assert untolerated_taint((), (soft, hard)) == hard
    assert untolerated_taint((Toleration("hard", "Exists"),), (soft, hard)) is None
