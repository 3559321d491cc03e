"""`plan` -> `approve` -> `apply` end to end: moto for the ASGs, the fake Kubernetes API for the live
cluster (drains really evict), a local bare repository for Git, and real SSH signatures."""

from __future__ import annotations

import json
import math
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from reconciler.demo.kube_api import FakeKubeAPI
from reconciler.gitops.manifest import parse_manifest
from reconciler.model import OWN_DRAIN_TAINT
from tests.e2e.cli import run
from tests.fakes import k8s_objects as k
from tests.fixtures_aws import MotoAws
from tests.fixtures_git import BOB, git
from tests.fixtures_kube import write_kubeconfig

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
        described = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])
        self.instances = sorted(
            (i["InstanceId"], i["AvailabilityZone"]) for i in described["AutoScalingGroups"][0]["Instances"]
        )
        alice = keypair(tmp / "alice")
        signers = tmp / "allowed_signers"
        signers.write_text(f"alice@example.com {alice}\n")
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
            "apply: {drainTimeout: 20s}\n"
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


@pytest.fixture
def world(
    aws: MotoAws, kube_api: FakeKubeAPI, bare_remote: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> World:
    return World(aws, kube_api, bare_remote, tmp_path, monkeypatch)


def test_signed_approval_drains_and_terminates_exactly_the_named_instance(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    planned = world.cli(capsys, "plan")
    assert planned.code == 0, planned.err
    proposal = parse_manifest(git("show", f"{PROPOSAL}:{MAIN_PATH}", cwd=world.remote), PROPOSAL)
    assert proposal.group("general").removal_ids == (world.b_id,)  # type: ignore[union-attr]

    before = world.cli(capsys, "apply")  # main holds no removal yet: nothing to do, and a record
    assert before.code == 0, before.err
    assert world.desired() == 2 and world.note()["records"][0]["complete"] is True

    approved = world.cli(capsys, "approve", "scale-down")
    assert approved.code == 0, approved.err
    verified = subprocess.run(
        ["git", "-c", f"gpg.ssh.allowedSignersFile={world.tmp / 'allowed_signers'}", "verify-commit", "main"],
        cwd=world.remote,
        capture_output=True,
        text=True,
        check=False,
    )
    assert verified.returncode == 0, verified.stderr  # main's tip is Alice's signed merge

    dry = world.cli(capsys, "apply", "--dry-run")
    assert dry.code == 0, dry.err
    assert f"would drain node-b and terminate {world.b_id}" in dry.out
    assert world.desired() == 2 and world.kube.get_object("Pod", "shop", "web-b") is not None

    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert world.desired() == 1
    assert world.b_id not in world.in_service()
    assert world.kube.get_object("Pod", "shop", "web-b") is None  # evicted through the API
    assert world.kube.get_object("Pod", "shop", "web-a") is not None
    node_b = world.kube.get_object("Node", None, "node-b")
    assert node_b is not None and any(t["key"] == OWN_DRAIN_TAINT for t in node_b["spec"]["taints"])
    record = world.note()["records"][-1]
    assert record["complete"] is True
    assert record["groups"][0]["terminated"] == [world.b_id]
    history = world.cli(capsys, "history", "--output", "json")
    assert history.code == 0, history.err
    applied_entries = [e for e in json.loads(history.out) if e["kind"] == "apply" and e["to"] == 1]
    assert applied_entries and applied_entries[0]["instances"] == [world.b_id]


def test_an_unsigned_merge_is_refused_and_nothing_moves(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.cli(capsys, "plan").code == 0
    BOB.merge(world.remote, "main", PROPOSAL, "Merge scale-down proposal (no signature)")
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert f"{world.b_id}: not approved" in refused.out
    assert world.desired() == 2 and world.b_id in world.in_service()
    assert world.kube.get_object("Pod", "shop", "web-b") is not None
    assert world.note()["records"][-1]["complete"] is False


def test_scale_up_committed_by_plan_is_applied(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.kube.put(pod("web-b2", "node-b", "1500m"))  # node b is busy: no scale-down
    for i in range(2):
        world.kube.put(
            k.pod(f"job-{i}", "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="j")
        )
    assert world.cli(capsys, "plan").code == 0
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert world.desired() == 4
    assert "raised desired 2 -> 4" in applied.out
    again = world.cli(capsys, "apply")  # idempotent: AWS already matches
    assert again.code == 0 and world.desired() == 4


def test_scale_up_does_not_need_the_approval_settings(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Scale-ups are urgent: a missing allowed-signers file only matters to a removal."""
    signers = world.tmp / "allowed_signers"
    signers.unlink()
    world.kube.put(pod("web-b2", "node-b", "1500m"))
    world.kube.put(k.pod("job-0", "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="j"))
    assert world.cli(capsys, "plan").code == 0
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert world.desired() == 3


def test_apply_refuses_while_cluster_autoscaler_is_live(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.cli(capsys, "plan").code == 0
    world.kube.put(k.lease("cluster-autoscaler", "kube-system", holder="ca-0", renew_time=datetime.now(UTC)))
    refused = world.cli(capsys, "apply")
    assert refused.code == 3
    assert "cluster-autoscaler is live" in refused.err


def test_plan_waits_delay_after_scale_up_from_the_apply_record(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """The record's time is when apply raised the group; the planner reads it from the notes."""
    world.kube.put(pod("web-b2", "node-b", "1500m"))
    world.kube.put(k.pod("job-0", "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="j"))
    assert world.cli(capsys, "plan").code == 0
    assert world.cli(capsys, "apply").code == 0
    assert world.desired() == 3
    described = world.aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])
    new_id, zone = next(
        (i["InstanceId"], i["AvailabilityZone"])
        for i in described["AutoScalingGroups"][0]["Instances"]
        if i["InstanceId"] not in dict(world.instances)
    )
    world.kube.put(
        k.node("node-c", instance_id=new_id, zone=zone, instance_type="t3.small", allocatable=T3_SMALL)
    )
    world.kube.delete_object("Pod", "batch", "job-0")
    world.kube.put(pod("job-0", "node-c", "1500m"))  # the job runs on the new node
    world.kube.delete_object("Pod", "shop", "web-b2")  # and node b became idle
    planned = world.cli(capsys, "plan", "--dry-run", "--output", "json")
    assert planned.code == 0, planned.err
    document = json.loads(planned.out)
    kept = {u["node"]: u["reason"] for u in document["unremovableNodes"]}
    assert kept["node-b"].startswith("a scale-up of general was applied")
    assert document["nodeGroups"][0]["removeInstances"] == []


# ---------------------------------------------------------------------------------- the gates


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


def test_a_later_signed_commit_does_not_launder_an_unsigned_removal(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rule 4: the gate judges the commit that brought the removal, not the one being applied."""
    assert world.cli(capsys, "plan").code == 0
    BOB.merge(world.remote, "main", PROPOSAL, "Merge scale-down proposal (no signature)")
    clone = world.tmp / "alice-clone"
    git("clone", "--quiet", str(world.remote), str(clone))
    git("commit", "--quiet", "--allow-empty", "-S", "-m", "signed, but adds nothing", cwd=clone)
    git("push", "--quiet", "origin", "main", cwd=clone)
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert f"{world.b_id}: not approved" in refused.out
    untouched(world)


def test_an_approval_older_than_the_proposal_ttl_is_refused(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    approved(world, capsys)
    monkeypatch.setattr("reconciler.cli._now", lambda: datetime.now(UTC) + timedelta(hours=25))
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "older than scaleDown.proposalTTL 24h00m" in refused.out
    untouched(world)


def test_a_node_busy_again_is_not_drained(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    """Rule 5: the approval was for a nearly idle node; by apply time it runs more."""
    approved(world, capsys)
    world.kube.put(pod("web-b2", "node-b", "1500m"))
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "no longer safe to remove: busy again" in refused.out
    untouched(world)


def test_another_apply_holding_the_lease_refuses_the_run(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rule 6: one actor at a time."""
    approved(world, capsys)
    now = datetime.now(UTC)
    world.kube.put(k.lease("asg-reconciler-apply-prod", "kube-system", holder="other-apply", renew_time=now))
    refused = world.cli(capsys, "apply")
    assert refused.code == 3
    assert "another apply holds lease kube-system/asg-reconciler-apply-prod" in refused.err
    untouched(world)


def test_scaling_policies_or_a_refresh_make_apply_keep_its_hands_off(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rule 7: another writer on the group; an increase is refused as much as a removal."""
    world.kube.put(pod("web-b2", "node-b", "1500m"))
    world.kube.put(k.pod("job-0", "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="j"))
    assert world.cli(capsys, "plan").code == 0
    world.aws.autoscaling.put_scaling_policy(
        AutoScalingGroupName="general",
        PolicyName="cpu",
        PolicyType="TargetTrackingScaling",
        TargetTrackingConfiguration={
            "PredefinedMetricSpecification": {"PredefinedMetricType": "ASGAverageCPUUtilization"},
            "TargetValue": 50.0,
        },
    )
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "scaling policies" in refused.out
    assert world.desired() == 2


def test_desired_above_the_manifest_is_never_lowered(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rule 2: a decrease is only ever named instances; a number above the manifest stays."""
    world.kube.put(pod("web-b2", "node-b", "1500m"))  # no scale-down wanted
    assert world.cli(capsys, "plan").code == 0
    world.aws.autoscaling.set_desired_capacity(AutoScalingGroupName="general", DesiredCapacity=3)
    result = world.cli(capsys, "apply")
    assert result.code == 0, result.out + result.err
    assert "AWS desired 3 is 1 above the manifest: not lowered" in result.out
    assert world.desired() == 3


def test_ref_older_than_the_last_applied_commit_is_refused(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world.kube.put(pod("web-b2", "node-b", "1500m"))
    assert world.cli(capsys, "plan").code == 0
    first = git("rev-parse", "main", cwd=world.remote).strip()
    world.kube.put(k.pod("job-0", "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="j"))
    assert world.cli(capsys, "plan").code == 0
    assert world.cli(capsys, "apply").code == 0
    refused = world.cli(capsys, "apply", "--ref", first)
    assert refused.code == 3
    assert "older than the last applied commit" in refused.err
    assert world.cli(capsys, "apply", "--ref", "no-such-ref").code == 2


def test_a_drain_that_cannot_finish_gives_the_node_back(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pods never go (a stuck kubelet): the node serves again, nothing is terminated, exit 1."""
    approved(world, capsys)
    world.kube.pod_termination_seconds = math.inf
    world.config.write_text(world.config.read_text().replace("drainTimeout: 20s", "drainTimeout: 1s"))
    failed = world.cli(capsys, "apply")
    assert failed.code == 1, failed.out + failed.err
    assert f"{world.b_id}: drain of node-b did not finish" in failed.out
    assert world.desired() == 2 and world.b_id in world.in_service()
    node_b = world.kube.get_object("Node", None, "node-b")
    assert node_b is not None and not any(
        t["key"] == OWN_DRAIN_TAINT for t in node_b["spec"].get("taints", [])
    )


def test_a_crashed_drain_is_given_back_when_its_approval_is_gone(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rule 6: our taint on a node no longer approved for removal (crash, then the proposal was
    withdrawn) is removed; a person's cordon is never touched."""
    world.kube.put(pod("web-b2", "node-b", "1500m"))
    assert world.cli(capsys, "plan").code == 0
    node_a = world.kube.get_object("Node", None, "node-a")
    node_b = world.kube.get_object("Node", None, "node-b")
    assert node_a is not None and node_b is not None
    node_a["spec"]["unschedulable"] = True  # a person's kubectl cordon
    node_b["spec"]["taints"] = [{"key": OWN_DRAIN_TAINT, "value": "0" * 40, "effect": "NoSchedule"}]
    world.kube.put(node_a)
    world.kube.put(node_b)
    assert world.cli(capsys, "apply").code == 0
    node_a, node_b = (
        world.kube.get_object("Node", None, "node-a"),
        world.kube.get_object("Node", None, "node-b"),
    )
    assert node_b is not None and not node_b["spec"].get("taints")
    assert node_a is not None and node_a["spec"]["unschedulable"] is True


def test_approve_mistakes_are_one_line(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    nothing = world.cli(capsys, "approve", "scale-down")  # no plan yet: no proposal
    assert nothing.code == 2
    assert nothing.err.startswith("error: proposal branch 'asg-reconciler/prod/scale-down' does not exist")
    assert len(nothing.err.strip().splitlines()) == 1
    assert world.cli(capsys, "plan").code == 0
    unsigned = world.tmp / "no-key.gitconfig"
    unsigned.write_text("[user]\n\tname = Bob\n\temail = bob@example.com\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(unsigned))
    keyless = world.cli(capsys, "approve", "scale-down")
    assert keyless.code == 2, keyless.err
    assert "gpg.format ssh" in keyless.err and len(keyless.err.strip().splitlines()) == 1
    assert git("rev-parse", "--verify", "--quiet", f"refs/heads/{PROPOSAL}", cwd=world.remote).strip()


def test_missing_signers_with_a_removal_to_judge_is_exit_2_and_nothing_changes(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    approved(world, capsys)
    waiting = world.cli(capsys, "plan", "--dry-run")
    assert "1 approved removal(s) on main waiting for apply" in waiting.out
    (world.tmp / "allowed_signers").unlink()
    notes_before = git("for-each-ref", "refs/notes", cwd=world.remote)
    broken = world.cli(capsys, "apply")
    assert broken.code == 2, broken.out + broken.err
    assert "approval.allowedSigners" in broken.err and len(broken.err.strip().splitlines()) == 1
    untouched(world)
    assert git("for-each-ref", "refs/notes", cwd=world.remote) == notes_before  # not even a record
