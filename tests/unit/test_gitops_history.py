"""The pure side of `history`: log text to entries, --since, rendering."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta

import pytest

from reconciler.domain.errors import UserError
from reconciler.gitops.history import Entry, build_entries, parse_log, parse_since
from reconciler.gitops.trailers import CapacityMessage, Change, InstanceRemoval, Reason, build_message
from reconciler.views.history import render_history

NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)


def record(
    sha: str, parents: str, message: str, when: datetime, author: str = "bot", committer: str = ""
) -> str:
    """One commit as `read_log` prints it."""
    fields = (sha, parents, author, f"{author}@x", committer or author, str(int(when.timestamp())), message)
    return "\x1e" + "\x00".join(fields) + "\n"


UP = CapacityMessage(
    "c1",
    "scale up a 1 -> 3, b 2 -> 3",
    (Change("a", 1, 3), Change("b", 2, 3)),
    (Reason("a", "5 pending pods"), Reason("", "plan run")),
)
DOWN = CapacityMessage(
    "c1",
    "scale down a 3 -> 2",
    (Change("a", 3, 2),),
    removals=(InstanceRemoval("a", "i-0123456789abcdef0"),),
)


def test_linear_log_and_reasons() -> None:
    text = record("s2", "s1", build_message(UP), NOW) + record(
        "s1", "", "initial\n", NOW - timedelta(hours=1)
    )
    a, b = build_entries(text)
    assert a == Entry("change", "c1", "a", NOW, 1, 3, "up", "5 pending pods", "s2", "bot", "bot@x")
    assert b.group == "b" and b.reason == "plan run" and b.direction == "up"


def test_merge_lands_the_proposal() -> None:
    merged_at = NOW + timedelta(hours=3)
    text = (
        record(
            "m1",
            "s2 p1",
            "Merge pull request #12 from org/asg-reconciler/c1/scale-down\n",
            merged_at,
            "alice",
        )
        + record("p1", "s2", build_message(DOWN), NOW + timedelta(minutes=5))
        + record("s2", "s1", build_message(UP), NOW)
        + record("s1", "", "initial\n", NOW - timedelta(hours=1))
    )
    down, *_ = build_entries(text)
    assert (down.time, down.merged_by, down.proposal, down.instances, down.direction) == (
        merged_at,
        "alice",
        "#12",
        ("i-0123456789abcdef0",),
        "down",
    )


def test_squash_merge_committer_is_who_merged() -> None:
    squash = CapacityMessage("c1", "scale down a 3 -> 2 (#7)", (Change("a", 3, 2),))
    (entry,) = build_entries(record("s1", "", build_message(squash), NOW, "bot", committer="bob"))
    assert (entry.merged_by, entry.proposal) == ("bob", "#7")
    # a scale-up rebased by someone is not a "merge" of a proposal
    up = CapacityMessage("c1", "scale up a 1 -> 2", (Change("a", 1, 2),))
    (entry,) = build_entries(record("s1", "", build_message(up), NOW, "bot", committer="bob"))
    assert entry.merged_by == ""


def test_removal_without_a_change_trailer_still_shows() -> None:
    odd = CapacityMessage("c1", "remove", removals=(InstanceRemoval("a", "i-0123456789abcdef0"),))
    (entry,) = build_entries(record("s1", "", build_message(odd), NOW))
    assert (entry.before, entry.after, entry.direction, entry.instances) == (
        None,
        None,
        "down",
        ("i-0123456789abcdef0",),
    )


def test_filters_in_the_builder() -> None:
    text = record("s2", "s1", build_message(UP), NOW) + record(
        "s1", "", build_message(DOWN), NOW - timedelta(days=2)
    )
    assert [e.group for e in build_entries(text, node_group="a")] == ["a", "a"]
    assert [e.commit for e in build_entries(text, since=NOW - timedelta(days=1))] == ["s2", "s2"]
    assert build_entries(text, cluster="other") == []


def test_parse_log_records() -> None:
    (rec,) = parse_log(record("s1", "p1 p2", "subject line\n\nbody\n", NOW, "alice"))
    assert (rec.sha, rec.parents, rec.author, rec.subject, rec.note) == (
        "s1",
        ("p1", "p2"),
        "alice",
        "subject line",
        "",
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("24h", NOW - timedelta(hours=24)),
        ("7d", NOW - timedelta(days=7)),
        ("2w", NOW - timedelta(weeks=2)),
        ("1d12h", NOW - timedelta(hours=36)),
        ("90m", NOW - timedelta(minutes=90)),
        ("2024-05-30", datetime(2024, 5, 30, tzinfo=UTC)),
        ("2024-05-30T10:00:00Z", datetime(2024, 5, 30, 10, tzinfo=UTC)),
        ("2024-05-30T10:00:00+02:00", datetime(2024, 5, 30, 8, tzinfo=UTC)),
        ("2024-05-30T10:00:00", datetime(2024, 5, 30, 10, tzinfo=UTC)),
    ],
)
def test_parse_since(text: str, expected: datetime) -> None:
    assert parse_since(text, NOW) == expected


@pytest.mark.parametrize("text", ["yesterday", "10", "1x", "-1d", ""])
def test_parse_since_rejects(text: str) -> None:
    with pytest.raises(UserError, match="--since"):
        parse_since(text, NOW)


ENTRIES = [
    Entry(
        "change",
        "c1",
        "a",
        NOW,
        3,
        2,
        "down",
        "idle, 40%",
        "f" * 40,
        "bot",
        "bot@x",
        "",
        ("i-1", "i-2"),
        "#3",
        "alice",
    ),
    Entry(
        "change",
        "c1",
        "b",
        NOW - timedelta(hours=1),
        1,
        4,
        "up",
        "pending",
        "e" * 40,
        "bot",
        source="external",
    ),
]


def test_render_json_csv_yaml_table() -> None:
    rows = json.loads(render_history(ENTRIES, "json"))
    assert rows[0] == {
        "time": "2024-06-01T12:00:00Z",
        "kind": "change",
        "cluster": "c1",
        "group": "a",
        "from": 3,
        "to": 2,
        "direction": "down",
        "reason": "idle, 40%",
        "source": "",
        "instances": ["i-1", "i-2"],
        "commit": "f" * 40,
        "author": "bot",
        "author_email": "bot@x",
        "proposal": "#3",
        "merged_by": "alice",
    }
    parsed = list(csv.DictReader(io.StringIO(render_history(ENTRIES, "csv"))))
    assert (
        parsed[0]["reason"] == "idle, 40%"
        and parsed[0]["instances"] == "i-1,i-2"
        and parsed[1]["from"] == "1"
    )
    assert "group: a" in render_history(ENTRIES, "yaml")
    table = render_history(ENTRIES, "table").splitlines()
    assert table[0].split()[:3] == ["TIME", "GROUP", "FROM"]
    assert "3 -> 2" in table[1] and "alice" in table[1] and "f" * 12 in table[1] and "f" * 13 not in table[1]
    assert "up (external)" in table[2]
    assert render_history([], "table") == "no capacity commits yet (or none match the filters)\n"
    with pytest.raises(UserError, match="--output"):
        render_history(ENTRIES, "xml")
