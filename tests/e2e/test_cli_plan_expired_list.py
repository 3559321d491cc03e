"""`plan --dry-run` reading the cluster live while etcd compacts between two pages of its pod list:
the expired continue token (410 Expired) costs a second listing, not the plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.demo.kube_api import FakeKubeAPI
from tests.support.aws import MotoAws
from tests.support.cli import run
from tests.support.kube import write_kubeconfig
from tests.support.plan_cli import TAGS, config, group, pending


def test_a_plan_whose_pod_list_expires_plans_the_pods_there_are(
    aws: MotoAws, kube_api: FakeKubeAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.launch_template("lt", "m5.large")
    aws.asg("general", max_size=10, tags=TAGS, launch_template="lt")
    for i in range(5):
        kube_api.put(pending(f"web-{i}", owner="web", requests={"cpu": "1"}))
    compacted = []

    def fault(method: str, path: str, query: dict[str, str]) -> None:
        """Before the second page of the first pod list: a sixth pod arrives, etcd compacts."""
        if path == "/api/v1/pods" and query.get("continue") and not compacted:
            compacted.append(path)
            kube_api.put(pending("web-5", owner="web", requests={"cpu": "1"}))
            kube_api.compact()

    kube_api.fault = fault
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kube_api.url)
    cfg = config(tmp_path, f"kubernetes: {{kubeconfig: {kubeconfig}, pageSize: 2}}\n")
    result = run(capsys, "plan", "--dry-run", "--config", str(cfg), "--output", "json")

    assert result.code == 0, result.err
    assert compacted
    document = json.loads(result.out)
    # m5.large: one 1-CPU pod per node; all six pods, each once
    assert (group(document, "general")["desired"], group(document, "general")["action"]) == (6, "scale-up")
    assert sorted(p["pod"] for p in document["pendingPods"]) == [f"apps/web-{i}" for i in range(6)]
