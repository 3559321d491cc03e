"""Git's and the forge's typed failures: what metrics and logs label them by (never message text)."""

from __future__ import annotations

from reconciler.domain.errors import OperationError, UserError


class GitError(OperationError):
    """A git command or the capacity repository's remote failed."""

    edge = "git"


class ForgeError(OperationError):
    """The forge's API (GitHub) failed or could not be reached."""

    edge = "forge"


class WorkDirError(UserError):
    """`git.workDir` cannot be made or written: the deployment's to fix, so every command (`status`
    too, which otherwise shows a Git failure as a warning) stops on it with exit 2."""


class BranchMissingError(UserError):
    """`git.branch` names no branch of a repository that has others (a typo): the config's to fix,
    so every command (`status` too) stops on it with exit 2 instead of reading an empty history."""
