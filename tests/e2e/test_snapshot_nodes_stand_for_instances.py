"""Review of issue 12 (snapshot completeness): a dump whose Node objects stand for none of the ASGs'
InService instances (a Fargate node, another cluster's nodes, nodes without providerID) must be
refused like a dump with no Node objects: otherwise every instance looks unregistered and the plan
names them for removal."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support import k8s_objects as k
from tests.support.aws import MotoAws
from tests.support.cli import run

TAGS = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/prod": "owned"}
T3_SMALL = {"cpu": "1930m", "memory": "1471840Ki", "pods": "11"}


@pytest.mark.parametrize(
    "stray",
    [
        {"provider_id": "aws:///us-east-1a/0123abcd/fargate-ip-10-0-0-1.ec2.internal"},  # a Fargate node
        {"provider_id": ""},  # no spec.providerID
        {"instance_id": "i-0aaaaaaaaaaaaaaaa"},  # another cluster's node (the wrong kubectl context)
    ],
)
def test_nodes_that_stand_for_no_instance_do_not_make_a_complete_dump(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str], stray: dict
) -> None:
    aws.launch_template("lt", "t3.small")
    aws.asg("general", min_size=0, max_size=5, desired=3, tags=TAGS, launch_template="lt")
    config = tmp_path / "asg-reconciler.yaml"
    config.write_text(
        "cluster: prod\nregion: us-east-1\nnodeGroups:\n  autoDiscovery:\n"
        "    - asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod\n"
        "scaleUp: {maxNodeProvisionTime: 1s}\n"
    )
    node = k.node("stray-0", instance_type="t3.small", allocatable=T3_SMALL, **stray)
    pods = [
        k.pod(
            f"web-{n}",
            "shop",
            node_name=f"ip-10-0-0-{n}",
            requests={"cpu": "1500m"},
            owner_kind="ReplicaSet",
            owner_name="web",
        )
        for n in range(3)
    ]
    snapshot = tmp_path / "dump.json"
    snapshot.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": [node, *pods]}))
    time.sleep(2)  # the instances are now older than maxNodeProvisionTime
    result = run(
        capsys, "plan", "--dry-run", "--config", str(config), "--snapshot", str(snapshot), "--output", "json"
    )
    removals = (
        {g["name"]: g["removeInstances"] for g in json.loads(result.out)["nodeGroups"]}
        if result.code == 0
        else {}
    )
    assert result.code == 2, f"not refused; the plan removes {removals}"
