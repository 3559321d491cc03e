"""Which removals listed on main apply can never accept under `approval.mode: signed`: the commit
that added each (traced as apply traces it, reconciler/apply/changes.py) carries no SSH signature at
all. Such a commit fails the signed gate whatever the allowed-signers file says, so the plan and
`status` can tell without it (a plan pod need not mount apply's file). A commit signed with an SSH
key the file does not list is left to apply, whose refusal names the fix (list the key).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import git

from reconciler.apply.approval.signed import NAME as SIGNED
from reconciler.apply.approval.signed import signature_kind
from reconciler.apply.changes import Unreadable, trace_removals
from reconciler.config.settings import Config
from reconciler.domain.errors import UserError
from reconciler.gitops.manifest import Manifest, parse_manifest
from reconciler.gitops.repo import WorkingCopy

_log = logging.getLogger(__name__)


def manifests_reader(copy: WorkingCopy, config: Config) -> Callable[[str], Manifest | Unreadable | None]:
    """Each commit's manifest, read once: None when there is none, Unreadable when it does not parse
    (the removals it might have brought are then refused, never credited to a later commit)."""
    manifests: dict[str, Manifest | Unreadable | None] = {}

    def manifest_at(sha: str) -> Manifest | Unreadable | None:
        if sha not in manifests:
            text = copy.read_file(config.manifest_path, sha)
            try:
                found = None if text is None else parse_manifest(text, f"{sha[:12]}:{config.manifest_path}")
                manifests[sha] = found
            except UserError as exc:
                manifests[sha] = Unreadable(str(exc))
        return manifests[sha]

    return manifest_at


def unsigned_removals(
    copy: WorkingCopy, config: Config, ref: str | None = None
) -> dict[tuple[str, str], str]:
    """(group, instance) -> the commit that added it, for each removal listed at `ref` (default: the
    tip of git.branch) whose adding commit has no SSH signature, under `approval.mode: signed`."""
    if config.approval.mode != SIGNED:
        return {}
    chain = copy.first_parent(ref or config.git.branch)
    if not chain:
        return {}
    introduced = trace_removals(chain, manifests_reader(copy, config))
    if not introduced:
        return {}
    repo = git.Repo(copy.path)
    kinds: dict[str, str | None] = {}
    found: dict[tuple[str, str], str] = {}
    for key, origin in introduced.items():
        if origin.unreadable:
            continue  # apply refuses it as untraceable, naming its own way out
        if origin.commit not in kinds:
            try:
                kinds[origin.commit] = signature_kind(repo.git.cat_file("commit", origin.commit))
            except git.GitCommandError as exc:
                _log.warning("cannot read commit %s: %s", origin.commit[:12], exc)
                kinds[origin.commit] = "unknown"
        if kinds[origin.commit] != "ssh" and kinds[origin.commit] != "unknown":
            found[key] = origin.commit
    return found
