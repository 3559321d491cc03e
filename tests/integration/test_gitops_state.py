"""The state branch is committed only when the state changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from reconciler.gitops.repo import Identity, WorkingCopy
from reconciler.gitops.state import EMPTY, Backoff, State, load_state, save_state, state_branch
from tests.support.git import BOT, git

T = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)


def commits_on(remote: Path, branch: str) -> int:
    return int(git("rev-list", "--count", branch, cwd=remote).strip())


def test_state_is_written_only_when_it_changes(seeded_remote: Path, tmp_path: Path) -> None:
    copy = WorkingCopy(str(seeded_remote), tmp_path / "work", Identity(BOT.name, BOT.email))
    copy.sync()
    assert load_state(copy, "c") == EMPTY
    state = State(since={"ip-1": T}, backoffs={"asg-a": Backoff(T + timedelta(minutes=5), 1)})
    first = save_state(copy, "c", state)
    assert first is not None and commits_on(seeded_remote, state_branch("c")) == 1
    assert save_state(copy, "c", state) is None  # unchanged: no commit
    assert (
        save_state(copy, "c", State(since={"ip-1": T.replace(microsecond=5)}, backoffs=state.backoffs))
        is None
    )
    assert commits_on(seeded_remote, state_branch("c")) == 1
    # a fresh run (new work dir) reads it back and changes it once
    other = WorkingCopy(str(seeded_remote), tmp_path / "other", Identity(BOT.name, BOT.email))
    other.sync()
    assert load_state(other, "c") == state
    assert save_state(other, "c", State(since={}, backoffs=state.backoffs)) is not None
    assert commits_on(seeded_remote, state_branch("c")) == 2
    # main is untouched by state writes
    assert commits_on(seeded_remote, "main") == 1
    # the first copy is behind now: its write is rejected, refetched, and lands on top
    newer = State(since={"ip-9": T}, backoffs={})
    assert save_state(copy, "c", newer) is not None
    assert commits_on(seeded_remote, state_branch("c")) == 3
    other.sync()
    assert load_state(other, "c") == newer
