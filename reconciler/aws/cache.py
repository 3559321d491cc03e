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
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from reconciler.aws.instance_types import InstanceTypeInfo

VERSION = 1
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
            handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".facts-", suffix=".json")
            with os.fdopen(handle, "w") as out:
                json.dump(document, out, separators=(",", ":"))
            os.replace(temporary, self.path)
        except OSError:
            return  # best effort: the next run asks AWS

    def _load(self, path: Path) -> None:
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError):
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


def _mapping(value: Any) -> dict[str, Any]:
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}


def _info(fields: Any) -> InstanceTypeInfo | None:
    if not isinstance(fields, dict) or set(fields) != set(_INFO_FIELDS):
        return None
    if not all(type(fields[name]) is kind for name, kind in _INFO_FIELDS.items()):
        return None
    return InstanceTypeInfo(**fields)
