"""Node templates built from ASGs on a moto server: tags, launch sources, the real t3.small."""

from __future__ import annotations

import json

from reconciler.aws.clients import aws_clients
from reconciler.aws.discovery import discover_node_groups
from reconciler.aws.templates import LABEL_PREFIX, OPTIONS_PREFIX, RESOURCES_PREFIX, TAINT_PREFIX
from reconciler.domain.model import NodeGroup, Taint
from reconciler.domain.quantity import int_value, milli_value
from tests.data import EKS_T3SMALL
from tests.support.aws import MotoAws

FIXTURE = EKS_T3SMALL / "nodes.json"


def discover(aws: MotoAws, *names: str) -> tuple[NodeGroup, ...]:
    """The named groups as explicit groups, tagged for the cluster as the apply IAM policy wants
    (an untagged explicit group is warned about: tests/e2e/test_cli_status.py)."""
    autoscaling, ec2 = aws_clients(aws.config())
    autoscaling.create_or_update_tags(
        Tags=[
            {
                "ResourceId": name,
                "ResourceType": "auto-scaling-group",
                "Key": "k8s.io/cluster-autoscaler/test",
                "Value": "owned",
                "PropagateAtLaunch": False,
            }
            for name in names
        ]
    )
    return discover_node_groups(aws.config(explicit=[f"0:10:{name}" for name in names]), autoscaling, ec2)


def test_t3small_template_matches_the_real_eks_node(aws: MotoAws) -> None:
    aws.launch_template("small", "t3.small")
    aws.asg("small-nodes", launch_template="small")
    (group,) = discover(aws, "small-nodes")
    template = group.template
    assert template is not None and group.template_error == ""
    real = json.loads(FIXTURE.read_text())["items"][0]
    allocatable, labels = real["status"]["allocatable"], real["metadata"]["labels"]
    assert template.allocatable.cpu == milli_value(allocatable["cpu"])  # 1930m
    assert template.allocatable.pods == int_value(allocatable["pods"])  # 11
    real_memory = int_value(allocatable["memory"])
    assert abs(template.allocatable.memory - real_memory) / real_memory < 0.03
    for label in ("kubernetes.io/arch", "kubernetes.io/os", "node.kubernetes.io/instance-type"):
        assert template.labels[label] == labels[label]
    assert template.labels["topology.kubernetes.io/region"] == "us-east-1"
    assert template.labels["topology.kubernetes.io/zone"] == "us-east-1a"
    assert template.labels["kubernetes.io/hostname"] == "template-node-for-small-nodes"


def test_templates_follow_the_node_template_tags(aws: MotoAws) -> None:
    aws.asg(
        "gpu",
        tags={
            LABEL_PREFIX + "accelerator": "nvidia-t4",
            TAINT_PREFIX + "nvidia.com/gpu": "present:NoSchedule",
            RESOURCES_PREFIX + "nvidia.com/gpu": "2",
            RESOURCES_PREFIX + "ephemeral-storage": "200Gi",
            OPTIONS_PREFIX + "scaledownutilizationthreshold": "0.2",
            OPTIONS_PREFIX + "scaledownunneededtime": "30m",
        },
    )
    (group,) = discover(aws, "gpu")
    template = group.template
    assert template is not None
    assert template.labels["accelerator"] == "nvidia-t4"
    assert template.taints == (Taint("nvidia.com/gpu", "present", "NoSchedule"),)
    assert template.capacity.get("nvidia.com/gpu") == template.allocatable.get("nvidia.com/gpu") == 2
    assert template.allocatable.get("ephemeral-storage") == 200 * 2**30
    assert group.options.scale_down_utilization_threshold == 0.2
    assert group.options.scale_down_unneeded_time_seconds == 1800.0
    assert group.warnings == ()


def test_bad_tags_are_warnings_and_the_rest_still_applies(aws: MotoAws) -> None:
    aws.asg(
        "messy",
        tags={
            TAINT_PREFIX + "dedicated": "ml",  # no effect
            RESOURCES_PREFIX + "ephemeral-storage": "a lot",
            OPTIONS_PREFIX + "scaledownunneededtime": "soon",
            LABEL_PREFIX + "team": "ml",
        },
    )
    aws.asg("clean")
    clean, messy = discover(aws, "messy", "clean")  # sorted by name
    assert messy.template is not None and messy.template.labels["team"] == "ml"
    assert messy.template.taints == ()
    assert len(messy.warnings) == 3
    assert all(
        w.startswith("asg messy: tag k8s.io/cluster-autoscaler/node-template/") for w in messy.warnings
    )
    assert clean.warnings == ()


def test_mixed_instances_template_is_sized_by_the_least_of_its_overrides(aws: MotoAws) -> None:
    aws.launch_template("base", "t3.small")
    aws.asg(
        "mixed", launch_template="base", overrides=[("m5.large", "2"), ("m5.xlarge", "4"), ("t3.small", None)]
    )
    (group,) = discover(aws, "mixed")
    assert group.instance_types == ("m5.large", "m5.xlarge", "t3.small")
    assert group.instance_weights == {"m5.large": 2, "m5.xlarge": 4}
    # not the first override (cluster-autoscaler's choice): AWS may launch t3.small, the least of them
    assert group.template is not None and group.template.instance_type == "t3.small"
    assert group.template.allocatable.pods == 11  # t3.small: 3 ENIs x (4 - 1) + 2


def test_launch_configuration(aws: MotoAws) -> None:
    aws.launch_configuration("legacy", "m6g.large")
    aws.asg("old-style", launch_configuration="legacy")
    (group,) = discover(aws, "old-style")
    assert group.instance_types == ("m6g.large",)
    assert group.template is not None and group.template.labels["kubernetes.io/arch"] == "arm64"


def test_launch_template_versions(aws: MotoAws) -> None:
    aws.launch_template("versioned", "t3.small", "m5.large", "c5.large", default_version=2)
    aws.asg("default", launch_template="versioned")
    aws.asg("latest", launch_template="versioned", version="$Latest")
    aws.asg("pinned", launch_template="versioned", version="1")
    default, latest, pinned = discover(aws, "default", "latest", "pinned")
    assert default.instance_types == ("m5.large",)
    assert latest.instance_types == ("c5.large",)
    assert pinned.instance_types == ("t3.small",)


def test_unknown_instance_type_leaves_no_template(aws: MotoAws) -> None:
    aws.launch_template("future", "t3.small")
    aws.asg("future", launch_template="future", overrides=[("z9.hyper", None)])
    aws.asg("fine")
    fine, future = discover(aws, "future", "fine")  # sorted by name
    assert future.template is None
    assert future.template_error == "asg future: no known EC2 instance type (launches: z9.hyper)"
    assert fine.template is not None
