"""Launches that fail, end to end through the CLI (issue 29, DESIGN §3.12): the expander's first choice
is raised, AWS cannot launch it (moto made to fail as AWS does: desired raised, no instance, Failed
activities), and the next plan backs that group off, sends the pods to the next group, never raises
it again and never lowers its desired; when capacity comes back, the instances AWS launches late are
proposed for removal by name."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from reconciler.config.documents import load_schema
from reconciler.demo.kube_api import FakeKubeAPI
from reconciler.gitops.manifest import parse_manifest
from tests.support import k8s_objects as k
from tests.support.aws import MotoAws, on_every_session
from tests.support.cli import Result, run
from tests.support.failing_launches import FailingLaunches
from tests.support.git import git
from tests.support.kube import write_kubeconfig

TAGS = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/prod": "owned"}
MAIN_PATH = "capacity/prod.yaml"
PROPOSAL = "asg-reconciler/prod/scale-down"
M5_LARGE = {"cpu": "1930m", "memory": "7220184Ki", "pods": "29"}


class Cluster:
    """Two empty groups of m5.large, `spot` preferred by the priority expander, and two pending pods
    that need a node each."""

    def __init__(self, aws: MotoAws, kube: FakeKubeAPI, remote: Path, tmp: Path) -> None:
        self.aws, self.kube, self.remote = aws, kube, remote
        aws.launch_template("lt", "m5.large")
        for name in ("spot", "ondemand"):
            aws.asg(name, max_size=5, tags=TAGS, launch_template="lt", zones=("us-east-1a",))
            aws.autoscaling.suspend_processes(AutoScalingGroupName=name, ScalingProcesses=["AZRebalance"])
        keygen = tmp / "record-key"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(keygen)], check=True
        )
        signers = tmp / "allowed_signers"
        signers.write_text(f"alice@example.com {Path(f'{keygen}.pub').read_text().strip()}\n")
        self.config = tmp / "asg-reconciler.yaml"
        self.config.write_text(
            "cluster: prod\nregion: us-east-1\n"
            "nodeGroups:\n  autoDiscovery:\n"
            "    - asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod\n"
            "expander: priority\n"
            "expanderOptions: {priorities: {'50': ['^spot$'], '10': ['^ondemand$']}}\n"
            f"git: {{url: '{remote}', workDir: '{tmp / 'work'}'}}\n"
            f"kubernetes: {{kubeconfig: '{write_kubeconfig(tmp / 'kubeconfig', kube.url)}'}}\n"
            "scaleDown: {unneededTime: 0s, delayAfterScaleUp: 0s}\n"
            f"approval: {{mode: signed, allowedSigners: '{signers}'}}\n"
            f"apply: {{drainTimeout: 20s, signingKey: '{keygen}'}}\n"
        )
        for i in range(2):
            kube.put(job(f"job-{i}"))

    def cli(self, capsys: pytest.CaptureFixture[str], *args: str) -> Result:
        return run(capsys, *args, "--config", str(self.config))

    def main(self) -> dict[str, int]:
        manifest = parse_manifest(git("show", f"main:{MAIN_PATH}", cwd=self.remote), "main")
        return {name: manifest.group(name).desired for name in ("spot", "ondemand")}  # type: ignore[union-attr]

    def asg(self, name: str) -> dict[str, Any]:
        described = self.aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])
        return described["AutoScalingGroups"][0]  # type: ignore[no-any-return]

    def register(self, group: str) -> list[str]:
        """Every instance of `group` joins the cluster as a node named after it; their names."""
        names = []
        for instance in self.asg(group)["Instances"]:
            name = f"node-{instance['InstanceId']}"
            self.kube.put(
                k.node(
                    name,
                    instance_id=instance["InstanceId"],
                    zone=instance["AvailabilityZone"],
                    instance_type="m5.large",
                    allocatable=M5_LARGE,
                )
            )
            names.append(name)
        return names


def job(name: str, node: str = "") -> dict[str, Any]:
    return k.pod(name, "batch", node_name=node, requests={"cpu": "1500m"}, owner_kind="Job", owner_name="job")


@pytest.fixture
def cluster(aws: MotoAws, kube_api: FakeKubeAPI, bare_remote: Path, tmp_path: Path) -> Cluster:
    return Cluster(aws, kube_api, bare_remote, tmp_path)


def desired_set(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every SetDesiredCapacity the code under test sends: (group, desired)."""
    sent: list[tuple[str, int]] = []

    def seen(params: dict[str, Any], **_: Any) -> None:
        sent.append((params["AutoScalingGroupName"], int(params["DesiredCapacity"])))

    on_every_session(monkeypatch, "provide-client-params.auto-scaling.SetDesiredCapacity", seen)
    return sent


def test_pods_go_to_the_next_group_and_the_failing_group_is_neither_raised_nor_lowered(
    cluster: Cluster,
    failing_launches: FailingLaunches,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent = desired_set(monkeypatch)
    first = cluster.cli(capsys, "plan")
    assert first.code == 0, first.err
    assert cluster.main() == {"spot": 2, "ondemand": 0}  # the expander's first choice

    failing_launches.fail("spot")  # no m5.large capacity in us-east-1a from now on
    applied = cluster.cli(capsys, "apply")
    assert applied.code == 0, applied.err
    assert sent == [("spot", 2)]
    spot = cluster.asg("spot")
    assert (spot["DesiredCapacity"], spot["Instances"]) == (2, [])  # raised, nothing launched

    replanned = cluster.cli(capsys, "plan", "--output", "json")
    assert replanned.code == 0, replanned.err
    document = json.loads(replanned.out)
    jsonschema.validate(document, load_schema("plan"))
    groups = {g["name"]: g for g in document["nodeGroups"]}
    failure = groups["spot"]["launchFailure"]
    assert (failure["code"], failure["errorClass"], failure["unfilled"]) == (
        "InsufficientInstanceCapacity",
        "OutOfResources",
        2,
    )
    assert "We currently do not have sufficient m5.large capacity" in failure["message"]
    assert groups["spot"]["backoffUntil"] == failure["backoffUntil"]
    assert (groups["spot"]["action"], groups["spot"]["desired"], groups["spot"]["upcoming"]) == ("none", 2, 0)
    assert (groups["ondemand"]["action"], groups["ondemand"]["desired"]) == ("scale-up", 2)
    assert {p["pod"]: p["nodeGroup"] for p in document["pendingPods"]} == {
        "batch/job-0": "ondemand",
        "batch/job-1": "ondemand",
    }
    assert cluster.main() == {"spot": 2, "ondemand": 2}  # spot's desired kept, never lowered
    message = git("log", "-1", "--format=%B", "main", cwd=cluster.remote)
    assert "Capacity-Change: ondemand 0 -> 2" in message
    assert "backed off, AWS could not launch: spot InsufficientInstanceCapacity (OutOfResources)" in message

    applied = cluster.cli(capsys, "apply")
    assert applied.code == 0, applied.err
    assert sent == [("spot", 2), ("ondemand", 2)]  # nothing ever sent to spot again, up or down
    failing_launches.attempt("spot")  # AWS keeps trying by itself, and keeps failing

    again = cluster.cli(capsys, "plan")
    assert again.code == 0, again.err
    assert cluster.main() == {"spot": 2, "ondemand": 2}  # the pods wait for ondemand's instances
    assert "AWS could not launch 2 of desired 2" in again.out

    status = cluster.cli(capsys, "status", "--output", "json")
    assert status.code == 0, status.err
    report = json.loads(status.out)
    jsonschema.validate(report, load_schema("status"))
    spot_status = next(g for g in report["nodeGroups"] if g["name"] == "spot")
    assert spot_status["launchFailure"]["code"] == "InsufficientInstanceCapacity"
    assert (spot_status["unfilledDesired"], spot_status["launchFailure"]["backedOff"]) == (2, True)
    table = cluster.cli(capsys, "status")
    assert (
        "spot: AWS could not launch 2 of desired 2: InsufficientInstanceCapacity (OutOfResources)"
        in table.out
    )

    # Capacity comes back: AWS launches the two instances late. The pods run on ondemand's nodes by
    # then, so spot's nodes are empty: proposed for removal by name, never a lower number.
    late = failing_launches.recover("spot")
    on_demand_nodes = cluster.register("ondemand")
    for i, node in enumerate(on_demand_nodes):
        cluster.kube.put(job(f"job-{i}", node=node))
    cluster.register("spot")
    last = cluster.cli(capsys, "plan")
    assert last.code == 0, last.err
    proposal = parse_manifest(git("show", f"{PROPOSAL}:{MAIN_PATH}", cwd=cluster.remote), PROPOSAL)
    assert sorted(proposal.group("spot").removal_ids) == sorted(late)  # type: ignore[union-attr]
    assert cluster.asg("spot")["DesiredCapacity"] == 2
    assert sent == [("spot", 2), ("ondemand", 2)]
