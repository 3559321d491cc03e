"""A tenant's quantities stop nobody (issue 28): `memory: 1e33` is a value the API server accepts and
serves (ResourceQuota does not cover DaemonSets), and until then one such pod or DaemonSet made
every live read fail, `plan` exit 2 and `run`'s Pod reflector relist and fail for ever. Quantities
are read as apimachinery reads them (saturating); an object that still cannot be read (a value no
server would serve, in a dump or a fake) is left out with a warning naming it, and the rest of the
cluster is planned."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.demo.kube_api import FakeKubeAPI
from tests.support import k8s_objects as k
from tests.support.aws import MotoAws
from tests.support.cli import run
from tests.support.kube import write_kubeconfig
from tests.support.plan_cli import TAGS, config, group, pending, snapshot


def _tenant_objects() -> list[dict[str, Any]]:
    return [
        pending("web-0", owner="web", requests={"cpu": "1"}),
        k.pod("greedy", "team-a", requests={"memory": "1e33"}, owner_kind="ReplicaSet", owner_name="greedy"),
        k.daemonset("agent", "team-a", requests={"cpu": "10m", "memory": "1e33"}),
        k.pod("typo", "team-b", requests={"cpu": "lots"}, owner_kind="ReplicaSet", owner_name="typo"),
    ]


def _check(result: Any) -> None:
    assert result.code == 0, result.err
    document = json.loads(result.out)
    general = group(document, "general")
    assert (general["action"], general["desired"]) == ("scale-up", 1)  # web-0 gets its node
    outcomes = {p["pod"]: p for p in document["pendingPods"]}
    assert outcomes["apps/web-0"]["nodeGroup"] == "general"
    assert outcomes["team-a/greedy"]["nodeGroup"] is None  # read, saturated: fits no group
    assert "team-b/typo" not in outcomes  # left out...
    said = "\n".join(document["warnings"])
    assert "pod team-b/typo left out of the plan" in said  # ...and named, with its field
    assert "spec.containers[app].resources.requests.cpu: 'lots'" in said
    assert "daemonset team-a/agent asks for more than a new node of general has left" in said


def test_live_plan_reads_past_a_tenants_quantities(
    aws: MotoAws, kube_api: FakeKubeAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.launch_template("lt", "m5.large")
    aws.asg("general", max_size=10, tags=TAGS, launch_template="lt")
    for obj in _tenant_objects():
        kube_api.put(obj)
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kube_api.url)
    cfg = config(tmp_path, f"kubernetes: {{kubeconfig: {kubeconfig}}}\n")
    _check(run(capsys, "plan", "--dry-run", "--config", str(cfg), "--output", "json"))


def test_snapshot_plan_reads_past_a_tenants_quantities(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.launch_template("lt", "m5.large")
    aws.asg("general", max_size=10, tags=TAGS, launch_template="lt")
    dump = snapshot(tmp_path, _tenant_objects())
    cfg = config(tmp_path)
    _check(
        run(capsys, "plan", "--dry-run", "--config", str(cfg), "--snapshot", str(dump), "--output", "json")
    )
