"""Approval gates without git or HTTP: the factory, the github-reviews rules through an in-memory
forge, protected-branch, and the allowed-signers file checks (docs/approval.md)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from reconciler.apply.approval import FACTORIES, Verdict, make_gate
from reconciler.apply.approval.github_reviews import GitHubReviewsGate
from reconciler.apply.approval.protected_branch import ProtectedBranchGate
from reconciler.apply.approval.signed import SignedGate, load_allowed_signers, signature_kind
from reconciler.config.settings import ApprovalConfig, Config, ForgeConfig, GitConfig
from reconciler.domain.errors import UserError
from reconciler.gitops.approve import _without_https_credentials
from reconciler.gitops.forge import CLOSED, PullRequest, Review, Reviews, count_reviews
from reconciler.gitops.forge.none import NoForge

MERGE, HEAD, OLD_HEAD, OTHER = "m" * 40, "h" * 40, "o" * 40, "x" * 40
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG9vb2JhcmJhemJhcmJhemJhcmJhemJhcmJhemJhcmJheg"
NOWHERE = Path("/nonexistent-repo")


@dataclass
class MemoryForge:
    """A forge holding one merged pull request and its reviews (oldest first)."""

    reviews_given: list[Review] = field(default_factory=list)
    merged_as: str = MERGE
    head_sha: str = HEAD
    asked: list[str] = field(default_factory=list)

    name = "memory"
    opens_pull_requests = True

    def pull_for_commit(self, sha: str) -> PullRequest | None:
        self.asked.append(sha)
        if sha != self.merged_as:
            return None
        return PullRequest(
            7, "https://github.example/org/capacity/pull/7", CLOSED, "proposal", "main",
            head_sha=self.head_sha, merged=True, merged_by="alice", merge_commit_sha=sha, author="bot",
        )  # fmt: skip

    def reviews(self, pr: PullRequest, head_sha: str, *, ignore: Collection[str] = ()) -> Reviews:
        never = {**{login: "ignored" for login in ignore}, pr.author: "the pull request's author"}
        return count_reviews(self.reviews_given, head_sha, permission=lambda login: "write", never=never)


def merged_as_reviewed(repo_path: Path, merge: str, pr: PullRequest) -> str | None:
    return None  # the merge adds what the head proposes (tests/integration checks it with git)


def reviews_gate(reviews: list[Review], min_approvals: int = 1) -> GitHubReviewsGate:
    return GitHubReviewsGate(MemoryForge(reviews), merged_as_reviewed, min_approvals)  # type: ignore[arg-type]


def config(mode: str, **approval: object) -> Config:
    return Config(
        cluster="prod-eks",
        git=GitConfig(url="https://github.com/org/capacity.git", branch="main"),
        forge=ForgeConfig("github", "org/capacity"),
        approval=replace(ApprovalConfig(mode=mode), **approval),  # type: ignore[arg-type]
    )


# --------------------------------------------------------------------------- github-reviews rules


def test_an_approval_of_the_merged_head_approves_the_merge_commit() -> None:
    forge = MemoryForge([Review("alice", "APPROVED", HEAD)])
    verdict = GitHubReviewsGate(forge, merged_as_reviewed, 1).check(MERGE, NOWHERE)  # type: ignore[arg-type]
    assert verdict.approved and verdict.by == "alice"
    assert "#7" in verdict.reason and forge.asked == [MERGE]


def test_a_commit_that_is_no_pull_requests_merge_is_refused() -> None:
    verdict = reviews_gate([Review("alice", "APPROVED", HEAD)]).check(OTHER, NOWHERE)
    assert not verdict.approved and verdict.by == ""
    assert "not the merge commit of a pull request" in verdict.reason


def test_an_approval_of_an_older_head_does_not_count() -> None:
    verdict = reviews_gate([Review("alice", "APPROVED", OLD_HEAD)]).check(MERGE, NOWHERE)
    assert not verdict.approved
    assert "has 0 of the 1 approvals of its head hhhhhhhhhhhh" in verdict.reason
    assert "not counted: alice (approved an older head oooooooooooo)" in verdict.reason


def test_the_authors_and_ignored_approvals_do_not_count() -> None:
    reviews = [Review("bot", "APPROVED", HEAD), Review("capacity-bot", "APPROVED", HEAD)]
    gate = GitHubReviewsGate(MemoryForge(reviews), merged_as_reviewed, 1, ("capacity-bot",))  # type: ignore[arg-type]
    verdict = gate.check(MERGE, NOWHERE)
    assert not verdict.approved
    assert "not counted: bot (the pull request's author); capacity-bot (ignored)" in verdict.reason


def test_a_merge_that_brings_more_than_was_approved_is_refused() -> None:
    def more(repo_path: Path, merge: str, pr: PullRequest) -> str | None:
        return f"{merge[:12]} adds removals its approved head {pr.head_sha[:12]} does not propose: asg-a/i-0x"

    forge = MemoryForge([Review("alice", "APPROVED", HEAD)])
    verdict = GitHubReviewsGate(forge, more, 1).check(MERGE, NOWHERE)  # type: ignore[arg-type]
    assert verdict == Verdict(
        False,
        "",
        "pull request #7 (merged as mmmmmmmmmmmm): mmmmmmmmmmmm adds removals its approved head "
        "hhhhhhhhhhhh does not propose: asg-a/i-0x",
    )


def test_the_latest_deciding_review_per_user_counts() -> None:
    withdrawn = [Review("alice", "APPROVED", HEAD), Review("alice", "CHANGES_REQUESTED", HEAD)]
    verdict = reviews_gate(withdrawn).check(MERGE, NOWHERE)
    assert not verdict.approved and "changes requested by alice" in verdict.reason

    came_round = [Review("bob", "CHANGES_REQUESTED", OLD_HEAD), Review("bob", "APPROVED", HEAD)]
    verdict = reviews_gate(came_round).check(MERGE, NOWHERE)
    assert verdict.approved and verdict.by == "bob"

    comment_after = [Review("bob", "APPROVED", HEAD), Review("bob", "COMMENTED", HEAD)]
    assert reviews_gate(comment_after).check(MERGE, NOWHERE).approved


def test_outstanding_changes_requested_blocks_even_with_enough_approvals() -> None:
    reviews = [
        Review("alice", "APPROVED", HEAD),
        Review("bob", "APPROVED", HEAD),
        Review("carol", "CHANGES_REQUESTED", OLD_HEAD),  # said on an older head: still outstanding
    ]
    verdict = reviews_gate(reviews, min_approvals=2).check(MERGE, NOWHERE)
    assert not verdict.approved and "changes requested by carol" in verdict.reason
    dismissed = [*reviews, Review("carol", "DISMISSED", HEAD)]
    assert reviews_gate(dismissed, min_approvals=2).check(MERGE, NOWHERE).approved


def test_min_approvals_counts_distinct_users() -> None:
    twice = [Review("alice", "APPROVED", HEAD), Review("Alice", "APPROVED", HEAD)]
    verdict = reviews_gate(twice, min_approvals=2).check(MERGE, NOWHERE)
    assert not verdict.approved and "has 1 (Alice) of the 2 approvals" in verdict.reason

    two = [Review("alice", "APPROVED", HEAD), Review("bob", "APPROVED", HEAD)]
    verdict = reviews_gate(two, min_approvals=2).check(MERGE, NOWHERE)
    assert verdict.approved and verdict.by == "alice, bob"


# --------------------------------------------------------------------------- factory and modes


def test_every_mode_of_the_design_has_a_gate() -> None:
    assert set(FACTORIES) == {"signed", "github-reviews", "protected-branch"}


def test_unknown_mode_is_a_user_error_listing_the_modes() -> None:
    with pytest.raises(UserError, match=r"approval.mode: unknown mode 'majority'.*github-reviews"):
        make_gate(config("majority"))


def test_github_reviews_without_a_forge_is_refused_at_construction() -> None:
    no_forge = replace(config("github-reviews"), forge=ForgeConfig())
    with pytest.raises(UserError, match=r"approval.mode: github-reviews.*forge.type is none"):
        make_gate(no_forge)
    with pytest.raises(UserError, match=r"forge.type"):
        make_gate(config("github-reviews"), forge=NoForge())


def test_github_reviews_gate_is_built_with_the_configured_forge_and_minimum() -> None:
    gate = make_gate(config("github-reviews", min_approvals=2), environ={})
    assert isinstance(gate, GitHubReviewsGate) and gate.min_approvals == 2
    assert gate.forge.name == "github" and gate.name == "github-reviews"


def test_protected_branch_approves_everything_and_says_whom_it_trusts() -> None:
    gate = make_gate(replace(config("protected-branch"), git=GitConfig(branch="live")))
    assert isinstance(gate, ProtectedBranchGate)
    verdict = gate.check(MERGE, NOWHERE)
    assert verdict.approved and verdict.by == "branch protection"
    assert "whoever can push to live (the plan bot included)" in verdict.reason


def test_signed_is_the_default_and_needs_a_readable_signers_file(tmp_path: Path) -> None:
    assert ApprovalConfig().mode == "signed"
    missing = tmp_path / "allowed_signers"
    with pytest.raises(UserError, match=rf"approval.allowedSigners: {missing} does not exist"):
        make_gate(config("signed", allowed_signers=str(missing)))
    missing.write_text(f"alice@example.com {KEY}\n")
    gate = make_gate(config("signed", allowed_signers=str(missing)))
    assert isinstance(gate, SignedGate) and gate.allowed_signers == missing


# --------------------------------------------------------------------------- allowed_signers files


def test_allowed_signers_lines_are_counted_and_comments_skipped(tmp_path: Path) -> None:
    path = tmp_path / "allowed"
    path.write_text(
        "# approvers\n\n"
        f"alice@example.com {KEY} alice's laptop\n"
        f'bob@example.com,bob@corp namespaces="git",valid-after="20240101" {KEY}\n'
    )
    assert load_allowed_signers(path) == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "lists no keys"),
        ("# nobody yet\n", "lists no keys"),
        (f"alice@example.com {KEY}\nbob@example.com\n", "line 2 is not an allowed_signers entry"),
        ("alice@example.com ssh-ed25519\n", "line 1 is not an allowed_signers entry"),
    ],
)
def test_bad_allowed_signers_files_name_the_key_and_the_fix(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "allowed"
    path.write_text(text)
    with pytest.raises(UserError, match=rf"^approval.allowedSigners: .*{message}"):
        load_allowed_signers(path)


def test_an_unreadable_allowed_signers_path_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"approval.allowedSigners: cannot read .*directory"):
        load_allowed_signers(tmp_path)


@pytest.mark.parametrize(
    ("header", "kind"),
    [
        ("gpgsig -----BEGIN SSH SIGNATURE-----", "ssh"),
        ("gpgsig -----BEGIN PGP SIGNATURE-----", "OpenPGP"),
        ("gpgsig -----BEGIN SIGNED MESSAGE-----", "X.509"),
        ("encoding UTF-8", None),
    ],
)
def test_signature_kind_reads_the_commit_header(header: str, kind: str | None) -> None:
    raw = f"tree {'a' * 40}\nauthor A <a@x> 1 +0000\ncommitter A <a@x> 1 +0000\n{header}\n second\n\nmsg\n"
    assert signature_kind(raw) == kind
    # a signature quoted in the message is not a signature
    assert signature_kind(f"tree {'a' * 40}\n\ngpgsig -----BEGIN SSH SIGNATURE-----\n") is None


def test_approve_drops_https_credentials_but_keeps_ssh_users() -> None:
    assert _without_https_credentials("https://x-access-token:ghp_bot@github.com/o/c.git") == (
        "https://github.com/o/c.git"
    )
    assert _without_https_credentials("ssh://git@github.com/o/c.git") == "ssh://git@github.com/o/c.git"
    assert _without_https_credentials("git@github.com:o/c.git") == "git@github.com:o/c.git"


def test_an_allowed_signers_window_is_judged_now_not_at_the_commits_date() -> None:
    """git checks valid-before against the commit's own date, which the signer sets (a backdated
    commit by a key whose entry expired verifies): the gate checks it again at apply time."""
    import base64
    import hashlib
    from datetime import UTC, datetime

    from reconciler.apply.approval.signed import expired_now

    blob = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + bytes(range(32))
    key = base64.b64encode(blob).decode()
    fp = "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    expired = f'carol@example.com namespaces="git",valid-before="20261203110000Z" ssh-ed25519 {key} c\n'
    assert expired_now(expired, fp, now) == "valid-before 20261203110000Z"
    shouting = expired.replace("valid-before", "VALID-BEFORE")  # OpenSSH reads options in any case
    assert expired_now(shouting, fp, now) == "valid-before 20261203110000Z"
    assert expired_now(expired.replace("20261203110000Z", "20261231Z"), fp, now) == ""
    assert expired_now(f'carol@example.com valid-after="20270101Z" ssh-ed25519 {key}\n', fp, now)
    assert expired_now(f"carol@example.com ssh-ed25519 {key}\n", fp, now) == ""  # no window
    assert expired_now(expired, "SHA256:someone-else", now) == ""  # not this key's entry
    renewed = expired + f"carol@example.com ssh-ed25519 {key}\n"  # another entry of hers is valid
    assert expired_now(renewed, fp, now) == ""
