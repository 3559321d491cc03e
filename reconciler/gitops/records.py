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

This module is the record and its format; record_reading.py reads them (and says when one is
worth writing), record_trust.py decides which to trust, record_store.py reads and writes them in Git.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from reconciler.config.documents import JSON_TOO_DEEP
from reconciler.gitops.errors import GitError
from reconciler.gitops.history import NOTES_REF
from reconciler.gitops.record_signing import Signer, Verifier
from reconciler.gitops.repo import (
    Identity,
    WorkingCopy,
)

FORMAT_VERSION = 1
ACTIONS = ("scale-up", "scale-down", "none", "refused", "failed")
PHASES = ("done", "intent")  # intent: written before a termination (write-ahead); done: the result
DEFAULT_APPLIER = Identity("asg-reconciler-apply", "asg-reconciler-apply@users.noreply.local")
# What a signature covers: this context, then the canonical payload. The context keeps a signature
# made for a record from meaning anything else, should the key ever sign something else.
SIGNED_CONTEXT = b"asg-reconciler apply record v1\n"

_log = logging.getLogger(__name__)  # the records modules share it
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
        "appliedAt": iso_time(record.applied_at),
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
    stored = as_stored(record, applier or DEFAULT_APPLIER, copy)
    return hashlib.sha256(canonical_payload(encode_record(stored))).hexdigest()


def signed_object(record: ApplyRecord, signer: Signer | None) -> dict[str, Any]:
    """The stored object of `record`, with `signature` when there is a signer."""
    data = encode_record(record)
    if signer is not None:
        data["signature"] = signer.sign(SIGNED_CONTEXT + canonical_payload(data))
    return data


def as_stored(record: ApplyRecord, who: Identity, copy: WorkingCopy | None) -> ApplyRecord:
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


def iso_time(when: datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _time(value: Any) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"appliedAt {value!r} is not a time")
    when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if when.tzinfo is None:
        raise ValueError(f"appliedAt {value!r} has no time zone")
    return when.astimezone(UTC)
