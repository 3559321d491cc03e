"""Many clusters, one capacity repo: plan processes racing to push to one `git daemon` remote.

The processes and the check are benchmarks/fleet.py's, smaller; how fast it goes is the benchmark's
business, what lands on main is this test's.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tenacity import RetryCallState, Retrying

from benchmarks.fleet import check_remote, cluster_name, run_fleet, scale_up, seed_remote, serve
from reconciler.domain.errors import OperationError
from reconciler.gitops.repo import Identity, Update, WorkingCopy, _full_jitter
from tests.support.git import ALICE, BOT, MANIFEST_PATH, git

# Real processes: one worker, in turn, like the other tests that start them.
pytestmark = pytest.mark.xdist_group("timing")

IDENTITY = Identity(BOT.name, BOT.email)


def test_racing_plan_processes_land_every_commit_once_on_a_linear_main(tmp_path: Path) -> None:
    clusters = [cluster_name(n) for n in range(1, 8)]
    root = tmp_path / "daemon"
    repo = root / "capacity.git"
    seed_remote(repo, clusters, history=50)
    seeded = git("rev-parse", "main", cwd=repo).strip()
    with serve(root) as base:
        results, _ = run_fleet(f"{base}/capacity.git", tmp_path / "work", clusters, rounds=3)
    assert [r.error for r in results if r.sha is None] == []
    # every intended commit on main once, each the child of the one before, touching only its own
    # manifest, and every manifest at its final value
    assert check_remote(repo, seeded, clusters, 3, results) == []
    # they did race: seven processes released together, each planned on the main it fetched first
    assert sum(r.attempts - 1 for r in results) > 0


def test_the_check_sees_a_lost_a_duplicated_and_a_merged_commit(tmp_path: Path) -> None:
    """The benchmark's oracle, on histories that break each rule."""
    clusters = ["c01", "c02"]
    repo = tmp_path / "capacity.git"
    seed_remote(repo, clusters, history=4)
    base = git("rev-parse", "main", cwd=repo).strip()
    work = tmp_path / "work"
    copy = WorkingCopy(str(repo), work, IDENTITY, token_env="")
    copy.sync()
    first = scale_up(copy, "c01", 1)
    assert check_remote(repo, base, ["c01"], 1, [first]) == []
    lost = check_remote(repo, base, clusters, 1, [first])
    assert "c02/1 is on main 0 times, not once" in lost
    # the same change committed twice (a retry that did not see its own commit)
    again = copy.commit(copy.head("main"), {"x": "1\n"}, git("log", "-1", "--format=%B", "main", cwd=repo))
    assert again is not None
    copy.push(again, "main")
    assert "c01/1 is on main 2 times, not once" in check_remote(repo, base, ["c01"], 1, [first])
    # a merge instead of a rebase
    git("update-ref", "refs/heads/main", first.sha or "", cwd=repo)
    side = ALICE.commit(repo, "side", {"y": "1\n"}, "side", parents=[base])
    ALICE.merge(repo, "main", "side", "merge")
    problems = check_remote(repo, base, ["c01"], 1, [first])
    assert any("has parents" in p for p in problems), problems
    assert any(side[:12] in p for p in problems), problems


def test_a_retry_fetches_only_its_branch(bare_remote: Path, tmp_path: Path) -> None:
    ours = WorkingCopy(str(bare_remote), tmp_path / "ours", IDENTITY, token_env="")
    ALICE.commit(bare_remote, "main", {"m": "1\n"}, "main")
    ALICE.commit(bare_remote, "other", {"o": "1\n"}, "other")
    ours.sync()
    other_before = ours.head("other")
    ALICE.commit(bare_remote, "main", {"m": "2\n"}, "main moves")
    ALICE.commit(bare_remote, "other", {"o": "2\n"}, "other moves")
    seen: list[str | None] = []

    def change(text: str | None) -> Update:
        seen.append(text)
        return Update("3\n", "ours")

    sha = ours.update("main", "m", change, wait_initial=0.01, wait_max=0.01)
    assert seen == ["1\n", "2\n"]  # the stale main, then the fetched one
    assert sha is not None and git("rev-parse", "main", cwd=bare_remote).strip() == sha
    assert ours.head("other") == other_before  # not fetched: only main was needed
    git("update-ref", "-d", "refs/heads/other", cwd=bare_remote)
    assert ours.fetch_branch("other") is None and ours.head("other") is None  # gone: dropped


def test_retries_stop_at_the_git_timeout(seeded_remote: Path, tmp_path: Path) -> None:
    """However many attempts are allowed, a writer that keeps losing gives up within git.timeout."""
    ours = WorkingCopy(str(seeded_remote), tmp_path / "ours", IDENTITY, token_env="", timeout=1.0)
    ours.sync()
    counter = iter(range(10_000))

    def always_racing(text: str | None) -> Update:
        ALICE.commit(seeded_remote, "main", {"race": f"{next(counter)}\n"}, "race")  # main moves every time
        return Update((text or "") + "# more\n", "ours")

    started = time.monotonic()
    with pytest.raises(OperationError, match=r"was rejected \d+ times in \d+s: other writers") as info:
        ours.update("main", MANIFEST_PATH, always_racing, attempts=10_000, wait_max=0.05)
    assert time.monotonic() - started < 5
    assert "\n" not in str(info.value)


def test_the_wait_is_counted_in_attempts() -> None:
    """Full jitter whose unit is the time an attempt took (at least the initial wait), capped."""
    wait = _full_jitter(0.05, 3.0)

    def state(attempts: int, took: float) -> RetryCallState:
        retry = RetryCallState(Retrying(), None, (), {})
        retry.attempt_number, retry.idle_for = attempts, 0.0
        retry.outcome_timestamp = retry.start_time + took
        return retry

    fast = [wait(state(1, 0.001)) for _ in range(200)]
    assert all(0 <= w <= 0.05 for w in fast) and max(fast) > 0.025  # the initial wait: quick remote
    slow = [wait(state(3, 3 * 0.4)) for _ in range(200)]
    assert all(0 <= w <= 1.6 for w in slow) and max(slow) > 0.8  # 0.4 s per attempt, third rejection
    capped = [wait(state(10, 10 * 0.4)) for _ in range(200)]
    assert all(0 <= w <= 3.0 for w in capped) and max(capped) > 1.5
