"""The world `apply` is tested in end to end: moto for the ASGs, the fake Kubernetes API (drains
really evict), a local bare repository for Git, real SSH signatures; and the steps tests share
(a plan approved, a cluster left untouched, a signed commit on main)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from reconciler.demo.kube_api import FakeKubeAPI
from reconciler.domain.model import OWN_DRAIN_TAINT
from tests.support import k8s_objects as k
from tests.support.aws import MotoAws
from tests.support.cli import run
from tests.support.git import git
from tests.support.kube import write_kubeconfig

TAGS = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/prod": "owned"}
MAIN_PATH = "capacity/prod.yaml"
PROPOSAL = "asg-reconciler/prod/scale-down"
T3_SMALL = {"cpu": "1930m", "memory": "1471840Ki", "pods": "11"}
NOTES = "refs/notes/asg-reconciler"


def keypair(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)], check=True)
    return Path(f"{path}.pub").read_text().strip()


class World:
    def __init__(
        self,
        aws: MotoAws,
        kube: FakeKubeAPI,
        remote: Path,
        tmp: Path,
        monkeypatch: pytest.MonkeyPatch,
        mode: str = "signed",
    ) -> None:
        self.aws, self.kube, self.remote, self.tmp = aws, kube, remote, tmp
        aws.launch_template("lt", "t3.small")
        aws.asg("general", min_size=1, max_size=5, desired=2, tags=TAGS, launch_template="lt")
        # two zones: scale-downs need AZRebalance suspended, as every such group does in production
        aws.autoscaling.suspend_processes(AutoScalingGroupName="general", ScalingProcesses=["AZRebalance"])
        described = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])
        self.instances = sorted(
            (i["InstanceId"], i["AvailabilityZone"]) for i in described["AutoScalingGroups"][0]["Instances"]
        )
        alice = keypair(tmp / "alice")
        signers = tmp / "allowed_signers"
        signers.write_text(f"alice@example.com {alice}\n")
        keypair(tmp / "record-key")  # apply's own key: it signs apply's records
        gitconfig = tmp / "alice.gitconfig"  # the approver's own git configuration
        gitconfig.write_text(
            "[user]\n\tname = Alice Admin\n\temail = alice@example.com\n"
            f"\tsigningKey = {tmp / 'alice.pub'}\n[gpg]\n\tformat = ssh\n"
        )
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
        self.config = tmp / "asg-reconciler.yaml"
        self.config.write_text(
            "cluster: prod\nregion: us-east-1\n"
            "nodeGroups:\n  autoDiscovery:\n"
            "    - asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod\n"
            f"git: {{url: '{remote}', workDir: '{tmp / 'work'}'}}\n"
            f"kubernetes: {{kubeconfig: '{write_kubeconfig(tmp / 'kubeconfig', kube.url)}'}}\n"
            "scaleDown: {unneededTime: 0s}\n"
            f"approval: {{mode: {mode}, allowedSigners: '{signers}'}}\n"
            f"apply: {{drainTimeout: 20s, signingKey: '{tmp / 'record-key'}'}}\n"
        )
        (a_id, a_zone), (b_id, b_zone) = self.instances
        self.b_id = b_id
        kube.put(
            k.node("node-a", instance_id=a_id, zone=a_zone, instance_type="t3.small", allocatable=T3_SMALL)
        )
        kube.put(
            k.node("node-b", instance_id=b_id, zone=b_zone, instance_type="t3.small", allocatable=T3_SMALL)
        )
        kube.put(pod("web-a", "node-a", "1000m"))
        kube.put(pod("web-b", "node-b", "100m"))

    def add_node(self, name: str) -> str:
        """One more instance in the group, registered as node `name`; its instance id."""
        self.aws.autoscaling.update_auto_scaling_group(
            AutoScalingGroupName="general", DesiredCapacity=self.desired() + 1
        )
        described = self.aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])
        known = {n["spec"]["providerID"].rsplit("/", 1)[-1] for n in self.kube.objects("Node")}
        new = next(i for i in described["AutoScalingGroups"][0]["Instances"] if i["InstanceId"] not in known)
        self.kube.put(
            k.node(
                name,
                instance_id=new["InstanceId"],
                zone=new["AvailabilityZone"],
                instance_type="t3.small",
                allocatable=T3_SMALL,
            )
        )
        return str(new["InstanceId"])

    def cli(self, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
        return run(capsys, *args, "--config", str(self.config))

    def desired(self) -> int:
        groups = self.aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])
        return int(groups["AutoScalingGroups"][0]["DesiredCapacity"])

    def in_service(self) -> set[str]:
        groups = self.aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])
        return {
            i["InstanceId"]
            for i in groups["AutoScalingGroups"][0]["Instances"]
            if i["LifecycleState"] == "InService"
        }

    def note(self) -> dict[str, Any]:
        sha = git("rev-parse", "main", cwd=self.remote).strip()
        return json.loads(git("notes", f"--ref={NOTES}", "show", sha, cwd=self.remote))  # type: ignore[no-any-return]


def pod(name: str, node: str, cpu: str) -> dict[str, Any]:
    return k.pod(
        name, "shop", node_name=node, requests={"cpu": cpu}, owner_kind="ReplicaSet", owner_name="web"
    )


def approved(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    assert world.cli(capsys, "plan").code == 0
    result = world.cli(capsys, "approve", "scale-down")
    assert result.code == 0, result.err


def untouched(world: World) -> None:
    assert world.desired() == 2 and world.b_id in world.in_service()
    assert world.kube.get_object("Pod", "shop", "web-b") is not None
    node_b = world.kube.get_object("Node", None, "node-b")
    assert node_b is not None and not any(
        t["key"] == OWN_DRAIN_TAINT for t in node_b["spec"].get("taints", [])
    )


def manifest_on_main(world: World) -> str:
    return git("show", f"main:{MAIN_PATH}", cwd=world.remote)


def signed_commit(world: World, text: str | None, message: str, env: dict[str, str] | None = None) -> str:
    """Alice commits (signed with her key) on main, optionally changing the manifest."""
    clone = world.tmp / f"alice-{message.split()[0]}"
    git("clone", "--quiet", str(world.remote), str(clone))
    if text is not None:
        (clone / MAIN_PATH).write_text(text)
        git("add", MAIN_PATH, cwd=clone)
    git("commit", "--quiet", "--allow-empty", "-S", "-m", message, cwd=clone, env=env)
    git("push", "--quiet", "origin", "main", cwd=clone)
    return git("rev-parse", "HEAD", cwd=clone).strip()


def scaled_up_then_lowered_outside(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.kube.put(pod("web-b2", "node-b", "1500m"))
    world.kube.put(k.pod("job-0", "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="j"))
    assert world.cli(capsys, "plan").code == 0
    assert world.cli(capsys, "apply").code == 0 and world.desired() == 3
    world.aws.autoscaling.set_desired_capacity(AutoScalingGroupName="general", DesiredCapacity=2)
