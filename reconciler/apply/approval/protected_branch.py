"""`approval.mode: protected-branch`: whatever is on `git.branch` counts as approved.

It trusts whoever can push to the branch, and the plan bot can (that is how scale-ups land), so on
its own it lets the bot approve its own scale-downs. It is only safe where branch protection makes
every push to `git.branch` go through review and the bot cannot bypass it; never the default
(DESIGN §5.2, docs/approval.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from reconciler.apply.approval.base import FetchRef, short
from reconciler.config.settings import Config
from reconciler.domain.verdict import Verdict
from reconciler.gitops.forge.base import Forge

NAME = "protected-branch"
BY = "branch protection"


@dataclass(frozen=True)
class ProtectedBranchGate:
    branch: str = "main"

    name = NAME

    def check(self, commit: str, repo_path: Path) -> Verdict:
        del repo_path  # being on the branch is the whole test, and the caller established that
        return Verdict(
            True,
            BY,
            f"{short(commit)} is on {self.branch} and approval.mode is protected-branch, which trusts "
            f"whoever can push to {self.branch} (the plan bot included)",
        )


def create(
    config: Config, forge: Forge | None, environ: Mapping[str, str] | None, fetch: FetchRef | None = None
) -> ProtectedBranchGate:
    del forge, environ, fetch
    return ProtectedBranchGate(config.git.branch)
