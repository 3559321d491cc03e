"""The records of one apply run share one `appliedAt` second (intents, then the result): what
apply left is the run's result, never its first intent (issue 28: a clean 3 -> 1 read as drift
"from 2 to 1" by `status`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reconciler.gitops.adopt import newest_record
from reconciler.gitops.record_reading import Records, last_desired, newest_complete
from reconciler.gitops.records import ApplyRecord, GroupRecord

C1, C2 = "1" * 40, "2" * 40
T = datetime(2026, 12, 6, 6, 0, 5, tzinfo=UTC)


def intent(commit: str, before: int, instance: str, at: datetime = T) -> ApplyRecord:
    group = GroupRecord(
        "general", "scale-down", before, before - 1, (instance,), f"intent: terminate {instance}"
    )
    return ApplyRecord(commit, at, False, (group,), cluster="prod", run="r1", phase="intent")


def done(commit: str, before: int, after: int, *gone: str, at: datetime = T) -> ApplyRecord:
    group = GroupRecord("general", "scale-down", before, after, gone)
    return ApplyRecord(commit, at, True, (group,), cluster="prod", run="r1")


def test_a_clean_three_to_one_leaves_one_not_the_first_intents_two() -> None:
    note = [intent(C1, 3, "i-b"), intent(C1, 2, "i-c"), done(C1, 3, 1, "i-b", "i-c")]
    records = Records({C1: note})
    assert last_desired(records, "prod") == {"general": 1}
    assert newest_record(records, "prod") == note[-1]
    assert newest_complete(records, cluster="prod") == (C1, note[-1])


def test_five_to_one_on_a_newer_commit_in_the_same_second() -> None:
    older = [done(C1, 2, 5)]
    newer = [intent(C2, 5, f"i-{n}") for n in range(4)] + [done(C2, 5, 1, "i-0", "i-1", "i-2", "i-3")]
    records = Records({C2: newer, C1: older})  # newest commit first, as read_records orders them
    assert last_desired(records, "prod") == {"general": 1}


def test_time_still_decides_where_it_can() -> None:
    later = done(C1, 4, 2, at=T + timedelta(seconds=1))
    records = Records({C1: [later, done(C1, 3, 4)]})
    assert last_desired(records, "prod") == {"general": 2}
    # `before` leaves out the record it names and everything after it
    assert last_desired(records, "prod", before=later.applied_at) == {"general": 4}


def test_an_open_intent_counts_by_its_effect_when_aws_is_known() -> None:
    """`status` reads an open intent as apply does: by what AWS shows of it."""
    result = done(C1, 2, 2)
    raise_intent = ApplyRecord(
        C1,
        T,
        False,
        (GroupRecord("general", "scale-up", 2, 3, (), "intent: raise desired 2 -> 3"),),
        cluster="prod",
        run="r2",
        phase="intent",
    )
    records = Records({C1: [result, raise_intent]})
    assert last_desired(records, "prod") == {"general": 3}  # nothing known of AWS: as recorded
    assert last_desired(records, "prod", observed={"general": 3}) == {"general": 3}  # it went: ours
    assert last_desired(records, "prod", observed={"general": 2}) == {"general": 2}  # it never did
    terminating = Records({C1: [done(C1, 3, 3), intent(C1, 3, "i-b")]})
    assert last_desired(terminating, "prod", in_service=lambda i: i == "i-b") == {"general": 3}
    assert last_desired(terminating, "prod", in_service=lambda i: False) == {"general": 2}
