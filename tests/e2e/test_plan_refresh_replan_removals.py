"""Review of issue 12: the plan asks about instance refreshes only for groups it would remove from,
then plans again without removals there; that second plan must not propose removals in a group it
never asked about (here: every group is under a refresh, scaleDown.maxNodesPerPlan 1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import k8s_objects as k
from tests.support.aws import MotoAws
from tests.support.cli import run
from tests.support.refresh_world import refresh_under_way

TAGS = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/prod": "owned"}
T3_SMALL = {"cpu": "1930m", "memory": "1471840Ki", "pods": "11"}


def test_no_removal_is_proposed_in_a_group_under_a_refresh(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    aws.launch_template("tmpl", "t3.small")
    items: list[Any] = []
    for name in ("a", "b", "c"):
        aws.asg(name, min_size=0, max_size=5, desired=2, tags=TAGS, launch_template="tmpl")
        described = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])
        for n, i in enumerate(described["AutoScalingGroups"][0]["Instances"]):
            node = f"{name}-{n}"
            items.append(
                k.node(
                    node,
                    instance_id=i["InstanceId"],
                    zone=i["AvailabilityZone"],
                    instance_type="t3.small",
                    allocatable=T3_SMALL,
                )
            )
            if n == 0:  # one busy node per group, one idle
                items.append(
                    k.pod(
                        f"w-{node}",
                        "shop",
                        node_name=node,
                        requests={"cpu": "500m"},
                        owner_kind="ReplicaSet",
                        owner_name="w",
                    )
                )
    snapshot = tmp_path / "dump.json"
    snapshot.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    config = tmp_path / "asg-reconciler.yaml"
    config.write_text(
        "cluster: prod\nregion: us-east-1\nnodeGroups:\n  autoDiscovery:\n"
        "    - asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod\n"
        "scaleDown: {unneededTime: 0s, maxNodesPerPlan: 1}\n"
    )
    refresh_under_way(monkeypatch)
    result = run(
        capsys, "plan", "--dry-run", "--config", str(config), "--snapshot", str(snapshot), "-o", "json"
    )
    assert result.code == 0, result.err
    document = json.loads(result.out)
    removing = {g["name"]: g["removeInstances"] for g in document["nodeGroups"] if g["removeInstances"]}
    assert removing == {}, (removing, document["awsCalls"])
