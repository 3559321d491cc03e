"""Rendering examples/kubernetes/ with `kubectl kustomize`, shared by the examples' tests."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kubernetes"
OVERLAYS = ("split", "all-in-one", "shadow", "cronjob")
KUBECTL = shutil.which("kubectl")

needs_kubectl = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not installed: cannot render kustomize"
)


@functools.cache
def _render(directory: str) -> tuple[str, ...]:
    assert KUBECTL is not None
    done = subprocess.run(
        [KUBECTL, "kustomize", directory], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return tuple(yaml.safe_dump(d) for d in yaml.safe_load_all(done.stdout) if d)


def render(directory: Path) -> list[dict[str, Any]]:
    """Every object `kubectl kustomize DIRECTORY` prints (fresh copies each call)."""
    return [yaml.safe_load(text) for text in _render(str(directory))]


def overlay(name: str) -> list[dict[str, Any]]:
    return render(EXAMPLES / "overlays" / name)


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
