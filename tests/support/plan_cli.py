"""`plan --dry-run --snapshot` through the CLI, for the tests that plan a kubectl dump: a config
discovering the prod ASGs by tag, a dump written as a kubectl List, the plan as schema-valid JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from reconciler.config.documents import load_schema
from tests.support import k8s_objects as k
from tests.support.cli import run

TAGS = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/prod": "owned"}
TEMPLATE = "k8s.io/cluster-autoscaler/node-template"
GPU_TAGS = {
    **TAGS,
    f"{TEMPLATE}/label/workload": "gpu",
    f"{TEMPLATE}/taint/nvidia.com/gpu": "true:NoSchedule",
}


def config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "asg-reconciler.yaml"
    path.write_text(
        "cluster: prod\nregion: us-east-1\nnodeGroups:\n  autoDiscovery:\n"
        "    - asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod\n" + extra
    )
    return path


def snapshot(tmp_path: Path, objects: list[dict[str, Any]]) -> Path:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": objects}))
    return path


def plan_json(capsys: pytest.CaptureFixture[str], cfg: Path, snap: Path) -> dict[str, Any]:
    result = run(
        capsys, "plan", "--dry-run", "--config", str(cfg), "--snapshot", str(snap), "--output", "json"
    )
    assert result.code == 0, result.err
    document: dict[str, Any] = json.loads(result.out)
    jsonschema.validate(document, load_schema("plan"))
    return document


def group(document: dict[str, Any], name: str) -> dict[str, Any]:
    return next(g for g in document["nodeGroups"] if g["name"] == name)


def pending(name: str, **kw: Any) -> dict[str, Any]:
    return k.pod(name, "apps", owner_kind="ReplicaSet", owner_name=kw.pop("owner", name), **kw)
