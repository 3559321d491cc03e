"""The demo's AWS: an in-process moto server holding the groups of the bundled example cluster.

Only for `asg-reconciler demo`; tests build their own worlds (tests/fixtures_aws.py).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3

from reconciler.domain.errors import UserError

REGION = "us-east-1"
ZONES = ("us-east-1a", "us-east-1b")
DISCOVERY_TAGS = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/demo": "owned"}
TEMPLATE_TAG = "k8s.io/cluster-autoscaler/node-template"


@dataclass(frozen=True)
class DemoGroup:
    name: str
    instance_type: str
    min_size: int
    max_size: int
    desired: int
    tags: Mapping[str, str]


GROUPS = (
    DemoGroup("demo-general", "m5.large", 1, 10, 2, {f"{TEMPLATE_TAG}/label/workload": "general"}),
    DemoGroup(
        "demo-gpu",
        "g4dn.xlarge",
        0,
        4,
        0,
        {
            f"{TEMPLATE_TAG}/label/workload": "gpu",
            f"{TEMPLATE_TAG}/taint/nvidia.com/gpu": "true:NoSchedule",
        },
    ),
)


@contextmanager
def mock_aws() -> Iterator[str]:
    """Start moto in this process and point boto3 at it (environment restored afterwards)."""
    try:
        from moto.server import ThreadedMotoServer
    except ImportError:
        raise UserError(
            "the demo needs moto: pip install 'asg-reconciler[demo]' (make demo installs it)"
        ) from None
    logging.getLogger("werkzeug").disabled = True  # moto's request log is not the demo's story
    saved = dict(os.environ)
    os.environ.update(
        {
            "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
            "AWS_ACCESS_KEY_ID": "AKIDEMOEXAMPLE",  # not "demo": log redaction would hide the cluster name
            "AWS_SECRET_ACCESS_KEY": "demo-secret-not-real",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }
    )
    os.environ.pop("AWS_PROFILE", None)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        os.environ["AWS_ENDPOINT_URL"] = f"http://{host}:{port}"
        yield os.environ["AWS_ENDPOINT_URL"]
    finally:
        server.stop()
        os.environ.clear()
        os.environ.update(saved)


def create_groups() -> dict[str, list[tuple[str, str]]]:
    """Create the demo ASGs; returns each group's instances as (instance id, zone), oldest first."""
    session = boto3.session.Session(region_name=REGION)
    autoscaling: Any = session.client("autoscaling")
    ec2: Any = session.client("ec2")
    for group in GROUPS:
        template = ec2.create_launch_template(
            LaunchTemplateName=f"{group.name}-template",
            LaunchTemplateData={"InstanceType": group.instance_type, "ImageId": "ami-12345678"},
        )
        tags = {**DISCOVERY_TAGS, **group.tags}
        autoscaling.create_auto_scaling_group(
            AutoScalingGroupName=group.name,
            MinSize=group.min_size,
            MaxSize=group.max_size,
            DesiredCapacity=group.desired,
            AvailabilityZones=list(ZONES),
            LaunchTemplate={"LaunchTemplateId": template["LaunchTemplate"]["LaunchTemplateId"]},
            Tags=[
                {
                    "ResourceId": group.name,
                    "ResourceType": "auto-scaling-group",
                    "Key": key,
                    "Value": value,
                    "PropagateAtLaunch": True,
                }
                for key, value in tags.items()
            ],
        )
        # What we recommend for every group we manage: AWS must not pick instances to kill.
        autoscaling.suspend_processes(AutoScalingGroupName=group.name, ScalingProcesses=["AZRebalance"])
    return group_instances()


def group_instances() -> dict[str, list[tuple[str, str]]]:
    """Each demo group's instances now, as (instance id, zone), sorted."""
    autoscaling: Any = boto3.session.Session(region_name=REGION).client("autoscaling")
    described = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[g.name for g in GROUPS])
    return {
        asg["AutoScalingGroupName"]: sorted(
            (i["InstanceId"], i["AvailabilityZone"]) for i in asg.get("Instances", [])
        )
        for asg in described["AutoScalingGroups"]
    }
