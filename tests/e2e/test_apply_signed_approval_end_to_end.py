"""`plan` -> `approve` -> `apply` end to end in apply's World (tests/support/apply_world.py): the signed
approval drains and terminates exactly the named instance, an unsigned merge moves nothing, scale-ups
are applied without the approval settings, a live cluster-autoscaler stops apply, and the plan waits
`delayAfterScaleUp` from apply's record."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime

import pytest

from reconciler.domain.model import OWN_DRAIN_TAINT
from reconciler.gitops.manifest import parse_manifest
from tests.support import k8s_objects as k
from tests.support.apply_world import MAIN_PATH, PROPOSAL, T3_SMALL, World, pod
from tests.support.git import BOB, git, needs_ssh_keygen

pytestmark = needs_ssh_keygen


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
