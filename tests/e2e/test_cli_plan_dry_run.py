"""`plan --dry-run --snapshot` end to end: ASGs in moto (templates from tags and DescribeInstanceTypes),
the cluster from a kubectl dump, the plan as table and as schema-valid JSON."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from tests.support import k8s_objects as k
from tests.support.aws import MotoAws
from tests.support.cli import run
from tests.support.plan_cli import GPU_TAGS, TAGS, config, group, pending, plan_json, snapshot


def test_scale_from_zero_uses_tags_and_instance_types(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.launch_template("general-lt", "m5.large")
    aws.launch_template("gpu-lt", "g4dn.xlarge")
    aws.asg("general", max_size=10, tags=TAGS, launch_template="general-lt")
    aws.asg("gpu", max_size=4, tags=GPU_TAGS, launch_template="gpu-lt")
    objects = [pending(f"web-{i}", owner="web", requests={"cpu": "1", "memory": "1Gi"}) for i in range(3)]
    objects.append(
        pending(
            "train",
            requests={"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"},
            node_selector={"workload": "gpu"},
            tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        )
    )
    document = plan_json(capsys, config(tmp_path), snapshot(tmp_path, objects))
    general, gpu = group(document, "general"), group(document, "gpu")
    # m5.large from DescribeInstanceTypes: 1930m allocatable, so one 1-CPU pod per node
    assert (general["current"], general["desired"], general["action"]) == (0, 3, "scale-up")
    assert (gpu["current"], gpu["desired"], gpu["action"]) == (0, 1, "scale-up")
    outcomes = {p["pod"]: p["nodeGroup"] for p in document["pendingPods"]}
    assert outcomes["apps/train"] == "gpu"
    assert outcomes["apps/web-0"] == "general"


def test_table_reads_like_terraform_plan(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.launch_template("lt", "m5.large")
    aws.asg("general", max_size=2, tags=TAGS, launch_template="lt")
    objects = [pending(f"web-{i}", owner="web", requests={"cpu": "1500m"}) for i in range(3)]
    objects.append(pending("giant", requests={"cpu": "64"}))
    result = run(
        capsys,
        "plan",
        "--dry-run",
        "--config",
        str(config(tmp_path)),
        "--snapshot",
        str(snapshot(tmp_path, objects)),
    )
    assert result.code == 0, result.err
    assert "~ general  0 -> 2" in result.out
    assert "(+2)" in result.out
    assert "2 pending pod(s) need 2 × m5.large" in result.out
    assert "apps/giant: no node group can help" in result.out
    assert "insufficient cpu: needs 64" in result.out
    assert "Plan: 2 node(s) to add, 0 to remove." in result.out


def test_csv_has_one_row_per_group_with_the_json_field_names(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.launch_template("lt", "m5.large")
    aws.asg("general", max_size=2, tags=TAGS, launch_template="lt")
    aws.asg("idle", max_size=2, tags=TAGS, launch_template="lt")
    objects = [pending(f"web-{i}", owner="web", requests={"cpu": "1500m"}) for i in range(2)]
    cfg, snap = config(tmp_path), snapshot(tmp_path, objects)
    result = run(capsys, "plan", "--dry-run", "--config", str(cfg), "--snapshot", str(snap), "-o", "csv")
    assert result.code == 0, result.err
    rows = list(csv.DictReader(io.StringIO(result.out)))
    assert list(rows[0]) == [
        "name",
        "minSize",
        "maxSize",
        "current",
        "desired",
        "action",
        "reasons",
        "removeInstances",
    ]
    by_name = {r["name"]: r for r in rows}
    assert (by_name["general"]["current"], by_name["general"]["desired"]) == ("0", "2")
    assert by_name["general"]["action"] == "scale-up"
    assert by_name["general"]["reasons"] == (
        "2 pending pod(s) need 2 × m5.large; adds about $140.16 a month (2 x m5.large at $0.0960/h on-demand)"
    )
    assert by_name["idle"]["action"] == "none"


def test_expander_choice_between_groups(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.launch_template("small-lt", "m5.large")
    aws.launch_template("big-lt", "m5.4xlarge")
    aws.asg("small", max_size=10, tags=TAGS, launch_template="small-lt")
    aws.asg("big", max_size=10, tags=TAGS, launch_template="big-lt")
    objects = [pending(f"web-{i}", owner="web", requests={"cpu": "1", "memory": "1Gi"}) for i in range(4)]
    snap = snapshot(tmp_path, objects)
    fewest = plan_json(capsys, config(tmp_path, "expander: least-nodes\n"), snap)
    assert group(fewest, "big")["desired"] == 1 and group(fewest, "small")["desired"] == 0
    most = plan_json(
        capsys, config(tmp_path, "expander: priority\nexpanderOptions: {priorities: {'10': [small]}}\n"), snap
    )
    assert group(most, "small")["desired"] == 4 and group(most, "big")["desired"] == 0


def test_instances_that_never_register_back_off_and_fall_through(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.launch_template("lt", "m5.large")
    aws.asg("flaky", desired=1, max_size=10, tags=TAGS, launch_template="lt")
    aws.asg("steady", max_size=10, tags=TAGS, launch_template="lt")
    # A complete dump has nodes (infra's, tainted so web-0 cannot use it) and pods.
    aws.asg("infra", desired=1, max_size=1, tags=TAGS, launch_template="lt")
    described = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["infra"])
    (instance,) = described["AutoScalingGroups"][0]["Instances"]
    infra = k.node(
        "infra",
        instance_id=instance["InstanceId"],
        zone=instance["AvailabilityZone"],
        taints=["dedicated=infra:NoSchedule"],
    )
    objects = [
        infra,
        k.pod("agent", node_name="infra", phase="Running"),
        pending("web-0", requests={"cpu": "1"}),
    ]
    # maxNodeProvisionTime 0s: flaky's instance, launched by moto just now, is already overdue
    document = plan_json(
        capsys, config(tmp_path, "scaleUp: {maxNodeProvisionTime: 0s}\n"), snapshot(tmp_path, objects)
    )
    flaky = group(document, "flaky")
    assert flaky["backoffUntil"] is not None
    # and the instance that never registered serves nothing: it is proposed for removal, by name
    assert flaky["action"] == "scale-down"
    assert len(flaky["removeInstances"]) == 1
    assert "unregistered" in flaky["removals"][0]["reason"]
    assert group(document, "steady")["desired"] == 1
    assert document["pendingPods"][0]["nodeGroup"] == "steady"


def test_running_capacity_and_unregistered_instances(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.launch_template("lt", "t3.small")
    aws.asg("general", desired=2, min_size=1, max_size=5, tags=TAGS, launch_template="lt")
    described = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])
    first = sorted(described["AutoScalingGroups"][0]["Instances"], key=lambda i: i["InstanceId"])[0]
    objects = [
        k.node(
            "n1",
            instance_id=first["InstanceId"],
            zone=first["AvailabilityZone"],
            instance_type="t3.small",
            allocatable={"cpu": "1930m", "memory": "1471840Ki", "pods": "11"},
        ),
        pending("web-0", requests={"cpu": "1500m"}),  # does not fit n1's 1930m after its other pod
        k.pod("busy", "apps", node_name="n1", requests={"cpu": "1"}, owner_kind="ReplicaSet", owner_name="b"),
    ]
    document = plan_json(capsys, config(tmp_path), snapshot(tmp_path, objects))
    general = group(document, "general")
    # the second instance has no node yet: it is upcoming capacity, and the pod waits for it
    assert general["upcoming"] == 1
    assert general["action"] == "none"
    assert document["pendingPods"] == [
        {"pod": "apps/web-0", "nodeGroup": "general", "reason": "fits upcoming capacity"}
    ]


def test_a_pod_nominated_for_preemption_waits_for_its_node(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A kubectl dump where the scheduler nominated `urgent` to the full n1 (status.nominatedNodeName):
    it waits there for the lower-priority pod to be preempted, as in cluster-autoscaler: no scale-up."""
    aws.launch_template("lt", "t3.small")
    aws.asg("general", desired=1, max_size=5, tags=TAGS, launch_template="lt")
    described = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])
    [only] = described["AutoScalingGroups"][0]["Instances"]
    objects = [
        k.node(
            "n1",
            instance_id=only["InstanceId"],
            zone=only["AvailabilityZone"],
            instance_type="t3.small",
            allocatable={"cpu": "1930m", "memory": "1471840Ki", "pods": "11"},
        ),
        k.pod("batch", "apps", node_name="n1", requests={"cpu": "1500m"}, owner_kind="ReplicaSet"),
        pending("urgent", requests={"cpu": "1"}, priority=1000, nominated_node_name="n1"),
    ]
    document = plan_json(capsys, config(tmp_path), snapshot(tmp_path, objects))
    general = group(document, "general")
    assert (general["action"], general["desired"]) == ("none", 1)
    assert document["pendingPods"] == [
        {"pod": "apps/urgent", "nodeGroup": "general", "reason": "waiting for preemption on node n1"}
    ]


def test_writing_without_git_url_is_a_user_error(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.asg("general", tags=TAGS)
    result = run(capsys, "plan", "--config", str(config(tmp_path)), "--snapshot", str(snapshot(tmp_path, [])))
    assert result.code == 2
    assert "git.url" in result.err
