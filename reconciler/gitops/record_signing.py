"""Apply's own signing key for its records (DESIGN §3 rule 4: records are trusted only if the plan
credentials could not have written them).

The plan bot's Git credentials can push `refs/notes/asg-reconciler`, so a record is only worth
something when it carries a signature by a key the bot does not hold: apply's Ed25519 key
(`apply.signingKey`, an unencrypted OpenSSH private key mounted from a Kubernetes Secret). Readers
trust the public keys listed in `apply.recordSigners`; apply also always trusts its own.

A signature is text that says what made it: `ed25519:<fingerprint>:<base64 signature>`, the
fingerprint as `ssh-keygen -lf` prints it (`SHA256:...`), so a reader with several trusted keys (a
rotation) knows which one to try. Signing is in-process (`cryptography`), no ssh-keygen needed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from reconciler.domain.errors import UserError

__all__ = ["ALGORITHM", "Signer", "Verifier", "fingerprint", "load_signer", "load_verifier"]

ALGORITHM = "ed25519"
_KEY_TYPE = "ssh-ed25519"
_GENERATE = "generate one: ssh-keygen -t ed25519 -N '' -C asg-reconciler-apply -f record-key"


def fingerprint(key: Ed25519PublicKey) -> str:
    """The key's SHA256 fingerprint as OpenSSH prints it: `SHA256:` and unpadded base64."""
    blob = base64.b64decode(_openssh_line(key).split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii").rstrip("=")


def _openssh_line(key: Ed25519PublicKey) -> str:
    return key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


class Signer:
    """Apply's private key: signs record payloads."""

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key
        self.public_key = key.public_key()
        self.fingerprint = fingerprint(self.public_key)

    @property
    def public_key_line(self) -> str:
        """The public half as one `apply.recordSigners` line: `ssh-ed25519 AAAA...`."""
        return _openssh_line(self.public_key)

    def sign(self, payload: bytes) -> str:
        """`ed25519:<fingerprint>:<base64 signature of payload>`."""
        signature = base64.b64encode(self._key.sign(payload)).decode("ascii")
        return f"{ALGORITHM}:{self.fingerprint}:{signature}"

    def __repr__(self) -> str:
        return f"Signer({self.fingerprint})"


class Verifier:
    """The public keys whose signatures count: fingerprint -> key (and a name, for messages)."""

    def __init__(self, keys: Iterable[Ed25519PublicKey | tuple[Ed25519PublicKey, str]] = ()) -> None:
        self._keys: dict[str, tuple[Ed25519PublicKey, str]] = {}
        for entry in keys:
            key, name = entry if isinstance(entry, tuple) else (entry, "")
            self._keys.setdefault(fingerprint(key), (key, name))

    @property
    def keys(self) -> Mapping[str, str]:
        """fingerprint -> the name given to the key (its comment; "" when none)."""
        return {fp: name for fp, (_, name) in self._keys.items()}

    def __bool__(self) -> bool:
        return bool(self._keys)

    def verify(self, payload: bytes, signature: str) -> str | None:
        """The fingerprint of the trusted key that made `signature` over `payload`, or None: no
        signature, not one of ours, made by a key not trusted here, or not over this payload."""
        if not isinstance(signature, str):
            return None
        algorithm, _, rest = signature.partition(":")
        key_id, _, encoded = rest.rpartition(":")
        if algorithm != ALGORITHM or key_id not in self._keys:
            return None
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            return None
        try:
            self._keys[key_id][0].verify(raw, payload)
        except InvalidSignature:
            return None
        return key_id

    def __repr__(self) -> str:
        return f"Verifier({sorted(self._keys)})"


def load_signer(path: str, label: str) -> Signer:
    """The Ed25519 private key at `path` (OpenSSH format, unencrypted; PKCS#8 PEM works too).

    Every problem is a one-line UserError naming `label` (the config key), the path and the fix.
    """
    where = f"{label}: {path}"
    if not path:
        raise UserError(f"{label} is empty: set it to apply's record key ({_GENERATE})")
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise UserError(f"{where} does not exist ({_GENERATE}, and mount it from a Secret)") from None
    except OSError as exc:
        raise UserError(
            f"{where} cannot be read ({exc.strerror or exc}): check the mount's permissions"
        ) from None
    key: object
    try:
        key = serialization.load_ssh_private_key(data, password=None)
    except TypeError:  # "Key is password-protected"
        raise UserError(
            f"{where} is encrypted; apply needs it without a passphrase"
            f" (ssh-keygen -p -N '' -f {path}, or {_GENERATE})"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except TypeError:
            raise UserError(
                f"{where} is encrypted; apply needs it without a passphrase ({_GENERATE})"
            ) from None
        except (ValueError, UnsupportedAlgorithm):
            raise UserError(f"{where} is not an OpenSSH private key ({_GENERATE})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UserError(f"{where} is not an ed25519 key ({_GENERATE})")
    return Signer(key)


def parse_public_keys(text: str, where: str) -> list[tuple[Ed25519PublicKey, str]]:
    """OpenSSH public key lines (`ssh-ed25519 AAAA... comment`), `#` comments and blank lines.

    A line that is not an ed25519 public key is a UserError naming `where` and the line number.
    """
    found: list[tuple[Ed25519PublicKey, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split(None, 2)
        if fields[0] != _KEY_TYPE:
            raise UserError(
                f"{where}:{number}: expected an ssh-ed25519 public key (the .pub of apply's record key),"
                f" found {fields[0][:40]!r}"
            )
        try:
            key = serialization.load_ssh_public_key(" ".join(fields[:2]).encode("ascii"))
        except (ValueError, UnsupportedAlgorithm, UnicodeEncodeError):
            key = None
        if not isinstance(key, Ed25519PublicKey):
            raise UserError(f"{where}:{number}: not a valid ssh-ed25519 public key")
        found.append((key, fields[2].strip() if len(fields) > 2 else ""))
    return found


def load_verifier(path: str, label: str, *, own: Signer | None = None) -> Verifier:
    """The keys listed in the file at `path` (`apply.recordSigners`; "" lists none), plus `own`'s
    public half (apply trusts what it signed itself). A file that cannot be read, or a line that is
    not an ssh-ed25519 public key, is a one-line UserError naming `label`."""
    keys: list[tuple[Ed25519PublicKey, str]] = []
    if own is not None:
        keys.append((own.public_key, "apply.signingKey"))
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UserError(
                f"{label}: {path} does not exist (write apply's public key there:"
                f' ssh-keygen -y -f record-key > {path}; or set {label} to "" to list none)'
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise UserError(f"{label}: {path} cannot be read ({reason or exc})") from None
        keys += parse_public_keys(text, f"{label}: {path}")
    return Verifier(keys)
