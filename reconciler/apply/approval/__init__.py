"""Approval gates: may apply act on a scale-down that reached `git.branch`? (DESIGN §3.4, §4)

One small interface (`base.ApprovalGate`: `name`, `check(commit, repo_path) -> Verdict`) and one
module per `approval.mode`, each exposing `NAME` and `create(config, forge, environ)`; a new mode is
a new module plus its line in `FACTORIES`, and nothing else moves. docs/approval.md explains each.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from reconciler.apply.approval import github_reviews, protected_branch, signed
from reconciler.apply.approval.base import ApprovalGate, FetchRef
from reconciler.config.settings import Config
from reconciler.domain.errors import UserError
from reconciler.domain.verdict import Verdict
from reconciler.gitops.forge.base import Forge

Factory = Callable[[Config, Forge | None, Mapping[str, str] | None, FetchRef | None], ApprovalGate]

FACTORIES: dict[str, Factory] = {
    signed.NAME: signed.create,
    github_reviews.NAME: github_reviews.create,
    protected_branch.NAME: protected_branch.create,
}


def make_gate(
    config: Config,
    *,
    forge: Forge | None = None,
    environ: Mapping[str, str] | None = None,
    fetch: FetchRef | None = None,
) -> ApprovalGate:
    """The gate `approval.mode` names, checked as far as it can be before the first commit.

    `forge` is used by `github-reviews` (default: made from `config.forge`, with its token from
    `environ`), and `fetch` lets it bring a squashed pull request's head into the repository it
    reads; the other modes ignore both. UserError for a configuration the gate cannot work with.
    """
    factory = FACTORIES.get(config.approval.mode)
    if factory is None:
        known = ", ".join(sorted(FACTORIES))
        raise UserError(f"approval.mode: unknown mode {config.approval.mode!r} (use one of: {known})")
    return factory(config, forge, environ, fetch)


__all__ = ["FACTORIES", "ApprovalGate", "FetchRef", "Verdict", "make_gate"]
