"""A workload whose field has the wrong type (a string where Kubernetes wants a mapping, a list item
that is null, a number where it wants a string) is a mistake in the file: one line naming the file,
the document, the workload and the field, exit 2, before anything is asked. Each of these was a
Python traceback (exit 1), or read silently in a way the API server would refuse."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run
from tests.support.what_if_world import deployment, manifest, one_line_error, pod_template, write_yaml


def web() -> dict[str, Any]:
    return deployment(
        "web",
        2,
        {"cpu": "1"},
        tolerations=[{"key": "k", "operator": "Exists"}],
        nodeSelector={"team": "blue"},
        volumes=[{"name": "v", "emptyDir": {}}],
        affinity={"nodeAffinity": {}},
    )


def with_value(document: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(document)
    node: Any = changed
    keys: list[str | int] = [int(k) if k.isdigit() else k for k in path.split(".")]
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    return changed


POD = "spec.template.spec"
CASES: list[tuple[str, Any, str]] = [
    (
        "spec.template.metadata.labels",
        "app",
        "spec.template.metadata.labels: expected a mapping, got a string",
    ),
    ("spec.template.metadata.annotations", 5, "spec.template.metadata.annotations: expected a mapping"),
    ("spec.template.metadata.labels.app", ["web"], "spec.template.metadata.labels"),
    (f"{POD}.containers.0.resources", "big", f"{POD}.containers[0].resources: expected a mapping"),
    (f"{POD}.containers.0.resources.requests", "1", f"{POD}.containers[0].resources.requests"),
    (f"{POD}.containers.0.resources.requests.cpu", [1], f"{POD}.containers[0].resources.requests"),
    (f"{POD}.containers.0.name", [], f"{POD}.containers[0].name: expected a string"),
    (f"{POD}.tolerations", "all", f"{POD}.tolerations: expected a list"),
    (f"{POD}.tolerations.0", None, f"{POD}.tolerations[0]: expected a mapping, got null"),
    (f"{POD}.tolerations.0.tolerationSeconds", "5", f"{POD}.tolerations[0].tolerationSeconds"),
    (f"{POD}.nodeSelector", "team=blue", f"{POD}.nodeSelector: expected a mapping"),
    (f"{POD}.nodeSelector.team", 1, f"{POD}.nodeSelector"),
    (f"{POD}.volumes", 5, f"{POD}.volumes: expected a list"),
    (f"{POD}.volumes.0", None, f"{POD}.volumes[0]"),
    (f"{POD}.volumes.0.emptyDir", "x", f"{POD}.volumes[0].emptyDir: expected a mapping"),
    (f"{POD}.affinity", "x", f"{POD}.affinity: expected a mapping"),
    (f"{POD}.affinity.nodeAffinity", "x", f"{POD}.affinity.nodeAffinity: expected a mapping"),
    (f"{POD}.priority", "5", f"{POD}.priority: expected a whole number"),
    ("spec.selector.matchLabels", "x", "spec.selector.matchLabels: expected a mapping"),
]


@pytest.mark.parametrize(("path", "value", "fragment"), CASES, ids=[f"{p}={v!r}" for p, v, _ in CASES])
def test_a_field_of_the_wrong_type_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str, value: Any, fragment: str
) -> None:
    bad = write_yaml(tmp_path / "app.yaml", with_value(web(), path, value))
    result = run(capsys, "what-if", "--config", str(tmp_path / "none.yaml"), str(bad))
    one_line_error(result, "app.yaml:1: document 1", "Deployment web", fragment)


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        (
            manifest("Pod", "p", containers=[{"name": "a"}], tolerations="all"),
            "Pod p: spec.tolerations: expected a list",
        ),
        (
            manifest(
                "CronJob",
                "c",
                schedule="* * * * *",
                jobTemplate={"spec": {"template": {**pod_template("c", {}), "metadata": {"labels": "x"}}}},
            ),
            "CronJob c: spec.jobTemplate.spec.template.metadata.labels: expected a mapping",
        ),
        (
            manifest(
                "StatefulSet",
                "db",
                template=pod_template("db", {}),
                volumeClaimTemplates=[{"metadata": "data"}],
            ),
            "StatefulSet db: spec.volumeClaimTemplates[0].metadata: expected a mapping",
        ),
        (
            manifest(
                "ReplicationController", "rc", template=pod_template("rc", {}), selector={"app": ["rc"]}
            ),
            "ReplicationController rc: spec.selector",
        ),
    ],
    ids=["pod", "cronjob", "statefulset", "replicationcontroller"],
)
def test_every_kind_names_its_own_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: dict[str, Any], fragment: str
) -> None:
    bad = write_yaml(tmp_path / "app.yaml", document)
    result = run(capsys, "what-if", "--config", str(tmp_path / "none.yaml"), str(bad))
    one_line_error(result, "app.yaml:1: document 1", fragment)
