"""Issue 29 item 2: an EKS managed node group at zero scales up for the pods that need its labels and
tolerate its taints, which live on the node group (DescribeNodegroup), not on the ASG's tags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.aws.clients import new_session
from tests.support import k8s_objects as k
from tests.support.aws import REGION, MotoAws
from tests.support.cli import run

DISCOVERY = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/prod": "owned"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}
TOLERATE_GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def eks_client() -> Any:
    return new_session(REGION).client("eks")


def managed_group(
    aws: MotoAws,
    name: str,
    *,
    labels: dict[str, str],
    taints: list[dict[str, str]],
    capacity_type: str = "ON_DEMAND",
    asg_tags: dict[str, str] | None = None,
) -> None:
    """A managed node group in EKS and the ASG EKS made for it (moto does not make the ASG)."""
    eks = eks_client()
    try:
        eks.describe_cluster(name="prod")
    except eks.exceptions.ResourceNotFoundException:
        eks.create_cluster(
            name="prod",
            roleArn="arn:aws:iam::123456789012:role/eks",
            resourcesVpcConfig={"subnetIds": ["subnet-1"]},
        )
    eks.create_nodegroup(
        clusterName="prod",
        nodegroupName=name,
        nodeRole="arn:aws:iam::123456789012:role/node",
        subnets=["subnet-1"],
        labels=labels,
        taints=taints,
        capacityType=capacity_type,
    )
    tags = {**DISCOVERY, "eks:cluster-name": "prod", "eks:nodegroup-name": name, **(asg_tags or {})}
    aws.asg(f"eks-{name}-0a1b2c", min_size=0, max_size=5, desired=0, tags=tags)


def plan(tmp_path: Path, capsys: pytest.CaptureFixture[str], *pending: dict[str, Any]) -> dict[str, Any]:
    config = tmp_path / "asg-reconciler.yaml"
    config.write_text(
        "cluster: prod\nregion: us-east-1\nnodeGroups:\n  autoDiscovery:\n"
        "    - asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod\n"
    )
    snapshot = tmp_path / "dump.json"
    snapshot.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": list(pending)}))
    result = run(
        capsys, "plan", "--dry-run", "--config", str(config), "--snapshot", str(snapshot), "--output", "json"
    )
    assert result.code == 0, result.err
    document: dict[str, Any] = json.loads(result.out)
    return document


def actions(document: dict[str, Any]) -> dict[str, tuple[str, int]]:
    return {g["name"]: (g["action"], g["desired"]) for g in document["nodeGroups"]}


def gpu_pod(name: str = "train", **extra: Any) -> dict[str, Any]:
    return k.pod(
        name,
        "ml",
        requests={"cpu": "500m"},
        owner_kind="ReplicaSet",
        owner_name=name,
        **extra,
    )


def test_a_group_at_zero_scales_up_for_a_pod_needing_its_node_group_labels_and_taints(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    managed_group(aws, "gpu", labels={"workload": "gpu"}, taints=[GPU_TAINT])
    aws.asg("general", min_size=0, max_size=5, desired=0, tags=DISCOVERY)
    pod = gpu_pod(node_selector={"workload": "gpu"}, tolerations=[TOLERATE_GPU])
    assert actions(plan(tmp_path, capsys, pod)) == {
        "eks-gpu-0a1b2c": ("scale-up", 1),
        "general": ("none", 0),
    }


def test_the_node_group_taint_keeps_an_intolerant_pod_off_it(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    managed_group(aws, "gpu", labels={"workload": "gpu"}, taints=[GPU_TAINT])
    aws.asg("general", min_size=0, max_size=5, desired=0, tags=DISCOVERY)
    web = gpu_pod("web")
    selecting_without_toleration = gpu_pod("picky", node_selector={"workload": "gpu"})
    document = plan(tmp_path, capsys, web, selecting_without_toleration)
    assert actions(document) == {"eks-gpu-0a1b2c": ("none", 0), "general": ("scale-up", 1)}
    placed = {o["pod"]: o["nodeGroup"] for o in document["pendingPods"]}
    assert placed == {"ml/web": "general", "ml/picky": None}, placed


def test_pods_selecting_what_eks_labels_every_node_with_find_the_group(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    managed_group(aws, "spot", labels={}, taints=[], capacity_type="SPOT")
    aws.asg("general", min_size=0, max_size=5, desired=0, tags=DISCOVERY)
    by_capacity = gpu_pod("batch", node_selector={"eks.amazonaws.com/capacityType": "SPOT"})
    by_name = gpu_pod("named", node_selector={"eks.amazonaws.com/nodegroup": "spot"})
    assert actions(plan(tmp_path, capsys, by_capacity, by_name)) == {
        "eks-spot-0a1b2c": ("scale-up", 1),
        "general": ("none", 0),
    }


def test_an_asg_node_template_tag_wins_over_the_node_group(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    managed_group(
        aws,
        "gpu",
        labels={"workload": "gpu"},
        taints=[],
        asg_tags={"k8s.io/cluster-autoscaler/node-template/label/workload": "inference"},
    )
    wants_gpu = gpu_pod("train", node_selector={"workload": "gpu"})
    wants_inference = gpu_pod("serve", node_selector={"workload": "inference"})
    document = plan(tmp_path, capsys, wants_gpu)
    assert actions(document) == {"eks-gpu-0a1b2c": ("none", 0)}
    assert actions(plan(tmp_path, capsys, wants_inference)) == {"eks-gpu-0a1b2c": ("scale-up", 1)}


def test_a_node_group_eks_does_not_know_is_a_warning_and_the_plan_goes_on(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tags = {**DISCOVERY, "eks:cluster-name": "prod", "eks:nodegroup-name": "gone"}
    aws.asg("eks-gone-1", min_size=0, max_size=5, desired=0, tags=tags)
    aws.asg("general", min_size=0, max_size=5, desired=0, tags=DISCOVERY)
    document = plan(tmp_path, capsys, gpu_pod("web"))
    assert actions(document)["general"][0] == "scale-up" or actions(document)["eks-gone-1"][0] == "scale-up"
    warnings = " ".join(document["warnings"] + [w for g in document["nodeGroups"] for w in g["warnings"]])
    assert "eks-gone-1" in warnings and "EKS managed node group" in warnings, warnings


def test_a_node_group_of_another_eks_cluster_is_named_in_a_warning(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # discovery tags put on an ASG EKS made for another cluster: its nodes join that cluster
    tags = {**DISCOVERY, "eks:cluster-name": "staging", "eks:nodegroup-name": "web"}
    aws.asg("eks-web-9f8e", min_size=0, max_size=5, desired=0, tags=tags)
    document = plan(tmp_path, capsys, gpu_pod("web"))
    warnings = " ".join(document["warnings"] + [w for g in document["nodeGroups"] for w in g["warnings"]])
    assert "eks-web-9f8e" in warnings and "cluster 'staging'" in warnings and "'prod'" in warnings, warnings
