"""`Capacity-Restore` (issue 20): a desired lowered by hand on main without naming instances and put
back by the plan is a restore in the commit's subject, its trailers and `history`, never a scale-up."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reconciler.gitops.history import build_entries
from reconciler.gitops.trailers import (
    CapacityMessage,
    Change,
    Reason,
    build_message,
    parse_message,
    summarize,
)

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

MIXED = CapacityMessage(
    "prod",
    "scale up a 2 -> 3; restore b 1 -> 2",
    (Change("a", 2, 3), Change("b", 1, 2)),
    (Reason("a", "1 pending pod"), Reason("b", "desired lowered by hand without naming instances: restored")),
    restores=("b",),
)


def test_the_subject_says_restore_and_the_trailer_round_trips() -> None:
    assert summarize(MIXED.changes, restores=MIXED.restores) == MIXED.summary
    text = build_message(MIXED)
    assert "\nCapacity-Restore: b\n" in text
    assert parse_message(text) == MIXED


def test_a_restore_must_be_a_raise_of_a_group_the_commit_changes() -> None:
    for restores in (("c",), ("b", "b")):
        with pytest.raises(ValueError, match="restore of"):
            build_message(CapacityMessage("prod", "x", MIXED.changes, restores=restores))
    lowered = CapacityMessage("prod", "x", (Change("b", 2, 1),), restores=("b",))
    with pytest.raises(ValueError, match="restore of"):
        build_message(lowered)


def test_history_shows_the_restored_group_as_restore_and_the_other_as_up() -> None:
    fields = ("s1", "", "bot", "bot@x", "bot", str(int(NOW.timestamp())), build_message(MIXED))
    entries = {e.group: e for e in build_entries("\x1e" + "\x00".join(fields) + "\n")}
    assert entries["a"].direction == "up"
    assert entries["b"].direction == "restore" and (entries["b"].before, entries["b"].after) == (1, 2)
