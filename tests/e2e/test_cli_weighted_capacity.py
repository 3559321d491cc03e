"""Issue 29 item 3: a mixed-instances group whose overrides carry WeightedCapacity counts desired in
capacity units, as AWS does; the plan asks for enough units to hold its nodes whichever override
AWS launches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import k8s_objects as k
from tests.support.aws import MotoAws
from tests.support.cli import run

DISCOVERY = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/prod": "owned"}


def plan(tmp_path: Path, capsys: pytest.CaptureFixture[str], pods: int) -> dict[str, Any]:
    config = tmp_path / "asg-reconciler.yaml"
    config.write_text(
        "cluster: prod\nregion: us-east-1\nnodeGroups:\n  autoDiscovery:\n"
        "    - asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod\n"
    )
    items = [
        k.pod(f"api-{i}", "shop", requests={"cpu": "1500m"}, owner_kind="ReplicaSet", owner_name="api")
        for i in range(pods)
    ]
    snapshot = tmp_path / "dump.json"
    snapshot.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    result = run(
        capsys, "plan", "--dry-run", "--config", str(config), "--snapshot", str(snapshot), "--output", "json"
    )
    assert result.code == 0, result.err
    group: dict[str, Any] = json.loads(result.out)["nodeGroups"][0]
    return group


def test_weights_by_vcpu_ask_for_units_not_nodes(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # weights = vCPUs: 3 pods of 1.5 CPU need 3 m5.large (2 vCPU) = 6 units; AWS may fill them with
    # 3 m5.large or, say, 1 m5.xlarge and 1 m5.large: both hold the pods.
    aws.asg(
        "mixed", desired=0, max_size=40, tags=DISCOVERY, overrides=[("m5.large", "2"), ("m5.xlarge", "4")]
    )
    group = plan(tmp_path, capsys, 3)
    assert group["desired"] == 6, group
    assert any("6 capacity units for 3 node(s)" in r for r in group["reasons"]), group["reasons"]


def test_a_weight_out_of_proportion_to_size_asks_for_more_units(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # m5.xlarge is twice an m5.large but weighted 1 like it: one unit per m5.large node. m5.2xlarge
    # weighted 8 has 4x the CPU and memory of an m5.large but only 2x its pod slots (58 vs 29, the
    # VPC CNI's ENI arithmetic): worth 2 m5.large, so 4 units a node. The worst override decides.
    overrides = [("m5.large", "1"), ("m5.xlarge", "1"), ("m5.2xlarge", "8")]
    aws.asg("mixed", desired=0, max_size=40, tags=DISCOVERY, overrides=overrides)
    assert plan(tmp_path, capsys, 3)["desired"] == 12


def test_without_weights_a_node_is_a_unit(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.asg(
        "mixed", desired=0, max_size=40, tags=DISCOVERY, overrides=[("m5.large", None), ("m5.xlarge", None)]
    )
    assert plan(tmp_path, capsys, 3)["desired"] == 3


def test_room_under_max_size_is_counted_in_units(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.asg("mixed", desired=0, max_size=5, tags=DISCOVERY, overrides=[("m5.large", "2"), ("m5.xlarge", "4")])
    group = plan(tmp_path, capsys, 4)  # 4 nodes would be 8 units; max 5 units leaves room for 2 nodes
    assert group["desired"] == 4, group


def test_the_cost_of_a_mixed_raise_is_its_units_at_the_priciest_override_per_unit(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by the new-user trial: a mixed raise was priced by its template (the least override),
    but AWS may launch any override. m5.large and m5.xlarge both weighted 1: 3 units may be three
    m5.xlarge at $0.192/h, so that is what the plan says it adds, at most."""
    overrides = [("m5.large", "1"), ("m5.xlarge", "1")]
    aws.asg("mixed", desired=0, max_size=40, tags=DISCOVERY, overrides=overrides)
    group = plan(tmp_path, capsys, 3)
    assert group["desired"] == 3  # the template is an m5.large: 1 unit a node
    assert group["monthlyCost"]["usd"] == round(3 * 0.192 * 730, 2)
    assert "priciest of its overrides" in group["monthlyCost"]["basis"]
