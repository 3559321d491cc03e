"""When apply writes a record (issue 20, "no idle writes"): only when it changed something or found
something new against the newest record it trusts. Pure: records in, a decision out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reconciler.gitops.record_reading import OBSERVATIONS_PER_COMMIT, is_change, what_is_new, worth_writing
from reconciler.gitops.records import ApplyRecord, GroupRecord

C1, C2 = "1" * 40, "2" * 40
T = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def record(
    *groups: GroupRecord, commit: str = C1, at: datetime = T, complete: bool = True, phase: str = "done"
) -> ApplyRecord:
    return ApplyRecord(
        commit, at, complete, groups or (GroupRecord("asg-a", "none", 3, 3),), "apply", "prod", phase=phase
    )


def later(*groups: GroupRecord, complete: bool = True, commit: str = C1) -> ApplyRecord:
    return record(*groups, commit=commit, at=T + timedelta(minutes=5), complete=complete)


def test_an_idle_run_on_the_same_commit_says_nothing_new() -> None:
    assert what_is_new(later(), record()) == ""


def test_a_first_record_a_new_commit_or_an_open_intent_before_it_is_news() -> None:
    assert what_is_new(later(), None)
    assert what_is_new(later(commit=C2), record())
    intent = record(
        GroupRecord("asg-a", "scale-down", 3, 2, ("i-1",), "intent: terminate i-1"),
        complete=False,
        phase="intent",
    )
    assert what_is_new(later(), intent)


def test_a_change_in_aws_is_news_and_the_quiet_run_after_it_is_not() -> None:
    raised = later(GroupRecord("asg-a", "scale-up", 3, 5, detail="raised desired 3 -> 5"))
    assert what_is_new(raised, record())
    assert is_change(raised)
    after = record(GroupRecord("asg-a", "none", 5, 5), at=T + timedelta(minutes=6))
    assert what_is_new(after, raised) == ""
    terminated = later(GroupRecord("asg-a", "scale-down", 5, 4, ("i-1",), "terminated i-1"))
    assert what_is_new(terminated, raised) and is_change(terminated)


def test_a_refusal_new_or_gone_is_news_the_same_refusal_an_hour_later_is_not() -> None:
    refused = later(
        GroupRecord("asg-a", "refused", 3, 3, detail="i-1: approved 25h ago in abcdef, older than 24h"),
        complete=False,
    )
    assert what_is_new(refused, record())
    assert not is_change(refused)
    again = record(
        GroupRecord("asg-a", "refused", 3, 3, detail="i-1: approved 26h10m ago in abcdef, older than 24h"),
        at=T + timedelta(hours=1),
        complete=False,
    )
    assert what_is_new(again, refused) == ""
    other = record(
        GroupRecord("asg-a", "refused", 3, 3, detail="i-2: approved 26h ago in abcdef, older than 24h"),
        at=T + timedelta(hours=1),
        complete=False,
    )
    assert what_is_new(other, refused)  # another instance refused: news
    assert what_is_new(later(), refused)  # the refusal is gone


def test_drift_is_news_once_the_record_has_taken_it_in() -> None:
    drifted = later(
        GroupRecord(
            "asg-a",
            "none",
            2,
            2,
            detail="drift: desired lowered outside the tool from 3 to 2 since the last apply",
        )
    )
    assert what_is_new(drifted, record())
    quiet = record(GroupRecord("asg-a", "none", 2, 2), at=T + timedelta(minutes=10))
    assert what_is_new(quiet, drifted) == ""  # drift is measured against the last record: gone


def test_adoption_a_group_coming_or_going_and_completeness_are_news() -> None:
    adopted = later(GroupRecord("asg-a", "none", 2, 2, detail="apply.drift adopt: ...", adopted=True))
    assert what_is_new(adopted, record(GroupRecord("asg-a", "none", 2, 2)))
    assert is_change(adopted)  # the plan commits it to main from this record
    held = record(GroupRecord("asg-a", "none", 2, 2, detail="apply.drift adopt: stays", adopted=True))
    assert what_is_new(held, adopted) == ""
    assert what_is_new(
        later(GroupRecord("asg-a", "none", 3, 3), GroupRecord("asg-b", "none", 1, 1)), record()
    )
    waiting = later(GroupRecord("asg-a", "none", 3, 3, detail="i-1: waits for the window"), complete=False)
    assert what_is_new(waiting, record())


def test_one_commit_takes_a_bounded_number_of_observations_but_every_change() -> None:
    refused = later(GroupRecord("asg-a", "refused", 3, 3, detail="i-1: not approved"), complete=False)
    full = OBSERVATIONS_PER_COMMIT
    assert worth_writing(refused, record(), on_commit=full - 1)
    assert worth_writing(refused, record(), on_commit=full) == ""  # the note is full of observations
    raised = later(GroupRecord("asg-a", "scale-up", 3, 5, detail="raised desired 3 -> 5"))
    assert worth_writing(raised, record(), on_commit=10 * full)  # a change is always recorded
    assert worth_writing(later(), record(), on_commit=10 * full, acted=True)  # e.g. a node given back
    assert worth_writing(later(), record(), on_commit=0) == ""  # idle: nothing to write
    assert worth_writing(later(commit=C2), record(commit=C1), on_commit=0)  # a new commit applied
