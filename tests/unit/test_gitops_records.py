"""Apply records, the pure parts: the note format, merging appends, and what the records answer."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta, timezone

import pytest

from reconciler.domain.errors import OperationError
from reconciler.gitops import history
from reconciler.gitops.history import LogRecord, build_entries
from reconciler.gitops.record_reading import Records, history_entries, last_scale_up, newest_complete
from reconciler.gitops.records import (
    NOTES_REF,
    ApplyRecord,
    GroupRecord,
    decode_note,
    encode_note,
    merge_note,
    record_message,
)

C1, C2, C3 = ("1" * 40), ("2" * 40), ("3" * 40)
T = datetime(2024, 6, 1, 12, 0, 5, tzinfo=UTC)


def record(
    commit: str = C1,
    at: datetime = T,
    complete: bool = True,
    *groups: GroupRecord,
    cluster: str = "prod",
    applier: str = "apply-bot",
) -> ApplyRecord:
    return ApplyRecord(
        commit, at, complete, groups or (GroupRecord("asg-a", "scale-up", 2, 4),), applier, cluster
    )


def test_note_text_is_canonical_and_round_trips() -> None:
    rec = record(
        C1,
        T,
        True,
        GroupRecord("asg-a", "scale-up", 2, 4),
        GroupRecord("asg-b", "scale-down", 3, 1, ("i-0a", "i-0b"), "drained"),
    )
    text = encode_note([rec])
    assert decode_note(text, C1).records == (rec,)
    assert decode_note(text, C1).warnings == ()
    assert text == (
        "{\n"
        '  "records": [\n'
        "    {\n"
        '      "appliedAt": "2024-06-01T12:00:05Z",\n'
        '      "applier": "apply-bot",\n'
        '      "cluster": "prod",\n'
        f'      "commit": "{C1}",\n'
        '      "complete": true,\n'
        '      "groups": [\n'
        "        {\n"
        '          "action": "scale-up",\n'
        '          "desiredAfter": 4,\n'
        '          "desiredBefore": 2,\n'
        '          "detail": "",\n'
        '          "name": "asg-a",\n'
        '          "terminated": []\n'
        "        },\n"
        "        {\n"
        '          "action": "scale-down",\n'
        '          "desiredAfter": 1,\n'
        '          "desiredBefore": 3,\n'
        '          "detail": "drained",\n'
        '          "name": "asg-b",\n'
        '          "terminated": [\n'
        '            "i-0a",\n'
        '            "i-0b"\n'
        "          ]\n"
        "        }\n"
        "      ]\n"
        "    }\n"
        "  ],\n"
        '  "version": 1\n'
        "}\n"
    )
    # another time zone is the same instant and the same text; sub-seconds survive the trip
    tokyo = record(C1, T.astimezone(timezone(timedelta(hours=9))), True, *rec.groups)
    assert encode_note([tokyo]) == text
    fine = record(C1, T.replace(microsecond=250000))
    assert decode_note(encode_note([fine]), C1).records[0].applied_at == fine.applied_at
    assert NOTES_REF == history.NOTES_REF == "refs/notes/asg-reconciler"


@pytest.mark.parametrize(
    "build",
    [
        lambda: GroupRecord("asg-a", "scale-sideways", 1, 2),
        lambda: GroupRecord("asg-a", "scale-up", -1, 2),
        lambda: GroupRecord("asg-a", "scale-up", True, 2),
        lambda: GroupRecord("", "none", 1, 1),
        lambda: GroupRecord("asg-a", "scale-down", 2, 1, ["i-1"]),  # type: ignore[arg-type]
        lambda: ApplyRecord("abc123", T, True, ()),
        lambda: ApplyRecord(C1, datetime(2024, 6, 1), True, ()),
        lambda: ApplyRecord(C1, T, 1, ()),  # type: ignore[arg-type]
    ],
)
def test_invalid_records_are_refused(build: object) -> None:
    with pytest.raises(ValueError):
        build()  # type: ignore[operator]


def test_unreadable_notes_and_records_are_skipped_with_a_warning() -> None:
    good = record(C1)
    for text, says in [
        ("applied asg-a at noon\n", "not JSON"),
        ("[1, 2]\n", "not a JSON object"),
        ('{"version": 2, "records": []}\n', "format version 2"),
        ('{"version": 1}\n', "no records list"),
    ]:
        note = decode_note(text, C1)
        assert note.records == ()
        assert len(note.warnings) == 1 and says in note.warnings[0] and C1[:12] in note.warnings[0]

    data = json.loads(encode_note([good]))
    bad_action = {**data["records"][0], "groups": [{**data["records"][0]["groups"][0], "action": "boom"}]}
    no_time = {k: v for k, v in data["records"][0].items() if k != "appliedAt"}
    naive = {**data["records"][0], "appliedAt": "2024-06-01T12:00:05"}
    string_ids = {**data["records"][0], "groups": [{**data["records"][0]["groups"][0], "terminated": "i-1"}]}
    elsewhere = json.loads(encode_note([record(C2)]))["records"][0]
    data["records"] = [bad_action, good_raw := data["records"][0], no_time, naive, string_ids, elsewhere, 7]
    note = decode_note(json.dumps(data), C1)
    assert note.records == (good,) and good_raw["commit"] == C1
    assert [w.split(": record ")[1].split(" ")[0] for w in note.warnings] == ["1", "3", "4", "5", "6", "7"]
    assert "'boom'" in note.warnings[0] and "missing 'appliedAt'" in note.warnings[1]
    assert "is for commit 222222222222" in note.warnings[4]


def test_merge_appends_keeps_what_is_there_and_never_duplicates(caplog: pytest.LogCaptureFixture) -> None:
    first = record(C1, T, False, GroupRecord("asg-a", "failed", 2, 2, detail="throttled"))
    second = record(C1, T + timedelta(minutes=1), True)
    text = merge_note(None, first)
    assert text == encode_note([first])
    text = merge_note(text, second)
    assert text is not None and decode_note(text, C1).records == (first, second)
    assert merge_note(text, second) is None  # the same record again: nothing to write
    assert merge_note(text, first) is None

    # a record this version cannot read is kept exactly as stored
    data = json.loads(text)
    data["records"].insert(0, {"commit": C1, "future": {"field": [1, 2]}})
    third = record(C1, T + timedelta(minutes=2), True, GroupRecord("asg-c", "none", 1, 1))
    merged = merge_note(json.dumps(data), third)
    assert merged is not None
    assert json.loads(merged)["records"][0] == {"commit": C1, "future": {"field": [1, 2]}}
    assert decode_note(merged, C1).records == (first, second, third)

    # a note that is not ours at all is replaced, and says so
    with caplog.at_level(logging.WARNING, logger="reconciler.gitops.records"):
        assert merge_note("applied by hand\n", first) == encode_note([first])
    assert any("not JSON" in r.getMessage() and "replaced" in r.getMessage() for r in caplog.records)
    # a newer format is never overwritten
    with pytest.raises(OperationError, match="format version 2"):
        merge_note('{"version": 2, "records": []}\n', first)


def test_newest_complete_follows_the_given_order_and_skips_partial_runs() -> None:
    older = record(C1, T, True)
    partial = record(C3, T + timedelta(hours=2), False)
    retried = record(C2, T + timedelta(hours=1, minutes=5), True)
    first_try = record(C2, T + timedelta(hours=1), True)
    other_cluster = record(C3, T + timedelta(hours=3), True, cluster="staging")
    records = Records({C3: [partial, other_cluster], C2: [retried, first_try], C1: [older]})
    assert list(records) == [C3, C2, C1]
    assert newest_complete(records) == (C3, other_cluster)
    assert newest_complete(records, cluster="prod") == (C2, retried)  # the latest complete run on C2
    assert newest_complete(Records({C3: [partial]}), cluster="prod") is None
    assert newest_complete(Records()) is None
    assert len(Records({C1: []})) == 0  # commits without records are not listed


def test_last_scale_up_per_group() -> None:
    runs = [
        record(C1, T, True, GroupRecord("asg-a", "scale-up", 1, 2), GroupRecord("asg-b", "scale-up", 1, 3)),
        record(C2, T + timedelta(minutes=5), False, GroupRecord("asg-a", "scale-up", 2, 3)),
        record(C3, T + timedelta(minutes=9), True, GroupRecord("asg-a", "failed", 3, 3)),
        record(C3, T + timedelta(minutes=9), True, GroupRecord("asg-b", "refused", 3, 5)),
        record(C3, T + timedelta(minutes=9), True, GroupRecord("asg-c", "scale-down", 3, 2, ("i-1",))),
        record(C3, T + timedelta(hours=1), True, GroupRecord("asg-a", "scale-up", 3, 9), cluster="other"),
    ]
    # asg-b's "refused" record raised desired 3 -> 5 beside a refused removal: still a raise
    expected = {"asg-a": T + timedelta(minutes=5), "asg-b": T + timedelta(minutes=9)}
    assert last_scale_up(runs, cluster="prod") == expected
    assert last_scale_up(Records({C3: runs[2:5], C2: runs[1:2], C1: runs[:1]})) == expected
    assert last_scale_up(runs)["asg-a"] == T + timedelta(hours=1)
    assert last_scale_up([]) == {}


def test_history_entries_and_the_commit_message() -> None:
    rec = record(
        C1,
        T,
        False,
        GroupRecord("asg-a", "scale-up", 2, 4),
        GroupRecord("asg-b", "failed", 3, 3, detail="AccessDenied for arn:aws:iam::1:role/x"),
        GroupRecord("asg-c", "scale-down", 3, 2, ("i-0c",)),
    )
    log = LogRecord(C1, (), "a", "a@x", "a", "0", "capacity(prod): x\n", encode_note([rec]))
    entries = history_entries(log)
    assert [(e.kind, e.cluster, e.group, e.before, e.after, e.direction) for e in entries] == [
        ("apply", "prod", "asg-a", 2, 4, "up"),
        ("apply", "prod", "asg-b", 3, 3, "none"),
        ("apply", "prod", "asg-c", 3, 2, "down"),
    ]
    assert entries[0].reason == "scale-up (partial apply)" and entries[0].time == T
    assert entries[1].reason.startswith("failed: AccessDenied")
    assert entries[2].instances == ("i-0c",) and entries[2].author == "apply-bot" and entries[2].commit == C1
    assert history_entries(log._replace(note="garbage")) == []
    # through history's own pure core, filtered by group
    text = "\x1e" + "\x00".join((C1, "", "a", "a@x", "a", "0", "unrelated\n", encode_note([rec])))
    assert [e.group for e in build_entries(text, history_entries, cluster="prod", node_group="asg-c")] == [
        "asg-c"
    ]

    message = record_message(rec)
    assert message.startswith(f"apply(prod): {C1[:12]} partial\n\n")
    assert "asg-a: scale-up 2 -> 4\n" in message and "asg-b: failed 3 -> 3" in message
    assert "AccessDenied" not in message  # free text stays out of the commit message
