"""Apply records in Git: read (all, or only the trusted ones), the last applied commit, and appended
with a rejected push fetched and appended again on top (the notes ref is never force-pushed).
"""

from __future__ import annotations

import logging

from reconciler.gitops.history import NOTES_REF
from reconciler.gitops.record_reading import Records, newest_complete
from reconciler.gitops.record_signing import Signer, Verifier
from reconciler.gitops.record_trust import TrustedRecords, trust_records
from reconciler.gitops.records import (
    DEFAULT_APPLIER,
    ApplyRecord,
    as_stored,
    decode_note,
    merge_note,
    record_message,
)
from reconciler.gitops.repo import (
    PUSH_ATTEMPTS,
    PUSH_WAIT_INITIAL,
    PUSH_WAIT_MAX,
    Identity,
    Update,
    WorkingCopy,
)

# ------------------------------------------------------------------------------------- with Git

_log = logging.getLogger("reconciler.gitops.records")  # the records modules share one logger


def read_records(copy: WorkingCopy, branch: str, *, fetch: bool = True) -> Records:
    """The records on the first-parent history of `branch` (as last fetched), newest commit first.

    Fetches the notes ref first unless `fetch` is False; it does not fetch `branch` itself (the
    caller synced it, and reads the manifest from the same tip). No notes ref yet: no records.
    A record on a commit off the first-parent line (a merged side branch) is not returned.
    """
    if fetch:
        copy.fetch_notes(NOTES_REF)
    chain = copy.first_parent(branch)
    notes = copy.read_notes(NOTES_REF, set(chain)) if chain else {}
    by_commit: dict[str, list[ApplyRecord]] = {}
    warnings: list[str] = []
    for commit in chain:
        text = notes.get(commit)
        if text is None:
            continue
        note = decode_note(text, commit)
        warnings += note.warnings
        if note.records:
            by_commit[commit] = list(note.records)
    for warning in warnings:
        _log.warning("%s", warning)
    return Records(by_commit, warnings)


def read_trusted_records(
    copy: WorkingCopy, cluster: str, verifier: Verifier, anchor: str | None, *, fetch: bool = False
) -> TrustedRecords:
    """`trust_records` over every note on the notes ref as last fetched (`fetch`: fetch it first).

    All notes, not only those on the branch's first-parent line: a record on a commit that a
    rewritten branch skips (a merge whose first parent is not the last applied commit) must still
    be seen, or rule 4 could be dodged by leaving the last applied commit off the first-parent line.
    """
    if fetch:
        copy.fetch_notes(NOTES_REF)
    return trust_records(copy.read_notes(NOTES_REF), cluster, verifier, anchor)


def last_applied(
    copy: WorkingCopy, branch: str, *, cluster: str | None = None, fetch: bool = True
) -> tuple[str, ApplyRecord] | None:
    """The newest first-parent commit of `branch` with a complete record (of `cluster`, when given)."""
    return newest_complete(read_records(copy, branch, fetch=fetch), cluster=cluster)


def append_record(
    copy: WorkingCopy,
    record: ApplyRecord,
    *,
    signer: Signer | None = None,
    applier: Identity | None = None,
    attempts: int = PUSH_ATTEMPTS,
    wait_initial: float = PUSH_WAIT_INITIAL,
    wait_max: float = PUSH_WAIT_MAX,
) -> str | None:
    """Append `record` to its commit's note and push the notes ref; the new notes commit.

    None when the very same record is already there. With a `signer` the stored object carries its
    signature over the canonical payload; `record.previous` is the caller's (the chain is not
    computed here). The notes commit is authored and committed by `applier` (default
    `DEFAULT_APPLIER`), whose name also fills an empty `record.applier`; details are redacted
    before signing (`record_digest(record, copy=copy)` is the stored record's digest). A push
    rejected because another writer moved the notes ref fetches it and appends again on top (their
    records on the same commit are kept, before ours); after `attempts` rejections, OperationError.
    """
    who = applier or DEFAULT_APPLIER
    record = as_stored(record, who, copy)

    def change(current: str | None) -> Update | None:
        text = merge_note(current, record, signer=signer)
        return None if text is None else Update(text, record_message(record))

    return copy.update_note(
        NOTES_REF,
        record.commit,
        change,
        identity=who,
        attempts=attempts,
        wait_initial=wait_initial,
        wait_max=wait_max,
    )
