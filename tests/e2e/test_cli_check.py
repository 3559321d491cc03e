"""`check --ref REF [--comment PR]` end to end: moto, the fake Kubernetes API, a bare repository,
real SSH signatures, and the fake GitHub API for the one comment kept up to date."""

from __future__ import annotations

import pytest

from reconciler.runtime.check_comment import comment_marker
from tests.support.apply_world import MAIN_PATH, PROPOSAL, World, manifest_on_main
from tests.support.check_world import remote_refs, signed_branch
from tests.support.git import BOB, git, needs_ssh_keygen
from tests.support.github_api import FakeGitHub

pytestmark = needs_ssh_keygen

TOKEN = "ghp_check-token-never-printed"
MARKER = comment_marker("prod")  # the world's cluster


def test_an_unsigned_proposal_is_refused_by_the_gate_and_named(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.cli(capsys, "plan").code == 0
    before = remote_refs(world)
    result = world.cli(capsys, "check", "--ref", PROPOSAL)
    assert result.code == 3, result.out + result.err
    assert result.out.startswith(MARKER)
    assert "approval.mode: signed" in result.out
    assert f"`{world.b_id}`" in result.out and "**not approved**" in result.out
    assert "is not signed" in result.out
    assert f"{world.b_id}: not approved" in result.out  # the dry run's own gate says the same
    assert "fast-forwarded" in result.out
    assert remote_refs(world) == before  # nothing pushed: no landing, no private ref
    assert world.desired() == 2 and world.b_id in world.in_service()


def test_a_signed_change_passes_and_the_dry_run_lists_the_drain(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.cli(capsys, "plan").code == 0
    proposed = git("show", f"{PROPOSAL}:{MAIN_PATH}", cwd=world.remote)
    sha = signed_branch(world, "alice/scale-down", proposed, "scale down general, signed")
    before = remote_refs(world)

    result = world.cli(capsys, "check", "--ref", "alice/scale-down")
    assert result.code == 0, result.out + result.err
    assert f"{sha[:12]}` | approved: {sha[:12]} is signed by alice@example.com" in result.out
    assert f"would drain node-b and terminate {world.b_id}" in result.out
    assert remote_refs(world) == before
    assert world.desired() == 2 and world.kube.get_object("Pod", "shop", "web-b") is not None

    again = world.cli(capsys, "check", "--ref", sha)  # a commit id (a pull request's head) works too
    assert again.code == 0, again.out + again.err


def test_a_branch_that_needs_a_merge_is_judged_on_that_merge(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Off an older main, REF lands by a merge commit; apply would judge that merge, unsigned."""
    assert world.cli(capsys, "plan").code == 0
    proposed = git("show", f"{PROPOSAL}:{MAIN_PATH}", cwd=world.remote)
    signed_branch(world, "alice/scale-down", proposed, "scale down general, signed")
    BOB.commit(world.remote, "main", {"README.md": "capacity of prod\n"}, "docs: a readme")
    result = world.cli(capsys, "check", "--ref", "alice/scale-down")
    assert result.code == 3, result.out + result.err
    assert "the merge of `alice/scale-down`" in result.out and "**not approved**" in result.out
    assert "refs/asg-reconciler-check" not in result.out  # the private landing ref is never shown
    assert "refs/asg-reconciler-check" not in remote_refs(world)


def test_a_manifest_broken_at_ref_is_validates_error_and_exit_2(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.cli(capsys, "plan").code == 0
    broken = manifest_on_main(world).replace("desired: 2", "desired: two")
    BOB.commit(
        world.remote,
        "bob/typo",
        {MAIN_PATH: broken},
        "a typo",
        parents=[git("rev-parse", "main", cwd=world.remote).strip()],
    )
    result = world.cli(capsys, "check", "--ref", "bob/typo")
    assert result.code == 2, result.out + result.err
    assert "- error: " in result.out and MAIN_PATH in result.out and "desired" in result.out
    assert "apply --dry-run" not in result.out  # not judged further


def test_an_unknown_ref_is_one_line_and_exit_2(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    assert world.cli(capsys, "plan").code == 0
    result = world.cli(capsys, "check", "--ref", "no-such-branch")
    assert result.code == 2
    assert result.err.strip().startswith("error: --ref no-such-branch: no such commit or branch")
    assert len(result.err.strip().splitlines()) == 1


def test_comment_without_a_forge_is_one_line_and_exit_2(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    result = world.cli(capsys, "check", "--ref", "main", "--comment", "7")
    assert result.code == 2
    assert len(result.err.strip().splitlines()) == 1
    assert "--comment: forge.type is none" in result.err and result.out == ""


def test_comment_is_created_once_and_updated_in_place(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeGitHub(repo="org/capacity", token=TOKEN) as github:
        monkeypatch.setenv("CAPACITY_TOKEN", TOKEN)
        forge = f"{{type: github, repo: org/capacity, tokenEnv: CAPACITY_TOKEN, baseUrl: '{github.url}'}}"
        world.config.write_text(world.config.read_text() + f"forge: {forge}\n")
        assert world.cli(capsys, "plan").code == 0
        number = github.pull(1).number  # plan opened the proposal's pull request
        github.pull(number).comments.append({"id": 900, "body": "> " + MARKER + "\nquoting the bot"})

        first = world.cli(capsys, "check", "--ref", PROPOSAL, "--comment", str(number))
        # found by review: someone pastes the marker into a comment of their own; check must not
        # edit theirs (its own old verdict would stand), nor be misled by it
        mallory = github.add_comment(number, "mallory", MARKER + "\nlooks good to me")
        assert first.code == 3, first.out + first.err
        assert f"commented on pull request #{number}" in first.err
        ours = [c for c in github.comments(number) if c.startswith(MARKER)][:1]
        assert ours == [first.out]

        # the pull request's head moves: Alice replaces the bot's commit with her signed one
        proposed = git("show", f"{PROPOSAL}:{MAIN_PATH}", cwd=world.remote)
        signed = signed_branch(world, "alice/scale-down", proposed, "scale down general, signed")
        second = world.cli(capsys, "check", "--ref", signed, "--comment", str(number))
        assert second.code == 0, second.out + second.err
        assert f"updated the comment on pull request #{number}" in second.err
        ours = [c for c in github.comments(number) if c.startswith(MARKER)]
        assert ours == [second.out, MARKER + "\nlooks good to me"] and second.out != first.out
        assert len(github.comments(number)) == 3  # ours, the quote and mallory's, nothing more
        assert mallory not in [
            int(r.path.rsplit("/", 1)[-1]) for r in github.writes() if "/comments/" in r.path
        ]

        third = world.cli(capsys, "check", "--ref", signed, "--comment", str(number))
        assert "unchanged" in third.err
        posts = [r for r in github.writes() if r.path.endswith(f"/issues/{number}/comments")]
        patches = [r for r in github.writes() if "/issues/comments/" in r.path]
        assert len(posts) == 1 and len(patches) == 1
        assert TOKEN not in first.out + first.err + second.out + second.err

        # found by review: a head that cannot be judged must not leave the last "ok" standing
        broken = world.cli(capsys, "check", "--ref", "main@{1}", "--comment", str(number))
        assert broken.code == 2 and "Traceback" not in broken.err, broken.err
        ours = [c for c in github.comments(number) if c.startswith(MARKER)]
        assert ours[0].startswith(MARKER + "\n**failed**: could not check `main@{1}`"), ours[0]


def test_untrusted_text_cannot_inject_markdown_into_the_comment() -> None:
    """Found by review: a manifest key or group name reached the comment raw (HTML, links, pings)."""
    from reconciler.domain.markdown import inline

    hostile = "@org/platform-admins<br><h1>APPROVED</h1>[run this](https://evil.example)<!--"
    for rendered in (inline(hostile),):
        assert "<" not in rendered and ">" not in rendered
        assert "](" not in rendered.replace("\\](", "")
        assert "@org" not in rendered  # the @ is followed by a zero-width joiner: no ping


def with_github(world: World, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPACITY_TOKEN", TOKEN)
    forge = f"{{type: github, repo: org/capacity, tokenEnv: CAPACITY_TOKEN, baseUrl: '{github.url}'}}"
    world.config.write_text(world.config.read_text() + f"forge: {forge}\n")


def branch_with_bytes(world: World, branch: str, data: bytes, message: str) -> str:
    """Bob commits the manifest as these exact bytes on a new branch off main and pushes it."""
    clone = world.tmp / f"bob-{abs(hash(branch))}"
    git("clone", "--quiet", str(world.remote), str(clone))
    git("checkout", "--quiet", "-b", branch, cwd=clone)
    (clone / MAIN_PATH).write_bytes(data)
    git("add", MAIN_PATH, cwd=clone)
    git("commit", "--quiet", "-m", message, cwd=clone)
    git("push", "--quiet", "origin", f"HEAD:refs/heads/{branch}", cwd=clone)
    return git("rev-parse", "HEAD", cwd=clone).strip()


def test_a_head_whose_manifest_is_not_utf8_replaces_the_standing_ok(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by review: a latin-1 comment in the manifest made `check --comment` raise a traceback
    and leave the previous head's "ok" comment standing."""
    with FakeGitHub(repo="org/capacity", token=TOKEN) as github:
        with_github(world, github, monkeypatch)
        assert world.cli(capsys, "plan").code == 0
        number = github.pull(1).number
        proposed = git("show", f"{PROPOSAL}:{MAIN_PATH}", cwd=world.remote)
        signed = signed_branch(world, "alice/scale-down", proposed, "scale down general, signed")
        ok = world.cli(capsys, "check", "--ref", signed, "--comment", str(number))
        assert ok.code == 0 and "**ok**" in github.comments(number)[-1], ok.out + ok.err

        latin1 = ("# capacity de la région\n" + manifest_on_main(world)).encode("latin-1")
        head = branch_with_bytes(world, "bob/latin1", latin1, "a comment in latin-1")
        try:
            failed = world.cli(capsys, "check", "--ref", head, "--comment", str(number))
            assert failed.code != 0 and "Traceback" not in failed.err
            assert len(failed.err.strip().splitlines()) == 1, failed.err
        except UnicodeDecodeError:
            pass  # the manifest reader's own one-line error is gitops/repo.py's (issue 24 item 2)
        [comment] = [c for c in github.comments(number) if c.startswith(MARKER)]
        assert comment.startswith(f"{MARKER}\n**failed**: could not check `{head}`"), comment
        assert "**ok**" not in comment


def test_a_branch_named_like_a_heading_cannot_fake_a_verdict(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by review: `check --ref 'x/<h1>APPROVED-by-platform-admins</h1>'` (a legal branch
    name) rendered as a heading in the failed comment."""
    hostile = "x/<h1>APPROVED-by-platform-admins</h1>"
    with FakeGitHub(repo="org/capacity", token=TOKEN) as github:
        with_github(world, github, monkeypatch)
        assert world.cli(capsys, "plan").code == 0
        number = github.pull(1).number

        missing = world.cli(capsys, "check", "--ref", hostile, "--comment", str(number))
        assert missing.code == 2 and len(missing.err.strip().splitlines()) == 1
        [comment] = github.comments(number)
        assert comment.count("<h1>") == 1 and f"`{hostile}`" in comment  # only in its code span
        assert "&lt;h1&gt;APPROVED-by-platform-admins&lt;/h1&gt;" in comment

        subject = "<h1>APPROVED</h1> @org/platform-admins [merge me](https://evil.example)"
        proposed = git("show", f"{PROPOSAL}:{MAIN_PATH}", cwd=world.remote)
        branch_with_bytes(world, hostile, proposed.encode(), subject)
        judged = world.cli(capsys, "check", "--ref", hostile, "--comment", str(number))
        assert judged.code == 3, judged.out + judged.err
        [comment] = github.comments(number)
        assert comment.startswith(f"{MARKER}\n### asg-reconciler check: `{hostile}` (")
        assert comment.count("<h1>") == 1 and "**refused**" in comment
        assert "](https://evil" not in comment and "@org/" not in comment


def test_a_manifest_of_another_cluster_at_ref_is_an_error_and_exit_2(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """What plan, apply and approve refuse, the pull request's check says first (issue 28)."""
    assert world.cli(capsys, "plan").code == 0
    copied = manifest_on_main(world).replace("cluster: prod\n", "cluster: staging\n")
    BOB.commit(
        world.remote,
        "bob/copied",
        {MAIN_PATH: copied},
        "copied from staging",
        parents=[git("rev-parse", "main", cwd=world.remote).strip()],
    )
    result = world.cli(capsys, "check", "--ref", "bob/copied")
    assert result.code == 2, result.out + result.err
    assert "- error: " in result.out and "cluster: 'staging'" in result.out and "'prod'" in result.out
    assert "apply --dry-run" not in result.out
