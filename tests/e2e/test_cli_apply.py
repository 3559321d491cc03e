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
from botocore.awsrequest import AWSResponse

from reconciler.aws import clients as aws_clients_module
from reconciler.demo.kube_api import FakeKubeAPI
from reconciler.domain.model import OWN_DRAIN_TAINT, SAFE_TO_EVICT
from reconciler.gitops.manifest import parse_manifest
from reconciler.kube.lease import ApplyLease, LeaseLost
from tests.e2e.cli import run
from tests.fakes import k8s_objects as k
from tests.fixtures_aws import MotoAws, _Body
from tests.fixtures_git import BOB, git, needs_ssh_keygen
from tests.fixtures_kube import write_kubeconfig
from tests.integration.test_aws_clients import REFRESH_IN_PROGRESS

pytestmark = needs_ssh_keygen

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
    signed_commit(world, None, "signed, but adds nothing")
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert f"{world.b_id}: not approved" in refused.out
    untouched(world)


def test_an_approval_older_than_the_proposal_ttl_is_refused(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    approved(world, capsys)
    monkeypatch.setattr("reconciler.cli.commands._now", lambda: datetime.now(UTC) + timedelta(hours=25))
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "older than scaleDown.proposalTTL 24h" in refused.out
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
    assert result.code == 3, result.out + result.err  # the group did not reach the manifest: honest
    assert "is 1 above the manifest (2): not applied; the next plan proposes which" in result.out
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
    untouched(world)  # its pod is still there, terminating forever
    record = world.note()["records"][-1]
    assert record["complete"] is False and record["groups"][0]["action"] == "failed"


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
    unsigned = world.tmp / "no-key.gitconfig"
    unsigned.write_text("[user]\n\tname = Bob\n\temail = bob@example.com\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(unsigned))
    nothing = world.cli(capsys, "approve", "scale-down")  # no plan yet: no proposal (and no key)
    assert nothing.code == 2  # nothing to approve is said first, before the signing set-up
    assert nothing.err.startswith("error: proposal branch 'asg-reconciler/prod/scale-down' does not exist")
    assert len(nothing.err.strip().splitlines()) == 1
    assert world.cli(capsys, "plan").code == 0
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


# ------------------------------------------------------------- gaps found by mutation testing


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


def test_a_commit_off_the_first_parent_line_is_refused(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rule 4: only what was merged to main, along main, may be applied."""
    world.kube.put(pod("web-b2", "node-b", "1500m"))
    assert world.cli(capsys, "plan").code == 0
    side = BOB.commit(world.remote, "side", {"notes.txt": "a side branch\n"}, "side work")
    BOB.merge(world.remote, "main", "side", "Merge side work")
    refused = world.cli(capsys, "apply", "--ref", side)
    assert refused.code == 3
    assert "is not on the first-parent history of main" in refused.err
    assert world.desired() == 2


def test_applying_an_older_target_gates_the_removal_as_it_was_there(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rule 4: Bob's unsigned merge U adds b; W withdraws it; Alice's signed Z adds it again. Applying U
    must judge U's own history, not the tip's."""
    assert world.cli(capsys, "plan").code == 0
    unsigned = BOB.merge(world.remote, "main", PROPOSAL, "Merge scale-down proposal (no signature)")
    listed = manifest_on_main(world)
    withdrawn = listed.replace(f"      - {world.b_id}", "").replace(
        "removeInstances:\n", "removeInstances: []\n"
    )
    BOB.commit(world.remote, "main", {MAIN_PATH: withdrawn}, "withdraw the removal")
    signed_commit(world, listed, "re-add the removal, signed")
    refused = world.cli(capsys, "apply", "--ref", unsigned)
    assert refused.code == 3, refused.out + refused.err
    assert f"{world.b_id}: not approved" in refused.out
    untouched(world)


def test_the_ttl_counts_from_the_approval_not_from_later_commits(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    approved(world, capsys)
    later = (datetime.now(UTC) + timedelta(hours=24, minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    signed_commit(world, None, "unrelated, a day later", env={"GIT_COMMITTER_DATE": later})
    monkeypatch.setattr("reconciler.cli.commands._now", lambda: datetime.now(UTC) + timedelta(hours=25))
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "older than scaleDown.proposalTTL" in refused.out
    untouched(world)


def test_a_lease_lost_mid_run_stops_before_the_next_change(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rule 6: the Lease is checked before each change; here another apply takes it over between the
    guard before the mark and the mark itself (a fault hook on the check, as botocore's before-send
    is for AWS): the run stops on the spot, one line, exit 1, the node never tainted."""
    approved(world, capsys)
    checks: list[int] = []
    real_check = ApplyLease.check

    def check(self: ApplyLease) -> None:
        checks.append(1)
        if len(checks) > 1:
            raise LeaseLost(f"lease {self.where} was taken over by other-apply")
        real_check(self)

    monkeypatch.setattr(ApplyLease, "check", check)
    failed = world.cli(capsys, "apply")
    assert failed.code == 1, failed.out + failed.err
    assert "error: lease kube-system/asg-reconciler-apply-prod was taken over by other-apply" in failed.err
    untouched(world)  # never tainted, never terminated


def test_an_instance_refresh_keeps_apply_off_the_group(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rule 7: AWS replacing instances is another writer; the approved removal waits."""
    approved(world, capsys)
    real_session = aws_clients_module.core_session

    def session() -> Any:
        core = real_session()

        def refresh(request: Any, **_: Any) -> Any:
            return AWSResponse(request.url, 200, {"Content-Type": "text/xml"}, _Body(REFRESH_IN_PROGRESS))

        core.register("before-send.auto-scaling.DescribeInstanceRefreshes", refresh)
        return core

    monkeypatch.setattr(aws_clients_module, "core_session", session)
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "an instance refresh is in progress" in refused.out
    untouched(world)


def test_a_group_that_did_something_and_was_refused_reports_refused(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hand edit on main: one more node (fine, applied) and an unsigned removal (refused): the group
    says refused, exit 3, and the record is not complete."""
    world.kube.put(pod("web-b2", "node-b", "1500m"))
    assert world.cli(capsys, "plan").code == 0
    text = manifest_on_main(world)
    edited = text.replace("removeInstances: []", f"removeInstances:\n      - {world.b_id}").replace(
        "desired: 2", "desired: 4"
    )
    assert edited != text
    BOB.commit(world.remote, "main", {MAIN_PATH: edited}, "one more node, and drop b (unsigned)")
    result = world.cli(capsys, "apply")
    assert result.code == 3, result.out + result.err
    assert "raised desired 2 -> 4" in result.out and f"{world.b_id}: not approved" in result.out
    record = world.note()["records"][-1]
    assert record["complete"] is False and record["groups"][0]["action"] == "refused"
    assert world.desired() == 4 and world.b_id in world.in_service()


def test_a_partial_apply_still_counts_as_applied_for_ref(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Going back behind a partly applied commit would undo what it did."""
    world.kube.put(pod("web-b2", "node-b", "1500m"))
    assert world.cli(capsys, "plan").code == 0
    older = git("rev-parse", "main", cwd=world.remote).strip()
    assert world.cli(capsys, "apply").code == 0
    text = manifest_on_main(world).replace("removeInstances: []", f"removeInstances:\n      - {world.b_id}")
    BOB.commit(world.remote, "main", {MAIN_PATH: text}, "drop b (unsigned)")
    assert world.cli(capsys, "apply").code == 3  # partial: the removal was refused
    BOB.commit(world.remote, "main", {MAIN_PATH: manifest_on_main(world)}, "no-op")  # not applied yet
    refused = world.cli(capsys, "apply", "--ref", older)
    assert refused.code == 3
    assert "older than the last applied commit" in refused.err


def test_a_pod_that_arrives_after_the_recheck_and_forbids_the_drain_is_never_evicted(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rule 5 at drain time: the drain looks at every pod it is about to evict with the planner's
    drain rules, so a bare pod with safe-to-evict "false" landing while apply runs stops it."""
    approved(world, capsys)
    pinned = k.pod(
        "pinned",
        "shop",
        node_name="node-b",
        owner_kind="ReplicaSet",
        owner_name="pinned",
        annotations={SAFE_TO_EVICT: "false"},
    )

    def arrive_while_marking(method: str, path: str, query: dict[str, str]) -> None:
        if (
            method in ("PUT", "PATCH")
            and path == "/api/v1/nodes/node-b"
            and not world.kube.get_object("Pod", "shop", "pinned")
        ):
            world.kube.put(pinned)
        return None

    world.kube.fault = arrive_while_marking
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "no longer safe to remove (re-checked after tainting): pod shop/pinned is annotated" in refused.out
    assert world.kube.get_object("Pod", "shop", "pinned") is not None
    assert world.kube.get_object("Pod", "shop", "web-b") is not None  # nothing was evicted
    untouched(world)


def test_a_drain_resumes_after_a_crash_left_its_taint(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rule 6: our taint on a node still approved for removal is the crashed run's drain: resumed."""
    approved(world, capsys)
    node_b = world.kube.get_object("Node", None, "node-b")
    assert node_b is not None
    node_b["spec"]["taints"] = [{"key": OWN_DRAIN_TAINT, "value": "0" * 40, "effect": "NoSchedule"}]
    world.kube.put(node_b)
    resumed = world.cli(capsys, "apply")
    assert resumed.code == 0, resumed.out + resumed.err
    assert world.desired() == 1 and world.b_id not in world.in_service()


def test_a_failure_after_marking_gives_the_node_back_and_records_no_change(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """An API error mid-drain: the taint comes off, and the record keeps desired as AWS has it."""
    approved(world, capsys)
    world.kube.fault = lambda method, path, query: (
        (500, None)
        if method == "GET"
        and path == "/api/v1/pods"
        and "spec.nodeName=node-b" in query.get("fieldSelector", "")
        else None
    )
    failed = world.cli(capsys, "apply")
    world.kube.fault = None
    assert failed.code == 1, failed.out + failed.err
    assert "node node-b given back" in failed.out
    untouched(world)
    record = world.note()["records"][-1]
    assert record["groups"][0]["desiredAfter"] == 2 and record["complete"] is False


def scaled_up_then_lowered_outside(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.kube.put(pod("web-b2", "node-b", "1500m"))
    world.kube.put(k.pod("job-0", "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="j"))
    assert world.cli(capsys, "plan").code == 0
    assert world.cli(capsys, "apply").code == 0 and world.desired() == 3
    world.aws.autoscaling.set_desired_capacity(AutoScalingGroupName="general", DesiredCapacity=2)


def test_drift_warn_reports_and_does_not_fight(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    """Rule 7, apply.drift warn (the default): someone lowered the group after our last apply."""
    scaled_up_then_lowered_outside(world, capsys)
    result = world.cli(capsys, "apply")
    assert result.code == 0, result.out + result.err
    assert "drift: desired lowered outside the tool from 3 to 2 since the last apply" in result.out
    assert "apply.drift warn: not raised back" in result.out
    assert world.desired() == 2


def test_drift_restore_raises_back(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.config.write_text(
        world.config.read_text().replace("drainTimeout: 20s", "drainTimeout: 20s, drift: restore")
    )
    scaled_up_then_lowered_outside(world, capsys)
    result = world.cli(capsys, "apply")
    assert result.code == 0, result.out + result.err
    assert "drift: desired lowered outside the tool from 3 to 2" in result.out
    assert "raised desired 2 -> 3" in result.out and world.desired() == 3


def test_status_shows_drift_since_the_last_apply(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    scaled_up_then_lowered_outside(world, capsys)
    status = world.cli(capsys, "status")
    assert status.code == 0, status.err
    assert "general: drift: desired lowered outside the tool from 3 to 2 since the last apply" in status.out
