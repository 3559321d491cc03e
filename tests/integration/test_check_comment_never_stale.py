"""`check --comment`: whatever goes wrong, the comment on the pull request never keeps an earlier
head's "ok". Against the fake GitHub API (which refuses bodies over 65,536 characters as GitHub
does); the check itself is replaced by what each case needs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from reconciler.apply.outcome import ApplyReport, GroupOutcome
from reconciler.config.settings import Config, ForgeConfig, GitConfig
from reconciler.domain.errors import OperationError, ReconcilerError, RefusedError, UserError
from reconciler.domain.markdown import GITHUB_BODY_LIMIT
from reconciler.gitops.errors import GitError
from reconciler.gitops.forge.github import GitHubForge
from reconciler.runtime import check_comment
from reconciler.runtime.check_comment import check_and_comment, comment_marker
from reconciler.views.check_report import FAST_FORWARD, CheckReport, GateLine
from tests.support.github_api import FakeGitHub

TOKEN = "ghp_check-token-never-printed"
ENV = "CAPACITY_TOKEN"
REPO = "org/capacity"
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
MARKER = comment_marker("prod")
HEADING = "x/<h1>APPROVED-by-platform-admins</h1>"


def report(removals: int = 0, *, approved: bool = True) -> CheckReport:
    sha = "a" * 40
    return CheckReport(
        ref="feature",
        commit=sha,
        branch="main",
        tip="b" * 40,
        landing=FAST_FORWARD,
        manifest_path="capacity/prod.yaml",
        approval_mode="signed",
        landed=sha,
        verdicts=tuple(
            GateLine("general", f"i-{n:017x}", sha, approved, f"{sha[:12]} is not signed; " + "x" * 150)
            for n in range(removals)
        ),
        dry_run=ApplyReport(commit=sha, dry_run=True, groups=(GroupOutcome("general", "none", 2, 2),)),
    )


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with FakeGitHub(repo=REPO, token=TOKEN) as fake:
        yield fake


@pytest.fixture
def pr(github: FakeGitHub) -> int:
    forge = forge_for(github)
    return forge.open(title="t", body="b", head="feature", base="main").number


def forge_for(github: FakeGitHub) -> GitHubForge:
    return GitHubForge(ForgeConfig("github", REPO, ENV, github.url), {ENV: TOKEN}, timeout=5, backoff=0)


def config(github: FakeGitHub) -> Config:
    return Config(
        cluster="prod",
        git=GitConfig(url="https://github.com/org/capacity.git"),
        forge=ForgeConfig("github", REPO, ENV, github.url),
    )


def judged_as(monkeypatch: pytest.MonkeyPatch, outcome: CheckReport | BaseException) -> None:
    def check_once(*args: Any, **kwargs: Any) -> CheckReport:
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    monkeypatch.setattr(check_comment, "check_once", check_once)


def ok_standing(github: FakeGitHub, pr: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """An earlier head was judged "ok" and its comment stands."""
    judged_as(monkeypatch, report())
    _, code, _ = check_and_comment(config(github), "old-head", NOW, pr, forge_for(github))
    assert code == 0 and "**ok**" in ours(github, pr)


def ours(github: FakeGitHub, pr: int) -> str:
    [comment] = [c for c in github.comments(pr) if c.startswith(MARKER)]
    return comment


@pytest.mark.parametrize(
    "failure",
    [
        UserError("capacity/prod.yaml at a1b2c3: not UTF-8 text (byte 0xe9 at offset 120)"),
        OperationError("git fetch https://github.com/org/capacity.git: connection reset"),
        UnicodeDecodeError("utf-8", b"\xe9", 0, 1, "invalid continuation byte"),
        RuntimeError("a bug, with a message that may hold anything: ghp_not-to-be-shown"),
    ],
    ids=["user-mistake", "operation", "unicode", "bug"],
)
def test_any_failure_replaces_the_standing_ok_with_failed(
    github: FakeGitHub, pr: int, monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> None:
    """Found by review: a manifest that is not UTF-8 raised a traceback from `check --comment` and
    left the previous head's "ok" standing (only ReconcilerError was caught)."""
    ok_standing(github, pr, monkeypatch)
    judged_as(monkeypatch, failure)
    with pytest.raises(type(failure)) as raised:
        check_and_comment(config(github), "new-head", NOW, pr, forge_for(github))
    assert raised.value is failure  # a user mistake stays one line and its exit code (2, 1)
    comment = ours(github, pr)
    assert comment.startswith(MARKER + "\n**failed**: could not check `new-head`"), comment
    assert "**ok**" not in comment and len(github.comments(pr)) == 1
    if isinstance(failure, ReconcilerError):
        assert str(failure).split(":")[0] in comment
    else:  # a bug's message may hold anything: only its kind is shown
        assert type(failure).__name__ in comment and "ghp_" not in comment


def test_ctrl_c_says_interrupted(github: FakeGitHub, pr: int, monkeypatch: pytest.MonkeyPatch) -> None:
    ok_standing(github, pr, monkeypatch)
    judged_as(monkeypatch, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        check_and_comment(config(github), "new-head", NOW, pr, forge_for(github))
    assert ours(github, pr).startswith(MARKER + "\n**interrupted**: the check of `new-head` did not finish")


def test_a_ref_like_a_heading_is_shown_not_rendered(
    github: FakeGitHub, pr: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    judged_as(monkeypatch, UserError(f"--ref {HEADING}: no such commit or branch in {REPO}"))
    with pytest.raises(UserError):
        check_and_comment(config(github), HEADING, NOW, pr, forge_for(github))
    comment = ours(github, pr)
    assert f"`{HEADING}`" in comment  # in a code span: literal
    assert "--ref x/&lt;h1&gt;APPROVED-by-platform-admins&lt;/h1&gt;: no such" in comment
    assert comment.count("<h1>") == 1  # only inside the code span


def test_a_verdict_too_long_for_github_is_cut_and_still_replaces_the_ok(
    github: FakeGitHub, pr: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by review: 400 unapproved removals made a 100,690-character body; GitHub refused it
    (422), check exited 1, and the earlier "ok" stayed."""
    ok_standing(github, pr, monkeypatch)
    judged_as(monkeypatch, report(400, approved=False))
    body, code, said = check_and_comment(config(github), "new-head", NOW, pr, forge_for(github))
    assert code == 3 and said.startswith("updated the comment")
    comment = ours(github, pr)
    assert len(body) > GITHUB_BODY_LIMIT >= len(comment)  # printed whole, posted cut
    assert comment.split("\n")[3].startswith("**refused**") and "shortened" in comment


def test_a_refused_update_falls_back_to_a_short_failed_comment(
    github: FakeGitHub, pr: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The forge refuses the verdict (here it counts characters more strictly than we cut to):
    the short "failed" comment takes its place, and the exit is 1, never the verdict's 0."""
    ok_standing(github, pr, monkeypatch)
    github.body_limit = 1_500
    judged_as(monkeypatch, report(20))
    body, code, said = check_and_comment(config(github), "new-head", NOW, pr, forge_for(github))
    assert code == 1 and "**ok**" in body
    assert said.startswith("error: could not post the verdict on pull request #1 (")
    assert "Body is too long" in said and 'now says "failed"' in said and "\n" not in said
    comment = ours(github, pr)
    assert comment.startswith(MARKER + "\n**failed**: could not check `new-head`: its verdict (exit 0)")


def test_when_no_comment_can_be_written_the_error_says_the_old_one_stands(
    github: FakeGitHub, pr: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok_standing(github, pr, monkeypatch)
    github.fault = lambda method, path: (
        (403, {"message": "Must have admin rights"}) if method != "GET" else None
    )
    judged_as(monkeypatch, UserError("git.branch: main has no commits"))
    with pytest.raises(UserError) as raised:
        check_and_comment(config(github), "new-head", NOW, pr, forge_for(github))
    message = str(raised.value)
    assert message.startswith("git.branch: main has no commits; the comment on pull request #1 could not")
    assert "earlier verdict still stands" in message and TOKEN not in message
    assert "**ok**" in ours(github, pr)  # what the error warns about

    judged_as(monkeypatch, report(1))  # a new verdict that cannot be posted either
    _, code, said = check_and_comment(config(github), "new-head", NOW, pr, forge_for(github))
    assert code == 1 and "an earlier verdict may still stand" in said


@pytest.mark.parametrize(
    "failure",
    [GitError("git fetch origin failed: could not resolve host"), RefusedError("held", kind="lease")],
)
def test_the_error_that_says_the_old_one_stands_keeps_its_type(
    github: FakeGitHub, pr: int, monkeypatch: pytest.MonkeyPatch, failure: ReconcilerError
) -> None:
    """Its edge or refusal kind (what metrics and logs label it by) survives the added words."""
    ok_standing(github, pr, monkeypatch)
    github.fault = lambda method, path: (
        (403, {"message": "Must have admin rights"}) if method != "GET" else None
    )
    judged_as(monkeypatch, failure)
    with pytest.raises(ReconcilerError) as raised:
        check_and_comment(config(github), "new-head", NOW, pr, forge_for(github))
    assert type(raised.value) is type(failure) and raised.value.exit_code == failure.exit_code
    assert str(raised.value).startswith(f"{failure}; the comment on pull request #1 could not")
    assert getattr(raised.value, "edge", None) == getattr(failure, "edge", None)
    assert getattr(raised.value, "kind", None) == getattr(failure, "kind", None)
