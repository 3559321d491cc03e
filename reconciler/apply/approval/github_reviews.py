"""`approval.mode: github-reviews`: C is the merge of a pull request people who may write approved,
and C brings nothing but what that pull request proposed.

Asked of the forge: which pull request was merged as C (GitHub: `GET /repos/{repo}/commits/{sha}/pulls`),
then its reviews, counted by `count_reviews` (reconciler/gitops/forge/base.py) the way GitHub's
branch protection counts them, in the safe direction: each reviewer's latest deciding review;
approvals only of the pull request's final head (a review of an older head saw other content); only
people with write, maintain or admin permission (anyone who can read may submit an approving
review, and the plan bot's token may submit reviews by design); never a bot, the pull request's
author, the reading token's own account or a login in `approval.ignoreReviewers`; and any
outstanding "changes requested" blocks.

Then asked of git: GitHub marks a pull request merged, with C as its `merge_commit_sha`, when someone
pushes a merge of its head with plain git, whatever else that merge changes. So the removals C's own
diff adds (against its first parent) must all be removals the approved head proposes (listed there,
not listed where it branched from main); anything more is refused. A squash merge's head is on no
branch of main: it is fetched from `refs/pull/N/head`, which GitHub keeps.

A commit pushed straight to the branch, or one of several commits a rebase-merge put there, is no
pull request's merge commit and is refused: merge scale-downs with a merge commit or a squash.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from reconciler.apply.approval.base import FetchRef, short
from reconciler.apply.changes import removals
from reconciler.config.settings import Config
from reconciler.domain.errors import OperationError, ReconcilerError, UserError
from reconciler.domain.verdict import Verdict
from reconciler.gitops.forge import make_forge
from reconciler.gitops.forge.base import Forge, PullRequest
from reconciler.gitops.manifest import parse_manifest

NAME = "github-reviews"
_REPO_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR")

ContentCheck = Callable[[Path, str, PullRequest], str | None]
"""`(repo_path, merge commit, pull request)` -> why the merge brings more than was approved, or None."""


@dataclass(frozen=True)
class GitHubReviewsGate:
    forge: Forge
    content: ContentCheck  # see MergedContent: what the merge adds against what was approved
    min_approvals: int = 1
    ignore: tuple[str, ...] = ()  # approval.ignoreReviewers

    name = NAME

    def check(self, commit: str, repo_path: Path) -> Verdict:
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
        reviews = self.forge.reviews(pr, pr.head_sha, ignore=self.ignore)
        head = short(pr.head_sha)
        where = f"pull request #{pr.number} (merged as {short(commit)})"
        if reviews.changes_requested_by:
            names = ", ".join(reviews.changes_requested_by)
            return Verdict(
                False,
                "",
                f"{where} still has changes requested by {names}; they must approve it or the review "
                "must be dismissed",
            )
        if not reviews.approved(self.min_approvals):
            count = len(reviews.approved_by)
            approvers = f" ({', '.join(reviews.approved_by)})" if reviews.approved_by else ""
            skipped = f"; not counted: {'; '.join(reviews.not_counted)}" if reviews.not_counted else ""
            return Verdict(
                False,
                "",
                f"{where} has {count}{approvers} of the {self.min_approvals} approvals of its head "
                f"{head} that approval.minApprovals asks for, counting people with write access only "
                f"(approvals of an older head do not count){skipped}",
            )
        extra = self.content(repo_path, commit, pr)
        if extra is not None:
            return Verdict(False, "", f"{where}: {extra}")
        by = ", ".join(reviews.approved_by)
        return Verdict(True, by, f"{where} approved on {head} by {by}")


@dataclass(frozen=True)
class MergedContent:
    """Compare what merge commit M adds with what pull request P's approved head H proposes, in git.

    Added by M: removals listed at M whose instance its first parent does not list (apply's rule 4
    trace asks the gate about M for exactly these). Proposed by H: removals listed at H whose
    instance is not listed at the merge base of H and M's first parent (what the reviewers saw in
    the pull request's diff). A removal H merely inherited from an older main and that main
    withdrew since is not proposed: a clean merge drops it again."""

    manifest_path: str
    fetch: FetchRef | None = None  # brings `refs/pull/N/head` into the repository when H is missing
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ, repr=False)
    timeout: float = 60.0

    def __call__(self, repo_path: Path, merge: str, pr: PullRequest) -> str | None:
        head = pr.head_sha
        if not self._has(repo_path, head):
            pull_ref = f"refs/pull/{pr.number}/head"
            why = ""
            if self.fetch is not None:
                try:
                    self.fetch(pull_ref)
                except ReconcilerError as exc:
                    why = f" ({exc})"
            if not self._has(repo_path, head):
                return (
                    f"its approved head {short(head)} is not in the repository apply reads and fetching "
                    f"{pull_ref} did not bring it{why}, so what {short(merge)} may add cannot be checked"
                )
        parents = self._git(repo_path, "rev-parse", f"{merge}^@").split()
        parent = parents[0] if parents else None
        base = self._merge_base(repo_path, parent, head) if parent else None
        try:
            at_merge, at_parent = self._removals(repo_path, merge), self._removals(repo_path, parent)
            at_head, at_base = self._removals(repo_path, head), self._removals(repo_path, base)
        except UserError as exc:
            return f"cannot tell what {short(merge)} adds: {exc}"
        listed_before = {instance for _, instance in at_parent}
        inherited = {instance for _, instance in at_base}
        added = {(g, i) for g, i in at_merge if i not in listed_before}
        proposed = {(g, i) for g, i in at_head if i not in inherited}
        extra = sorted(added - proposed)
        if not extra:
            return None
        names = ", ".join(f"{group}/{instance}" for group, instance in extra)
        return (
            f"{short(merge)} adds removals its approved head {short(head)} does not propose: {names} "
            "(a merge pushed by hand, or an edit made while merging); only what the reviewers approved "
            "may be removed: withdraw them from removeInstances and propose them in a pull request"
        )

    def _removals(self, repo_path: Path, commit: str | None) -> set[tuple[str, str]]:
        """(group, instance) listed at `commit`; none without a manifest; UserError if unreadable."""
        if commit is None:
            return set()
        spec = f"{commit}:{self.manifest_path}"
        blob = self._run(repo_path, "rev-parse", "--verify", "--quiet", spec)
        if blob.returncode != 0:
            return set()  # no manifest at that commit
        raw = self._run_bytes(repo_path, "cat-file", "blob", blob.stdout.strip())
        label = f"{short(commit)}:{self.manifest_path}"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise UserError(f"{label}: the manifest is not UTF-8 text") from None
        return removals(parse_manifest(text, label))

    def _has(self, repo_path: Path, sha: str) -> bool:
        return self._run(repo_path, "cat-file", "-e", f"{sha}^{{commit}}").returncode == 0

    def _merge_base(self, repo_path: Path, a: str, b: str) -> str | None:
        result = self._run(repo_path, "merge-base", a, b)
        if result.returncode != 0:
            return None  # no common history: the head proposes everything it lists
        return result.stdout.strip() or None

    def _git(self, repo_path: Path, *args: str) -> str:
        result = self._run(repo_path, *args)
        if result.returncode != 0:
            reason = (result.stderr.strip().splitlines() or ["failed"])[-1]
            raise OperationError(f"git {args[0]} in {repo_path}: {reason}")
        return result.stdout

    def _run(self, repo_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                ["git", *args],
                cwd=repo_path,
                env=self._env(),
                capture_output=True,
                text=True,
                timeout=self.timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise OperationError(f"git {args[0]} in {repo_path}: {exc}") from None

    def _run_bytes(self, repo_path: Path, *args: str) -> bytes:
        try:
            result = subprocess.run(
                ["git", *args], cwd=repo_path, env=self._env(), capture_output=True, timeout=self.timeout
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise OperationError(f"git {args[0]} in {repo_path}: {exc}") from None
        if result.returncode != 0:
            raise OperationError(f"git {args[0]} in {repo_path}: {result.stderr.decode(errors='replace')}")
        return result.stdout

    def _env(self) -> dict[str, str]:
        return {k: v for k, v in self.environ.items() if k not in _REPO_VARS}


def create(
    config: Config, forge: Forge | None, environ: Mapping[str, str] | None, fetch: FetchRef | None = None
) -> GitHubReviewsGate:
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
    content = MergedContent(config.manifest_path, fetch)
    return GitHubReviewsGate(forge, content, config.approval.min_approvals, config.approval.ignore_reviewers)
