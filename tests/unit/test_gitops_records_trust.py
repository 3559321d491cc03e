"""Apply's records against someone holding the plan bot's Git credentials (issue 8, hole 6).

The attacker can rewrite `refs/notes/asg-reconciler` at will but holds neither apply's signing key
nor write access to apply's Lease (the anchor). Each attack either changes nothing apply decides on
(latest, last_acted_on, last_desired, open_intents) or turns into a problem (removals refused).
Pure: notes are a commit -> text mapping, as `read_trusted_records` reads them from Git.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from reconciler.gitops.history import LogRecord
from reconciler.gitops.record_reading import history_entries
from reconciler.gitops.record_signing import Signer, Verifier
from reconciler.gitops.record_trust import TrustedRecords, trust_records
from reconciler.gitops.records import (
    ApplyRecord,
    GroupRecord,
    canonical_payload,
    decode_note,
    encode_note,
    merge_note,
    record_digest,
    record_message,
    signed_object,
)

C1, C2, C3, C4 = ("1" * 40), ("2" * 40), ("3" * 40), ("4" * 40)
T = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
CLUSTER = "prod"
APPLY = Signer(Ed25519PrivateKey.generate())
STAGING = Signer(Ed25519PrivateKey.generate())  # another cluster's apply, listed in recordSigners
TRUSTED = Verifier([APPLY.public_key, STAGING.public_key])
GONE = "i-0gone"
STILL = "i-0still"


def done(
    commit: str, at: datetime, *groups: GroupRecord, run: str = "r1", complete: bool = True
) -> ApplyRecord:
    return ApplyRecord(
        commit,
        at,
        complete,
        groups or (GroupRecord("asg-a", "scale-up", 2, 3),),
        "asg-reconciler-apply",
        CLUSTER,
        run=run,
    )


def intent(commit: str, at: datetime, instance: str, before: int, run: str) -> ApplyRecord:
    group = GroupRecord(
        "asg-b", "scale-down", before, before - 1, (instance,), f"intent: terminate {instance}"
    )
    return ApplyRecord(commit, at, False, (group,), "asg-reconciler-apply", CLUSTER, run=run, phase="intent")


class Notes:
    """The notes ref as apply writes it: each record signed, chained to the one before."""

    def __init__(self, signer: Signer | None = APPLY) -> None:
        self.signer = signer
        self.notes: dict[str, str] = {}
        self.previous = ""
        self.written: list[ApplyRecord] = []

    def write(
        self, *records: ApplyRecord, signer: Signer | None = None, unsigned: bool = False, chain: bool = True
    ) -> str:
        for record in records:
            if chain:
                record = replace(record, previous=self.previous)
            text = merge_note(
                self.notes.get(record.commit), record, signer=None if unsigned else signer or self.signer
            )
            assert text is not None
            self.notes[record.commit] = text
            if chain:
                self.previous = record_digest(record)
            self.written.append(record)
        return self.previous

    def raw(self, commit: str) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = json.loads(self.notes[commit])["records"]
        return records

    def put_raw(self, commit: str, records: Iterable[dict[str, Any]]) -> None:
        self.notes[commit] = json.dumps({"records": list(records), "version": 1})


@pytest.fixture
def history() -> tuple[Notes, str]:
    """Three runs: C1 done, C2 done (asg-b 3 -> 2 terminating GONE), C3 an intent left open (crash)."""
    notes = Notes()
    notes.write(done(C1, T, GroupRecord("asg-a", "scale-up", 2, 3), GroupRecord("asg-b", "none", 3, 3)))
    notes.write(
        done(
            C2,
            T + timedelta(minutes=10),
            GroupRecord("asg-a", "none", 3, 3),
            GroupRecord("asg-b", "scale-down", 3, 2, (GONE,)),
            run="r2",
        )
    )
    anchor = notes.write(intent(C3, T + timedelta(minutes=20), STILL, 2, run="r3"))
    return notes, anchor


def in_service(instance: str) -> bool:
    return instance == STILL


def decisions(trust: TrustedRecords) -> tuple[Any, ...]:
    """Everything apply decides on."""
    return (
        trust.latest,
        trust.last_acted_on(),
        trust.last_desired(in_service),
        trust.open_intents(),
        trust.latest_digest,
    )


def test_signed_chained_and_anchored_records(history: tuple[Notes, str]) -> None:
    notes, anchor = history
    trust = trust_records(notes.notes, CLUSTER, TRUSTED, anchor)
    assert trust.problems == () and trust.warnings == ()
    assert [r.commit for r in trust.records] == [C3, C2, C1]
    assert trust.latest == trust.records[0] and trust.latest.phase == "intent"
    assert trust.latest_digest == anchor
    assert trust.last_acted_on() == C3
    assert trust.open_intents() == (trust.records[0],)
    # the open intent's instance is still in service: the termination never happened
    assert trust.last_desired(in_service) == {"asg-b": 2, "asg-a": 3}
    # ... or it is gone: the crashed run did terminate it
    assert trust.last_desired(lambda i: False) == {"asg-b": 1, "asg-a": 3}


def test_a_done_record_closes_the_intents_before_it(history: tuple[Notes, str]) -> None:
    notes, _ = history
    anchor = notes.write(
        done(C3, T + timedelta(minutes=21), GroupRecord("asg-b", "scale-down", 2, 1, (STILL,)), run="r3")
    )
    trust = trust_records(notes.notes, CLUSTER, TRUSTED, anchor)
    assert trust.open_intents() == ()
    assert trust.last_desired(in_service)["asg-b"] == 1  # the done record says, not the intent


def test_intents_of_two_crashed_runs_are_both_open(history: tuple[Notes, str]) -> None:
    notes, _ = history
    anchor = notes.write(intent(C3, T + timedelta(minutes=30), "i-0next", 2, run="r4"))
    trust = trust_records(notes.notes, CLUSTER, TRUSTED, anchor)
    assert [r.run for r in trust.open_intents()] == ["r4", "r3"]


def test_a_record_written_just_before_a_crash_extends_the_anchor(history: tuple[Notes, str]) -> None:
    """Apply appends, then moves the anchor: a crash between leaves a signed record chained onto the
    anchored one. Only apply can sign, so it is apply's: it is the latest, with no problem."""
    notes, anchor = history
    newer = notes.write(done(C4, T + timedelta(minutes=30), run="r4"))
    trust = trust_records(notes.notes, CLUSTER, TRUSTED, anchor)
    assert trust.problems == ()
    assert trust.last_acted_on() == C4 and trust.latest_digest == newer


# ------------------------------------------------------------------------------------ attacks


def test_deleting_the_notes_ref_is_a_problem(history: tuple[Notes, str]) -> None:
    _, anchor = history
    trust = trust_records({}, CLUSTER, TRUSTED, anchor)
    assert len(trust.problems) == 1
    problem = trust.problems[0]
    assert f"digest {anchor[:12]}" in problem and "removals are refused" in problem
    assert (
        "kubectl annotate lease -n kube-system asg-reconciler-apply-prod asg-reconciler.dev/last-record-"
        in problem
    )
    assert "\n" not in problem
    assert trust.latest is None and trust.last_acted_on() is None and trust.open_intents() == ()
    assert trust.latest_digest == anchor  # what apply writes next hangs off the missing record


def test_force_pushing_the_notes_ref_to_an_older_state_is_a_problem(history: tuple[Notes, str]) -> None:
    notes, anchor = history
    older = {C1: notes.notes[C1], C2: notes.notes[C2]}  # the ref before the intent on C3
    trust = trust_records(older, CLUSTER, TRUSTED, anchor)
    assert len(trust.problems) == 1 and "is missing" in trust.problems[0]
    # rule 4 stays as strict as what is left allows; removals are refused anyway
    assert trust.last_acted_on() == C2 and trust.latest_digest == anchor


def test_an_unsigned_record_counts_for_nothing(history: tuple[Notes, str]) -> None:
    notes, anchor = history
    before = decisions(trust_records(notes.notes, CLUSTER, TRUSTED, anchor))
    forged = done(C4, T + timedelta(hours=1), GroupRecord("asg-b", "scale-down", 2, 0, (STILL,)), run="r9")
    notes.write(replace(forged, previous=anchor), unsigned=True, chain=False)  # even chained onto ours
    trust = trust_records(notes.notes, CLUSTER, TRUSTED, anchor)
    assert decisions(trust) == before and trust.problems == ()
    assert any("1 apply record of cluster prod" in w and "is not signed" in w for w in trust.warnings)
    # without an anchor too: only signed records are ever candidates
    assert trust_records(notes.notes, CLUSTER, TRUSTED, None).last_acted_on() == C3


def test_a_signed_record_copied_onto_another_commit_counts_for_nothing(history: tuple[Notes, str]) -> None:
    notes, anchor = history
    before = decisions(trust_records(notes.notes, CLUSTER, TRUSTED, anchor))
    copied = notes.raw(C2)[0]
    retargeted = {**copied, "commit": C4}  # with the commit changed it no longer verifies
    notes.put_raw(C4, [copied, retargeted])  # copied as is: the signature is real, but it names C2
    trust = trust_records(notes.notes, CLUSTER, TRUSTED, anchor)
    assert decisions(trust) == before and trust.problems == ()
    assert any(f"is for commit {C2[:12]}; skipped" in w for w in trust.warnings)
    assert any("signed but do not verify" in w for w in trust.warnings)


def test_a_signed_record_of_another_cluster_counts_for_nothing(history: tuple[Notes, str]) -> None:
    notes, anchor = history
    before = decisions(trust_records(notes.notes, CLUSTER, TRUSTED, anchor))
    theirs = replace(done(C4, T + timedelta(hours=1), run="s1"), cluster="staging", previous=anchor)
    notes.write(theirs, signer=STAGING, chain=False)  # a key we trust, for its own cluster
    relabelled = {**signed_object(replace(theirs, commit=C4), STAGING), "cluster": CLUSTER}
    notes.put_raw(C4, [*notes.raw(C4), relabelled])  # claimed for ours: the signature breaks
    trust = trust_records(notes.notes, CLUSTER, TRUSTED, anchor)
    assert decisions(trust) == before and trust.problems == ()
    assert trust_records(notes.notes, "staging", TRUSTED, None).last_acted_on() == C4  # theirs, for them


@pytest.mark.parametrize(
    "change",
    [
        lambda r: {**r, "complete": True},
        lambda r: {**r, "appliedAt": "2026-03-01T08:00:00Z"},
        lambda r: {k: v for k, v in r.items() if k != "phase"},  # the intent made a "done"
        lambda r: {**r, "groups": [{**r["groups"][0], "terminated": ["i-0other"]}]},
        lambda r: {**r, "groups": [{**r["groups"][0], "desiredBefore": 9}]},
        lambda r: {**r, "previous": ""},
        lambda r: {**r, "extra": "field"},
        lambda r: {k: v for k, v in r.items() if k != "signature"},
    ],
)
def test_changing_any_field_of_the_anchored_record_is_a_problem(
    history: tuple[Notes, str], change: Any
) -> None:
    notes, anchor = history
    notes.put_raw(C3, [change(notes.raw(C3)[0])])
    trust = trust_records(notes.notes, CLUSTER, TRUSTED, anchor)
    assert len(trust.problems) == 1 and "does not verify" in trust.problems[0]
    assert trust.open_intents() == () or trust.open_intents()[0].commit != C3
    assert trust.last_acted_on() == C2  # the newest record that still verifies


def test_changing_an_older_record_leaves_a_gap_and_changes_nothing(history: tuple[Notes, str]) -> None:
    notes, anchor = history
    before = decisions(trust_records(notes.notes, CLUSTER, TRUSTED, anchor))
    changed = notes.raw(C2)[0]
    changed["groups"][1]["desiredAfter"] = 0
    notes.put_raw(C2, [changed])
    trust = trust_records(notes.notes, CLUSTER, TRUSTED, anchor)
    assert trust.problems == ()
    assert trust.latest == before[0] and trust.last_acted_on() == C3 and trust.open_intents() == before[3]
    assert [r.commit for r in trust.records] == [C3]  # the chain stops at the changed record
    assert any("the audit trail has a gap" in w for w in trust.warnings)


def test_a_record_signed_by_a_key_nobody_trusts_counts_for_nothing(history: tuple[Notes, str]) -> None:
    notes, anchor = history
    before = decisions(trust_records(notes.notes, CLUSTER, TRUSTED, anchor))
    bots_key = Signer(Ed25519PrivateKey.generate())
    notes.write(
        replace(done(C4, T + timedelta(hours=1), run="b"), previous=anchor), signer=bots_key, chain=False
    )
    trust = trust_records(notes.notes, CLUSTER, TRUSTED, anchor)
    assert decisions(trust) == before and trust.problems == ()
    # nor with no anchor, as long as it is not signed by a trusted key
    assert trust_records(notes.notes, CLUSTER, TRUSTED, None).last_acted_on() == C3


def test_a_problem_persists_while_the_anchor_stays_and_heals_when_the_ref_is_restored(
    history: tuple[Notes, str],
) -> None:
    """The bot deletes the notes; apply (refusing removals) goes on recording scale-ups, chained to
    the missing record, and leaves the anchor where it was. Once the ref is restored, the chain is
    whole and the newest record is apply's last."""
    notes, anchor = history
    kept = dict(notes.notes)
    during = Notes()
    during.previous = trust_records({}, CLUSTER, TRUSTED, anchor).latest_digest
    during.write(done(C4, T + timedelta(hours=1), run="r5", complete=False))
    second = trust_records(during.notes, CLUSTER, TRUSTED, anchor)
    assert second.problems and second.last_acted_on() == C4  # rule 4 from what apply wrote meanwhile
    during.write(done(C4, T + timedelta(hours=2), run="r6"))
    assert trust_records(during.notes, CLUSTER, TRUSTED, anchor).problems  # still refused
    restored = trust_records({**kept, **during.notes}, CLUSTER, TRUSTED, anchor)
    assert restored.problems == () and restored.last_acted_on() == C4
    assert [r.run for r in restored.records] == ["r6", "r5", "r3", "r2", "r1"]


def test_without_an_anchor_the_newest_signed_record_with_a_warning(history: tuple[Notes, str]) -> None:
    notes, _ = history
    trust = trust_records(notes.notes, CLUSTER, TRUSTED, None)
    assert trust.problems == () and trust.last_acted_on() == C3
    assert any("no record anchor" in w for w in trust.warnings)
    empty = trust_records({}, CLUSTER, TRUSTED, None)
    assert empty == TrustedRecords(CLUSTER)  # a first run: nothing, no noise


def test_a_rotated_key_is_trusted_while_listed(history: tuple[Notes, str]) -> None:
    notes, anchor = history
    new_key = Signer(Ed25519PrivateKey.generate())
    rotated = Verifier([new_key.public_key])  # the old key dropped from apply.recordSigners
    trust = trust_records(notes.notes, CLUSTER, rotated, anchor)
    assert trust.problems and "no longer in apply.recordSigners" in trust.problems[0]
    listed = Verifier([new_key.public_key, APPLY.public_key])
    notes.signer = new_key
    newer = notes.write(done(C4, T + timedelta(hours=1), run="r7"))
    trust = trust_records(notes.notes, CLUSTER, listed, newer)
    assert trust.problems == () and [r.commit for r in trust.records] == [C4, C3, C2, C1]


def test_old_unsigned_notes_still_read_and_the_format_keeps_its_old_shape() -> None:
    old = ApplyRecord(C1, T, True, (GroupRecord("asg-a", "scale-up", 1, 2),), "apply", CLUSTER)
    text = encode_note([old])
    assert "run" not in text and "phase" not in text and "previous" not in text and "signature" not in text
    assert decode_note(text, C1).records == (old,)
    trust = trust_records({C1: text}, CLUSTER, TRUSTED, None)
    assert trust.latest is None and len(trust.warnings) == 1 and "not signed" in trust.warnings[0]


def test_the_stored_object_digest_and_signature() -> None:
    record = replace(intent(C3, T, STILL, 2, run="abcd"), previous="f" * 64, applier="")
    stored = signed_object(replace(record, applier="asg-reconciler-apply"), APPLY)
    assert stored["phase"] == "intent" and stored["run"] == "abcd" and stored["previous"] == "f" * 64
    assert stored["signature"].startswith(f"ed25519:{APPLY.fingerprint}:")
    payload = canonical_payload(stored)
    assert (
        b"signature" not in payload
        and payload
        == json.dumps(
            {k: v for k, v in stored.items() if k != "signature"}, sort_keys=True, separators=(",", ":")
        ).encode()
    )
    # the digest is of the record as append_record stores it: an empty applier filled the same way
    import hashlib

    assert record_digest(record) == hashlib.sha256(payload).hexdigest()
    assert record_message(record).startswith(f"apply(prod): {C3[:12]} intent\n")
    with pytest.raises(ValueError, match="never complete"):
        replace(record, complete=True)
    with pytest.raises(ValueError, match="phase"):
        replace(record, phase="maybe")
    with pytest.raises(ValueError, match="digest"):
        replace(record, previous="abc")


def test_history_marks_records_that_do_not_verify(history: tuple[Notes, str]) -> None:
    notes, _ = history
    notes.write(
        done(C2, T + timedelta(hours=1), GroupRecord("asg-a", "scale-up", 3, 9), run="x"), unsigned=True
    )
    log = LogRecord(C2, (), "a", "a@x", "a", "0", "capacity(prod): x\n", notes.notes[C2])
    shown = [e.reason for e in history_entries(log, verifier=TRUSTED)]
    assert shown == ["scale-down", "scale-up (unverified: not signed by a key in apply.recordSigners)"]
    assert [e.reason for e in history_entries(log)] == ["scale-down", "scale-up"]  # no verifier: as is
    assert [e.reason for e in history_entries(log, verifier=Verifier())] == ["scale-down", "scale-up"]
    log3 = log._replace(sha=C3, note=notes.notes[C3])
    assert history_entries(log3, verifier=TRUSTED)[0].reason.endswith(
        "(the run stopped before recording its result)"  # an intent whose run recorded no result
    )
