"""A pending pod that fits an existing node of no node group (a node no ASG of ours owns: a
self-managed node, another tool's group) has a place: `plan` lists it with its node, not under
"Pending pods no group can help"; `what-if` counts it as hosted, never as "nothing can host"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from reconciler.config.documents import load_schema
from tests.support import k8s_objects as k
from tests.support.aws import MotoAws
from tests.support.cli import run
from tests.support.what_if_world import deployment, write_yaml

TAGS = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/prod": "owned"}


def _world(aws: MotoAws, tmp_path: Path, pending: int) -> tuple[Path, Path]:
    """`general` (m5.large, max 2) full: both nodes run 1900m; the node `other` (no ASG of ours)
    is empty; `pending` pods of 1500m wait."""
    aws.launch_template("lt", "m5.large")
    aws.asg("general", desired=2, max_size=2, tags=TAGS, launch_template="lt")
    described = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])
    objects: list[dict[str, Any]] = []
    for index, instance in enumerate(sorted(described["AutoScalingGroups"][0]["Instances"], key=str)):
        objects.append(
            k.node(f"n{index}", instance_id=instance["InstanceId"], zone=instance["AvailabilityZone"])
        )
        objects.append(k.pod(f"busy-{index}", "apps", node_name=f"n{index}", requests={"cpu": "1900m"}))
    objects.append(k.node("other", instance_id="i-0123456789abcdef0", zone="us-east-1a"))
    objects += [k.pod(f"report-{i}", "batch", requests={"cpu": "1500m"}) for i in range(pending)]
    cfg = tmp_path / "asg-reconciler.yaml"
    cfg.write_text(
        "cluster: prod\nregion: us-east-1\nnodeGroups:\n  autoDiscovery:\n"
        "    - asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod\n"
    )
    snap = tmp_path / "cluster.json"
    snap.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": objects}))
    return cfg, snap


def test_plan_lists_a_pod_that_fits_a_node_of_no_group_as_placed(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, snap = _world(aws, tmp_path, pending=1)
    table = run(capsys, "plan", "--config", str(cfg), "--snapshot", str(snap), "--dry-run")
    assert table.code == 0, table.err
    assert "no group can help" not in table.out, table.out
    assert "batch/report-0 -> node other (no node group) (fits existing capacity)" in table.out, table.out

    as_json = run(
        capsys, "plan", "--config", str(cfg), "--snapshot", str(snap), "--dry-run", "--output", "json"
    )
    document = json.loads(as_json.out)
    jsonschema.validate(document, load_schema("plan"))
    (pod,) = document["pendingPods"]
    assert pod == {
        "pod": "batch/report-0",
        "nodeGroup": None,
        "node": "other",
        "reason": "fits existing capacity",
    }


def test_what_if_counts_pods_on_nodes_of_no_group_as_hosted(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, snap = _world(aws, tmp_path, pending=0)
    app = write_yaml(tmp_path / "app.yaml", deployment("report", 1, {"cpu": "1500m"}))
    result = run(
        capsys, "what-if", "--config", str(cfg), "--snapshot", str(snap), "--output", "json", str(app)
    )
    assert result.code == 0, result.err
    document = json.loads(result.out)
    jsonschema.validate(document, load_schema("what-if"))
    (pod,) = document["pods"]
    assert pod["nodeGroup"] is None and pod["node"] == "other" and "fits existing capacity" in pod["reason"]
    assert document["podsOnNodesOfNoGroup"] == 1 and document["add"] == 0

    table = run(capsys, "what-if", "--config", str(cfg), "--snapshot", str(snap), str(app))
    assert table.code == 0, table.err
    assert "nothing can host" not in table.out, table.out
    assert "1 pod(s) fit nodes of no node group" in table.out, table.out
