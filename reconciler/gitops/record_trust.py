"""Which apply records apply may decide on (pure): signed by a trusted key, chained to the record before,
and the newest one anchored on apply's Lease (DESIGN §3 rule 4).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from reconciler.domain.lease_names import apply_lease_name
from reconciler.domain.model import APPLY_LEASE_NAMESPACE, RECORD_ANCHOR_ANNOTATION
from reconciler.gitops.history import NOTES_REF
from reconciler.gitops.record_signing import Verifier
from reconciler.gitops.records import ApplyRecord, StoredRecord, iso_time, stored_records

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

    def last_desired(
        self, in_service: Callable[[str], bool], observed: Mapping[str, int] | None = None
    ) -> dict[str, int]:
        """group -> DesiredCapacity as apply last left it (a different value in AWS now was set by
        someone else: drift, DESIGN §3 rule 7). An open intent is resolved by its effect: a
        termination whose instance is still in service never happened, and a raise interrupted
        inside its call (`observed`: each group's desired in AWS now) happened only if AWS is at its
        target; otherwise the group's desired is the intent's "before"."""
        left: dict[str, int] = {}
        for record in self.records:
            for group in record.groups:
                if group.name in left:
                    continue
                not_done = False
                if record.phase == "intent" and group.terminated:
                    not_done = any(in_service(i) for i in group.terminated)
                elif record.phase == "intent" and observed is not None:
                    not_done = observed.get(group.name) != group.desired_after
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
            lease = f"{APPLY_LEASE_NAMESPACE}/{apply_lease_name(cluster)}"
            problems.append(
                f"the record apply wrote last (digest {anchor[:12]}, kept on lease {lease}) is missing"
                f" from {NOTES_REF} or does not verify: someone with write access to the notes ref removed"
                " or changed it, or its key is no longer in apply.recordSigners; removals are refused"
                " until it is back (restore the notes ref from a copy, or list the old key; or, after"
                f" checking, remove the anchor: kubectl annotate lease -n {APPLY_LEASE_NAMESPACE}"
                f" {apply_lease_name(cluster)} {RECORD_ANCHOR_ANNOTATION}-)"
            )
            if head is None:
                head = newest  # rule 4 as strict as what is left allows; removals are refused anyway
    elif newest is not None:
        latest_digest = forward(newest.digest)
        head = verified[latest_digest]
        warnings.append(
            f"apply's Lease has no record anchor (a first signed run, a new Lease, or a dry run that"
            f" does not read it): trusting the newest signed record, on {head.record.commit[:12]}"
            f" at {iso_time(head.record.applied_at)}"
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
                f" {iso_time(chain[-1].applied_at)} (digest {before[:12]}) is missing from {NOTES_REF} or"
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
    return f"on {newest.commit[:12]} at {iso_time(newest.applied_at)}"
