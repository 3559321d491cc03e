"""`history` over real repositories: generated timelines, real merges, filters, empty repos."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.domain.errors import OperationError
from reconciler.gitops.history import Entry, LogRecord, history_command, read_log
from reconciler.gitops.trailers import CapacityMessage, Change, InstanceRemoval, Reason, build_message
from reconciler.views.history import render_history
from tests.support.git import ALICE, BOT, CLUSTER, capacity_history, git, init_bare


def test_history_over_1000_generated_commits_equals_what_was_written(bare_remote: Path) -> None:
    expected = capacity_history(bare_remote, 1000, seed=7)
    started = time.perf_counter()
    got = history_command(bare_remote, CLUSTER, ref="main")
    elapsed = time.perf_counter() - started
    assert len(expected) > 900
    assert got == expected
    assert {e.direction for e in got} == {"up", "down", "none"} or {e.direction for e in got} >= {
        "up",
        "down",
    }
    assert any(e.merged_by and e.proposal.startswith("#") for e in got)
    assert any(e.source == "external" for e in got)
    assert elapsed < 2.0


def test_filters(bare_remote: Path) -> None:
    expected = capacity_history(bare_remote, 300, seed=3)
    only_a = history_command(bare_remote, CLUSTER, node_group="asg-a", ref="main")
    assert only_a == [e for e in expected if e.group == "asg-a"] and only_a
    middle = expected[len(expected) // 2].time
    now = middle + timedelta(hours=1)
    recent = history_command(bare_remote, CLUSTER, since="1h", ref="main", now=now)
    assert recent == [e for e in expected if e.time >= middle] and recent
    iso = history_command(bare_remote, CLUSTER, since=middle.isoformat(), ref="main")
    assert iso == recent
    assert history_command(bare_remote, "other-cluster", ref="main")
    assert history_command(bare_remote, "no-such-cluster", ref="main") == []
    everyone = history_command(bare_remote, None, ref="main")
    assert len(everyone) > len(expected)


def test_a_real_proposal_merge(seeded_remote: Path) -> None:
    """The proposal commit lands with the merge: its time, who merged, which proposal."""
    t0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
    up = CapacityMessage(
        CLUSTER, "scale up asg-a 2 -> 4", (Change("asg-a", 2, 4),), (Reason("asg-a", "pending"),)
    )
    up_sha = BOT.commit(seeded_remote, "main", {"capacity/x": "1\n"}, build_message(up), when=t0)
    down = CapacityMessage(
        CLUSTER,
        "scale down asg-b 3 -> 2",
        (Change("asg-b", 3, 2),),
        (Reason("asg-b", "idle"),),
        removals=(InstanceRemoval("asg-b", "i-0123456789abcdef0"),),
    )
    branch = f"asg-reconciler/{CLUSTER}/scale-down"
    proposal = BOT.commit(
        seeded_remote,
        branch,
        {"capacity/x": "2\n"},
        build_message(down),
        parents=[up_sha],
        when=t0 + timedelta(minutes=1),
    )
    ALICE.merge(seeded_remote, "main", branch, f"Merge branch '{branch}'\n", when=t0 + timedelta(hours=2))
    got = history_command(seeded_remote, CLUSTER, ref="main")
    assert got == [
        Entry(
            kind="change",
            cluster=CLUSTER,
            group="asg-b",
            time=t0 + timedelta(hours=2),
            before=3,
            after=2,
            direction="down",
            reason="idle",
            commit=proposal,
            author=BOT.name,
            author_email=BOT.email,
            instances=("i-0123456789abcdef0",),
            proposal=branch,
            merged_by=ALICE.name,
            opened=t0 + timedelta(minutes=1),  # the proposal's own commit: it waited 1h59m
        ),
        Entry(
            kind="change",
            cluster=CLUSTER,
            group="asg-a",
            time=t0,
            before=2,
            after=4,
            direction="up",
            reason="pending",
            commit=up_sha,
            author=BOT.name,
            author_email=BOT.email,
        ),
    ]
    table = render_history(got, "table")
    assert "asg-b" in table and "3 -> 2" in table and ALICE.name in table and proposal[:12] in table


def test_merge_commit_trailers_count_once(seeded_remote: Path) -> None:
    """A merge commit repeating the proposal's trailers (e.g. `approve`) does not double the entry."""
    down = CapacityMessage(CLUSTER, "scale down asg-b 3 -> 2", (Change("asg-b", 3, 2),))
    branch = "p"
    BOT.commit(
        seeded_remote,
        branch,
        {"f": "1\n"},
        build_message(down),
        parents=[git("rev-parse", "main", cwd=seeded_remote).strip()],
    )
    ALICE.merge(seeded_remote, "main", branch, build_message(replace(down, summary="approve")))
    (entry,) = history_command(seeded_remote, CLUSTER, ref="main")
    assert entry.merged_by == ALICE.name


def test_notes_join_the_timeline(seeded_remote: Path) -> None:
    up = CapacityMessage(CLUSTER, "scale up asg-a 2 -> 3", (Change("asg-a", 2, 3),))
    sha = BOT.commit(
        seeded_remote, "main", {"f": "1\n"}, build_message(up), when=datetime(2024, 5, 1, tzinfo=UTC)
    )
    git(
        "notes",
        "--ref=asg-reconciler",
        "add",
        "-m",
        "applied asg-a 3 at 2024-05-01T00:05:00Z",
        sha,
        cwd=seeded_remote,
    )

    def apply_records(record: LogRecord) -> list[Entry]:
        assert record.sha == sha and record.note.startswith("applied")
        return [
            Entry(
                "apply",
                CLUSTER,
                "asg-a",
                datetime(2024, 5, 1, 0, 5, tzinfo=UTC),
                2,
                3,
                "up",
                "",
                sha,
                "apply",
            )
        ]

    got = history_command(seeded_remote, CLUSTER, ref="main", note_entries=apply_records)
    assert [(e.kind, e.time.minute) for e in got] == [("apply", 5), ("change", 0)]


def test_notes_ref_may_not_exist_yet(seeded_remote: Path) -> None:
    up = CapacityMessage(CLUSTER, "scale up asg-a 2 -> 3", (Change("asg-a", 2, 3),))
    BOT.commit(seeded_remote, "main", {"f": "1\n"}, build_message(up))
    got = history_command(seeded_remote, CLUSTER, ref="main", note_entries=lambda record: [])
    assert [e.group for e in got] == ["asg-a"]


def test_empty_and_missing(tmp_path: Path) -> None:
    empty = init_bare(tmp_path / "empty.git")
    assert history_command(empty, CLUSTER) == []
    assert read_log(empty, "refs/heads/nope") == ""
    with pytest.raises(OperationError, match="not a directory"):
        history_command(tmp_path / "missing", CLUSTER)
    (tmp_path / "plain").mkdir()
    with pytest.raises(OperationError, match="not a git repository"):
        history_command(tmp_path / "plain", CLUSTER)
