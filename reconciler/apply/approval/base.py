"""The approval gate: one question the apply stage asks before it drains anything (DESIGN §3.4).

For one commit C on the first-parent history of `git.branch` that brought scale-down changes onto
it (instances added under `removeInstances`, a group deleted), a gate says whether a person approved
C, who, and why in one line. One module per `approval.mode` implements it (DESIGN §4): `signed`
(the default), `github-reviews` and `protected-branch`; `make_gate` in `__init__` picks one.

A gate never raises for "not approved": that is a `Verdict` with `approved=False` and a reason that
names the fix. It raises `UserError` for configuration it cannot work with (a missing allowed-signers
file, github-reviews without a forge) and `OperationError` when git or the forge fails.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from reconciler.domain.verdict import Verdict

FetchRef = Callable[[str], None]
"""Bring one ref of the capacity repository's remote (such as GitHub's `refs/pull/N/head`) into the
repository a gate reads; raises ReconcilerError when it cannot. Given by whoever owns the clone."""


class ApprovalGate(Protocol):
    """One approval policy (reconciler/apply/approval/<mode>.py)."""

    @property
    def name(self) -> str:
        """The `approval.mode` this implements."""
        ...

    def check(self, commit: str, repo_path: Path) -> Verdict:
        """Is `commit` (a full sha on the first-parent line of `git.branch`) approved?

        `repo_path` is a git repository that holds the commit (the WorkingCopy's bare work dir);
        modes that ask a forge instead of git ignore it.
        """
        ...


def short(sha: str) -> str:
    """A commit as messages show it."""
    return sha[:12]
