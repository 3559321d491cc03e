"""A capacity repository, moto's ASGs and the fake GitHub for the tests of plan writing to Git:
a Setup that plans a kubectl dump through the CLI and reads what landed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from reconciler.gitops.manifest import parse_manifest
from tests.support import k8s_objects as k
from tests.support.aws import MotoAws
from tests.support.cli import run
from tests.support.git import git
from tests.support.github_api import FakeGitHub

TAGS = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/prod": "owned"}

MAIN_PATH = "capacity/prod.yaml"

PROPOSAL = "asg-reconciler/prod/scale-down"

REVIEW = "asg-reconciler/prod/scale-up"

STATE = "asg-reconciler/prod/state"

T3_SMALL = {"cpu": "1930m", "memory": "1471840Ki", "pods": "11"}

REPO, TOKEN = "org/capacity", "ghp_test_token"


class Setup:
    def __init__(self, aws: MotoAws, tmp_path: Path, remote: Path, github: FakeGitHub | None) -> None:
        self.aws, self.tmp, self.remote = aws, tmp_path, remote
        aws.launch_template("lt", "t3.small")
        aws.asg("general", min_size=1, max_size=5, desired=2, tags=TAGS, launch_template="lt")
        groups = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])
        self.instances = sorted(
            (i["InstanceId"], i["AvailabilityZone"]) for i in groups["AutoScalingGroups"][0]["Instances"]
        )
        forge = (
            f"forge: {{type: github, repo: {REPO}, baseUrl: '{github.url}'}}\n" if github is not None else ""
        )
        self.config = tmp_path / "asg-reconciler.yaml"
        self.config.write_text(
            "cluster: prod\nregion: us-east-1\n"
            "nodeGroups:\n  autoDiscovery:\n"
            "    - asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod\n"
            f"git: {{url: '{remote}', workDir: '{tmp_path / 'work'}'}}\n"
            "scaleDown: {unneededTime: 0s}\n" + forge
        )

    def cluster(self, busy_b: int = 0, pending: int = 0) -> list[dict[str, Any]]:
        """Node a runs 1500m; node b runs `busy_b` millicores (0: a 100m pod, so b is unneeded)."""
        (a_id, a_zone), (b_id, b_zone) = self.instances
        objects = [
            k.node("node-a", instance_id=a_id, zone=a_zone, instance_type="t3.small", allocatable=T3_SMALL),
            k.node("node-b", instance_id=b_id, zone=b_zone, instance_type="t3.small", allocatable=T3_SMALL),
            k.pod(
                "web-a",
                "shop",
                node_name="node-a",
                requests={"cpu": "1500m"},
                owner_kind="ReplicaSet",
                owner_name="web",
            ),
            k.pod(
                "web-b",
                "shop",
                node_name="node-b",
                requests={"cpu": f"{busy_b or 100}m"},
                owner_kind="ReplicaSet",
                owner_name="web",
            ),
        ]
        objects += [
            k.pod(f"job-{i}", "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="job")
            for i in range(pending)
        ]
        return objects

    def plan(self, capsys: pytest.CaptureFixture[str], objects: list[dict[str, Any]], *extra: str) -> Any:
        snapshot = self.tmp / "cluster.json"
        snapshot.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": objects}))
        return run(capsys, "plan", "--config", str(self.config), "--snapshot", str(snapshot), *extra)

    def head(self, branch: str) -> str | None:
        result = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
            cwd=self.remote,
            capture_output=True,
            text=True,
            check=False,
        )
        return result.stdout.strip() or None

    def show(self, ref: str) -> str:
        return git("show", f"{ref}:{MAIN_PATH}", cwd=self.remote)

    def removal_ids(self, ref: str) -> tuple[str, ...]:
        group = parse_manifest(self.show(ref), ref).group("general")
        assert group is not None
        return group.removal_ids

    def state(self) -> Any:
        return json.loads(git("show", f"{STATE}:state.json", cwd=self.remote))

    def add_instance(self) -> tuple[str, str]:
        """A third instance in the ASG: its (id, zone)."""
        self.aws.autoscaling.set_desired_capacity(AutoScalingGroupName="general", DesiredCapacity=3)
        groups = self.aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])
        (new,) = [
            (i["InstanceId"], i["AvailabilityZone"])
            for i in groups["AutoScalingGroups"][0]["Instances"]
            if (i["InstanceId"], i["AvailabilityZone"]) not in self.instances
        ]
        return new

    def approve(self, github: FakeGitHub, branch: str, number: int = 1) -> str:
        """A person approves the pull request at the branch's current head."""
        head = self.head(branch)
        assert head is not None
        github.push(branch, head)
        github.review(number, "carol", "APPROVED")
        return head


def node_c(instance: tuple[str, str], busy: int = 0) -> list[dict[str, Any]]:
    """A third node, empty or running `busy` millicores."""
    objects = [
        k.node(
            "node-c",
            instance_id=instance[0],
            zone=instance[1],
            instance_type="t3.small",
            allocatable=T3_SMALL,
        )
    ]
    if busy:
        objects.append(
            k.pod(
                "web-c",
                "shop",
                node_name="node-c",
                requests={"cpu": f"{busy}m"},
                owner_kind="ReplicaSet",
                owner_name="web",
            )
        )
    return objects
