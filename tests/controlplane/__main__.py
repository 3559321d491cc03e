"""`python -m tests.controlplane build|up DIR|down DIR|gomod VERSION` (docs/development.md)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.controlplane import binaries, gomod
from tests.controlplane.cluster import ControlPlane

USAGE = """usage: python -m tests.controlplane COMMAND
  build [--force]          build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl
                           into the cache (a no-op when they are cached)
  up DIR                   start a control plane with its files in DIR (new or empty); writes
                           DIR/admin.kubeconfig and leaves it running
  down DIR                 stop the control plane `up DIR` started
  gomod VERSION [--etcd V] move go.mod to another k8s.io/kubernetes version"""


def _up(directory: Path) -> int:
    if directory.exists() and any(directory.iterdir()):
        print(f"{directory}: not empty; pick a new directory (or `down` the control plane in it first)")
        return 2
    built = binaries.build(log=lambda line: print(line, file=sys.stderr))
    plane = ControlPlane(directory.resolve(), built).start(die_with_parent=False)
    print(f"control plane {built.version} up in {plane.started_seconds:.1f}s at {plane.url}")
    print(f"export KUBECONFIG={plane.admin_kubeconfig}")
    print(f"{plane.kubectl} get --raw /readyz")
    print(f"python -m tests.controlplane down {directory}")
    return 0


def _down(directory: Path) -> int:
    try:
        plane = ControlPlane.from_directory(directory.resolve())
    except (OSError, ValueError, KeyError):
        print(f"{directory}: no control plane started by `up` here")
        return 2
    plane.stop()
    print(f"stopped the control plane in {directory}")
    return 0


def main(argv: list[str]) -> int:
    if not argv:
        print(USAGE)
        return 2
    command, rest = argv[0], argv[1:]
    if command == "build":
        return binaries.main(rest)
    if command == "gomod":
        return gomod.main(rest)
    if command in ("up", "down") and len(rest) == 1:
        return _up(Path(rest[0])) if command == "up" else _down(Path(rest[0]))
    print(USAGE)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
