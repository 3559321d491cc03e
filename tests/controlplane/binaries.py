"""The control plane's programs, built from this folder's Go module and cached per version outside the
checkout, so a second `make test` (or another worktree) does not rebuild them.

The version is the one `go.mod` requires of k8s.io/kubernetes: that file is the only place it is
written (docs/development.md says how to move it). A cache entry is used only when its stamp names
the same go.mod, go.sum and etcd main as the checkout's, so moving the version or a dependency
rebuilds, and nothing else does."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MODULE_DIR = Path(__file__).resolve().parent
CACHE_ENV = "ASG_RECONCILER_CONTROL_PLANE_CACHE"
STAMP = "build.json"

# name -> the Go package `go build` makes it from (etcd through our own two-line main, cmd/etcd)
COMMANDS = {
    "etcd": "./cmd/etcd",
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
    "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    "kubectl": "k8s.io/kubernetes/cmd/kubectl",
}
# the files whose content decides what gets built: a change to any of them means a rebuild
INPUTS = ("go.mod", "go.sum", "cmd/etcd/main.go")


def kubernetes_version(go_mod: Path = MODULE_DIR / "go.mod") -> str:
    match = re.search(r"^\s*k8s\.io/kubernetes\s+(v\S+)", go_mod.read_text(), re.MULTILINE)
    if match is None:
        raise ValueError(f"{go_mod}: no `k8s.io/kubernetes vX.Y.Z` requirement")
    return match.group(1)


def etcd_version(go_mod: Path = MODULE_DIR / "go.mod") -> str:
    match = re.search(r"^\s*go\.etcd\.io/etcd/server/v3\s+(v\S+)", go_mod.read_text(), re.MULTILINE)
    if match is None:
        raise ValueError(f"{go_mod}: no `go.etcd.io/etcd/server/v3 vX.Y.Z` requirement")
    return match.group(1)


def cache_root() -> Path:
    """$ASG_RECONCILER_CONTROL_PLANE_CACHE, else ~/.cache/asg-reconciler/control-plane. Not
    $XDG_CACHE_HOME: the test suite points that at a fresh folder for every test."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "asg-reconciler" / "control-plane"


def fingerprint() -> str:
    digest = hashlib.sha256()
    for name in INPUTS:
        digest.update(name.encode() + b"\0" + (MODULE_DIR / name).read_bytes() + b"\0")
    return digest.hexdigest()


def go_command() -> str | None:
    """$ASG_RECONCILER_GO (a path, or `none`: act as where Go is missing), else `go` on PATH, else
    Go's default install path."""
    configured = os.environ.get("ASG_RECONCILER_GO")
    if configured:
        return None if configured == "none" else configured
    found = shutil.which("go")
    if found:
        return found
    fallback = Path("/usr/local/go/bin/go")
    return str(fallback) if fallback.is_file() else None


@dataclass(frozen=True)
class Binaries:
    """A complete, stamped set of the programs for one version."""

    directory: Path
    version: str

    def path(self, name: str) -> Path:
        return self.directory / name

    def stamp(self) -> dict[str, object]:
        return json.loads((self.directory / STAMP).read_text())  # type: ignore[no-any-return]


def cached(version: str | None = None) -> Binaries | None:
    """The cached programs when every one is there and the stamp matches this checkout; else None."""
    version = version or kubernetes_version()
    directory = cache_root() / version
    try:
        stamp = json.loads((directory / STAMP).read_text())
    except (OSError, ValueError):
        return None
    if stamp.get("fingerprint") != fingerprint():
        return None
    if not all(os.access(directory / name, os.X_OK) for name in COMMANDS):
        return None
    return Binaries(directory, version)


def unavailable_reason() -> str | None:
    """Why the real tier cannot run here, in one line; None when it can (cached, or Go to build it)."""
    if cached() is not None:
        return None
    if go_command() is None:
        return (
            f"the real control plane {kubernetes_version()} is not cached in {cache_root()} and Go is "
            "not installed to build it (install Go 1.24+ and run `make control-plane`)"
        )
    return None


def build(*, force: bool = False, log: Callable[[str], None] = print) -> Binaries:
    """The cached programs, building them first when they are missing or stale. Safe to call from
    several processes at once: one builds, the others wait on the lock and find the result."""
    version = kubernetes_version()
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = None if force else cached(version)
        if found is not None:
            return found
        go = go_command()
        if go is None:
            raise RuntimeError(unavailable_reason() or "Go is not installed")
        staging = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=root))
        command = [
            go,
            "build",
            "-trimpath",
            "-buildvcs=false",
            "-ldflags=-s -w",
            "-o",
            str(staging) + os.sep,
            *COMMANDS.values(),
        ]
        log(
            f"building the control plane {version} (etcd {etcd_version()}) into {root / version}: this "
            "takes 10-30 minutes the first time"
        )
        started = time.monotonic()
        done = subprocess.run(command, cwd=MODULE_DIR, check=False)
        seconds = round(time.monotonic() - started, 1)
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise RuntimeError(f"`{' '.join(command)}` failed with exit code {done.returncode}")
        go_version = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False)
        sizes = {name: (staging / name).stat().st_size for name in COMMANDS}
        (staging / STAMP).write_text(
            json.dumps(
                {
                    "version": version,
                    "etcd": etcd_version(),
                    "fingerprint": fingerprint(),
                    "go": go_version.stdout.strip(),
                    "buildSeconds": seconds,
                    "sizes": sizes,
                    "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                },
                indent=2,
            )
            + "\n"
        )
        target = root / version
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
        total = sum(sizes.values()) / 2**20
        log(f"built the control plane {version} in {seconds:.0f}s ({total:.0f} MiB in {target})")
        return Binaries(target, version)


def main(argv: list[str]) -> int:
    """`python -m tests.controlplane build [--force] [--if-go]`: a no-op when cached; with --if-go,
    one line and success where Go is missing (the real tier then skips)."""
    if "--if-go" in argv and (reason := unavailable_reason()) is not None:
        print(f"real tier: skipped: {reason}", file=sys.stderr)
        return 0
    binaries = build(force="--force" in argv, log=lambda line: print(line, file=sys.stderr))
    print(binaries.directory)
    return 0
