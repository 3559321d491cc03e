"""What AWS told us that need not be asked again: kept for the process, and on disk between one-shot
runs (docs/aws-calls.md).

Two kinds of answers. Facts that never change once they exist — an instance type's shape, the
instance type of a numbered launch template version (versions are immutable) — are kept for good.
Answers that can change — what `$Latest` or `$Default` point at — carry the time they were read and
are trusted for `aws.refreshInterval`, the same freshness `run` gives ASG descriptions. Errors are
never kept: a template version missing now may exist a minute later.

The file is an optimisation only: one per account, region and endpoint under
`$XDG_CACHE_HOME/asg-reconciler/aws/`, written atomically, and anything unreadable, malformed or
unwritable (a read-only root filesystem in a pod) is ignored and asked of AWS instead.

It is also trusted by the plan: an instance type's shape decides a scale-up from zero. So it is read
only if nobody else could have written it — a regular file (not a symlink, a FIFO, a device) owned
by the effective user with no group or other write bit, in a folder likewise — checked with fstat
on what was opened (the folder opened without following a symlink, the file opened through it with
O_NOFOLLOW), so nothing can be swapped between the check and the read. Anything else is refused,
said once per process with the fix, and AWS is asked; the folder is made 0700 and each file 0600,
and nothing is written into a folder that fails the same test.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import math
import os
import secrets
import stat
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from reconciler.aws.instance_types import InstanceTypeInfo

_log = logging.getLogger(__name__)

VERSION = 1
_OPEN = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW
_said: set[str] = set()  # files already refused in this process: said once
_said_lock = threading.Lock()
_INFO_FIELDS = {
    "name": str,
    "vcpus": int,
    "memory_mib": int,
    "architecture": str,
    "max_enis": int,
    "ipv4_per_eni": int,
    "gpu_count": int,
    "gpu_manufacturer": str,
}


def cache_root() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "asg-reconciler" / "aws"


def cache_file(account: str, region: str, endpoint: str) -> Path:
    """One file per account and region, and per endpoint when it is not AWS's own (moto, a proxy):
    two emulators never share answers."""
    suffix = f"-{hashlib.sha256(endpoint.encode()).hexdigest()[:10]}" if endpoint else ""
    return cache_root() / f"{account or 'unknown'}-{region or 'unknown'}{suffix}.json"


class FactCache:
    """Instance types and launch template versions; thread-safe, saved only when something was added."""

    def __init__(self, path: Path | None = None, clock: Any = time.time) -> None:
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._types: dict[str, InstanceTypeInfo] = {}
        self._versions: dict[str, str] = {}  # "<template>@<number>" -> instance type
        self._aliases: dict[str, tuple[str, float]] = {}  # "<template>@$Latest" -> (type, read at)
        self._dirty = False
        if path is not None:
            self._load(path)

    # instance types -------------------------------------------------------------------------

    def instance_type(self, name: str) -> InstanceTypeInfo | None:
        with self._lock:
            return self._types.get(name)

    def add_instance_types(self, infos: list[InstanceTypeInfo]) -> None:
        with self._lock:
            for info in infos:
                if self._types.get(info.name) != info:
                    self._types[info.name] = info
                    self._dirty = True

    # launch template versions ---------------------------------------------------------------

    def template_type(self, key: str, alias: bool, max_age: float) -> str | None:
        with self._lock:
            if not alias:
                return self._versions.get(key)
            found = self._aliases.get(key)
        if found is None or not 0 <= self._clock() - found[1] <= max_age:
            return None  # too old, or read "in the future" (a clock that jumped, a damaged file)
        return found[0]

    def add_template_type(self, key: str, alias: bool, instance_type: str) -> None:
        with self._lock:
            if alias:
                self._aliases[key] = (instance_type, self._clock())
            elif self._versions.get(key) == instance_type:
                return
            else:
                self._versions[key] = instance_type
            self._dirty = True

    def forget_aliases(self) -> None:
        """After an error naming a group (its template may have changed): read them again."""
        with self._lock:
            self._aliases.clear()

    # the file -------------------------------------------------------------------------------

    def save(self) -> None:
        with self._lock:
            if self.path is None or not self._dirty:
                return
            document = {
                "version": VERSION,
                "instanceTypes": {name: asdict(info) for name, info in sorted(self._types.items())},
                "templateVersions": dict(sorted(self._versions.items())),
                "templateAliases": {k: [t, at] for k, (t, at) in sorted(self._aliases.items())},
            }
            self._dirty = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            _write_private(self.path, json.dumps(document, separators=(",", ":")).encode())
        except (OSError, _Untrusted):
            return  # best effort: the next run asks AWS (an untrusted folder was said at load)

    def _load(self, path: Path) -> None:
        try:
            raw = _read_trusted(path)
        except _Untrusted as exc:
            _refused(path, str(exc))
            return
        except OSError:
            return
        if raw is None:
            return
        try:
            document = json.loads(raw)
        except ValueError:
            return
        if not isinstance(document, dict) or document.get("version") != VERSION:
            return
        for name, fields in _mapping(document.get("instanceTypes")).items():
            info = _info(fields)
            if info is not None and info.name == name:
                self._types[name] = info
        for key, value in _mapping(document.get("templateVersions")).items():
            if isinstance(value, str) and value:
                self._versions[key] = value
        for key, value in _mapping(document.get("templateAliases")).items():
            if (
                isinstance(value, list)
                and len(value) == 2
                and isinstance(value[0], str)
                and value[0]
                and isinstance(value[1], (int, float))
                and math.isfinite(value[1])
            ):
                self._aliases[key] = (value[0], float(value[1]))


class _Untrusted(Exception):
    """Someone other than us could have written it."""


def _check(info: os.stat_result, what: str) -> None:
    """_Untrusted unless `info` is owned by the effective user and not group/other writable."""
    own = os.geteuid()
    if info.st_uid != own:
        raise _Untrusted(f"{what} is owned by uid {info.st_uid}, not by this process's uid {own}")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise _Untrusted(
            f"{what} is writable by its group or by others (mode {stat.S_IMODE(info.st_mode):04o})"
        )


def _open_folder(folder: Path) -> int:
    """The folder, opened without following a symlink and checked on what was opened."""
    try:
        fd = os.open(folder, _OPEN | os.O_DIRECTORY)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _Untrusted("its folder is a symbolic link") from None
        raise
    try:
        _check(os.fstat(fd), "its folder")
    except _Untrusted:
        os.close(fd)
        raise
    return fd


def _read_trusted(path: Path) -> bytes | None:
    """The file's bytes when only we could have written it; None when there is none."""
    try:
        folder = _open_folder(path.parent)
    except FileNotFoundError:
        return None
    try:
        try:
            fd = os.open(path.name, _OPEN | os.O_NONBLOCK, dir_fd=folder)  # a FIFO must not block
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _Untrusted("it is a symbolic link") from None
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise _Untrusted("it is not a regular file")
            _check(info, "it")
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)
    finally:
        os.close(folder)


def _write_private(path: Path, data: bytes) -> None:
    """Atomically, 0600, into the folder only if it passes the test a read applies."""
    folder = _open_folder(path.parent)
    temporary = f".facts-{secrets.token_hex(8)}.json"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN, 0o600, dir_fd=folder)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(temporary, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except OSError:
            os.unlink(temporary, dir_fd=folder)
            raise
    finally:
        os.close(folder)


def _refused(path: Path, why: str) -> None:
    with _said_lock:
        if str(path) in _said:
            return
        _said.add(str(path))
    _log.warning(
        "aws facts cache %s ignored: %s, so another user could have planted what it says; AWS is asked "
        "instead. To fix: rm -rf %s (it is written again, folder 0700 and files 0600, owned by uid %d)",
        path,
        why,
        path.parent,
        os.geteuid(),
    )


def _mapping(value: Any) -> dict[str, Any]:
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}


def _info(fields: Any) -> InstanceTypeInfo | None:
    if not isinstance(fields, dict) or set(fields) != set(_INFO_FIELDS):
        return None
    if not all(type(fields[name]) is kind for name, kind in _INFO_FIELDS.items()):
        return None
    return InstanceTypeInfo(**fields)
