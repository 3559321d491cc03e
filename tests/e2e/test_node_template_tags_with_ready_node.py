"""Review of issue 12: a group WITH a Ready node still honours the taints and labels its ASG's
node-template tags declare (inventory._with_declared), as it did before the change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import k8s_objects as k
from tests.support.aws import MotoAws
from tests.support.cli import run

TAINT_TAG = "k8s.io/cluster-autoscaler/node-template/taint/dedicated"
TAGS = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/prod": "owned"}
T3_SMALL = {"cpu": "1930m", "memory": "1471840Ki", "pods": "11"}


def write_config(tmp_path: Path) -> Path:
    path = tmp_path / "asg-reconciler.yaml"
    path.write_text(
        "cluster: prod\nregion: us-east-1\nnodeGroups:\n  autoDiscovery:\n"
        "    - asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod\n"
    )
    return path


def in_service(aws: MotoAws, name: str) -> list[tuple[str, str]]:
    described = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])
    return sorted(
        (i["InstanceId"], i["AvailabilityZone"]) for i in described["AutoScalingGroups"][0]["Instances"]
    )


LABEL_TAG = "k8s.io/cluster-autoscaler/node-template/label/pool"


def _plan(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str], tags: dict[str, str], pending: dict
) -> dict:
    aws.launch_template("lt", "t3.small")
    aws.asg("gpu", min_size=1, max_size=5, desired=1, tags={**TAGS, **tags}, launch_template="lt")
    ((iid, zone),) = in_service(aws, "gpu")
    node = k.node("node-0", instance_id=iid, zone=zone, instance_type="t3.small", allocatable=T3_SMALL)
    busy = k.pod(
        "busy",
        "shop",
        node_name="node-0",
        requests={"cpu": "1800m"},
        owner_kind="ReplicaSet",
        owner_name="busy",
    )
    snapshot = tmp_path / "dump.json"
    snapshot.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": [node, busy, pending]}))
    result = run(
        capsys,
        "plan",
        "--dry-run",
        "--config",
        str(write_config(tmp_path)),
        "--snapshot",
        str(snapshot),
        "--output",
        "json",
    )
    assert result.code == 0, result.err
    return {g["name"]: g for g in json.loads(result.out)["nodeGroups"]}["gpu"]


def test_a_declared_taint_keeps_an_intolerant_pod_off_a_group_with_a_ready_node(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pending = k.pod("web", "shop", requests={"cpu": "500m"}, owner_kind="ReplicaSet", owner_name="web")
    group = _plan(aws, tmp_path, capsys, {TAINT_TAG: "gpu:NoSchedule"}, pending)
    assert group["action"] == "none", group  # a new gpu node would carry dedicated=gpu:NoSchedule


def test_a_declared_label_lets_a_selecting_pod_scale_a_group_with_a_ready_node(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pending = k.pod(
        "train",
        "ml",
        requests={"cpu": "500m"},
        node_selector={"pool": "gpu"},
        owner_kind="ReplicaSet",
        owner_name="train",
    )
    group = _plan(aws, tmp_path, capsys, {LABEL_TAG: "gpu"}, pending)
    assert group["action"] == "scale-up", group  # a new gpu node is labelled pool=gpu
