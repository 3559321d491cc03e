"""`plan` -> `approve` -> `apply` end to end: moto for the ASGs, the fake Kubernetes API for the live
cluster (drains really evict), a local bare repository for Git, and real SSH signatures."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from reconciler.aws import clients as aws_clients_module
from reconciler.domain.model import OWN_DRAIN_TAINT, SAFE_TO_EVICT
from reconciler.kube.lease import ApplyLease, LeaseLost
from tests.support import k8s_objects as k
from tests.support.apply_world import (
    MAIN_PATH,
    PROPOSAL,
    World,
    approved,
    manifest_on_main,
    pod,
    scaled_up_then_lowered_outside,
    signed_commit,
    untouched,
)
from tests.support.aws import _Body
from tests.support.aws_answers import REFRESH_IN_PROGRESS
from tests.support.git import BOB, git, needs_ssh_keygen

pytestmark = needs_ssh_keygen

# ---------------------------------------------------------------------------------- the gates


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
