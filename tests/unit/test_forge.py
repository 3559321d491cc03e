"""Forge pieces that need no server: review counting, text comparison, `forge.type: none`."""

from __future__ import annotations

import pytest

from reconciler.config.settings import ForgeConfig
from reconciler.domain.errors import OperationError, UserError
from reconciler.gitops.forge import (
    CLOSED,
    UNOPENED,
    Review,
    Reviews,
    count_reviews,
    make_forge,
    open_or_update,
)
from reconciler.gitops.forge.github import GitHubForge
from reconciler.gitops.forge.none import NoForge, compare_url, repo_web_url

HEAD = "asg-reconciler/prod-eks/scale-down"
SHA, OLD = "a" * 40, "b" * 40


def writers(login: str) -> str:
    """Everyone may write, except those named after what they may do."""
    return {"reader": "read", "triager": "read", "nobody": "none"}.get(login, "write")


def count(reviews: list[Review], head: str = SHA, **never: str) -> Reviews:
    return count_reviews(reviews, head, permission=writers, never=never)


def test_reviews_latest_deciding_review_per_user_wins() -> None:
    reviews = count(
        [
            Review("alice", "APPROVED", SHA),
            Review("Bob", "APPROVED", SHA),
            Review("bob", "CHANGES_REQUESTED", SHA),  # logins compare case-insensitively
            Review("carol", "APPROVED", OLD),  # stale: given before the last push
            Review("dave", "APPROVED", SHA),
            Review("dave", "COMMENTED", SHA),
            Review("erin", "APPROVED", SHA),
            Review("erin", "DISMISSED", SHA),
            Review("frank", "PENDING", SHA),  # a draft is not submitted
            Review("", "APPROVED", SHA),  # a deleted account
        ]
    )
    assert reviews.approved_by == ("alice", "dave")
    assert reviews.changes_requested_by == ("bob",)
    assert reviews.standing == ("alice", "carol", "dave")  # carol's approval of OLD still stands
    assert not reviews.approved(1) and reviews.locks


def test_changes_requested_on_an_old_head_still_blocks() -> None:
    reviews = count([Review("a", "APPROVED", SHA), Review("b", "CHANGES_REQUESTED", OLD)])
    assert reviews.approved_by == ("a",) and not reviews.approved(1)


def test_min_approvals() -> None:
    reviews = count([Review("a", "APPROVED", SHA), Review("b", "APPROVED", SHA)])
    assert reviews.approved(2) and not reviews.approved(3)


def test_only_people_who_may_write_count_and_never_bots_or_the_excluded() -> None:
    asked: list[str] = []

    def permission(login: str) -> str:
        asked.append(login)
        return writers(login)

    reviews = count_reviews(
        [
            Review("reader", "APPROVED", SHA, author_association="CONTRIBUTOR"),
            Review("triager", "APPROVED", SHA),  # triage reads as read
            Review("nobody", "APPROVED", SHA, author_association="NONE"),
            Review("renovate[bot]", "APPROVED", SHA, user_type="Bot"),
            Review("ci-app", "APPROVED", SHA, user_type="Bot"),  # the type decides, not the name
            Review("Plan-Bot", "APPROVED", SHA),
            Review("mallory", "APPROVED", SHA),
            Review("alice", "APPROVED", SHA),
        ],
        SHA,
        permission=permission,
        never={"plan-bot": "the token's own account", "MALLORY": "the pull request's author"},
    )
    assert reviews.approved_by == ("alice",) and reviews.standing == ("alice",)
    assert reviews.not_counted == (
        "ci-app (a bot)",
        "mallory (the pull request's author)",
        "nobody (permission none)",
        "Plan-Bot (the token's own account)",
        "reader (permission read)",
        "renovate[bot] (a bot)",
        "triager (permission read)",
    )
    assert sorted(asked) == ["alice", "nobody", "reader", "triager"], "no permission asked for the rest"


def test_a_permission_the_forge_cannot_tell_counts_as_no_but_locks() -> None:
    def failing(login: str) -> str:
        raise OperationError("GitHub at https://api.github.com failed to read the permission (502: boom)")

    reviews = count_reviews([Review("alice", "APPROVED", OLD)], SHA, permission=failing, never={})
    assert reviews.approved_by == () and reviews.standing == () and reviews.unsure == ("alice",)
    assert reviews.not_counted == (
        "alice (permission unknown: GitHub at https://api.github.com failed to "
        "read the permission (502: boom))",
    )
    assert reviews.locks, "an approval that may stand keeps a proposal from growing"


def test_a_withdrawn_or_dismissed_approval_no_longer_stands() -> None:
    withdrawn = count([Review("alice", "APPROVED", OLD), Review("alice", "CHANGES_REQUESTED", OLD)])
    dismissed = count([Review("alice", "DISMISSED", OLD)])  # GitHub turns the approval itself DISMISSED
    assert not withdrawn.locks and not dismissed.locks


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/org/capacity.git",
        "https://github.com/org/capacity",
        "https://x-access-token:ghp_secret@github.com/org/capacity.git",
        "git@github.com:org/capacity.git",
        "ssh://git@github.com/org/capacity.git",
        "ssh://git@github.com:22/org/capacity",
        "git://github.com/org/capacity.git/",
    ],
)
def test_github_remote_forms_give_the_repository_page(url: str) -> None:
    assert repo_web_url(url) == "https://github.com/org/capacity"


@pytest.mark.parametrize(
    "url",
    [
        "",
        "file:///srv/git/capacity.git",
        "/srv/git/capacity.git",
        "../capacity.git",
        "https://gitlab.com/org/capacity.git",
        "git@bitbucket.org:org/capacity.git",
        "https://github.com/org",
        "https://github.com/org/capacity/extra",
    ],
)
def test_other_remotes_give_no_guess(url: str) -> None:
    assert repo_web_url(url) is None


def test_compare_url_keeps_branch_slashes_and_fills_the_title() -> None:
    url = compare_url("git@github.com:org/capacity.git", "main", HEAD, title="scale down prod-eks: 2 nodes")
    assert url == (
        "https://github.com/org/capacity/compare/main...asg-reconciler/prod-eks/scale-down"
        "?expand=1&title=scale%20down%20prod-eks%3A%202%20nodes"
    )


def test_none_forge_says_where_to_open_the_pull_request() -> None:
    forge = make_forge(ForgeConfig(), git_url="https://ci:ghp_secret@github.com/org/capacity.git")
    assert isinstance(forge, NoForge) and not forge.opens_pull_requests
    pr = open_or_update(forge, title="t", body="b", head=HEAD, base="main")
    assert (pr.number, pr.state, pr.opened) == (0, UNOPENED, False)
    assert pr.url.startswith("https://github.com/org/capacity/compare/main...asg-reconciler/prod-eks/")
    assert pr.message == f"pushed {HEAD}; open the pull request at {pr.url}"
    assert "ghp_secret" not in pr.message
    assert forge.update(pr, title="t2", body="b2").title == "t2"
    forge.comment(pr, "nothing happens")
    assert forge.close(pr, "pods came back").state == CLOSED


def test_none_forge_without_a_github_remote_says_open_it_by_hand() -> None:
    pr = make_forge(ForgeConfig(), git_url="file:///srv/git/capacity.git").open(
        title="t", body="b", head=HEAD, base="main"
    )
    assert pr.url == ""
    assert pr.message == (
        f"pushed {HEAD}; open a pull request from {HEAD} into main by hand "
        "(forge.type is none, so none was opened)"
    )


def test_none_forge_knows_the_github_enterprise_host_from_the_base_url() -> None:
    config = ForgeConfig(base_url="https://ghe.example.com/api/v3")
    pr = make_forge(config, git_url="git@ghe.example.com:org/capacity.git").open(
        title="", body="", head=HEAD, base="main"
    )
    assert pr.url == f"https://ghe.example.com/org/capacity/compare/main...{HEAD}?expand=1"


def test_none_forge_has_no_reviews_and_no_pull_requests() -> None:
    forge = make_forge(ForgeConfig())
    pr = forge.open(title="t", body="b", head=HEAD, base="main")
    assert forge.find_open(HEAD) is None
    with pytest.raises(UserError, match="approval.mode: github-reviews needs forge.type github"):
        forge.reviews(pr, SHA)
    with pytest.raises(UserError, match="forge.type: none keeps no pull requests"):
        forge.get(1)


def test_make_forge_picks_the_implementation() -> None:
    forge = make_forge(ForgeConfig("github", "org/capacity"), environ={})
    assert isinstance(forge, GitHubForge) and forge.opens_pull_requests and forge.name == "github"
    with pytest.raises(UserError, match="forge.type: unknown forge 'gitlab'"):
        make_forge(ForgeConfig("gitlab"))
