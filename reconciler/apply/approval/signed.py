"""`approval.mode: signed` (the default): C carries a valid SSH signature by a listed key.

The check is git's own, offline, with no forge (DESIGN §6):

    git -c gpg.format=ssh -c gpg.ssh.allowedSignersFile=FILE verify-commit C

FILE is `approval.allowedSigners` in OpenSSH allowed_signers format. A signature covers the whole
commit (tree, parents, message), so it cannot be moved onto other content: a commit changed after
signing fails as "incorrect signature". Only SSH signatures count: an OpenPGP or X.509 signature
would be checked against whatever keyring the apply pod happens to have, so it is refused before git
is asked. The plan bot signs nothing, so its own commits never pass unless someone lists its key.

`asg-reconciler approve PROPOSAL` (reconciler/gitops/approve.py) makes the signed merge this accepts.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from reconciler.apply.approval.base import FetchRef, short
from reconciler.config.settings import Config
from reconciler.domain.errors import OperationError, UserError
from reconciler.domain.verdict import Verdict
from reconciler.gitops.forge.base import Forge

NAME = "signed"
KEY = "approval.allowedSigners"
FORMAT_HINT = "one line per approver: `alice@example.com ssh-ed25519 AAAA...`"

# A proposal merged with the forge's button (GitHub signs with its own PGP key, or not at all) never
# passes: the plan recovers from it (reconciler/gitops/withdraw.py), and the refusal says so.
MERGED_BY_BUTTON = (
    "; if it is a proposal merged with the forge's button, the next `asg-reconciler plan` withdraws "
    "what it added from main and proposes it again, for `asg-reconciler approve`"
)

_SSH_ARMOR = "-----BEGIN SSH SIGNATURE-----"
_PGP_ARMOR = "-----BEGIN PGP SIGNATURE-----"
_GOOD = re.compile(r'^Good "git" signature for (?P<who>.+?) with (?P<kind>\S+) key (?P<fp>\S+)', re.MULTILINE)
_KEY = re.compile(r'^Good "git" signature with (?P<kind>\S+) key (?P<fp>\S+)', re.MULTILINE)
_SIGNER_LINE = re.compile(r"(?:^|\s)(?:ssh|ecdsa|sk)-[A-Za-z0-9@.-]+\s+AAAA[A-Za-z0-9+/]+=*(?:\s|$)")
# A repository location inherited from a git hook would point git at the wrong repository.
_REPO_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR")


def load_allowed_signers(path: Path) -> int:
    """The number of signer lines in `path`; UserError naming approval.allowedSigners if it is
    missing, unreadable, empty or not in allowed_signers format."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(
            f"{KEY}: {path} does not exist; create it in OpenSSH allowed_signers format ({FORMAT_HINT}), "
            "see docs/approval.md"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UserError(f"{KEY}: cannot read {path}: {reason}; point it at a readable file") from None
    count = 0
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if not _SIGNER_LINE.search(line):
            raise UserError(f"{KEY}: {path} line {number} is not an allowed_signers entry ({FORMAT_HINT})")
        count += 1
    if count == 0:
        raise UserError(
            f"{KEY}: {path} lists no keys, so no scale-down could ever be approved; add the approvers "
            f"({FORMAT_HINT})"
        )
    return count


_WINDOW = re.compile(
    r'(?:^|,)(valid-before|valid-after)="?([0-9]{8}(?:[0-9]{4}(?:[0-9]{2})?)?)([Zz]?)"?', re.IGNORECASE
)
_KEY_BLOB = re.compile(r"(?:^|\s)((?:ssh|ecdsa|sk)-[A-Za-z0-9@.-]+)\s+(AAAA[A-Za-z0-9+/]+=*)(?:\s|$)")


def _now() -> datetime:
    return datetime.now(UTC)


def expired_now(allowed_signers: str, fingerprint: str, now: datetime) -> str:
    """Why every allowed_signers entry of the key `fingerprint` (SHA256:...) is outside its
    valid-after/valid-before window at `now`; "" when one is inside it (or none has a window).

    git checks the window at the commit's date, which whoever signs chooses: a key whose entry
    expired could still sign a backdated commit. An approval is judged when apply acts on it."""
    reasons = []
    for line in allowed_signers.splitlines():
        line = line.strip()
        match = _KEY_BLOB.search(line)
        if not line or line.startswith("#") or match is None:
            continue
        blob = base64.b64decode(match[2] + "=" * (-len(match[2]) % 4))
        if "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=") != fingerprint:
            continue
        options = line[: match.start()].split(None, 1)[-1] if " " in line[: match.start()].strip() else ""
        why = ""
        for name, stamp, zulu in _WINDOW.findall(options):
            when = _ssh_time(stamp, zulu.upper() == "Z")
            if name.lower() == "valid-before" and now > when:
                why = f"valid-before {stamp}{zulu}"
            if name.lower() == "valid-after" and now < when:
                why = f"valid-after {stamp}{zulu}"
        if not why:
            return ""
        reasons.append(why)
    return "; ".join(reasons)


def _ssh_time(stamp: str, utc: bool) -> datetime:
    """ssh-keygen's YYYYMMDD[HHMM[SS]] (local time unless Z)."""
    layout = {8: "%Y%m%d", 12: "%Y%m%d%H%M", 14: "%Y%m%d%H%M%S"}[len(stamp)]
    naive = datetime.strptime(stamp, layout)
    return naive.replace(tzinfo=UTC) if utc else naive.astimezone()


def signature_kind(raw_commit: str) -> str | None:
    """ "ssh", "OpenPGP", "X.509" or None (unsigned), from a `git cat-file commit` text."""
    headers = raw_commit.split("\n\n", 1)[0]
    for line in headers.splitlines():
        if line.startswith(("gpgsig ", "gpgsig-sha256 ")):
            armor = line.split(" ", 1)[1].strip()
            if armor == _SSH_ARMOR:
                return "ssh"
            return "OpenPGP" if armor == _PGP_ARMOR else "X.509"
    return None


@dataclass(frozen=True)
class SignedGate:
    """Approved when git verifies C's SSH signature against `allowed_signers`."""

    allowed_signers: Path
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ, repr=False)
    timeout: float = 60.0

    name = NAME

    def check(self, commit: str, repo_path: Path) -> Verdict:
        load_allowed_signers(self.allowed_signers)  # re-read: a mounted file may have changed
        raw = self._git(repo_path, "cat-file", "commit", commit)
        if raw.returncode != 0:
            raise OperationError(
                f"git cat-file {short(commit)} in {repo_path}: {_last_line(raw.stderr) or 'no such commit'}"
            )
        kind = signature_kind(raw.stdout)
        if kind is None:
            return Verdict(
                False,
                "",
                f"{short(commit)} is not signed; approve a proposal with `asg-reconciler approve "
                f"PROPOSAL`, or make the change as a commit signed with an SSH key listed in {KEY}"
                f"{MERGED_BY_BUTTON}",
            )
        if kind != "ssh":
            return Verdict(
                False,
                "",
                f"{short(commit)} carries an {kind} signature, but approval.mode signed accepts SSH "
                f"signatures only; approve again with an SSH key listed in {KEY} (gpg.format ssh)"
                f"{MERGED_BY_BUTTON}",
            )
        result = self._git(
            repo_path,
            "-c",
            "gpg.format=ssh",
            "-c",
            f"gpg.ssh.allowedSignersFile={self.allowed_signers}",
            "-c",
            "gpg.ssh.program=ssh-keygen",
            "verify-commit",
            commit,
        )
        output = f"{result.stdout}\n{result.stderr}"
        if result.returncode == 0:
            good = _GOOD.search(output)
            who = good["who"] if good else "a listed key"
            key = f" ({good['fp']})" if good else ""
            signers = self.allowed_signers.read_text(encoding="utf-8")
            lapsed = expired_now(signers, good["fp"], _now()) if good else ""
            if lapsed:
                return Verdict(
                    False,
                    "",
                    f"{short(commit)} is signed by {who}{key}, whose {KEY} entry is not valid now "
                    f"({lapsed}); git judged it at the commit's own date, which the signer sets",
                )
            return Verdict(True, who, f"{short(commit)} is signed by {who}{key}, listed in {KEY}")
        unknown = _KEY.search(output)
        if unknown or "No principal matched" in output:
            fingerprint = f"key {unknown['fp']}" if unknown else "a key"
            return Verdict(
                False,
                "",
                f"{short(commit)} is signed by {fingerprint}, which {KEY} ({self.allowed_signers}) does "
                "not list; add the approver's public key there, or approve with a listed key",
            )
        if "incorrect signature" in output:
            return Verdict(
                False,
                "",
                f"{short(commit)} has a signature that does not match its content (changed after "
                "signing); approve the proposal again with `asg-reconciler approve PROPOSAL`",
            )
        return Verdict(
            False,
            "",
            f"the signature on {short(commit)} could not be verified with {KEY} ({self.allowed_signers}): "
            f"{_last_line(output) or 'git verify-commit failed'}",
        )

    def _git(self, repo_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in self.environ.items() if k not in _REPO_VARS}
        try:
            return subprocess.run(
                ["git", *args],
                cwd=repo_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=self.timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise OperationError(f"git {args[-2]} in {repo_path}: {exc}") from None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def create(
    config: Config, forge: Forge | None, environ: Mapping[str, str] | None, fetch: FetchRef | None = None
) -> SignedGate:
    """The gate, having checked the allowed-signers file once (a bad path fails at start-up)."""
    del forge, fetch  # signed approvals need no forge, and the signed commit is on the branch
    path = Path(config.approval.allowed_signers).expanduser().absolute()
    load_allowed_signers(path)
    return SignedGate(path) if environ is None else SignedGate(path, environ)
