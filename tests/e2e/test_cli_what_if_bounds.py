"""What-if's work is bounded by its inputs: every pod it would build, a DaemonSet's included, and
every value of those pods (containers, volumes, claim templates) counts against one budget, checked
before anything is allocated. Over it is one line naming the file, the object and the field, exit 2.
A 15 KB StatefulSet (100,000 replicas of 200 volumeClaimTemplates) ended in a MemoryError traceback;
a DaemonSet's pods were not counted at all."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from reconciler.kube import workloads
from tests.e2e.test_cli_what_if import cluster, config, snapshot
from tests.support.aws import MotoAws
from tests.support.cli import run
from tests.support.what_if_world import deployment, manifest, one_line_error, pod_template, write_yaml


def test_a_daemonsets_pods_count_against_the_pod_bound(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workloads, "MAX_ADDED_PODS", 3)
    cfg, snap = config(tmp_path), snapshot(tmp_path, cluster(aws, nodes=2))
    agent = manifest(
        "DaemonSet",
        "agent",
        "kube-system",
        selector={"matchLabels": {"app": "agent"}},
        template=pod_template("agent", {"cpu": "10m"}),
    )
    app = write_yaml(tmp_path / "app.yaml", deployment("web", 2, {"cpu": "10m"}), agent)
    result = run(capsys, "what-if", "--config", str(cfg), "--snapshot", str(snap), str(app))
    one_line_error(
        result,
        "app.yaml:3: document 2: DaemonSet kube-system/agent: one pod on each of the 2 node(s) it selects",
        "more than what-if simulates (3 in all)",
    )


def test_a_small_statefulset_of_many_claims_is_refused_before_anything_is_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    claims = [{"metadata": {"name": f"d{n}"}, "spec": {"accessModes": ["ReadWriteOnce"]}} for n in range(200)]
    db = manifest(
        "StatefulSet",
        "db",
        replicas=100_000,
        selector={"matchLabels": {"app": "db"}},
        template=pod_template("db", {"cpu": "10m"}),
        volumeClaimTemplates=claims,
    )
    app = write_yaml(tmp_path / "db.yaml", db)
    assert app.stat().st_size < 16_000
    started = time.monotonic()
    result = run(capsys, "what-if", "--config", str(tmp_path / "none.yaml"), str(app))
    one_line_error(
        result,
        "db.yaml:1: document 1: StatefulSet apps/db: spec.replicas: 100000 pod(s) of",
        "more than what-if builds",
    )
    assert time.monotonic() - started < 30  # refused before a pod is built (a generous bound)


def test_many_containers_times_many_replicas_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    template = pod_template("web", {"cpu": "1m"})
    template["spec"]["containers"] = [
        {"name": f"c{n}", "image": "i", "resources": {"requests": {"cpu": "1m"}}} for n in range(200)
    ]
    web = manifest(
        "Deployment", "web", replicas=90_000, selector={"matchLabels": {"app": "web"}}, template=template
    )
    result = run(
        capsys, "what-if", "--config", str(tmp_path / "none.yaml"), str(write_yaml(tmp_path / "w.yaml", web))
    )
    one_line_error(result, "w.yaml:1: document 1: Deployment apps/web: spec.replicas: 90000 pod(s)")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n"
            "  a: &a [x, x, x, x, x, x, x, x, x]\n"
            "  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n  c: [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n",
            "bomb.yaml:5: anchor &a: YAML anchors and aliases are refused",
        ),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: " + "[" * 5000 + "]" * 5000 + "\n",
            "nested more than 100 levels",
        ),
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
            "spec: {replicas: 99999999999999999999, "
            "selector: {}, template: {spec: {containers: [{name: a}]}}}\n",
            "spec.replicas: adds 99999999999999999999 pod(s)",
        ),
    ],
    ids=["alias-bomb", "deep-nesting", "huge-replicas"],
)
def test_parsing_cost_is_bounded_before_anything_is_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, fragment: str
) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    started = time.monotonic()
    result = run(capsys, "what-if", "--config", str(tmp_path / "none.yaml"), str(path))
    one_line_error(result, fragment)
    assert time.monotonic() - started < 30
