"""The GitHub forge against the local fake of the endpoints it calls (DESIGN §6)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import replace

import pytest

from reconciler.config.settings import ForgeConfig
from reconciler.domain.errors import OperationError, UserError
from reconciler.gitops.forge import CLOSED, OPEN, make_forge, open_or_update
from reconciler.gitops.forge.github import GitHubForge
from tests.support.github_api import BOT, DROP, FakeGitHub, FaultResult

TOKEN = "ghp_s3cret-value-never-printed"
ENV = "CAPACITY_TOKEN"
REPO = "org/capacity"
HEAD = "asg-reconciler/prod-eks/scale-down"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeGitHub]:
    with FakeGitHub(repo=REPO, token=TOKEN) as fake:
        yield fake


@pytest.fixture
def github(server: FakeGitHub) -> FakeGitHub:
    server.reset()
    return server


def forge_for(
    fake: FakeGitHub, token: str = TOKEN, *, base_url: str | None = None, repo: str = REPO
) -> GitHubForge:
    config = ForgeConfig("github", repo, ENV, base_url or fake.url)
    return GitHubForge(config, {ENV: token}, timeout=5, backoff=0)


def test_open_find_update_close_lifecycle(github: FakeGitHub) -> None:
    forge = forge_for(github)
    assert forge.find_open(HEAD) is None
    sha = github.push(HEAD)

    pr = forge.open(title="scale down prod-eks", body="| group | from -> to |", head=HEAD, base="main")
    assert (pr.number, pr.state, pr.head, pr.base, pr.head_sha) == (1, OPEN, HEAD, "main", sha)
    assert pr.url.endswith("/org/capacity/pull/1") and "opened pull request #1" in pr.message

    found = forge.find_open(HEAD)
    assert found is not None
    assert (found.number, found.title, found.body) == (1, "scale down prod-eks", "| group | from -> to |")

    writes = len(github.writes())
    same = forge.update(found, title="scale down prod-eks", body="| group | from -> to |")
    assert len(github.writes()) == writes, "an unchanged proposal must not edit the pull request"
    assert "unchanged" in same.message

    changed = forge.update(found, title="scale down prod-eks", body="| group | 3 -> 2 |")
    patch = github.writes()[-1]
    assert (patch.method, patch.path, patch.body) == (
        "PATCH",
        "/repos/org/capacity/pulls/1",
        {"body": "| group | 3 -> 2 |"},
    )
    assert changed.body == "| group | 3 -> 2 |" and github.pull(1).body == "| group | 3 -> 2 |"

    closed = forge.close(changed, "pods came back: ip-10-0-1-2 is busy again")
    assert closed.state == CLOSED and github.pull(1).state == "closed"
    assert github.comments(1) == ["pods came back: ip-10-0-1-2 is busy again"]
    assert forge.find_open(HEAD) is None
    writes = len(github.writes())
    assert forge.close(closed, "again") == closed
    assert len(github.writes()) == writes, "closing a closed pull request sends nothing"
    assert all(r.authorization == f"Bearer {TOKEN}" for r in github.requests)


def test_open_or_update_is_one_pull_request_edited_in_place(github: FakeGitHub) -> None:
    forge = forge_for(github)
    first = open_or_update(forge, title="t", body="b1", head=HEAD, base="main")
    second = open_or_update(forge, title="t", body="b1", head=HEAD, base="main")
    third = open_or_update(forge, title="t", body="b2", head=HEAD, base="main")
    assert first.number == second.number == third.number == 1
    assert [(r.method, r.path) for r in github.writes()] == [
        ("POST", "/repos/org/capacity/pulls"),
        ("PATCH", "/repos/org/capacity/pulls/1"),
    ]


def test_text_edited_in_the_web_editor_is_not_a_change(github: FakeGitHub) -> None:
    forge = forge_for(github)
    pr = forge.open(title="t", body="line 1\nline 2\n", head=HEAD, base="main")
    github.pull(pr.number).body = "line 1\r\nline 2"  # what the web editor stores
    found = forge.find_open(HEAD)
    assert found is not None
    writes = len(github.writes())
    forge.update(found, title="t", body="line 1\nline 2\n")
    assert len(github.writes()) == writes


def test_racing_planner_adopts_the_open_pull_request(github: FakeGitHub) -> None:
    ours, theirs = forge_for(github), forge_for(github)
    first = theirs.open(title="t", body="b", head=HEAD, base="main")
    second = ours.open(title="t", body="b2", head=HEAD, base="main")  # did not see it when it looked
    assert second.number == first.number
    assert len(github.pulls) == 1 and github.pull(1).body == "b2"


def test_find_open_ignores_other_branches_and_closed_pulls(github: FakeGitHub) -> None:
    forge = forge_for(github)
    other = forge.open(title="other", body="", head="asg-reconciler/staging/scale-down", base="main")
    old = forge.open(title="old", body="", head=HEAD, base="main")
    forge.close(old, "superseded")
    assert forge.find_open(HEAD) is None
    new = forge.open(title="new", body="", head=HEAD, base="main")
    found = forge.find_open(HEAD)
    assert found is not None and found.number == new.number != other.number


def test_reviews_count_latest_per_user_on_the_current_head(github: FakeGitHub) -> None:
    forge = forge_for(github)
    for login in ("alice", "bob", "carol", "dave", "erin", "frank"):
        github.grant(login, "write")
    github.grant("grace", "read")
    old_sha = github.push(HEAD)
    pr = forge.open(title="t", body="b", head=HEAD, base="main")
    github.review(1, "bob", "APPROVED")  # on the old head: stale after the push below
    github.review(1, "carol", "APPROVED", commit_id=old_sha)
    new_sha = github.push(HEAD)
    github.review(1, "alice", "APPROVED")
    github.review(1, "alice", "APPROVED")  # twice is still one approver
    github.review(1, "carol", "CHANGES_REQUESTED")  # cancels her own approval
    github.review(1, "dave", "CHANGES_REQUESTED", commit_id=old_sha)
    github.review(1, "dave", "APPROVED")  # changed his mind on the new head
    github.review(1, "erin", "APPROVED")
    github.review(1, "erin", "COMMENTED")  # a comment does not withdraw an approval
    github.review(1, "frank", "APPROVED")
    github.review(1, "frank", "DISMISSED")
    for _ in range(130):  # more than one page of 100
        github.review(1, "grace", "COMMENTED")

    reviews = forge.reviews(pr, new_sha)
    assert reviews.head_sha == new_sha
    assert reviews.approved_by == ("alice", "dave", "erin")
    assert reviews.changes_requested_by == ("carol",)
    assert not reviews.approved(1)  # carol's request blocks
    assert sum(1 for r in github.requests if r.path.endswith("/reviews")) == 2

    github.review(1, "carol", "APPROVED")
    reviews = forge.reviews(pr, new_sha)
    assert reviews.approved_by == ("alice", "carol", "dave", "erin")
    assert reviews.approved(4) and not reviews.approved(5)
    assert forge.reviews(pr, old_sha).approved_by == ("bob",)  # carol's old approval was replaced


def test_reviews_count_people_who_may_write_and_ask_each_approvers_permission_once(
    github: FakeGitHub,
) -> None:
    """What GitHub lists per review (user.type, author_association) and the permission endpoint
    decide; the pull request's author and the token's own account never count."""
    forge = forge_for(github)
    github.public = True  # anyone may review a public repository's pull requests
    github.grant("alice", "maintain")
    github.grant("mallory", "triage")
    number = github.open_pull(HEAD, author="mallory")
    head = github.pull(number).head_sha
    for login in ("alice", "alice", "outsider", "dependabot[bot]", BOT):
        github.review(number, login, "APPROVED")
    with pytest.raises(ValueError, match="Can not approve your own pull request"):
        github.review(number, "mallory", "APPROVED")
    listed = github.pull(number).reviews
    assert [r["user"]["type"] for r in listed[2:4]] == ["User", "Bot"]
    assert [r["author_association"] for r in listed[:3]] == ["COLLABORATOR", "COLLABORATOR", "NONE"]

    pr = forge.find_open(HEAD)
    assert pr is not None and pr.author == "mallory"
    reviews = forge.reviews(pr, head)
    assert reviews.approved_by == ("alice",)
    assert reviews.not_counted == (
        f"{BOT} (the token's own account)",
        "dependabot[bot] (a bot)",
        "outsider (permission read)",
    )
    asked = [r.path for r in github.requests if r.path.endswith("/permission")]
    assert asked == [
        f"/repos/{REPO}/collaborators/alice/permission",
        f"/repos/{REPO}/collaborators/outsider/permission",
    ]
    assert [r.path for r in github.requests].count("/user") == 1

    github.public = False
    github.pull(number).reviews.append({**listed[2], "user": {"login": "gone-account", "type": "User"}})
    reviews = forge.reviews(pr, head)
    assert "gone-account (permission none)" in reviews.not_counted  # 404: not a user
    assert "outsider (permission none)" in reviews.not_counted  # no access to a private repository


def test_merged_and_who_merged_it(github: FakeGitHub) -> None:
    forge = forge_for(github)
    pr = forge.open(title="t", body="b", head=HEAD, base="main")
    assert not forge.get(pr.number).merged
    merge_sha = github.merge(pr.number, "alice")
    merged = forge.get(pr.number)
    assert (merged.merged, merged.merged_by, merged.merge_commit_sha, merged.state) == (
        True,
        "alice",
        merge_sha,
        CLOSED,
    )
    assert forge.find_open(HEAD) is None
    with pytest.raises(OperationError, match="merged"):
        forge.close(replace(merged, state=OPEN), "too late")  # the bot's view was older than the merge
    assert github.comments(pr.number) == [], "no closing comment on a pull request that was merged"


def test_wrong_token_names_the_variable_and_never_the_token(github: FakeGitHub) -> None:
    wrong = "ghp_wrong-token-value"
    with pytest.raises(OperationError) as info:
        forge_for(github, wrong).find_open(HEAD)
    text = str(info.value)
    assert ENV in text and "pull requests: write" in text and "401" in text
    assert wrong not in text and TOKEN not in text and "\n" not in text


def test_missing_token_is_a_config_error(github: FakeGitHub) -> None:
    forge = GitHubForge(ForgeConfig("github", REPO, ENV, github.url), {})
    with pytest.raises(UserError, match=f"forge.tokenEnv.*{ENV}.*pull requests: write"):
        forge.find_open(HEAD)
    assert github.requests == []


def test_malformed_token_is_rejected_without_echoing_it(github: FakeGitHub) -> None:
    with pytest.raises(UserError, match=f"the value of {ENV} is not a token") as info:
        forge_for(github, "ghp_abc\ndef").find_open(HEAD)
    assert "ghp_abc" not in str(info.value) and github.requests == []


def test_read_only_token_is_told_which_permission_is_missing(github: FakeGitHub) -> None:
    github.read_only_tokens.add("ghp_read-only")
    forge = forge_for(github, "ghp_read-only")
    assert forge.find_open(HEAD) is None  # reads work
    with pytest.raises(OperationError) as info:
        forge.open(title="t", body="b", head=HEAD, base="main")
    text = str(info.value)
    assert "403" in text and ENV in text and "pull requests: write" in text and "ghp_read-only" not in text


def test_unknown_repository_names_forge_repo(github: FakeGitHub) -> None:
    forge = forge_for(github, repo="org/typo")
    with pytest.raises(UserError, match=r"forge.repo: 'org/typo' not found"):
        forge.find_open(HEAD)
    with pytest.raises(UserError, match=r"forge.repo: 'org/typo' not found"):
        forge.get(3)


def test_unknown_pull_request_is_not_reported_as_a_missing_repository(github: FakeGitHub) -> None:
    with pytest.raises(UserError, match=r"read pull request #42: not found in org/capacity"):
        forge_for(github).get(42)


def test_network_failure_is_one_line(github: FakeGitHub) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    forge = forge_for(github, base_url=f"http://127.0.0.1:{port}")
    with pytest.raises(
        OperationError, match=r"^cannot reach GitHub at http://127.0.0.1:\d+ to list pull requests"
    ) as info:
        forge.find_open(HEAD)
    assert "\n" not in str(info.value) and TOKEN not in str(info.value)


def test_reads_retry_transient_failures_and_writes_do_not(github: FakeGitHub) -> None:
    forge = forge_for(github)
    failures: dict[str, list[FaultResult]] = {"GET": [(502, None), DROP], "POST": [(502, None)]}

    def flaky(method: str, path: str) -> FaultResult:
        queue = failures.get(method, [])
        return queue.pop(0) if queue else None

    github.fault = flaky
    assert forge.find_open(HEAD) is None  # 502, dropped connection, then served
    assert sum(1 for r in github.requests if r.method == "GET") == 3
    with pytest.raises(OperationError, match="failed to open a pull request \\(502"):
        forge.open(title="t", body="b", head=HEAD, base="main")
    assert github.pulls == {}


def test_rate_limit_is_not_reported_as_a_permission_problem(github: FakeGitHub) -> None:
    github.fault = lambda method, path: (403, {"message": "API rate limit exceeded for user ID 1."})
    naps: list[float] = []
    forge = replace(forge_for(github), sleep=naps.append)
    with pytest.raises(OperationError, match="rate limit reached") as info:
        forge.find_open(HEAD)
    assert "permission" not in str(info.value) and naps == [60.0]  # a minute, then beyond max_wait


def test_moved_repository_is_not_followed(github: FakeGitHub) -> None:
    github.fault = lambda method, path: (301, {"message": "Moved Permanently"})
    with pytest.raises(UserError, match="renamed or transferred; set forge.repo"):
        forge_for(github).find_open(HEAD)
    assert len(github.requests) == 1


def test_github_enterprise_base_url_with_path_prefix() -> None:
    with FakeGitHub(repo=REPO, token=TOKEN, prefix="/api/v3") as ghe:
        assert ghe.url.endswith("/api/v3")
        forge = make_forge(ForgeConfig("github", REPO, ENV, ghe.url + "/"), environ={ENV: TOKEN})
        assert isinstance(forge, GitHubForge)
        pr = open_or_update(forge, title="t", body="b", head=HEAD, base="main")
        ghe.grant("alice", "admin")
        ghe.review(pr.number, "alice", "APPROVED")
        assert forge.reviews(pr, ghe.pull(pr.number).head_sha).approved(1)
        forge.close(pr, "no longer needed")
        assert ghe.pull(pr.number).state == "closed"
        assert [r.path for r in ghe.requests][:2] == [
            "/repos/org/capacity/pulls",
            "/repos/org/capacity/pulls",
        ]

        unprefixed = make_forge(ForgeConfig("github", REPO, ENV, ghe.root), environ={ENV: TOKEN})
        with pytest.raises(UserError, match="forge.repo"):
            unprefixed.find_open(HEAD)


def test_repr_never_shows_the_token(github: FakeGitHub) -> None:
    assert TOKEN not in repr(forge_for(github))
