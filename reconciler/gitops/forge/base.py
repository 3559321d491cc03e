"""The forge interface: what the scale-down proposal flow needs from a pull-request host.

Kept small on purpose (DESIGN §4): one module per forge implements it, and the proposal flow and
the `github-reviews` approval gate talk only to this. Every method is one decision the flow makes
(find, open, edit, comment, keep one comment up to date, close, read reviews, read
the merge), so a forge without pull requests (`forge.type: none`) can still honour it by opening
nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Protocol

OPEN = "open"
CLOSED = "closed"
UNOPENED = "unopened"  # forge.type none: the branch is pushed, a person opens the pull request


@dataclass(frozen=True)
class PullRequest:
    """A proposal as the forge sees it; `number` 0 means no forge opened one (see `message`)."""

    number: int
    url: str  # the pull request's page, or where a person would open it
    state: str  # OPEN | CLOSED | UNOPENED
    head: str  # branch name, without owner
    base: str
    title: str = ""
    body: str = ""
    head_sha: str = ""
    merged: bool = False
    merged_by: str | None = None  # login of whoever merged it
    merge_commit_sha: str | None = None
    message: str = ""  # one line for the user: what happened and where to look

    @property
    def opened(self) -> bool:
        return self.number > 0

    def with_text(self, title: str, body: str) -> PullRequest:
        return replace(self, title=title, body=body)


@dataclass(frozen=True)
class Review:
    """One submitted review, as the forge lists them (oldest first)."""

    login: str
    state: str  # APPROVED | CHANGES_REQUESTED | COMMENTED | DISMISSED | PENDING
    commit_id: str
    id: int = 0


@dataclass(frozen=True)
class Reviews:
    """Who approves `head_sha` now: each user's latest deciding review, approvals on that commit only."""

    head_sha: str
    approved_by: tuple[str, ...]
    changes_requested_by: tuple[str, ...]

    def approved(self, min_approvals: int) -> bool:
        """Enough approvals of the current head and nobody's latest word is "changes requested"."""
        return len(self.approved_by) >= min_approvals and not self.changes_requested_by


_DECIDING = frozenset({"APPROVED", "CHANGES_REQUESTED", "DISMISSED"})


def summarize_reviews(reviews: Iterable[Review], head_sha: str) -> Reviews:
    """Apply GitHub's review semantics to a review list, in the safe direction.

    A comment-only review does not change a user's standing, so only APPROVED, CHANGES_REQUESTED
    and DISMISSED decide, and the latest of those per user wins. An approval counts only if it was
    given on `head_sha`: a commit pushed after it was never reviewed. A request for changes keeps
    blocking across pushes (as on GitHub) until that user approves or it is dismissed.
    """
    latest: dict[str, Review] = {}
    for review in reviews:
        if review.state.upper() in _DECIDING and review.login:
            latest[review.login.lower()] = review  # the list is chronological: later ones win
    approved = sorted(
        r.login for r in latest.values() if r.state.upper() == "APPROVED" and r.commit_id == head_sha
    )
    blocking = sorted(r.login for r in latest.values() if r.state.upper() == "CHANGES_REQUESTED")
    return Reviews(head_sha, tuple(approved), tuple(blocking))


def same_text(a: str, b: str) -> bool:
    """Equal as a person reads them: the web editor stores CRLF and trims, which is not a change."""
    return a.replace("\r\n", "\n").strip() == b.replace("\r\n", "\n").strip()


class Forge(Protocol):
    """A pull-request host for scale-down proposals (reconciler/gitops/forge/<type>.py)."""

    @property
    def name(self) -> str:
        """The `forge.type` this implements."""
        ...

    @property
    def opens_pull_requests(self) -> bool:
        """False: the flow only pushes the branch, and `open` says where a person opens it."""
        ...

    def find_open(self, head: str) -> PullRequest | None:
        """The open pull request from branch `head` of this repository, if any."""
        ...

    def get(self, number: int) -> PullRequest:
        """A pull request by number, with its merge state and who merged it."""
        ...

    def open(self, *, title: str, body: str, head: str, base: str) -> PullRequest:
        """Open a pull request; if one is already open for `head` (a racing planner), return it."""
        ...

    def update(self, pr: PullRequest, *, title: str, body: str) -> PullRequest:
        """Edit title/body in place; sends nothing when both are unchanged (low noise)."""
        ...

    def comment(self, pr: PullRequest, body: str) -> None:
        """Add a comment to the conversation."""
        ...

    def close(self, pr: PullRequest, reason: str) -> PullRequest:
        """Close, and say why in a comment (the branch itself is deleted by the git layer)."""
        ...

    def upsert_comment(self, number: int, marker: str, body: str, *, legacy: tuple[str, ...] = ()) -> str:
        """Keep one comment on pull request `number` up to date: edit the comment of ours (written
        by this token's identity, never anyone else's) whose first line is `marker` (a hidden
        `<!-- ... -->` line), else our newest one with a `legacy` marker, or add one when there is
        none; never a second one. `body` must start with `marker`. Returns one line saying what
        was done."""
        ...

    def reviews(self, pr: PullRequest, head_sha: str) -> Reviews:
        """Approvals of `head_sha` (the commit the gate is about to trust); see summarize_reviews."""
        ...

    def pull_for_commit(self, sha: str) -> PullRequest | None:
        """The merged pull request whose merge commit is `sha`, or None (a direct push, or a commit
        that only sits inside a pull request); the `github-reviews` approval gate asks this."""
        ...
