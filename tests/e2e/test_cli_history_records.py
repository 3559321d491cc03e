"""`history` with `apply.recordSigners`: a record that apply's key did not sign is shown as unverified
(issue 8, hole 6: the plan bot's credentials can write apply's notes)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from reconciler.gitops.record_signing import Signer
from reconciler.gitops.record_store import append_record
from reconciler.gitops.records import ApplyRecord, GroupRecord
from reconciler.gitops.repo import Identity, WorkingCopy
from tests.support.cli import run
from tests.support.git import BOT, CLUSTER

T = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
FAST = {"wait_initial": 0.01, "wait_max": 0.05}


def test_history_marks_records_no_trusted_key_signed(
    seeded_remote: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = Signer(Ed25519PrivateKey.generate())
    copy = WorkingCopy(str(seeded_remote), tmp_path / "apply", Identity(BOT.name, BOT.email))
    copy.sync()
    sha = copy.first_parent("main")[0]
    genuine = ApplyRecord(sha, T, True, (GroupRecord("asg-a", "scale-up", 2, 3),), cluster=CLUSTER)
    forged = ApplyRecord(
        sha, T, True, (GroupRecord("asg-b", "scale-down", 3, 0, ("i-0x",)),), cluster=CLUSTER
    )
    append_record(copy, genuine, signer=key, **FAST)
    append_record(copy, forged, **FAST)

    signers = tmp_path / "record-signers"
    signers.write_text(f"# apply's key\n{key.public_key_line} apply-prod\n")
    config = tmp_path / "asg-reconciler.yaml"
    base = f"cluster: {CLUSTER}\ngit: {{url: '{seeded_remote}', workDir: '{tmp_path / 'work'}'}}\n"
    config.write_text(base + f"apply: {{recordSigners: '{signers}'}}\n")

    result = run(capsys, "history", "--config", str(config), "--output", "json")
    assert result.code == 0, result.err
    reasons = {e["group"]: e["reason"] for e in json.loads(result.out) if e["kind"] == "apply"}
    assert reasons == {
        "asg-a": "scale-up",
        "asg-b": "scale-down (unverified: not signed by a key in apply.recordSigners)",
    }

    config.write_text(base)  # no keys listed: shown as the notes say
    plain = run(capsys, "history", "--config", str(config), "--output", "json")
    assert {e["reason"] for e in json.loads(plain.out) if e["kind"] == "apply"} == {"scale-up", "scale-down"}

    signers.write_text("ssh-rsa AAAAB3Nza bob\n")  # a mistake in the file is a config error
    config.write_text(base + f"apply: {{recordSigners: '{signers}'}}\n")
    bad = run(capsys, "history", "--config", str(config))
    assert bad.code == 2 and "apply.recordSigners" in bad.err and ":1: expected an ssh-ed25519" in bad.err
