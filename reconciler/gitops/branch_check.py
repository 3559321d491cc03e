"""`git.branch` must name a branch the capacity repository has, unless the repository is new.

A typo (`mian`) would otherwise start a second, unrelated history: the first plan commits to a new
orphan branch, tracks every group again, and moves the cluster's shared state branch on, after which
apply refuses what it finds. Only an empty repository (or one holding nothing but this tool's own
branches, which a first plan with `scaleUp.review` leaves before `git.branch` exists) may have its
`git.branch` created by a plan.
"""

from __future__ import annotations

import difflib

from reconciler.gitops.errors import BranchMissingError
from reconciler.gitops.repo import WorkingCopy

OWN_PREFIX = "asg-reconciler/"  # proposal, review and state branches: created by plans, never by people
_SHOWN = 10  # branch names in the message: a fleet repository may hold hundreds of proposals


def missing_branch(branches: list[str], branch: str, url: str, source: str = "config") -> str | None:
    """Why `branch` cannot be used, given the remote's `branches`; None when it exists or when the
    repository has no branch but this tool's own (a plan creates `branch` there)."""
    if branch in branches:
        return None
    others = [b for b in branches if not b.startswith(OWN_PREFIX) and b != "HEAD"]
    if not others:
        return None
    close = difflib.get_close_matches(branch, others, n=1, cutoff=0.6)
    shown = ", ".join(others[:_SHOWN]) + (f" and {len(others) - _SHOWN} more" if len(others) > _SHOWN else "")
    hint = f"did you mean {close[0]}? " if close else ""
    return (
        f"{source}: git.branch: {branch} does not exist in {url}, which has the branches {shown}; "
        f"{hint}a plan would start a second, unrelated history there. Set "
        f"git.branch to the branch that holds the manifest, or create {branch} on the remote first "
        f"(git push origin <commit>:refs/heads/{branch})"
    )


def require_branch(copy: WorkingCopy, branch: str, source: str = "config") -> None:
    """A BranchMissingError (exit 2) when `branch` is missing from a repository that already has branches."""
    problem = missing_branch(copy.branches(), branch, copy.shown_url, source)
    if problem is not None:
        raise BranchMissingError(problem)
