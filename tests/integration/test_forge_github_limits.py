"""GitHub's limits, against the fake GitHub API answering as GitHub does: rate limits waited out
within a deadline, a token file read again at every request (an App token refreshed every hour),
an App installation token that may not read `GET /user` still editing its own comment and nobody
else's, and bodies over 65,536 characters refused."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from reconciler.config.settings import ForgeConfig
from reconciler.domain.errors import OperationError, UserError
from reconciler.gitops.forge.github import GitHubForge
from tests.support.github_api import (
    BODY_LIMIT,
    PRIMARY,
    SECONDARY,
    TOO_MANY,
    FakeGitHub,
)

TOKEN = "ghp_s3cret-value-never-printed"
APP_TOKEN = "ghs_app-installation-token-never-printed"
APP_BOT = "capacity-app[bot]"
ENV = "CAPACITY_TOKEN"
REPO = "org/capacity"
HEAD = "asg-reconciler/prod-eks/scale-down"
MARKER = "<!-- asg-reconciler:check cluster=prod -->"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeGitHub]:
    with FakeGitHub(repo=REPO, token=TOKEN) as fake:
        yield fake


@pytest.fixture
def github(server: FakeGitHub) -> FakeGitHub:
    server.reset()
    server.app_tokens[APP_TOKEN] = APP_BOT
    return server


def forge_for(
    fake: FakeGitHub, token: str = TOKEN, naps: list[float] | None = None, **config: str
) -> GitHubForge:
    forge_config = ForgeConfig("github", REPO, ENV, fake.url, **config)
    sleep = naps.append if naps is not None else (lambda _: None)
    return GitHubForge(forge_config, {ENV: token}, timeout=5, backoff=0, sleep=sleep)


def opened(github: FakeGitHub) -> int:
    return forge_for(github).open(title="t", body="b", head=HEAD, base="main").number


# ---------------------------------------------------------------------------------- rate limits


def test_a_primary_rate_limit_is_waited_out_until_its_reset(github: FakeGitHub) -> None:
    github.throttle(PRIMARY, 30)
    naps: list[float] = []
    assert forge_for(github, naps=naps).find_open(HEAD) is None
    assert len(naps) == 1 and 29 <= naps[0] <= 32  # until X-RateLimit-Reset, plus a second
    assert len(github.requests) == 2


def test_retry_after_is_obeyed_for_writes_too(github: FakeGitHub) -> None:
    """A rate-limited request was not acted on, so a write is sent again (once: no duplicate)."""
    number = opened(github)
    github.throttle(SECONDARY, 7)
    github.throttle(TOO_MANY, 3)
    naps: list[float] = []
    forge = forge_for(github, naps=naps)
    forge.comment(forge.get(number), "hello")
    assert naps == [7.0, 3.0]
    assert github.comments(number) == ["hello"]


def test_a_secondary_limit_without_a_time_waits_a_minute_then_longer(github: FakeGitHub) -> None:
    github.throttle(SECONDARY, None, times=2)
    naps: list[float] = []
    patient = replace(forge_for(github, naps=naps), max_wait=300)
    assert patient.find_open(HEAD) is None
    assert naps == [60.0, 120.0]

    github.throttle(SECONDARY, None, times=2)  # by default one call waits a minute at most
    with pytest.raises(
        OperationError, match="the next wait would be 120 s, beyond the 60 s asg-reconciler waits"
    ):
        forge_for(github, naps=naps).find_open(HEAD)
    assert naps == [60.0, 120.0, 60.0]


def test_a_wait_beyond_the_deadline_is_one_clear_line_and_no_more_requests(github: FakeGitHub) -> None:
    github.throttle(PRIMARY, 3600)
    naps: list[float] = []
    with pytest.raises(OperationError) as info:
        forge_for(github, naps=naps).find_open(HEAD)
    message = str(info.value)
    assert "rate limit reached while trying to list pull requests" in message
    assert "it resets at" in message and "the next run tries again" in message
    assert "\n" not in message and TOKEN not in message and "permission" not in message
    assert naps == [] and len(github.requests) == 1


def test_a_403_without_rate_limit_signs_is_a_permission_problem_at_once(github: FakeGitHub) -> None:
    github.read_only_tokens.add("ghp_read-only")
    naps: list[float] = []
    with pytest.raises(OperationError, match="the token needs pull requests: write"):
        forge_for(github, "ghp_read-only", naps).open(title="t", body="b", head=HEAD, base="main")
    assert naps == []


def test_the_real_clock_is_bounded_by_max_wait() -> None:
    """Without an injected sleep, a Retry-After within max_wait is really slept, and no longer."""
    with FakeGitHub(repo=REPO, token=TOKEN) as fake:
        fake.throttle(TOO_MANY, 1)
        forge = replace(forge_for(fake), sleep=time.sleep, max_wait=5)
        started = time.monotonic()
        assert forge.find_open(HEAD) is None
        assert 0.9 <= time.monotonic() - started < 4


# ---------------------------------------------------------------------------------- the token file


def test_the_token_file_is_read_again_at_every_request(github: FakeGitHub, tmp_path: Path) -> None:
    """An App installation token lasts an hour: whatever refreshes the file, the next request (a
    `run` loop's next cycle) uses the new one, and a 401 that raced a refresh is tried once more."""
    token_file = tmp_path / "token"
    token_file.write_text(APP_TOKEN + "\n")
    forge = forge_for(github, "ghp_not-used", token_file=str(token_file))
    assert forge.find_open(HEAD) is None
    assert github.requests[-1].authorization == f"Bearer {APP_TOKEN}"

    github.app_tokens = {"ghs_refreshed": APP_BOT}  # the old token expired; a new one was issued
    with pytest.raises(OperationError) as info:
        forge.find_open(HEAD)
    assert str(token_file) in str(info.value) and APP_TOKEN not in str(info.value)
    token_file.write_text("ghs_refreshed\n")
    assert forge.find_open(HEAD) is None
    assert github.requests[-1].authorization == "Bearer ghs_refreshed"

    calls = len(github.requests)
    refreshed = {"done": False}

    def refresh_on_first_401(method: str, path: str) -> None:
        if not refreshed["done"]:
            refreshed["done"] = True
            github.app_tokens = {"ghs_third": APP_BOT}
            token_file.write_text("ghs_third\n")

    github.fault = refresh_on_first_401  # the token rotates while the request is on its way
    assert forge.find_open(HEAD) is None
    assert len(github.requests) == calls + 2  # 401 with the old token, then the new one


def test_an_unreadable_or_empty_token_file_is_a_config_error(github: FakeGitHub, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-token"
    with pytest.raises(UserError, match=f"forge.tokenFile: {missing} cannot be read"):
        forge_for(github, token_file=str(missing)).find_open(HEAD)
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(UserError, match="forge.tokenFile: .* is empty"):
        forge_for(github, token_file=str(empty)).find_open(HEAD)
    assert github.requests == []


# ---------------------------------------------------------------------------------- our own comment


def test_an_app_token_edits_its_own_comment_though_it_cannot_read_user(github: FakeGitHub) -> None:
    """Found by review: GET /user is refused to App installation tokens, and the fallback
    identity github-actions[bot] made an App add a new comment on every run."""
    number = opened(github)
    person = github.add_comment(number, "mallory", MARKER + "\nlooks good to me")
    forge = forge_for(github, APP_TOKEN)
    assert forge.upsert_comment(number, MARKER, MARKER + "\nfirst").startswith("commented")
    again = forge_for(github, APP_TOKEN)  # the next run: a new process, nothing remembered
    assert again.upsert_comment(number, MARKER, MARKER + "\nsecond").startswith("updated the comment")
    bodies = github.comments(number)
    assert bodies == [MARKER + "\nlooks good to me", MARKER + "\nsecond"]
    assert [c["user"] for c in github.pull(number).comments][1] == {"login": APP_BOT, "type": "Bot"}
    assert not any(r.path.endswith(f"/comments/{person}") for r in github.writes())
    assert any(r.path == "/user" for r in github.requests)  # asked, refused (403), not fatal


def test_another_bot_copying_the_marker_is_ambiguous_until_bot_login_names_ours(
    github: FakeGitHub,
) -> None:
    number = opened(github)
    forge_for(github, APP_TOKEN).upsert_comment(number, MARKER, MARKER + "\nours")
    github.add_comment(number, "renovate[bot]", MARKER + "\nnot ours", user_type="Bot")
    with pytest.raises(UserError, match=r"set forge.botLogin .*my-app\[bot\]"):
        forge_for(github, APP_TOKEN).upsert_comment(number, MARKER, MARKER + "\nnew")

    before = len(github.requests)
    named = forge_for(github, APP_TOKEN, bot_login=APP_BOT)
    assert named.upsert_comment(number, MARKER, MARKER + "\nnew").startswith("updated the comment")
    assert github.comments(number) == [MARKER + "\nnew", MARKER + "\nnot ours"]
    assert [r.method for r in github.requests[before:]] == ["GET", "PATCH"]  # no GET /user


def test_a_personal_token_edits_only_comments_by_its_own_login(github: FakeGitHub) -> None:
    number = opened(github)
    github.add_comment(number, "github-actions[bot]", MARKER + "\nan older workflow's", user_type="Bot")
    forge = forge_for(github)
    assert forge.upsert_comment(number, MARKER, MARKER + "\nmine").startswith("commented")
    assert forge_for(github).upsert_comment(number, MARKER, MARKER + "\nmine 2").startswith("updated")
    assert github.comments(number) == [MARKER + "\nan older workflow's", MARKER + "\nmine 2"]


def test_the_marker_must_be_the_first_line_and_the_cluster_must_match(github: FakeGitHub) -> None:
    number = opened(github)
    forge = forge_for(github)
    other = "<!-- asg-reconciler:check cluster=prod-2 -->"
    forge.upsert_comment(number, other, other + "\nthe other cluster's")
    forge.upsert_comment(number, MARKER, MARKER + "\nthis cluster's")
    forge.upsert_comment(number, MARKER, MARKER + "\nthis cluster's, again")
    assert github.comments(number) == [other + "\nthe other cluster's", MARKER + "\nthis cluster's, again"]


def test_a_comment_with_the_legacy_marker_is_taken_over(github: FakeGitHub) -> None:
    number = opened(github)
    legacy = "<!-- asg-reconciler check -->"
    forge = forge_for(github)
    forge.upsert_comment(number, legacy, legacy + "\nok, from an older version")
    forge.upsert_comment(number, MARKER, MARKER + "\nfailed", legacy=(legacy,))
    assert github.comments(number) == [MARKER + "\nfailed"]


# ---------------------------------------------------------------------------------- body size


def test_bodies_over_65536_characters_are_refused_as_github_does(github: FakeGitHub) -> None:
    forge = forge_for(github)
    too_long = "x" * (BODY_LIMIT + 1)
    with pytest.raises(OperationError, match=r"422: Validation Failed; body is too long \(maximum is 65536"):
        forge.open(title="t", body=too_long, head=HEAD, base="main")
    pr = forge.open(title="t", body="x" * BODY_LIMIT, head=HEAD, base="main")
    with pytest.raises(OperationError, match="body is too long"):
        forge.update(pr, title="t", body=too_long)
    with pytest.raises(OperationError, match=r"Body is too long \(maximum is 65536 characters\)"):
        forge.comment(pr, too_long)
    forge.upsert_comment(pr.number, MARKER, MARKER + "\nshort")
    with pytest.raises(OperationError, match="Body is too long"):
        forge.upsert_comment(pr.number, MARKER, MARKER + "\n" + too_long)
    assert github.comments(pr.number) == [MARKER + "\nshort"]
