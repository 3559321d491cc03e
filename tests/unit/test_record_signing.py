"""Apply's record key: loading it (every mistake one line naming the key, the path and the fix),
signing, and verifying only with the keys a reader trusts."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from reconciler.domain.errors import UserError
from reconciler.gitops.record_signing import Signer, Verifier, fingerprint, load_signer, load_verifier
from tests.support.git import needs_ssh_keygen

LABEL = "apply.signingKey"
# An ed25519 key with the passphrase "secret" (made for this test by ssh-keygen; never used elsewhere).
ENCRYPTED = """\
-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAACmFlczI1Ni1jdHIAAAAGYmNyeXB0AAAAGAAAABAQrQiqQy
j+kJgue/HkDmhNAAAAEAAAAAEAAAAzAAAAC3NzaC1lZDI1NTE5AAAAIDsOu2NdRV/Fho1N
3SW6PuYSLR+FqjiRS7RIpaa+ekdEAAAAkIDm+iHg5Jok+9rO/H2NxtVp/xj1GUI3X+NAv6
IXi/NE85yy9AJQO5TH/x/WRyIw9zhQJWoJUlSS6sBNaDBfbFAMg/KOyngqeG9hx3kQEJ6K
rpYagUwKagfWQyeFktY3CR39g8IX8VSPAN/Vf2CSMxz2cObVQ7Ez2tCQ0jQ+3HRdtPPHXu
dHdhLDZi1MB/+CAQ==
-----END OPENSSH PRIVATE KEY-----
"""


def write_key(path: Path, key: Ed25519PrivateKey | ec.EllipticCurvePrivateKey | None = None) -> Path:
    key = key or Ed25519PrivateKey.generate()
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
    )
    return path


def one_line_user_error(path: str, *fragments: str) -> None:
    with pytest.raises(UserError) as raised:
        load_signer(path, LABEL)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(LABEL), message
    for fragment in fragments:
        assert fragment in message, message


def test_sign_and_verify_round_trip(tmp_path: Path) -> None:
    signer = load_signer(str(write_key(tmp_path / "record-key")), LABEL)
    signature = signer.sign(b"payload")
    algorithm, fp, body = signature.split(":", 1)[0], signer.fingerprint, signature.rsplit(":", 1)[1]
    assert signature == f"{algorithm}:{fp}:{body}" and algorithm == "ed25519" and fp.startswith("SHA256:")
    assert signer.sign(b"payload") == signature  # deterministic: the same record signs the same
    verifier = Verifier([signer.public_key])
    assert verifier.verify(b"payload", signature) == signer.fingerprint
    assert verifier.verify(b"payload!", signature) is None  # another payload
    assert Verifier().verify(b"payload", signature) is None  # a key not trusted here
    other = Signer(Ed25519PrivateKey.generate())
    assert verifier.verify(b"payload", other.sign(b"payload")) is None
    # the right fingerprint with someone else's signature bytes
    forged = f"ed25519:{signer.fingerprint}:{other.sign(b'payload').rsplit(':', 1)[1]}"
    assert verifier.verify(b"payload", forged) is None
    for junk in (
        "",
        "ed25519",
        f"ed25519:{signer.fingerprint}:",
        f"ed25519:{signer.fingerprint}:!!",
        "rsa:x:y",
    ):
        assert verifier.verify(b"payload", junk) is None
    assert signer.public_key_line.startswith("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5")


@needs_ssh_keygen
def test_keys_from_ssh_keygen_and_its_fingerprint(tmp_path: Path) -> None:
    key = tmp_path / "record-key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "apply", "-f", str(key)], check=True)
    signer = load_signer(str(key), LABEL)
    printed = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(key) + ".pub"], check=True, capture_output=True, text=True
    ).stdout.split()[1]
    assert signer.fingerprint == printed
    verifier = load_verifier(str(key) + ".pub", "apply.recordSigners")
    assert verifier.keys == {printed: "apply"}
    assert verifier.verify(b"x", signer.sign(b"x")) == printed


def test_signer_mistakes_are_one_line_with_the_fix(tmp_path: Path) -> None:
    one_line_user_error(str(tmp_path / "missing"), "does not exist", "ssh-keygen -t ed25519 -N ''")
    one_line_user_error("", "is empty", "ssh-keygen -t ed25519")
    (tmp_path / "garbage").write_text("not a key\n")
    one_line_user_error(str(tmp_path / "garbage"), "is not an OpenSSH private key", "ssh-keygen")
    (tmp_path / "encrypted").write_text(ENCRYPTED)
    one_line_user_error(str(tmp_path / "encrypted"), "is encrypted", "ssh-keygen -p -N ''")
    ecdsa = write_key(tmp_path / "ecdsa", ec.generate_private_key(ec.SECP256R1()))
    one_line_user_error(str(ecdsa), "is not an ed25519 key")
    one_line_user_error(str(tmp_path), "cannot be read")  # a directory
    if os.geteuid() != 0:  # root reads anything
        unreadable = write_key(tmp_path / "unreadable")
        unreadable.chmod(0)
        one_line_user_error(str(unreadable), "cannot be read")


def test_a_pkcs8_pem_key_works_too(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    path = tmp_path / "pem"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    assert load_signer(str(path), LABEL).fingerprint == fingerprint(key.public_key())


def test_verifier_trusts_its_own_key_and_the_listed_ones(tmp_path: Path) -> None:
    own = Signer(Ed25519PrivateKey.generate())
    old = Signer(Ed25519PrivateKey.generate())  # a rotated-out key still listed
    listed = tmp_path / "record-signers"
    listed.write_text(
        f"# apply's keys\n\n{old.public_key_line} old apply key, 2025\n   {own.public_key_line}\n"
    )
    verifier = load_verifier(str(listed), "apply.recordSigners", own=own)
    assert verifier.keys == {own.fingerprint: "apply.signingKey", old.fingerprint: "old apply key, 2025"}
    assert verifier.verify(b"p", old.sign(b"p")) == old.fingerprint
    assert verifier.verify(b"p", own.sign(b"p")) == own.fingerprint
    only_own = load_verifier("", "apply.recordSigners", own=own)
    assert only_own and only_own.verify(b"p", old.sign(b"p")) is None
    assert not load_verifier("", "apply.recordSigners")  # trusts nothing


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTY= x\n", "expected an ssh-ed25519 public key"),
        ("ssh-ed25519 AAAA-not-base64\n", ":1: not a valid ssh-ed25519 public key"),
        ("# ok\nssh-ed25519\n", ":2: not a valid ssh-ed25519 public key"),
        ("alice@example.com ssh-ed25519 AAAAC3Nza\n", "expected an ssh-ed25519 public key"),
    ],
)
def test_record_signers_mistakes_name_the_line(tmp_path: Path, text: str, fragment: str) -> None:
    listed = tmp_path / "record-signers"
    listed.write_text(text)
    with pytest.raises(UserError) as raised:
        load_verifier(str(listed), "apply.recordSigners")
    message = str(raised.value)
    assert message.startswith(f"apply.recordSigners: {listed}") and fragment in message
    assert "\n" not in message


def test_a_missing_record_signers_file_says_how_to_write_it(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"does not exist \(write apply's public key there: ssh-keygen -y"):
        load_verifier(str(tmp_path / "nope"), "apply.recordSigners")
