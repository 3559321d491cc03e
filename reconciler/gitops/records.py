"""Apply records: what `apply` did, kept as git notes on the commits of main it applied.

Apply pushes nothing but these (DESIGN §2). They answer three questions without any memory outside
Git (DESIGN §3 rule 9): which commit was applied last (apply acts only on first-parent commits of
the branch not older than it, rule 4), when each group last scaled up (the planner's
`delayAfterScaleUp`), and what happened (`history`). docs/gitops.md "Apply records" is the format.

One note per commit on `refs/notes/asg-reconciler`, a JSON object holding a list, because a commit
may be applied more than once (a partial apply, then a retry): appending never rewrites what is
there. Writers race safely: a rejected push fetches the notes ref and appends again on top of the
other writer's notes (`WorkingCopy.update_note`); the ref is never force-pushed. A note that does not
parse is skipped with a warning, never a crash, and never silently thrown away by a later append.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from reconciler.errors import OperationError
from reconciler.gitops.history import KIND_APPLY, NOTES_REF, Entry, LogRecord
from reconciler.gitops.repo import Identity, Update, WorkingCopy

__all__ = [
    "ACTIONS",
    "DEFAULT_APPLIER",
    "FORMAT_VERSION",
    "NOTES_REF",
    "ApplyRecord",
    "GroupRecord",
    "Note",
    "Records",
    "append_record",
    "decode_note",
    "encode_note",
    "history_entries",
    "last_applied",
    "last_scale_up",
    "merge_note",
    "newest_complete",
    "read_records",
    "record_message",
]

FORMAT_VERSION = 1
ACTIONS = ("scale-up", "scale-down", "none", "refused", "failed")
DEFAULT_APPLIER = Identity("asg-reconciler-apply", "asg-reconciler-apply@users.noreply.local")

_log = logging.getLogger(__name__)
_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")


@dataclass(frozen=True)
class GroupRecord:
    """What apply did to one node group. `terminated`: instance ids it terminated (scale-down)."""

    name: str
    action: str  # "scale-up" | "scale-down" | "none" | "refused" | "failed"
    desired_before: int
    desired_after: int
    terminated: tuple[str, ...] = ()
    detail: str = ""  # why refused or failed, in words; never a secret
    adopted: bool = False  # apply.drift adopt: desired_after is AWS's value, for plan to commit to main

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a group record needs the group's name")
        if self.action not in ACTIONS:
            raise ValueError(f"action {self.action!r} is not one of {', '.join(ACTIONS)}")
        for value in (self.desired_before, self.desired_after):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"desired capacity {value!r} is not a whole number >= 0")
        if not isinstance(self.terminated, tuple) or not all(isinstance(i, str) for i in self.terminated):
            raise ValueError("terminated must be a tuple of instance ids")
        if not isinstance(self.detail, str):
            raise ValueError("detail must be text")
        if not isinstance(self.adopted, bool):
            raise ValueError("adopted must be true or false")


@dataclass(frozen=True)
class ApplyRecord:
    """One apply run on one commit. `complete`: every group of the commit reached its target.

    `cluster` (empty when unknown) keeps clusters sharing one capacity repo apart: `history`
    filters on it, and so do `newest_complete` and `last_scale_up` when given a cluster.
    """

    commit: str
    applied_at: datetime  # timezone-aware; stored as UTC
    complete: bool
    groups: tuple[GroupRecord, ...]
    applier: str = ""
    cluster: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.commit, str) or not _SHA.match(self.commit):
            raise ValueError(f"commit {self.commit!r} is not a full commit id")
        if not isinstance(self.applied_at, datetime) or self.applied_at.tzinfo is None:
            raise ValueError("applied_at must be a timezone-aware time")
        if not isinstance(self.complete, bool):
            raise ValueError("complete must be true or false")
        if not isinstance(self.groups, tuple) or not all(isinstance(g, GroupRecord) for g in self.groups):
            raise ValueError("groups must be a tuple of group records")
        if not isinstance(self.applier, str) or not isinstance(self.cluster, str):
            raise ValueError("applier and cluster must be text")


# ------------------------------------------------------------------------------------ the format


def encode_record(record: ApplyRecord) -> dict[str, Any]:
    """One record as the JSON object stored in a note."""
    return {
        "applier": record.applier,
        "appliedAt": _iso(record.applied_at),
        "cluster": record.cluster,
        "commit": record.commit,
        "complete": record.complete,
        "groups": [
            {
                "action": g.action,
                **({"adopted": True} if g.adopted else {}),
                "desiredAfter": g.desired_after,
                "desiredBefore": g.desired_before,
                "detail": g.detail,
                "name": g.name,
                "terminated": list(g.terminated),
            }
            for g in record.groups
        ],
    }


def decode_record(data: Any) -> ApplyRecord:
    """The record in one stored JSON object; ValueError (or KeyError/TypeError) when it is not one."""
    if not isinstance(data, dict):
        raise ValueError("not an object")
    groups = data["groups"]
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        raise ValueError("groups is not a list of objects")
    for g in groups:
        if not isinstance(g.get("terminated", []), list):
            raise ValueError(f"terminated of {g.get('name')!r} is not a list")
    return ApplyRecord(
        commit=data["commit"],
        applied_at=_time(data["appliedAt"]),
        complete=data["complete"],
        groups=tuple(
            GroupRecord(
                name=g["name"],
                action=g["action"],
                desired_before=g["desiredBefore"],
                desired_after=g["desiredAfter"],
                terminated=tuple(g.get("terminated", ())),
                detail=g.get("detail", ""),
                adopted=g.get("adopted", False),
            )
            for g in groups
        ),
        applier=data.get("applier", ""),
        cluster=data.get("cluster", ""),
    )


def encode_note(records: Sequence[ApplyRecord]) -> str:
    """A note holding `records`, in order: `{"records": [...], "version": 1}`, keys sorted."""
    return _dump([encode_record(r) for r in records])


@dataclass(frozen=True)
class Note:
    """A note as read: the records that decoded, and a warning for everything skipped."""

    records: tuple[ApplyRecord, ...]
    warnings: tuple[str, ...] = ()


def decode_note(text: str, commit: str) -> Note:
    """The records in the note on `commit`; whatever does not parse is skipped with a warning.

    A record naming another commit (a note copied by a rebase, say) is skipped too: it is not a
    record of this commit.
    """
    where = f"apply record note on {commit[:12]}"
    raw, problem = _raw_records(text)
    if raw is None:
        return Note((), (f"{where}: {problem}; skipped",))
    records: list[ApplyRecord] = []
    warnings: list[str] = []
    for number, data in enumerate(raw, 1):
        try:
            record = decode_record(data)
        except (ValueError, KeyError, TypeError) as exc:
            warnings.append(f"{where}: record {number} is not valid ({_reason(exc)}); skipped")
            continue
        if record.commit != commit:
            warnings.append(f"{where}: record {number} is for commit {record.commit[:12]}; skipped")
            continue
        records.append(record)
    return Note(tuple(records), tuple(warnings))


def merge_note(current: str | None, record: ApplyRecord) -> str | None:
    """The note text with `record` appended to `current`, or None when it is already there.

    Records already in the note are kept exactly as stored, including ones this version cannot
    read. A note that is not a version-1 apply note at all is replaced (with a warning; the notes
    ref's history still holds it); a note from a newer format version is an OperationError rather
    than something to overwrite.
    """
    new = encode_record(record)
    raw: list[Any] = []
    if current is not None:
        found, problem = _raw_records(current)
        if found is None:
            version = _version_of(current)
            if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
                raise OperationError(
                    f"the apply record note on {record.commit[:12]} has format version {version}, newer"
                    f" than this asg-reconciler's {FORMAT_VERSION}: upgrade asg-reconciler to record there"
                )
            _log.warning(
                "apply record note on %s: %s; replaced (the old note stays in %s's history)",
                record.commit[:12],
                problem,
                NOTES_REF,
            )
        else:
            raw = found
    if new in raw:
        return None
    return _dump([*raw, new])


def record_message(record: ApplyRecord) -> str:
    """The notes commit's message: which commit, complete or not, each group's outcome.

    Only names and numbers: `detail` (free text from AWS or Kubernetes errors) stays in the note.
    """
    state = "complete" if record.complete else "partial"
    cluster = f"({record.cluster})" if record.cluster else ""
    lines = [f"apply{cluster}: {record.commit[:12]} {state}", ""]
    lines += [f"{g.name}: {g.action} {g.desired_before} -> {g.desired_after}" for g in record.groups]
    return "\n".join(lines) + "\n"


def _dump(raw: list[Any]) -> str:
    return json.dumps({"records": raw, "version": FORMAT_VERSION}, indent=2, sort_keys=True) + "\n"


def _raw_records(text: str) -> tuple[list[Any] | None, str]:
    """The stored record objects of a version-1 note, or None and why not."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, f"not JSON ({exc})"
    if not isinstance(data, dict):
        return None, "not a JSON object"
    if data.get("version") != FORMAT_VERSION:
        return None, f"format version {data.get('version')!r}, expected {FORMAT_VERSION}"
    records = data.get("records")
    if not isinstance(records, list):
        return None, "no records list"
    return records, ""


def _version_of(text: str) -> Any:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data.get("version") if isinstance(data, dict) else None


def _reason(exc: Exception) -> str:
    return f"missing {exc}" if isinstance(exc, KeyError) else str(exc)


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _time(value: Any) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"appliedAt {value!r} is not a time")
    when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if when.tzinfo is None:
        raise ValueError(f"appliedAt {value!r} has no time zone")
    return when.astimezone(UTC)


# ------------------------------------------------------------------------------ reading (pure)


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
    record (of `cluster`, when given), and its latest such record."""
    for commit, found in records.items():
        complete = [r for r in found if r.complete and (cluster is None or r.cluster == cluster)]
        if complete:
            return commit, max(complete, key=lambda r: r.applied_at)
    return None


def last_scale_up(
    records: Mapping[str, Sequence[ApplyRecord]] | Iterable[ApplyRecord], *, cluster: str | None = None
) -> dict[str, datetime]:
    """group -> when apply last scaled it up (complete or partial runs alike; failures do not count)."""
    if isinstance(records, Mapping):
        flat: Iterable[ApplyRecord] = (r for found in records.values() for r in found)
    else:
        flat = records
    latest: dict[str, datetime] = {}
    for record in flat:
        if cluster is not None and record.cluster != cluster:
            continue
        for group in record.groups:
            if group.action == "scale-up" and (
                group.name not in latest or record.applied_at > latest[group.name]
            ):
                latest[group.name] = record.applied_at
    return latest


def last_desired(records: Mapping[str, Sequence[ApplyRecord]], cluster: str) -> dict[str, int]:
    """Each group's DesiredCapacity as the newest apply of this cluster left it: a different value in
    AWS now was set by someone else (drift, DESIGN §3.7)."""
    newest_first = sorted(
        (r for found in records.values() for r in found if r.cluster == cluster),
        key=lambda r: r.applied_at,
        reverse=True,
    )
    left: dict[str, int] = {}
    for record in newest_first:
        for group in record.groups:
            left.setdefault(group.name, group.desired_after)
    return left


def history_entries(log_record: LogRecord) -> list[Entry]:
    """`history`'s `note_entries`: one kind="apply" entry per group of each record in the note."""
    note = decode_note(log_record.note, log_record.sha)
    for warning in note.warnings:
        _log.warning("%s", warning)
    entries = []
    for record in note.records:
        for g in record.groups:
            if g.action == "none" and not g.detail:
                continue  # a group apply found in sync: not an event of its history
            reason = f"{g.action}: {g.detail}" if g.detail else g.action
            if not record.complete:
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
                    reason,
                    record.commit,
                    record.applier,
                    instances=g.terminated,
                )
            )
    return entries


# ------------------------------------------------------------------------------------- with Git


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


def last_applied(
    copy: WorkingCopy, branch: str, *, cluster: str | None = None, fetch: bool = True
) -> tuple[str, ApplyRecord] | None:
    """The newest first-parent commit of `branch` with a complete record (of `cluster`, when given)."""
    return newest_complete(read_records(copy, branch, fetch=fetch), cluster=cluster)


def append_record(
    copy: WorkingCopy,
    record: ApplyRecord,
    *,
    applier: Identity | None = None,
    attempts: int = 5,
    wait_initial: float = 0.5,
    wait_max: float = 8.0,
) -> str | None:
    """Append `record` to its commit's note and push the notes ref; the new notes commit.

    None when the very same record is already there. The notes commit is authored and committed by
    `applier` (default `DEFAULT_APPLIER`), whose name also fills an empty `record.applier`. A push
    rejected because another writer moved the notes ref fetches it and appends again on top (their
    records on the same commit are kept, before ours); after `attempts` rejections, OperationError.
    """
    who = applier or DEFAULT_APPLIER
    if not record.applier:
        record = replace(record, applier=who.name)

    def change(current: str | None) -> Update | None:
        text = merge_note(current, record)
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
