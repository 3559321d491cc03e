"""`approval.mode: github-reviews`: C is the merge of a pull request its reviewers approved.

Asked of the forge, not of git: which pull request was merged as C (GitHub:
`GET /repos/{repo}/commits/{sha}/pulls`), then its reviews, counted by `summarize_reviews`
(reconciler/gitops/forge/base.py) the way GitHub's branch protection counts them, in the safe
direction: each reviewer's latest deciding review, approvals only of the pull request's final head
(a review of an older head saw other content), and any outstanding "changes requested" blocks.
A commit pushed straight to the branch, or one of several commits a rebase-merge put there, is no
pull request's merge commit and is refused: merge scale-downs with a merge commit or a squash.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from reconciler.apply.approval.base import Verdict, short
from reconciler.config import Config
from reconciler.errors import UserError
from reconciler.gitops.forge import make_forge
from reconciler.gitops.forge.base import Forge

NAME = "github-reviews"


@dataclass(frozen=True)
class GitHubReviewsGate:
    forge: Forge
    min_approvals: int = 1

    name = NAME

    def check(self, commit: str, repo_path: Path) -> Verdict:
        del repo_path  # the forge knows the merge and the reviews; git has neither
        pr = self.forge.pull_for_commit(commit)
        if pr is None:
            return Verdict(
                False,
                "",
                f"{short(commit)} is not the merge commit of a pull request; with approval.mode "
                "github-reviews scale-downs reach the branch only by merging a reviewed pull request",
            )
        if not pr.head_sha:
            return Verdict(False, "", f"pull request #{pr.number} (merged as {short(commit)}) has no head")
        reviews = self.forge.reviews(pr, pr.head_sha)
        head = short(pr.head_sha)
        if reviews.changes_requested_by:
            names = ", ".join(reviews.changes_requested_by)
            return Verdict(
                False,
                "",
                f"pull request #{pr.number} (merged as {short(commit)}) still has changes requested by "
                f"{names}; they must approve it or the review must be dismissed",
            )
        count = len(reviews.approved_by)
        if not reviews.approved(self.min_approvals):
            approvers = f" ({', '.join(reviews.approved_by)})" if reviews.approved_by else ""
            return Verdict(
                False,
                "",
                f"pull request #{pr.number} (merged as {short(commit)}) has {count}{approvers} of the "
                f"{self.min_approvals} approvals of its head {head} that approval.minApprovals asks "
                "for (approvals of an older head do not count)",
            )
        by = ", ".join(reviews.approved_by)
        return Verdict(
            True, by, f"pull request #{pr.number} (merged as {short(commit)}) approved on {head} by {by}"
        )


def create(config: Config, forge: Forge | None, environ: Mapping[str, str] | None) -> GitHubReviewsGate:
    """UserError naming both keys when there is no forge to ask."""
    forge_type = forge.name if forge is not None else config.forge.type
    if forge_type == "none":
        raise UserError(
            "approval.mode: github-reviews needs a forge that keeps reviews, but forge.type is none; "
            "set forge.type github (with forge.repo), or use approval.mode signed"
        )
    if config.approval.min_approvals < 1:
        raise UserError("approval.minApprovals: must be at least 1 with approval.mode github-reviews")
    if forge is None:
        forge = make_forge(config.forge, git_url=config.git.url, environ=environ)
    return GitHubReviewsGate(forge, config.approval.min_approvals)
