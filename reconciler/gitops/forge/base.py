"""The forge interface: what the scale-down proposal flow needs from a pull-request host.

Kept small on purpose (DESIGN §4): one module per forge implements it, and the proposal flow and
the `github-reviews` approval gate talk only to this. Every method is one decision the flow makes
(find, open, edit, comment, keep one comment up to date, close, read reviews, read
the merge), so a forge without pull requests (`forge.type: none`) can still honour it by opening
nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from reconciler.domain.errors import ReconcilerError

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
    author: str = ""  # login of whoever opened it (the plan bot, for its proposals)

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
    user_type: str = "User"  # GitHub's `user.type`: "Bot" for an app's `name[bot]` account
    author_association: str = ""  # how they relate to the repository (OWNER, MEMBER, NONE...): shown only

    @property
    def by_bot(self) -> bool:
        """An app or a workflow token (`github-actions[bot]`), never a person."""
        return self.user_type.lower() == "bot" or self.login.lower().endswith("[bot]")


# What a reviewer's permission must be for their approval to count: what GitHub's branch protection
# counts (write access). GitHub reports maintain as write; `maintain` is accepted in case it does not.
COUNTED_PERMISSIONS = frozenset({"admin", "maintain", "write"})

Permission = Callable[[str], str]
"""A reviewer's permission on the repository (admin, write, read, none); raises ReconcilerError
when the forge cannot say."""


@dataclass(frozen=True)
class Reviews:
    """Who approves `head_sha` now, counting only people who may write (see count_reviews)."""

    head_sha: str
    approved_by: tuple[str, ...]  # counted reviewers whose latest word approves `head_sha`
    changes_requested_by: tuple[str, ...]  # anyone whose latest word is "changes requested"
    standing: tuple[str, ...] = ()  # counted reviewers whose latest word approves, on any commit
    unsure: tuple[str, ...] = ()  # approvers whose permission the forge could not tell
    not_counted: tuple[str, ...] = ()  # "login (why)" for every approval that does not count

    def approved(self, min_approvals: int) -> bool:
        """Enough approvals of the current head and nobody's latest word is "changes requested"."""
        return len(self.approved_by) >= min_approvals and not self.changes_requested_by

    @property
    def locks(self) -> bool:
        """A person's approval may still stand (theirs, or one whose permission is unknown): the
        proposal may only shrink from here (DESIGN §3 rule 3)."""
        return bool(self.standing or self.unsure)


_DECIDING = frozenset({"APPROVED", "CHANGES_REQUESTED", "DISMISSED"})


def latest_decisions(reviews: Iterable[Review]) -> dict[str, Review]:
    """Each user's latest deciding review (GitHub's semantics): a comment-only review does not change
    a user's standing, so only APPROVED, CHANGES_REQUESTED and DISMISSED decide, and the latest of
    those wins (a request for changes after an approval withdraws it, a dismissal cancels either)."""
    latest: dict[str, Review] = {}
    for review in reviews:
        if review.state.upper() in _DECIDING and review.login:
            latest[review.login.lower()] = review  # the list is chronological: later ones win
    return latest


def count_reviews(
    reviews: Iterable[Review], head_sha: str, *, permission: Permission, never: Mapping[str, str]
) -> Reviews:
    """Apply GitHub's review semantics to a review list, in the safe direction.

    Per user only the latest deciding review counts. An approval counts only when it is a person's
    (not a bot's), the person is not in `never` (login -> why: the pull request's author, the
    token's own account, approval.ignoreReviewers) and may write to the repository (`permission`
    asked once per approver; a failure counts as "not counted", never as yes), and only if it was
    given on `head_sha`: a commit pushed after it was never reviewed. Such an approval of an older
    commit still *stands* (it locks a proposal). A request for changes keeps blocking across pushes
    (as on GitHub) until that user approves or it is dismissed.
    """
    latest = latest_decisions(reviews)
    excluded = {login.lower(): why for login, why in never.items() if login}
    approved: list[str] = []
    standing: list[str] = []
    unsure: list[str] = []
    skipped: list[str] = []
    for review in sorted(latest.values(), key=lambda r: r.login.lower()):
        if review.state.upper() != "APPROVED":
            continue
        login = review.login
        if review.by_bot:
            skipped.append(f"{login} (a bot)")
            continue
        if login.lower() in excluded:
            skipped.append(f"{login} ({excluded[login.lower()]})")
            continue
        try:
            level = permission(login).lower()
        except ReconcilerError as exc:
            unsure.append(login)
            skipped.append(f"{login} (permission unknown: {exc})")
            continue
        if level not in COUNTED_PERMISSIONS:
            skipped.append(f"{login} (permission {level or 'none'})")
            continue
        standing.append(login)
        if review.commit_id == head_sha:
            approved.append(login)
        else:
            skipped.append(f"{login} (approved an older head {review.commit_id[:12]})")
    blocking = sorted(
        (r.login for r in latest.values() if r.state.upper() == "CHANGES_REQUESTED"), key=str.lower
    )
    return Reviews(head_sha, tuple(approved), tuple(blocking), tuple(standing), tuple(unsure), tuple(skipped))


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

    def ready(self) -> None:
        """Raise UserError now if this forge cannot be used (its token missing or unreadable): asked
        before a proposal branch is pushed, so a missing token never leaves a branch without its
        pull request. Local only: no request is sent."""
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

    def upsert_comment(
        self, number: int, marker: str, body: str, *, legacy: tuple[str, ...] = (), every: bool = False
    ) -> str:
        """Keep one comment on pull request `number` up to date: edit the comment of ours (written
        by this token's identity, never anyone else's) whose first line is `marker` (a hidden
        `<!-- ... -->` line), else our newest one with a `legacy` marker, or add one when there is
        none; never a second one. `body` must start with `marker`. Returns one line saying what
        was done.
        `every`: when this token cannot tell its own comment from another bot's, write `body` on every
        bot comment with the marker instead of refusing (a "failed" verdict, so no earlier "ok" stands)."""
        ...

    def reviews(self, pr: PullRequest, head_sha: str, *, ignore: Collection[str] = ()) -> Reviews:
        """Approvals of `head_sha` (the commit the gate is about to trust) by people who may write,
        never by a bot, the pull request's author, the token's own account or a login in `ignore`;
        see count_reviews."""
        ...

    def pull_for_commit(self, sha: str) -> PullRequest | None:
        """The merged pull request whose merge commit is `sha`, or None (a direct push, or a commit
        that only sits inside a pull request); the `github-reviews` approval gate asks this."""
        ...
