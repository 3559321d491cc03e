"""Capacity commit messages parse back to exactly what was written."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.gitops.trailers import (
    CapacityMessage,
    Change,
    InstanceRemoval,
    Reason,
    build_message,
    one_line,
    parse_message,
    summarize,
)

SCALE_UP = CapacityMessage(
    cluster="prod-eks",
    summary="scale up asg-a 3 -> 5, asg-b 1 -> 2",
    changes=(Change("asg-a", 3, 5), Change("asg-b", 1, 2)),
    reasons=(Reason("asg-a", "3 pending pods need 2 × m5.large"), Reason("", "plan run 42")),
)


def test_message_layout() -> None:
    assert build_message(SCALE_UP) == (
        "capacity(prod-eks): scale up asg-a 3 -> 5, asg-b 1 -> 2\n"
        "\n"
        "Capacity-Cluster: prod-eks\n"
        "Capacity-Change: asg-a 3 -> 5\n"
        "Capacity-Change: asg-b 1 -> 2\n"
        "Capacity-Reason: asg-a: 3 pending pods need 2 × m5.large\n"
        "Capacity-Reason: plan run 42\n"
    )


def test_scale_down_with_body_round_trips() -> None:
    message = CapacityMessage(
        cluster="prod-eks",
        summary="scale down asg-a 5 -> 3",
        changes=(Change("asg-a", 5, 3),),
        reasons=(Reason("asg-a", "2 nodes under 50% for 10m"),),
        removals=(
            InstanceRemoval("asg-a", "i-0123456789abcdef0"),
            InstanceRemoval("asg-a", "i-0123456789abcdef1"),
        ),
        proposal="asg-reconciler/prod-eks/scale-down@2024-11-29T10:00:00Z",
        body="Instances:\n- i-0123456789abcdef0 (ip-10-0-1-2)\n\nSecond paragraph: with a colon.",
    )
    text = build_message(message)
    assert "Capacity-Remove: asg-a i-0123456789abcdef0\n" in text
    assert parse_message(text) == message
    assert message.reason_for("asg-a") == "2 nodes under 50% for 10m"
    assert message.removals_for("asg-a") == ("i-0123456789abcdef0", "i-0123456789abcdef1")


def test_external_source_and_general_reasons() -> None:
    message = CapacityMessage(
        cluster="c",
        summary="adopt drift asg-a 2 -> 4",
        changes=(Change("asg-a", 2, 4),),
        reasons=(Reason("", "DesiredCapacity changed outside the tool"),),
        source="external",
    )
    parsed = parse_message(build_message(message))
    assert parsed == message
    assert parsed.reason_for("asg-a") == "DesiredCapacity changed outside the tool"
    assert parsed.reason_for("other") == "DesiredCapacity changed outside the tool"


def test_not_a_capacity_commit() -> None:
    assert parse_message("Fix typo\n\nSigned-off-by: A <a@b>\n") is None
    assert parse_message("just a subject") is None
    assert parse_message("subject\n\nnot: a\ntrailer block because this line has none\n") is None
    assert parse_message("x\n\nSigned-off-by: a\n") is None


def test_parsing_is_lenient_about_case_and_foreign_trailers() -> None:
    text = (
        "capacity(c): s\n\ncapacity-cluster: c\nCAPACITY-CHANGE: g 1 -> 2\n"
        "Signed-off-by: A <a@b>\nCapacity-Change: junk\n"
    )
    parsed = parse_message(text)
    assert parsed == CapacityMessage("c", "s", (Change("g", 1, 2),))


def test_subject_without_prefix_keeps_it_as_summary() -> None:
    parsed = parse_message("Merge pull request #7\n\nCapacity-Cluster: c\n")
    assert parsed is not None and parsed.summary == "Merge pull request #7"


@pytest.mark.parametrize(
    "message",
    [
        CapacityMessage("two words", "s"),
        CapacityMessage("c", "two\nlines"),
        CapacityMessage("c", ""),
        CapacityMessage("c", "s", (Change("a b", 1, 2),)),
        CapacityMessage("c", "s", (Change("a", -1, 2),)),
        CapacityMessage("c", "s", removals=(InstanceRemoval("a", "i-1 i-2"),)),
        CapacityMessage("c", "s", reasons=(Reason("", "two\nlines"),)),
        CapacityMessage("c", "s", (Change("a", 1, 2),), reasons=(Reason("b", "not changed"),)),
        CapacityMessage("c", "s", (Change("a", 1, 2),), reasons=(Reason("", "a: looks like a's"),)),
        CapacityMessage("c", "s", source="two words"),
        CapacityMessage("c", "s", body="\nleading blank"),
        CapacityMessage("c", "s", body="a\n  \nb"),
    ],
)
def test_values_a_trailer_cannot_carry_are_refused(message: CapacityMessage) -> None:
    with pytest.raises(ValueError):
        build_message(message)


def test_one_line_and_summarize() -> None:
    assert one_line("  a\n b\t c ") == "a b c"
    assert summarize([]) == "no capacity change"
    assert summarize([Change("a", 1, 3), Change("b", 4, 2)]) == "scale up a 1 -> 3; scale down b 4 -> 2"
    many = [Change(f"group-number-{i}", i, i + 1) for i in range(10)]
    assert summarize(many) == "10 groups (+10)"
    assert len(summarize(many)) <= 72


words = st.text(
    st.characters(
        min_codepoint=33, max_codepoint=0x2FF, exclude_characters=":", exclude_categories=("Z", "C")
    ),
    min_size=1,
    max_size=12,
)
free_words = st.text(
    st.characters(min_codepoint=33, max_codepoint=0x2FF, exclude_categories=("Z", "C")),
    min_size=1,
    max_size=12,
)
free_text = st.lists(st.one_of(words, free_words, st.just("asg-a:")), min_size=1, max_size=5).map(" ".join)


@st.composite
def messages(draw: st.DrawFn) -> CapacityMessage:
    groups = draw(st.lists(words, min_size=0, max_size=4, unique=True))
    changes = tuple(Change(g, draw(st.integers(0, 500)), draw(st.integers(0, 500))) for g in groups)
    removals = tuple(InstanceRemoval(g, draw(words)) for g in groups for _ in range(draw(st.integers(0, 2))))
    reasons = tuple(
        Reason(draw(st.sampled_from(["", *groups])), draw(free_text)) for _ in range(draw(st.integers(0, 3)))
    )
    reasons = tuple(r for r in reasons if r.group or r.text.partition(": ")[0] not in groups)
    body = draw(st.one_of(st.just(""), st.lists(free_text, min_size=1, max_size=3).map("\n\n".join)))
    return CapacityMessage(
        cluster=draw(words.filter(lambda w: ")" not in w)),
        summary=draw(free_text),
        changes=changes,
        reasons=reasons,
        source=draw(st.sampled_from(["", "external"])),
        removals=removals,
        proposal=draw(st.one_of(st.just(""), free_text)),
        body=body,
    )


@given(messages())
def test_round_trip_property(message: CapacityMessage) -> None:
    assert parse_message(build_message(message)) == message
