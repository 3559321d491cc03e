"""Workload manifests for the what-if tests: a Deployment, its pod template, a file of them,
the one-line error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.cli import Result


def manifest(kind: str, name: str, namespace: str = "apps", **spec: Any) -> dict[str, Any]:
    api = {"Job": "batch/v1", "CronJob": "batch/v1", "Pod": "v1", "ReplicationController": "v1"}
    return {
        "apiVersion": api.get(kind, "apps/v1"),
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def pod_template(app: str, requests: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {
            "containers": [{"name": "app", "image": "app:1", "resources": {"requests": requests}}],
            **spec,
        },
    }


def deployment(name: str, replicas: int, requests: dict[str, str], **spec: Any) -> dict[str, Any]:
    return manifest(
        "Deployment",
        name,
        replicas=replicas,
        selector={"matchLabels": {"app": name}},
        template=pod_template(name, requests, **spec),
    )


def write_yaml(path: Path, *documents: dict[str, Any]) -> Path:
    """A YAML stream, `---` between documents; each document is one line of JSON (which is YAML), so
    the lines a message names are known."""
    path.write_text("---\n".join(json.dumps(d) + "\n" for d in documents))
    return path


def one_line_error(result: Result, *fragments: str) -> None:
    assert result.code == 2, result
    assert result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert "Traceback" not in result.err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
