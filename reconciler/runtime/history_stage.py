"""`history`: every group's capacity entries, from the commits' trailers and apply's signed records.

Wiring only: fetch the capacity repository and apply's notes, read them with gitops/history.py, and
mark a record none of `apply.recordSigners` signed as unverified (none listed: shown as is).
`history --report` is report_stage.py; both read the same `git log`.
"""

from __future__ import annotations

from functools import partial

from reconciler.config.settings import Config
from reconciler.gitops.branch_check import require_branch
from reconciler.gitops.history import NOTES_REF, Entry, history_command
from reconciler.gitops.record_reading import history_entries
from reconciler.gitops.record_signing import load_verifier
from reconciler.runtime.capacity_repo import working_copy


def history_once(config: Config, node_group: str | None, since: str | None) -> list[Entry]:
    verifier = load_verifier(config.apply.record_signers, "apply.recordSigners")
    copy = working_copy(config)
    require_branch(copy, config.git.branch, config.source or "config")  # a typo is no empty history
    copy.fetch_notes(NOTES_REF)  # apply's records, shown beside the plan's commits
    return history_command(
        copy.path,
        config.cluster,
        node_group,
        since,
        ref=f"refs/remotes/origin/{config.git.branch}",
        note_entries=partial(history_entries, verifier=verifier) if verifier else history_entries,
    )
