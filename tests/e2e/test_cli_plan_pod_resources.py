"""`plan --dry-run --snapshot` counts a pod as the scheduler does: pod-level requests
(`spec.resources`, PodLevelResources) instead of its containers', and the resources an in-place
resize left allocated when they are more than the spec says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import k8s_objects as k
from tests.support.aws import MotoAws
from tests.support.plan_cli import TAGS, config, group, pending, plan_json, snapshot

# an m5.2xlarge as the kubelet reports it (8 vCPU, 32 GiB)
ALLOCATABLE = {"cpu": "7910m", "memory": "31Gi", "pods": "58"}


def resized_to(obj: dict[str, Any], allocated: dict[str, str]) -> dict[str, Any]:
    """`obj` after an in-place resize of its container down to its spec, which the node has not
    carried out yet: the status still reports `allocated` (allocated and actuated)."""
    [app] = obj["status"]["containerStatuses"]
    app["allocatedResources"] = dict(allocated)
    app["resources"] = {"requests": dict(allocated)}
    obj["status"]["conditions"].append({"type": "PodResizeInProgress", "status": "True"})
    return obj


def big_pod(how: str) -> dict[str, Any]:
    """A pod on n1 whose containers say 100m but which holds 4 CPU and 8Gi, either way."""
    if how == "pod-level":
        return k.pod(
            "big",
            "apps",
            node_name="n1",
            requests={"cpu": "100m", "memory": "128Mi"},
            pod_requests={"cpu": "4", "memory": "8Gi"},
            owner_kind="ReplicaSet",
        )
    grown = k.pod(
        "big", "apps", node_name="n1", requests={"cpu": "100m", "memory": "128Mi"}, owner_kind="ReplicaSet"
    )
    return resized_to(grown, {"cpu": "4", "memory": "8Gi"})


@pytest.mark.parametrize("how", ["pod-level", "resized"])
def test_a_node_holding_a_big_pod_is_not_proposed_for_removal(
    how: str, aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """n1 holds a pod of 4 CPU (50% of the node); n2 is empty; n3's 5 CPU pod leaves it room for a
    100m pod but not for a 4 CPU one. Read as 100m, the big pod would make n1 a 1% node whose pod
    fits n3, and n1 would be removed with n2."""
    aws.launch_template("lt", "m5.2xlarge")
    aws.asg("general", desired=3, min_size=0, max_size=5, tags=TAGS, launch_template="lt")
    described = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])
    instances = sorted(described["AutoScalingGroups"][0]["Instances"], key=lambda i: i["InstanceId"])
    names = ["n1", "n2", "n3"]
    objects = [
        k.node(
            name,
            instance_id=instance["InstanceId"],
            zone=instance["AvailabilityZone"],
            instance_type="m5.2xlarge",
            allocatable=ALLOCATABLE,
        )
        for name, instance in zip(names, instances, strict=True)
    ]
    objects.append(big_pod(how))
    objects.append(k.pod("steady", "apps", node_name="n3", requests={"cpu": "5"}, owner_kind="ReplicaSet"))
    document = plan_json(
        capsys, config(tmp_path, "scaleDown: {unneededTime: 0s}\n"), snapshot(tmp_path, objects)
    )
    general = group(document, "general")
    by_node = {i["InstanceId"]: name for name, i in zip(names, instances, strict=True)}
    assert [by_node[i] for i in general["removeInstances"]] == ["n2"], general
    assert (general["action"], general["desired"]) == ("scale-down", 2)


def test_pending_pods_with_pod_level_requests_get_a_node_each(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two pods asking 1500m at pod level (their containers say 100m) on m5.large (1930m
    allocatable): one per node, so two nodes, not the one that 2 x 100m would need."""
    aws.launch_template("lt", "m5.large")
    aws.asg("general", max_size=10, tags=TAGS, launch_template="lt")
    objects = [
        pending(f"web-{i}", owner="web", requests={"cpu": "100m"}, pod_requests={"cpu": "1500m"})
        for i in range(2)
    ]
    document = plan_json(capsys, config(tmp_path), snapshot(tmp_path, objects))
    general = group(document, "general")
    assert (general["current"], general["desired"], general["action"]) == (0, 2, "scale-up")


def test_a_daemonset_with_pod_level_requests_takes_its_room_on_every_new_node(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A DaemonSet whose template asks 1 CPU at pod level (its container says 10m) leaves an
    m5.large 930m, so each 900m pending pod needs its own node: two, where 10m would leave room
    for both on one."""
    aws.launch_template("lt", "m5.large")
    aws.asg("general", max_size=10, tags=TAGS, launch_template="lt")
    objects = [
        k.daemonset("agent", requests={"cpu": "10m"}, pod_requests={"cpu": "1"}),
        *(pending(f"web-{i}", owner="web", requests={"cpu": "900m"}) for i in range(2)),
    ]
    document = plan_json(capsys, config(tmp_path), snapshot(tmp_path, objects))
    general = group(document, "general")
    assert (general["current"], general["desired"], general["action"]) == (0, 2, "scale-up")
