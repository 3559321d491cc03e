"""Forges: where scale-down proposals become pull requests (DESIGN §4: one module per forge).

Each module exposes `NAME` and `create(config, git_url, environ)`; a new forge is a new module plus
its line in `FACTORIES`. The proposal flow calls `make_forge(config.forge, git_url=config.git.url)`
and then `open_or_update`, which is the whole "one PR per proposal, edited in place" rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from reconciler.config.settings import ForgeConfig
from reconciler.domain.errors import UserError
from reconciler.gitops.forge import github, none
from reconciler.gitops.forge.base import (
    CLOSED,
    COUNTED_PERMISSIONS,
    OPEN,
    UNOPENED,
    Forge,
    PullRequest,
    Review,
    Reviews,
    count_reviews,
    latest_decisions,
    same_text,
)

Factory = Callable[[ForgeConfig, str, Mapping[str, str] | None], Forge]

FACTORIES: dict[str, Factory] = {
    none.NAME: none.create,
    github.NAME: github.create,
}


def make_forge(config: ForgeConfig, *, git_url: str = "", environ: Mapping[str, str] | None = None) -> Forge:
    """The forge `forge.type` names; `git_url` lets `none` say where to open the PR by hand."""
    factory = FACTORIES.get(config.type)
    if factory is None:
        known = ", ".join(sorted(FACTORIES))
        raise UserError(f"forge.type: unknown forge {config.type!r} (use one of: {known})")
    return factory(config, git_url, environ)


def open_or_update(forge: Forge, *, title: str, body: str, head: str, base: str) -> PullRequest:
    """The open pull request for `head` with this title and body: edited only if they changed,
    opened only if none is open (a racing planner's PR is adopted, never duplicated)."""
    existing = forge.find_open(head)
    if existing is None:
        return forge.open(title=title, body=body, head=head, base=base)
    return forge.update(existing, title=title, body=body)


__all__ = [
    "CLOSED",
    "COUNTED_PERMISSIONS",
    "FACTORIES",
    "OPEN",
    "UNOPENED",
    "Forge",
    "PullRequest",
    "Review",
    "Reviews",
    "count_reviews",
    "latest_decisions",
    "make_forge",
    "open_or_update",
    "same_text",
]
