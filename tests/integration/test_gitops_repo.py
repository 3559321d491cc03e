"""The working copy against real bare repositories: empty remotes, races, leases, failures, tokens."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from reconciler.config.settings import GitConfig
from reconciler.domain.errors import OperationError, UserError
from reconciler.gitops.repo import Identity, PushRejected, Update, WorkingCopy, redact
from tests.support.git import (
    ALICE,
    BOB,
    BOT,
    MANIFEST_PATH,
    SEED_MANIFEST,
    GitServer,
    Person,
    git,
    init_bare,
    show,
)

IDENTITY = Identity(BOT.name, BOT.email)


def copy_of(remote: Path | str, work: Path, **kwargs: object) -> WorkingCopy:
    copy = WorkingCopy(str(remote), work, IDENTITY, **kwargs)  # type: ignore[arg-type]
    copy.sync()
    return copy


def test_empty_remote_gets_its_first_commit(bare_remote: Path, tmp_path: Path) -> None:
    copy = copy_of(bare_remote, tmp_path / "work")
    assert copy.head("main") is None
    seen: list[str | None] = []

    def change(current: str | None) -> Update:
        seen.append(current)
        return Update("cluster: c\nnodeGroups: {}\n", "capacity(c): start\n")

    sha = copy.update("main", "capacity/c.yaml", change)
    assert seen == [None]
    assert sha is not None and copy.head("main") == sha
    assert git("rev-parse", "refs/heads/main", cwd=bare_remote).strip() == sha
    assert show(bare_remote, "main:capacity/c.yaml") == "cluster: c\nnodeGroups: {}\n"
    author = git("log", "-1", "--format=%an <%ae>|%cn <%ce>|%B", "main", cwd=bare_remote)
    assert author == f"{BOT.name} <{BOT.email}>|{BOT.name} <{BOT.email}>|capacity(c): start\n\n"


def test_update_reads_commits_and_skips_no_change(seeded_remote: Path, tmp_path: Path) -> None:
    copy = copy_of(f"file://{seeded_remote}", tmp_path / "work")
    assert copy.read_file(MANIFEST_PATH, "main") == SEED_MANIFEST
    assert copy.read_file("missing.yaml", "main") is None
    assert copy.read_file(MANIFEST_PATH, "no-such-branch") is None
    before = copy.head("main")
    assert copy.update("main", MANIFEST_PATH, lambda text: None) is None
    assert copy.update("main", MANIFEST_PATH, lambda text: Update(text or "", "same text")) is None
    assert copy.head("main") == before
    sha = copy.update(
        "main", MANIFEST_PATH, lambda text: Update((text or "").replace("desired: 1", "desired: 2"), "m")
    )
    assert sha is not None
    assert "desired: 2" in show(seeded_remote, f"{sha}:{MANIFEST_PATH}")
    assert copy.read_file(MANIFEST_PATH, sha) == show(seeded_remote, f"{sha}:{MANIFEST_PATH}")


def test_rejected_push_fetches_and_asks_the_caller_again(seeded_remote: Path, tmp_path: Path) -> None:
    ours = copy_of(seeded_remote, tmp_path / "ours")
    theirs = copy_of(seeded_remote, tmp_path / "theirs")
    # the other planner lands first, after we fetched
    theirs.update(
        "main", MANIFEST_PATH, lambda t: Update((t or "").replace("desired: 1", "desired: 3"), "theirs")
    )
    calls: list[str] = []

    def replan(text: str | None) -> Update:
        calls.append(text or "")
        return Update((text or "").replace("desired: 2 ", "desired: 4 "), "ours")

    sha = ours.update("main", MANIFEST_PATH, replan, wait_initial=0.01, wait_max=0.02)
    assert len(calls) == 2 and "desired: 1\n" in calls[0] and "desired: 3\n" in calls[1]
    final = show(seeded_remote, f"main:{MANIFEST_PATH}")
    assert "desired: 4 " in final and "desired: 3\n" in final  # both changes landed, nothing lost
    parents = git("log", "-1", "--format=%P", "main", cwd=seeded_remote).split()
    assert sha is not None and parents == [theirs.head("main")]


def test_plain_push_reports_rejection(seeded_remote: Path, tmp_path: Path) -> None:
    ours = copy_of(seeded_remote, tmp_path / "ours")
    parent = ours.head("main")
    ALICE.commit(seeded_remote, "main", {"README": "hi\n"}, "person moves main")
    sha = ours.commit(parent, {"x": "1\n"}, "m")
    assert sha is not None
    with pytest.raises(PushRejected):
        ours.push(sha, "main")


def test_retries_give_up_with_one_line(seeded_remote: Path, tmp_path: Path) -> None:
    ours = copy_of(seeded_remote, tmp_path / "ours")
    counter = iter(range(100))

    def always_racing(text: str | None) -> Update:
        ALICE.commit(seeded_remote, "main", {"race": f"{next(counter)}\n"}, "race")  # main moves every time
        return Update((text or "") + "# more\n", "ours")

    with pytest.raises(OperationError, match=r"rejected 3 times") as info:
        ours.update("main", MANIFEST_PATH, always_racing, attempts=3, wait_initial=0.01, wait_max=0.01)
    assert "\n" not in str(info.value)


def test_force_with_lease_and_human_commits(seeded_remote: Path, tmp_path: Path) -> None:
    copy = copy_of(seeded_remote, tmp_path / "work")
    main = copy.head("main")
    branch = "asg-reconciler/test-cluster/scale-down"
    first = copy.commit(main, {MANIFEST_PATH: SEED_MANIFEST + "# p1\n"}, "proposal 1")
    assert first is not None
    copy.force_push(first, branch, expected=None)
    second = copy.commit(main, {MANIFEST_PATH: SEED_MANIFEST + "# p2\n"}, "proposal 2")
    assert second is not None
    with pytest.raises(PushRejected):  # it exists now: "must not exist" fails
        copy.force_push(second, branch, expected=None)
    copy.force_push(second, branch, expected=first)  # rewrite while we own it
    assert copy.commits_not_by(branch, "main", BOT.email) == []
    # a person pushes to the proposal; our stale lease must not overwrite it
    human = ALICE.commit(seeded_remote, branch, {"note": "mine\n"}, "I adjusted this")
    third = copy.commit(main, {MANIFEST_PATH: SEED_MANIFEST + "# p3\n"}, "proposal 3")
    assert third is not None
    with pytest.raises(PushRejected):
        copy.force_push(third, branch, expected=second)
    assert git("rev-parse", f"refs/heads/{branch}", cwd=seeded_remote).strip() == human
    copy.sync()
    (found,) = copy.commits_not_by(branch, "main", BOT.email)
    assert (found.sha, found.author_email, found.subject) == (human, ALICE.email, "I adjusted this")
    copy.delete_branch(branch, expected=human)
    assert copy.head(branch) is None
    assert "asg-reconciler" not in git("branch", "--list", cwd=seeded_remote)


def test_unreachable_remote_is_one_line_and_the_next_run_works(tmp_path: Path) -> None:
    work = tmp_path / "work"
    copy = WorkingCopy(str(tmp_path / "nowhere.git"), work, IDENTITY)
    with pytest.raises(OperationError) as info:
        copy.sync()
    message = str(info.value)
    assert "\n" not in message and message.startswith("git fetch ") and "nowhere.git" in message
    # the remote appears; a new run in the same work dir just works
    remote = init_bare(tmp_path / "nowhere.git")
    ALICE.commit(remote, "main", {"a": "1\n"}, "init")
    again = WorkingCopy(str(remote), work, IDENTITY)
    again.sync()
    assert again.read_file("a", "main") == "1\n"


def test_closed_port_is_an_operation_error(tmp_path: Path) -> None:
    from tests.support.git import free_port

    copy = WorkingCopy(f"git://127.0.0.1:{free_port()}/x.git", tmp_path / "work", IDENTITY, timeout=20)
    with pytest.raises(OperationError, match=r"^git fetch git://127\.0\.0\.1:\d+/x\.git: "):
        copy.sync()


def test_leftovers_of_a_killed_run_are_cleared(seeded_remote: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    copy_of(seeded_remote, work)
    (work / "packed-refs.lock").write_text("")
    (work / "refs" / "remotes" / "origin" / "main.lock").write_text("")
    (work / "index-leftover").mkdir()
    ALICE.commit(seeded_remote, "main", {"b": "2\n"}, "moved")
    fresh = copy_of(seeded_remote, work)
    assert fresh.read_file("b", "main") == "2\n"
    assert not (work / "packed-refs.lock").exists() and not (work / "index-leftover").exists()


def test_a_broken_work_dir_of_ours_is_recreated_and_a_foreign_one_refused(
    seeded_remote: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    copy_of(seeded_remote, work)
    (work / "HEAD").unlink()  # no longer a repository
    (work / "objects").rename(work / "objects-gone")
    assert copy_of(seeded_remote, work).read_file(MANIFEST_PATH, "main") == SEED_MANIFEST
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("do not delete")
    with pytest.raises(UserError, match="not made by asg-reconciler"):
        WorkingCopy(str(seeded_remote), foreign, IDENTITY).sync()
    assert (foreign / "precious.txt").exists()


def test_git_daemon_protocol(git_daemon: GitServer, tmp_path: Path) -> None:
    init_bare(git_daemon.root / "cap.git")
    copy = copy_of(git_daemon.url("cap.git"), tmp_path / "work")
    sha = copy.update("main", "f.yaml", lambda t: Update("a: 1\n", "first"))
    assert sha is not None
    assert git("rev-parse", "main", cwd=git_daemon.root / "cap.git").strip() == sha


def test_https_token_from_the_environment_never_lands_on_disk(git_http: GitServer, tmp_path: Path) -> None:
    init_bare(git_http.root / "cap.git")
    subprocess.run(["git", "config", "http.receivepack", "true"], cwd=git_http.root / "cap.git", check=True)
    work = tmp_path / "work"
    config = GitConfig(url=git_http.url("cap.git"), token_env="CAP_TOKEN")
    copy = WorkingCopy.from_config(config, work, environ={**os.environ, "CAP_TOKEN": git_http.token})
    copy.sync()
    assert copy.update("main", "f.yaml", lambda t: Update("a: 1\n", "first")) is not None
    on_disk = b"".join(p.read_bytes() for p in work.rglob("*") if p.is_file())
    assert git_http.token.encode() not in on_disk
    assert git_http.token not in (work / "config").read_text()

    wrong = WorkingCopy.from_config(
        config, tmp_path / "w2", environ={**os.environ, "CAP_TOKEN": "wrong-token"}
    )
    with pytest.raises(OperationError) as info:
        wrong.sync()
    assert "wrong-token" not in str(info.value) and "\n" not in str(info.value)
    missing = WorkingCopy.from_config(
        config, tmp_path / "w3", environ={k: v for k, v in os.environ.items() if k != "CAP_TOKEN"}
    )
    with pytest.raises(OperationError, match="git fetch http://127.0.0.1"):
        missing.sync()


def test_credentials_in_urls_are_redacted(tmp_path: Path) -> None:
    assert (
        redact("fatal: https://user:pa55@host/x.git failed", ("tok",))
        == "fatal: https://***@host/x.git failed"
    )
    assert redact("tok in message", ("tok",)) == "*** in message"
    copy = WorkingCopy("https://user:pa55@127.0.0.1:1/x.git", tmp_path / "w", IDENTITY, timeout=20)
    with pytest.raises(OperationError) as info:
        copy.sync()
    assert "pa55" not in str(info.value)
    with pytest.raises(UserError, match="git.url: not set"):
        WorkingCopy.from_config(GitConfig(), tmp_path)


def _commit_as(repo: Path, branch: str, author: Person, committer: Person, message: str) -> str:
    """A commit on `branch` (same tree) whose author and committer differ, as `git commit --author`,
    a cherry-pick or a rebase makes."""
    tip = git("rev-parse", f"refs/heads/{branch}", cwd=repo).strip()
    env = {**author.env(), "GIT_COMMITTER_NAME": committer.name, "GIT_COMMITTER_EMAIL": committer.email}
    sha = git("commit-tree", f"{tip}^{{tree}}", "-p", tip, "-m", message, cwd=repo, env=env).strip()
    git("update-ref", f"refs/heads/{branch}", sha, cwd=repo)
    return sha


def test_a_persons_work_counts_whoever_committed_it(seeded_remote: Path, tmp_path: Path) -> None:
    """Rule 3: a commit Alice authored is hers even when the bot's email committed it (and the other
    way round), so it locks the proposal."""
    copy = copy_of(seeded_remote, tmp_path / "work")
    branch = "asg-reconciler/test-cluster/scale-down"
    ours = copy.commit(copy.head("main"), {MANIFEST_PATH: SEED_MANIFEST + "# p1\n"}, "proposal")
    assert ours is not None
    copy.force_push(ours, branch, expected=None)
    alices = _commit_as(seeded_remote, branch, ALICE, BOT, "Alice's change, committed by the bot")
    copy.sync()
    (found,) = copy.commits_not_by(branch, "main", BOT.email)
    assert (found.sha, found.author_email, found.committer_email) == (alices, ALICE.email, BOT.email)
    amended = _commit_as(seeded_remote, branch, BOT, BOB, "the bot's change, committed by Bob")
    copy.sync()
    assert [c.sha for c in copy.commits_not_by(branch, "main", BOT.email)] == [amended, alices]


def test_remote_head_asks_the_remote_without_fetching(git_daemon: GitServer, tmp_path: Path) -> None:
    """The run loop's cheap "did main move?": one ls-remote over the git protocol."""
    remote = init_bare(git_daemon.root / "cap.git")
    copy = copy_of(git_daemon.url("cap.git"), tmp_path / "work")
    assert copy.remote_head("main") is None  # no such branch yet
    first = copy.update("main", "capacity/c.yaml", lambda _: Update("cluster: c\n", "capacity(c): one\n"))
    assert copy.remote_head("main") == first
    other = copy_of(git_daemon.url("cap.git"), tmp_path / "other")
    second = other.update(
        "main", "capacity/c.yaml", lambda _: Update("cluster: c\n#\n", "capacity(c): two\n")
    )
    assert copy.remote_head("main") == second == git("rev-parse", "main", cwd=remote).strip()
    assert copy.head("main") == first  # nothing was fetched
    assert copy.remote_head("mainline") is None  # a prefix of another branch is not it


def test_remote_head_of_a_remote_gone_is_one_line(tmp_path: Path) -> None:
    remote = init_bare(tmp_path / "gone.git")
    copy = copy_of(remote, tmp_path / "work")
    import shutil

    shutil.rmtree(remote)
    with pytest.raises(OperationError, match=r"^git ls-remote .*gone\.git"):
        copy.remote_head("main")


def test_a_branch_named_like_a_commit_never_stands_in_for_it(bare_remote: Path, tmp_path: Path) -> None:
    """Found by review: a pushed branch `<sha>` swapped the manifest apply read for that commit."""
    copy = copy_of(bare_remote, tmp_path / "work")
    signed = copy.update("main", "capacity/c.yaml", lambda _: Update("desired: 2\n", "capacity(c): two\n"))
    assert signed is not None
    other = copy_of(bare_remote, tmp_path / "other")
    forged = other.update("decoy", "capacity/c.yaml", lambda _: Update("desired: 1\n", "remove one\n"))
    assert forged is not None
    git("push", "-q", str(bare_remote), f"{forged}:refs/heads/{signed}", cwd=tmp_path / "other")
    copy.sync()
    assert copy.read_file("capacity/c.yaml", signed) == "desired: 2\n"
    assert copy.first_parent(signed) == [signed]


def test_notes_created_while_they_are_fetched_are_fetched_not_an_error(
    bare_remote: Path, tmp_path: Path
) -> None:
    """Seen in a `run` test: apply pushed the first notes between plan's failed fetch (no such ref
    yet) and its look with ls-remote, and the plan cycle failed."""
    copy = copy_of(bare_remote, tmp_path / "work")
    sha = copy.update("main", "capacity/c.yaml", lambda _: Update("desired: 2\n", "capacity(c): two\n"))
    assert sha is not None
    real_git = copy._git
    created: list[bool] = []

    def racing(*args: str, repo: object = None) -> str:
        if args[0] == "ls-remote" and not created:  # the other writer lands right now
            created.append(True)
            git("notes", "--ref=refs/notes/race", "add", "-m", "hello", sha, cwd=bare_remote)
        return real_git(*args, repo=repo)  # type: ignore[arg-type]

    copy._git = racing  # type: ignore[method-assign]
    assert copy.fetch_notes("refs/notes/race") is not None
    assert created
