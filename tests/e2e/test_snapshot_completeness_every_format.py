"""Review of issue 12: the completeness refusal holds whatever shape the dump has — typed lists,
YAML, a kubectl stream, a directory (`kubectl cluster-info dump --output-directory`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.domain.snapshot_completeness import COMPLETE_DUMP
from tests.support import k8s_objects as k
from tests.support.aws import MotoAws
from tests.support.cli import run

TAGS = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/prod": "owned"}
T3_SMALL = {"cpu": "1930m", "memory": "1471840Ki", "pods": "11"}


def cluster(aws: MotoAws) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    aws.launch_template("tmpl", "t3.small")
    aws.asg("general", min_size=1, max_size=5, desired=2, tags=TAGS, launch_template="tmpl")
    described = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])
    instances = sorted(
        (i["InstanceId"], i["AvailabilityZone"]) for i in described["AutoScalingGroups"][0]["Instances"]
    )
    nodes = [
        k.node(f"node-{n}", instance_id=i, zone=z, instance_type="t3.small", allocatable=T3_SMALL)
        for n, (i, z) in enumerate(instances)
    ]
    pods = [
        k.pod(
            f"web-{n}",
            "shop",
            node_name=f"node-{n}",
            requests={"cpu": "100m"},
            owner_kind="ReplicaSet",
            owner_name="web",
        )
        for n in range(len(instances))
    ]
    return nodes, pods


def write(path: Path, shape: str, objects: list[dict[str, Any]], kind: str) -> Path:
    if shape == "typed":
        path = path.with_suffix(".json")
        path.write_text(json.dumps(k.typed_list(kind, objects)))
    elif shape == "yaml":
        path = path.with_suffix(".yaml")
        path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}))
    elif shape == "stream":
        path = path.with_suffix(".json")
        path.write_text("\n".join(json.dumps(o) for o in objects))
    else:  # a directory dump, one file per namespace as cluster-info dump writes it
        path.mkdir()
        (path / "shop").mkdir()
        (path / "shop" / f"{kind.lower()}s.json").write_text(json.dumps(k.typed_list(kind, objects)))
    return path


@pytest.mark.parametrize("shape", ["typed", "yaml", "stream", "directory"])
@pytest.mark.parametrize("missing", ["Node", "Pod"])
def test_a_dump_missing_nodes_or_pods_is_refused_in_every_shape(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str], shape: str, missing: str
) -> None:
    nodes, pods = cluster(aws)
    kept, kind = (pods, "Pod") if missing == "Node" else (nodes, "Node")
    snapshot = write(tmp_path / "dump", shape, kept, kind)
    config = tmp_path / "asg-reconciler.yaml"
    config.write_text(
        "cluster: prod\nregion: us-east-1\nnodeGroups:\n  autoDiscovery:\n"
        "    - asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod\n"
    )
    result = run(capsys, "plan", "--dry-run", "--config", str(config), "--snapshot", str(snapshot))
    assert result.code == 2, result.out + result.err
    assert result.err.startswith(f"error: {snapshot}: no {missing}")
    assert result.err.rstrip().endswith(COMPLETE_DUMP)
