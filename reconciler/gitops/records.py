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

The plan bot's credentials can push the notes ref too, so apply signs each record with its own key
(`record_signing`), chains it to the record before (`previous`, a digest) and keeps the newest one's
digest on its Lease, where the bot cannot write (the anchor). `read_trusted_records` is what apply
decides on: only records that verify count, and a missing or changed latest record is a problem
(removals refused) rather than a licence. `read_records` and the helpers below it read everything,
unverified, for the planner, `status` and `history`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from reconciler.config.documents import JSON_TOO_DEEP
from reconciler.domain.durations import standing
from reconciler.domain.model import APPLY_LEASE_NAMESPACE, APPLY_LEASE_PREFIX, RECORD_ANCHOR_ANNOTATION
from reconciler.gitops.errors import GitError
from reconciler.gitops.history import KIND_APPLY, NOTES_REF, Entry, LogRecord
from reconciler.gitops.record_signing import Signer, Verifier
from reconciler.gitops.repo import (
    PUSH_ATTEMPTS,
    PUSH_WAIT_INITIAL,
    PUSH_WAIT_MAX,
    Identity,
    Update,
    WorkingCopy,
)

__all__ = [
    "ACTIONS",
    "DEFAULT_APPLIER",
    "FORMAT_VERSION",
    "NOTES_REF",
    "OBSERVATIONS_PER_COMMIT",
    "PHASES",
    "ApplyRecord",
    "GroupRecord",
    "Note",
    "Records",
    "StoredRecord",
    "TrustedRecords",
    "append_record",
    "canonical_payload",
    "decode_note",
    "encode_note",
    "history_entries",
    "is_change",
    "last_applied",
    "last_scale_up",
    "merge_note",
    "newest_complete",
    "read_records",
    "read_trusted_records",
    "record_digest",
    "record_message",
    "signed_object",
    "stored_records",
    "trust_records",
    "what_is_new",
    "worth_writing",
]

FORMAT_VERSION = 1
ACTIONS = ("scale-up", "scale-down", "none", "refused", "failed")
PHASES = ("done", "intent")  # intent: written before a termination (write-ahead); done: the result
DEFAULT_APPLIER = Identity("asg-reconciler-apply", "asg-reconciler-apply@users.noreply.local")
# What a signature covers: this context, then the canonical payload. The context keeps a signature
# made for a record from meaning anything else, should the key ever sign something else.
SIGNED_CONTEXT = b"asg-reconciler apply record v1\n"

_log = logging.getLogger(__name__)
_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_DIGEST = re.compile(r"^[0-9a-f]{64}$")


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

    `run` names the apply run (random); `phase` is "intent" for the write-ahead record apply appends
    before it terminates an instance (complete false, one scale-down group naming the instance) and
    "done" for a run's result; `previous` is the digest of the record apply wrote before this one
    for the same cluster (a hash chain; "" for the first).
    """

    commit: str
    applied_at: datetime  # timezone-aware; stored as UTC
    complete: bool
    groups: tuple[GroupRecord, ...]
    applier: str = ""
    cluster: str = ""
    run: str = ""
    phase: str = "done"
    previous: str = ""

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
        if not isinstance(self.run, str):
            raise ValueError("run must be text")
        if self.phase not in PHASES:
            raise ValueError(f"phase {self.phase!r} is not one of {', '.join(PHASES)}")
        if self.phase == "intent" and self.complete:
            raise ValueError("an intent record is never complete")
        if not isinstance(self.previous, str) or (self.previous and not _DIGEST.match(self.previous)):
            raise ValueError(f"previous {self.previous!r} is not a record digest")


# ------------------------------------------------------------------------------------ the format


def encode_record(record: ApplyRecord) -> dict[str, Any]:
    """One record as the JSON object stored in a note (without a signature; `signed_object` adds
    it). `run`, `phase` and `previous` are left out at their defaults, so a record without them
    reads and writes exactly as before they existed."""
    return {
        **({"run": record.run} if record.run else {}),
        **({"phase": record.phase} if record.phase != "done" else {}),
        **({"previous": record.previous} if record.previous else {}),
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
        run=data.get("run", ""),
        phase=data.get("phase", "done"),
        previous=data.get("previous", ""),
    )


def canonical_payload(data: Mapping[str, Any]) -> bytes:
    """What a record's digest and signature cover: its stored object without `signature`, as
    compact JSON with sorted keys (ASCII). Computed from the object as stored, so a field this
    version does not know is covered too."""
    body = {key: value for key, value in data.items() if key != "signature"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def record_digest(
    record: ApplyRecord, *, applier: Identity | None = None, copy: WorkingCopy | None = None
) -> str:
    """The digest (sha256, hex) of `record` as `append_record(copy, record, applier=...)` stores
    it: an empty `applier` filled the same way (default `DEFAULT_APPLIER`) and, given the `copy`,
    each `detail` without what the copy keeps out of Git (its token, URL credentials). The next
    record's `previous`."""
    stored = _as_stored(record, applier or DEFAULT_APPLIER, copy)
    return hashlib.sha256(canonical_payload(encode_record(stored))).hexdigest()


def signed_object(record: ApplyRecord, signer: Signer | None) -> dict[str, Any]:
    """The stored object of `record`, with `signature` when there is a signer."""
    data = encode_record(record)
    if signer is not None:
        data["signature"] = signer.sign(SIGNED_CONTEXT + canonical_payload(data))
    return data


def _as_stored(record: ApplyRecord, who: Identity, copy: WorkingCopy | None) -> ApplyRecord:
    """`record` as appended: the applier's name when it has none; details redacted, so that what
    is signed is what is stored (the note text is redacted again as a whole when written)."""
    if not record.applier:
        record = replace(record, applier=who.name)
    if copy is not None:
        groups = tuple(replace(g, detail=copy.redact(g.detail)) for g in record.groups)
        if groups != record.groups:
            record = replace(record, groups=groups)
    return record


def encode_note(records: Sequence[ApplyRecord]) -> str:
    """A note holding `records`, in order: `{"records": [...], "version": 1}`, keys sorted."""
    return _dump([encode_record(r) for r in records])


@dataclass(frozen=True)
class Note:
    """A note as read: the records that decoded, and a warning for everything skipped."""

    records: tuple[ApplyRecord, ...]
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class StoredRecord:
    """A record as stored: the record, the canonical payload its digest and signature cover, its
    digest and its signature text ("" when unsigned)."""

    record: ApplyRecord
    payload: bytes
    digest: str
    signature: str = ""

    def signed_by(self, verifier: Verifier) -> str | None:
        """The fingerprint of the trusted key that signed this very payload, or None."""
        if not self.signature:
            return None
        return verifier.verify(SIGNED_CONTEXT + self.payload, self.signature)


def stored_records(text: str, commit: str) -> tuple[tuple[StoredRecord, ...], tuple[str, ...]]:
    """The records in the note on `commit` as stored, and a warning for each one skipped: what
    does not parse, and a record naming another commit (a note copied by a rebase, or a signed
    record copied onto another commit's note: its signature covers the commit it names)."""
    where = f"apply record note on {commit[:12]}"
    raw, problem = _raw_records(text)
    if raw is None:
        return (), (f"{where}: {problem}; skipped",)
    found: list[StoredRecord] = []
    warnings: list[str] = []
    for number, data in enumerate(raw, 1):
        try:
            record = decode_record(data)
            signature = data.get("signature", "")
            if not isinstance(signature, str):
                raise ValueError("signature is not text")
            payload = canonical_payload(data)
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            warnings.append(f"{where}: record {number} is not valid ({_reason(exc)}); skipped")
            continue
        if record.commit != commit:
            warnings.append(f"{where}: record {number} is for commit {record.commit[:12]}; skipped")
            continue
        found.append(StoredRecord(record, payload, hashlib.sha256(payload).hexdigest(), signature))
    return tuple(found), tuple(warnings)


def decode_note(text: str, commit: str) -> Note:
    """The records in the note on `commit`; whatever does not parse is skipped with a warning.

    A record naming another commit (a note copied by a rebase, say) is skipped too: it is not a
    record of this commit. Signatures are not looked at (`read_trusted_records` does).
    """
    found, warnings = stored_records(text, commit)
    return Note(tuple(s.record for s in found), warnings)


def merge_note(current: str | None, record: ApplyRecord, *, signer: Signer | None = None) -> str | None:
    """The note text with `record` (signed by `signer`, when given) appended to `current`, or None
    when it is already there (Ed25519 signatures are deterministic: the same record signs the same).

    Records already in the note are kept exactly as stored, including ones this version cannot
    read. A note that is not a version-1 apply note at all is replaced (with a warning; the notes
    ref's history still holds it); a note from a newer format version is an OperationError rather
    than something to overwrite.
    """
    new = signed_object(record, signer)
    raw: list[Any] = []
    if current is not None:
        found, problem = _raw_records(current)
        if found is None:
            version = _version_of(current)
            if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
                raise GitError(
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
    state = "intent" if record.phase == "intent" else "complete" if record.complete else "partial"
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
    except RecursionError:  # a planted note (the plan credentials can push notes) is skipped
        return None, JSON_TOO_DEEP
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
    except (ValueError, RecursionError):
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


def last_desired(
    records: Mapping[str, Sequence[ApplyRecord]], cluster: str, *, before: datetime | None = None
) -> dict[str, int]:
    """Each group's DesiredCapacity as the newest apply of this cluster (or the newest before
    `before`) left it: a different value in AWS now was set by someone else (drift, DESIGN §3.7)."""
    newest_first = sorted(
        (
            r
            for found in records.values()
            for r in found
            if r.cluster == cluster and (before is None or r.applied_at < before)
        ),
        key=lambda r: r.applied_at,
        reverse=True,
    )
    left: dict[str, int] = {}
    for record in newest_first:
        for group in record.groups:
            left.setdefault(group.name, group.desired_after)
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
    """Whether the run changed AWS (a raise, a termination) or what main is to say (an adoption)."""
    return any(g.action in _CHANGES or g.terminated or g.adopted for g in record.groups)


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
    if not why or is_change(record) or on_commit < OBSERVATIONS_PER_COMMIT:
        return why
    return ""


# ---------------------------------------------------------------------------- trusted (pure)


@dataclass(frozen=True)
class TrustedRecords:
    """Apply's records of one cluster that it can trust now (DESIGN §3 rule 4).

    Only records signed by a trusted key count. `latest` is the record apply wrote last: the one
    whose digest is on apply's Lease (the anchor), or a record apply chained onto it after that
    (written just before a crash, before the anchor moved). `records` runs from `latest` backwards
    along the chain (`previous`), newest first. `problems` (each one line, with the fix) say why
    the records cannot be trusted now: apply then refuses removals, scale-ups go on. `warnings`
    are for the audit: records ignored, gaps in the chain.

    `latest_digest` is what the next record's `previous` must be. It is `latest`'s digest, except
    when the anchored record is missing: then it is the anchor, so that records written meanwhile
    hang off the missing one and the chain is whole again once the notes ref is restored (`latest`
    is then the newest signed record left, if any, to keep rule 4 as strict as what is left allows).
    Apply must not move the anchor while there are problems: the next run would otherwise trust
    its own record and forget the one that went missing.
    """

    cluster: str
    records: tuple[ApplyRecord, ...] = ()
    latest: ApplyRecord | None = None
    latest_digest: str = ""
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    anchor: str | None = None

    def last_acted_on(self) -> str | None:
        """The commit of the newest trusted record of any phase: apply acted on it, even partly."""
        return self.latest.commit if self.latest is not None else None

    def open_intents(self) -> tuple[ApplyRecord, ...]:
        """The intent records after the newest "done" record, newest first: terminations apply
        announced and then stopped (a crash) before recording the result."""
        found: list[ApplyRecord] = []
        for record in self.records:
            if record.phase == "done":
                break
            found.append(record)
        return tuple(found)

    def last_desired(self, in_service: Callable[[str], bool]) -> dict[str, int]:
        """group -> DesiredCapacity as apply last left it (a different value in AWS now was set by
        someone else: drift, DESIGN §3 rule 7). For an intent record whose instance is still in
        service, the termination never happened: the group's desired is the intent's "before"."""
        left: dict[str, int] = {}
        for record in self.records:
            for group in record.groups:
                if group.name in left:
                    continue
                not_done = record.phase == "intent" and any(in_service(i) for i in group.terminated)
                left[group.name] = group.desired_before if not_done else group.desired_after
        return left


def trust_records(
    notes: Mapping[str, str], cluster: str, verifier: Verifier, anchor: str | None
) -> TrustedRecords:
    """The trusted records of `cluster` among all `notes` (commit -> note text, every note on the
    notes ref: a record on a commit that the branch's first-parent line skips still counts).

    `anchor`: the digest apply keeps on its Lease (None when the Lease has none, or was not read).
    """
    verified: dict[str, StoredRecord] = {}
    unsigned: list[StoredRecord] = []
    forged: list[StoredRecord] = []
    warnings: list[str] = []
    for commit in sorted(notes):
        found, note_warnings = stored_records(notes[commit], commit)
        warnings += note_warnings
        for stored in found:
            if stored.record.cluster != cluster:
                continue  # another cluster's: its signature covers its cluster, so it is not ours
            if not stored.signature:
                unsigned.append(stored)
            elif stored.signed_by(verifier) is None:
                forged.append(stored)
            else:
                verified.setdefault(stored.digest, stored)
    if unsigned:
        warnings.append(
            f"{_count(unsigned)} of cluster {cluster} on {NOTES_REF} {_are(unsigned)} not signed (written"
            f" before records were signed, without apply.signingKey, or by someone else): ignored;"
            f" newest {_where(unsigned)}"
        )
    if forged:
        warnings.append(
            f"{_count(forged)} of cluster {cluster} on {NOTES_REF} {_are(forged)} signed but do not verify"
            f" (changed after signing, forged, or signed by a key not in apply.recordSigners): ignored;"
            f" newest {_where(forged)}"
        )
    successors: dict[str, list[StoredRecord]] = {}
    for stored in verified.values():
        successors.setdefault(stored.record.previous, []).append(stored)

    def forward(digest: str) -> str:
        """Follow records chained onto `digest` (only apply can sign them) to the newest."""
        seen = {digest}
        while True:
            after = [s for s in successors.get(digest, ()) if s.digest not in seen]
            if not after:
                return digest
            if len(after) > 1:
                warnings.append(
                    f"{len(after)} signed apply records of cluster {cluster} follow the same record"
                    f" ({digest[:12]}): the chain forks; following the newest"
                )
            digest = max(after, key=lambda s: (s.record.applied_at, s.digest)).digest
            seen.add(digest)

    problems: list[str] = []
    head: StoredRecord | None = None
    latest_digest = ""
    newest = max(verified.values(), key=lambda s: (s.record.applied_at, s.digest), default=None)
    if anchor:
        latest_digest = forward(anchor)
        head = verified.get(latest_digest)
        if anchor not in verified:
            lease = f"{APPLY_LEASE_NAMESPACE}/{APPLY_LEASE_PREFIX}{cluster}"
            problems.append(
                f"the record apply wrote last (digest {anchor[:12]}, kept on lease {lease}) is missing"
                f" from {NOTES_REF} or does not verify: someone with write access to the notes ref removed"
                " or changed it, or its key is no longer in apply.recordSigners; removals are refused"
                " until it is back (restore the notes ref from a copy, or list the old key; or, after"
                f" checking, remove the anchor: kubectl annotate lease -n {APPLY_LEASE_NAMESPACE}"
                f" {APPLY_LEASE_PREFIX}{cluster} {RECORD_ANCHOR_ANNOTATION}-)"
            )
            if head is None:
                head = newest  # rule 4 as strict as what is left allows; removals are refused anyway
    elif newest is not None:
        latest_digest = forward(newest.digest)
        head = verified[latest_digest]
        warnings.append(
            f"apply's Lease has no record anchor (a first signed run, a new Lease, or a dry run that"
            f" does not read it): trusting the newest signed record, on {head.record.commit[:12]}"
            f" at {_iso(head.record.applied_at)}"
        )
    chain: list[ApplyRecord] = []
    seen: set[str] = set()
    current = head
    while current is not None and current.digest not in seen:
        chain.append(current.record)
        seen.add(current.digest)
        before = current.record.previous
        if not before:
            break
        current = verified.get(before)
        if current is None:
            warnings.append(
                f"the apply record before the one on {chain[-1].commit[:12]} at"
                f" {_iso(chain[-1].applied_at)} (digest {before[:12]}) is missing from {NOTES_REF} or"
                " does not verify: the audit trail has a gap there"
            )
    return TrustedRecords(
        cluster=cluster,
        records=tuple(chain),
        latest=chain[0] if chain else None,
        latest_digest=latest_digest,
        problems=tuple(problems),
        warnings=tuple(warnings),
        anchor=anchor,
    )


def _count(found: Sequence[StoredRecord]) -> str:
    return f"{len(found)} apply record{'s' if len(found) != 1 else ''}"


def _are(found: Sequence[StoredRecord]) -> str:
    return "are" if len(found) != 1 else "is"


def _where(found: Sequence[StoredRecord]) -> str:
    newest = max(found, key=lambda s: s.record.applied_at).record
    return f"on {newest.commit[:12]} at {_iso(newest.applied_at)}"


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
    record = _as_stored(record, who, copy)

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
