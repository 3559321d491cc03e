"""Apply records read (pure): the newest complete one per commit, the last scale-up and desired per
group, `history` entries; and when a new record is worth writing at all (no idle writes).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime

from reconciler.domain.durations import standing
from reconciler.gitops.history import KIND_APPLY, Entry, LogRecord
from reconciler.gitops.record_signing import Verifier
from reconciler.gitops.records import ApplyRecord, stored_records

# ------------------------------------------------------------------------------ reading (pure)

_log = logging.getLogger("reconciler.gitops.records")  # the records modules share one logger


class Records(Mapping[str, list[ApplyRecord]]):
    """commit -> its records (in note order), for the commits that have any, newest commit first.

    `warnings` says what was skipped because it did not parse (each was also logged).
    """

    def __init__(
        self, by_commit: Mapping[str, Sequence[ApplyRecord]] | None = None, warnings: Sequence[str] = ()
    ) -> None:
        self._by_commit = {sha: list(found) for sha, found in (by_commit or {}).items() if found}
        self.warnings = tuple(warnings)

    def __getitem__(self, commit: str) -> list[ApplyRecord]:
        return self._by_commit[commit]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_commit)

    def __len__(self) -> int:
        return len(self._by_commit)

    def __repr__(self) -> str:
        return f"Records({self._by_commit!r}, warnings={self.warnings!r})"


def newest_complete(
    records: Mapping[str, Sequence[ApplyRecord]], *, cluster: str | None = None
) -> tuple[str, ApplyRecord] | None:
    """The first commit of `records` (newest first, as `read_records` orders them) with a complete
    record (of `cluster`, when given), and its latest such record (by `appliedAt`, then the note's
    order: `appliedAt` has whole seconds)."""
    for commit, found in records.items():
        complete = [
            (r.applied_at, at, r)
            for at, r in enumerate(found)
            if r.complete and (cluster is None or r.cluster == cluster)
        ]
        if complete:
            return commit, max(complete, key=lambda item: item[:2])[2]
    return None


def newest_first(records: Mapping[str, Sequence[ApplyRecord]]) -> list[ApplyRecord]:
    """Every record, newest first, in a total order: by `appliedAt`, and where that ties (it has
    whole seconds, and a run's intents share the second of its result) by place: a newer commit
    first (apply never acts on a commit older than the last one it acted on, DESIGN §3 rule 4),
    and on one commit the note's order read backwards (records are appended, never rewritten)."""
    placed = [
        (record.applied_at, -rank, at, record)
        for rank, found in enumerate(records.values())
        for at, record in enumerate(found)
    ]
    return [item[3] for item in sorted(placed, key=lambda item: item[:3], reverse=True)]


def last_scale_up(
    records: Mapping[str, Sequence[ApplyRecord]] | Iterable[ApplyRecord], *, cluster: str | None = None
) -> dict[str, datetime]:
    """group -> when apply last scaled it up (complete or partial runs alike; failures do not count).
    A raise is a desired that went up, whatever else the group's record says (a raise beside a
    refused removal is recorded as "refused")."""
    if isinstance(records, Mapping):
        flat: Iterable[ApplyRecord] = (r for found in records.values() for r in found)
    else:
        flat = records
    latest: dict[str, datetime] = {}
    for record in flat:
        if cluster is not None and record.cluster != cluster:
            continue
        for group in record.groups:
            raised = group.action == "scale-up" or (
                group.action != "failed" and group.desired_after > group.desired_before
            )
            if raised and (group.name not in latest or record.applied_at > latest[group.name]):
                latest[group.name] = record.applied_at
    return latest


def last_desired(
    records: Mapping[str, Sequence[ApplyRecord]],
    cluster: str,
    *,
    before: datetime | None = None,
    observed: Mapping[str, int] | None = None,
    in_service: Callable[[str], bool] | None = None,
) -> dict[str, int]:
    """Each group's DesiredCapacity as the newest apply of this cluster (or the newest before
    `before`) left it: a different value in AWS now was set by someone else (drift, DESIGN §3.7).

    Newest by `newest_first`, never by `appliedAt` alone: after a clean 3 -> 1 the run's first
    intent (3 -> 2) shares the second of its result (3 -> 1), and must not be taken for the last
    word (`status` would then call our own 1 drift "from 2"). An open intent counts by its effect,
    as apply reads it (TrustedRecords.last_desired), when the caller knows AWS now: a termination
    whose instance is still `in_service`, or a raise whose group is not at its target (`observed`),
    never happened, and the group is at the intent's "before"."""
    left: dict[str, int] = {}
    for record in newest_first(records):
        if record.cluster != cluster or (before is not None and record.applied_at >= before):
            continue
        for group in record.groups:
            if group.name in left:
                continue
            not_done = False
            if record.phase == "intent" and group.terminated and in_service is not None:
                not_done = any(in_service(i) for i in group.terminated)
            elif record.phase == "intent" and not group.terminated and observed is not None:
                not_done = observed.get(group.name) != group.desired_after
            left[group.name] = group.desired_before if not_done else group.desired_after
    return left


def history_entries(log_record: LogRecord, *, verifier: Verifier | None = None) -> list[Entry]:
    """`history`'s `note_entries`: one kind="apply" entry per group of each record in the note.

    With a `verifier` that has keys (`apply.recordSigners`), a record it does not verify says so:
    its reason ends in " (unverified: ...)" — not apply's word, whoever wrote it. Without one,
    records are shown as they are (`functools.partial(history_entries, verifier=v)` for history).
    """
    found, warnings = stored_records(log_record.note, log_record.sha)
    for warning in warnings:
        _log.warning("%s", warning)
    entries = []
    finished = {s.record.run for s in found if s.record.phase == "done" and s.record.run}
    for stored in found:
        record = stored.record
        if record.phase == "intent" and record.run in finished:
            continue  # its run recorded the result too: one event, shown once
        unverified = ""
        if verifier and stored.signed_by(verifier) is None:
            unverified = " (unverified: not signed by a key in apply.recordSigners)"
        for g in record.groups:
            if g.action == "none" and not g.detail:
                continue  # a group apply found in sync: not an event of its history
            reason = f"{g.action}: {g.detail}" if g.detail else g.action
            if record.phase == "intent":
                reason += " (the run stopped before recording its result)"
            elif not record.complete:
                reason += " (partial apply)"
            up, down = g.desired_after > g.desired_before, g.desired_after < g.desired_before
            entries.append(
                Entry(
                    KIND_APPLY,
                    record.cluster,
                    g.name,
                    record.applied_at,
                    g.desired_before,
                    g.desired_after,
                    "up" if up else "down" if down else "none",
                    reason + unverified,
                    record.commit,
                    record.applier,
                    instances=g.terminated,
                )
            )
    return entries


# ------------------------------------------------------------------- when to write (pure)

# Records of one commit that change nothing (a refusal, a failure, drift seen, a removal waiting)
# written at most: a condition flapping for days must not grow a note without bound. Records of
# changes are always written (docs/gitops.md "When apply writes a record").
OBSERVATIONS_PER_COMMIT = 20
_CHANGES = ("scale-up", "scale-down")


def is_change(record: ApplyRecord) -> bool:
    """Whether the run changed AWS (a raise, a termination) or what main is to say (an adoption). A
    desired that moved counts whatever the group's action says: a raise beside a refused removal is
    recorded as "refused", and is still a raise."""
    return any(
        g.action in _CHANGES or g.terminated or g.adopted or g.desired_after != g.desired_before
        for g in record.groups
    )


def _baseline_moved(record: ApplyRecord, latest: ApplyRecord | None) -> bool:
    """Whether a group's desired differs from the newest record's: that record is the baseline the
    next run measures drift against, so a record that moves it is always written (a desired lowered
    by hand, seen once past the cap, would otherwise be reported as new drift on every run)."""
    if latest is None:
        return True
    before = {g.name: g.desired_after for g in latest.groups}
    return any(before.get(g.name) != g.desired_after for g in record.groups)


def what_is_new(record: ApplyRecord, latest: ApplyRecord | None) -> str:
    """Why `record` (a run's result, not written yet) says something the newest trusted record
    `latest` does not; "" when it says nothing new: the same commit, the same completeness, each
    group at the same desired, adopted or not, with the same refusal or failure (its durations and
    percentages aside). The quiet run after a change is not news; drift is (it is measured against
    the last record, so the run after it sees none)."""
    if latest is None:
        return "the first record"
    if latest.phase != "done":
        return "the last record is an intent: this is its result"
    if record.commit != latest.commit:
        return f"a new commit, {record.commit[:12]}"
    if record.cluster != latest.cluster:
        return "another cluster's record"
    if record.complete != latest.complete:
        return "complete now" if record.complete else "not complete now"
    now = {g.name: g for g in record.groups}
    before = {g.name: g for g in latest.groups}
    if now.keys() != before.keys():
        return "other groups"
    for name, group in now.items():
        last = before[name]
        if group.action in _CHANGES or group.terminated:
            return f"{name}: {group.action}"
        if (group.desired_after, group.adopted) != (last.desired_after, last.adopted):
            return f"{name}: desired {last.desired_after} -> {group.desired_after}"
        if group.action == "none" and last.action in (*_CHANGES, "none"):
            continue  # its notes are events (drift seen, a raise capped), said once
        if group.action != last.action or standing(group.detail) != standing(last.detail):
            return f"{name}: {group.action}: {group.detail}"
    return ""


def worth_writing(
    record: ApplyRecord, latest: ApplyRecord | None, *, on_commit: int, acted: bool = False
) -> str:
    """Why to write `record` ("" to skip it): news (`what_is_new`) that is a change, or that the
    run `acted` outside its groups (it recorded an intent, gave a node back, was interrupted), or an
    observation while the note on its commit holds fewer than OBSERVATIONS_PER_COMMIT records
    (`on_commit`, apply's own)."""
    why = what_is_new(record, latest)
    if acted:
        return why or "the run changed the cluster"
    if not why or is_change(record) or _baseline_moved(record, latest) or on_commit < OBSERVATIONS_PER_COMMIT:
        return why
    return ""
