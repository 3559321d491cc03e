"""An independent adversarial review's attacks on apply's promises, through the CLI (World from
test_cli_apply): each asserts the promise. Those that broke it were fixed (issue 8's closing note)."""

from __future__ import annotations

import os
import signal
import subprocess
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from reconciler.aws import clients as aws_clients_module
from tests.support.apply_steps import alice_clone, bot_commit, listing_b, ours
from tests.support.apply_world import (
    MAIN_PATH,
    NOTES,
    World,
    approved,
    keypair,
    manifest_on_main,
    pod,
    signed_commit,
    untouched,
)
from tests.support.aws import _Body, query_error
from tests.support.git import BOB, git, needs_ssh_keygen

pytestmark = needs_ssh_keygen


# ------------------------------------------------------------- laundering past a deleted manifest


def test_laundering_through_a_deleted_manifest(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    """Hole 1 again, with the file deleted instead of broken: the bot's B adds b (unsigned), its D
    deletes the manifest; Alice restores it with a signed `git revert D`. F's diff 'adds' b."""
    world.kube.put(pod("web-b2", "node-b", "100m"))
    assert world.cli(capsys, "plan").code == 0
    BOB.commit(world.remote, "main", {MAIN_PATH: listing_b(world)}, "drop b (unsigned)")
    first = world.cli(capsys, "apply")
    assert first.code == 3 and "not approved" in first.out  # the bot's own removal is refused
    bot_commit(world, None, "oops: delete the manifest")
    world.cli(capsys, "apply")
    clone = alice_clone(world, "alice-revert")
    d = git("rev-parse", "HEAD", cwd=clone).strip()
    git("revert", "--no-edit", "-S", d, cwd=clone)  # Alice restores the file, signed
    git("push", "--quiet", "origin", "main", cwd=clone)
    world.cli(capsys, "apply")
    assert world.b_id in world.in_service(), "BROKE: the bot's removal was laundered by Alice's revert"
    untouched(world)


def test_laundering_through_a_renamed_group(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    """The bot renames group general -> general-x and lists b under it, in one commit (refused:
    not a node group). Alice fixes the one-line typo (signed F): F's diff adds (general, b)."""
    world.kube.put(pod("web-b2", "node-b", "100m"))
    assert world.cli(capsys, "plan").code == 0
    renamed = listing_b(world).replace("  general:\n", "  general-x:\n", 1)
    assert renamed != listing_b(world)
    BOB.commit(world.remote, "main", {MAIN_PATH: renamed}, "rename (and drop b)")
    world.cli(capsys, "apply")
    fixed = manifest_on_main(world).replace("  general-x:\n", "  general:\n", 1)
    signed_commit(world, fixed, "fix the group name")
    world.cli(capsys, "apply")
    assert world.b_id in world.in_service(), "BROKE: laundered through a group rename"
    untouched(world)


def test_laundering_through_a_deleted_group(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.kube.put(pod("web-b2", "node-b", "100m"))
    assert world.cli(capsys, "plan").code == 0
    BOB.commit(world.remote, "main", {MAIN_PATH: listing_b(world)}, "drop b (unsigned)")
    with_b = manifest_on_main(world)
    head, _, rest = with_b.partition("  general:\n")
    # delete the group's block (everything indented under it)
    lines = rest.splitlines(keepends=True)
    tail = "".join(line for line in lines if not line.startswith("    "))
    BOB.commit(world.remote, "main", {MAIN_PATH: head + tail}, "delete group general")
    clone = alice_clone(world, "alice-revert2")
    d = git("rev-parse", "HEAD", cwd=clone).strip()
    git("revert", "--no-edit", "-S", d, cwd=clone)
    git("push", "--quiet", "origin", "main", cwd=clone)
    world.cli(capsys, "apply")
    assert world.b_id in world.in_service(), "BROKE: laundered through a deleted-then-restored group"


# --------------------------------------------------------- an abandoned signed commit, replayed


def test_an_expired_approver_key_backdating_its_commit_is_refused(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """allowed_signers: carol valid-before one hour ago. Carol signs now, with a committer date two
    hours ago: git judges validity at the commit's (self-chosen) time; the gate judges it now."""
    world.kube.put(pod("web-b2", "node-b", "100m"))
    assert world.cli(capsys, "plan").code == 0
    carol = keypair(world.tmp / "carol")
    expiry = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y%m%d%H%MZ")
    signers = world.tmp / "allowed_signers"
    signers.write_text(signers.read_text() + f'carol@example.com valid-before="{expiry}" {carol}\n')
    clone = alice_clone(world, "carol-clone")
    (clone / MAIN_PATH).write_text(listing_b(world))
    past = (datetime.now(UTC) - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    env = {**os.environ, "GIT_COMMITTER_DATE": past, "GIT_AUTHOR_DATE": past}
    git(
        "-c", f"user.signingKey={world.tmp / 'carol.pub'}", "-c", "user.email=carol@example.com",
        "commit", "--quiet", "-a", "-S", "-m", "remove b (carol)", cwd=clone, env=env,
    )  # fmt: skip
    git("push", "--quiet", "origin", "main", cwd=clone)
    result = world.cli(capsys, "apply")
    assert result.code == 3, result.out + result.err
    assert "entry is not valid now (valid-before" in result.out
    assert world.b_id in world.in_service(), "BROKE: a key expired an hour ago approved a removal"


def _aws_hook(monkeypatch: pytest.MonkeyPatch, register: Any) -> None:
    """Every botocore session apply makes gets `register(core)`'s hooks; no retry sleeps."""
    from botocore.retries import standard

    monkeypatch.setattr(standard.ExponentialBackoff, "delay_amount", lambda self, context: 0.0)
    real_session = aws_clients_module.core_session

    def session() -> Any:
        core = real_session()
        register(core)
        return core

    monkeypatch.setattr(aws_clients_module, "core_session", session)


def test_describe_failing_after_a_successful_terminate(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """TerminateInstanceInAutoScalingGroup succeeds; the DescribeAutoScalingGroups right after it is
    throttled until botocore gives up. Is the node left tainted (its instance is going away)? Does the
    record say b was terminated, so the next run does not call it drift?"""
    approved(world, capsys)
    monkeypatch = pytest.MonkeyPatch()
    sent = {"terminate": False}

    def register(core: Any) -> None:
        def hook(request: Any, event_name: str = "", **_: Any) -> Any:
            if "TerminateInstanceInAutoScalingGroup" in event_name:
                sent["terminate"] = True
                return None
            if sent["terminate"] and "DescribeAutoScalingGroups" in event_name:
                body = _Body(query_error("Throttling", "Rate exceeded"))
                return AWSResponse(request.url, 400, {"Content-Type": "text/xml"}, body)
            return None

        core.register("before-send", hook)

    _aws_hook(monkeypatch, register)
    world.cli(capsys, "apply")
    terminated = world.b_id not in world.in_service()
    tainted = ours(world, "node-b")
    monkeypatch.undo()
    world.config.write_text(
        world.config.read_text().replace("drainTimeout: 20s", "drainTimeout: 20s, drift: restore")
    )
    rerun = world.cli(capsys, "apply")
    assert terminated
    assert tainted, "BROKE: node-b given back (schedulable) while its instance is being terminated"
    assert "drift" not in rerun.out, "BROKE: apply's own termination reported as someone else's drift"


def test_terminate_answer_lost_then_retried(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The terminate goes through but its answer is a 503: botocore retries the call."""
    approved(world, capsys)
    monkeypatch = pytest.MonkeyPatch()
    calls: list[str] = []

    def register(core: Any) -> None:
        def hook(request: Any, event_name: str = "", **_: Any) -> Any:
            if "TerminateInstanceInAutoScalingGroup" in event_name:
                calls.append(event_name)
                if len(calls) == 1:
                    world.aws.autoscaling.terminate_instance_in_auto_scaling_group(
                        InstanceId=world.b_id, ShouldDecrementDesiredCapacity=True
                    )
                    body = _Body(query_error("ServiceUnavailable", "try again", sender=False))
                    return AWSResponse(request.url, 503, {"Content-Type": "text/xml"}, body)
            return None

        core.register("before-send", hook)

    _aws_hook(monkeypatch, register)
    world.cli(capsys, "apply")
    tainted = ours(world, "node-b")
    assert world.desired() == 1, "desired lowered by more than the one instance"
    assert tainted or world.kube.get_object("Node", None, "node-b") is None, "BROKE: node given back"


def test_sigterm_right_after_the_terminate_call(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    approved(world, capsys)
    monkeypatch = pytest.MonkeyPatch()

    def register(core: Any) -> None:
        def after(event_name: str = "", **_: Any) -> None:
            os.kill(os.getpid(), signal.SIGTERM)

        core.register("after-call.auto-scaling.TerminateInstanceInAutoScalingGroup", after)

    _aws_hook(monkeypatch, register)
    world.cli(capsys, "apply")
    terminated = world.b_id not in world.in_service()
    tainted = ours(world, "node-b")
    monkeypatch.undo()
    rerun = world.cli(capsys, "apply")
    assert terminated
    assert tainted, "BROKE: node-b given back (schedulable) while its instance is being terminated"
    assert "drift" not in rerun.out


# ----------------------------------------------------- a pod landing while the intent is pushed


def test_a_pod_landing_while_the_intent_is_written_is_killed(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """remaining() is checked, then the intent is pushed to Git (seconds, retries), then terminate.
    A pod bound to node-b in that window (tolerating every taint) dies with the instance."""
    approved(world, capsys)
    from reconciler.runtime import apply_stage

    real = apply_stage._Recorder.intent

    def intent(self: Any, *args: Any) -> None:
        real(self, *args)
        landed = pod("late", "node-b", "100m")
        landed["spec"]["tolerations"] = [{"operator": "Exists"}]
        world.kube.put(landed)

    monkeypatch.setattr(apply_stage._Recorder, "intent", intent)
    world.cli(capsys, "apply")
    on_b = world.kube.get_object("Pod", "shop", "late")
    assert not (on_b is not None and world.b_id not in world.in_service()), (
        "BROKE: instance terminated with a pod on its node that arrived after the last look"
    )


# ----------------------------------------------------------------- SIGTERM in parallel drains


def three_removable(world: World) -> list[tuple[str, str]]:
    """Raise the group to 5 with three idle extra nodes c, d, e."""
    made = []
    for name in ("node-c", "node-d", "node-e"):
        made.append((name, world.add_node(name)))
        world.kube.put(pod(f"web-{name}", name, "100m"))
    world.kube.put(pod("web-b2", "node-b", "1500m"))  # b busy: not part of this
    return made


def test_sigterm_in_the_middle_of_parallel_drains(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.config.write_text(
        world.config.read_text().replace("drainTimeout: 20s", "drainTimeout: 20s, maxParallelDrains: 3")
    )
    made = three_removable(world)
    assert world.cli(capsys, "plan").code == 0
    text = manifest_on_main(world)
    ids = "".join(f"\n      - {iid}" for _, iid in made)
    import re

    text = re.sub(
        r"removeInstances:(\n      - i-[0-9a-f]+)*( \[\])?", "removeInstances:" + ids, text, count=1
    )
    signed_commit(world, text, "remove c d e")
    world.kube.pod_termination_seconds = 3.0  # evicted pods take a while to go
    fired: list[str] = []

    def fault(method: str, path: str, query: dict[str, str]) -> None:
        if method == "POST" and path.endswith("/eviction") and not fired:
            fired.append(path)
            os.kill(os.getpid(), signal.SIGTERM)

    world.kube.fault = fault
    stopped = world.cli(capsys, "apply")
    world.kube.fault = None
    assert stopped.code == 130, stopped.out + stopped.err
    assert "Interrupted (SIGTERM or Ctrl-C)" in stopped.out and "given back" in stopped.out
    record = world.note()["records"][-1]  # what the run did is recorded, not complete
    assert record["complete"] is False and record["groups"][0]["action"] == "failed"
    lease = world.kube.get_object("Lease", "kube-system", "asg-reconciler-apply-prod")
    tainted = [n for n, _ in made if ours(world, n)]
    in_service = world.in_service()
    assert all(iid in in_service for _, iid in made), "terminated after SIGTERM"
    assert not tainted, f"BROKE: still tainted after SIGTERM: {tainted}"
    assert not (lease or {}).get("spec", {}).get("holderIdentity"), "lease not released"


# -------------------------------------------------------------- notes rewound to a signed state


def test_notes_rewound_to_an_older_signed_state(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.kube.put(pod("web-b2", "node-b", "1500m"))
    assert world.cli(capsys, "plan").code == 0
    assert world.cli(capsys, "apply").code == 0
    old = git("rev-parse", NOTES, cwd=world.remote).strip()
    world.kube.delete_object("Pod", "shop", "web-b2")
    assert world.cli(capsys, "plan").code == 0
    # a new commit on main, so the next apply has something new to record (an idle one records
    # nothing, and a rewind to the record before nothing is no rewind)
    manifest = git("show", f"main:{MAIN_PATH}", cwd=world.remote)
    BOB.commit(world.remote, "main", {MAIN_PATH: manifest + "# reviewed\n"}, "a comment")
    assert world.cli(capsys, "apply").code == 0
    assert git("rev-parse", NOTES, cwd=world.remote).strip() != old  # a newer signed record
    assert world.cli(capsys, "approve", "scale-down").code == 0
    git("update-ref", NOTES, old, cwd=world.remote)  # the bot rewinds the notes ref
    result = world.cli(capsys, "apply")
    assert result.code == 3 and "records cannot be trusted" in result.out
    untouched(world)


# ------------------------------------------------------------------- AWS kills the instance itself


def test_aws_terminates_the_instance_itself_mid_drain(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    approved(world, capsys)

    def fault(method: str, path: str, query: dict[str, str]) -> None:
        if method == "POST" and path.endswith("/eviction"):
            groups = world.aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])
            if any(i["InstanceId"] == world.b_id for i in groups["AutoScalingGroups"][0]["Instances"]):
                world.aws.autoscaling.terminate_instance_in_auto_scaling_group(
                    InstanceId=world.b_id, ShouldDecrementDesiredCapacity=False
                )

    world.kube.fault = fault
    world.cli(capsys, "apply")
    world.kube.fault = None
    assert world.desired() == 2  # never lowered by a number; AWS replaces b
    world.cli(capsys, "apply")
    assert world.desired() == 2


# -------------------------------------------------------------------------- a PDB blocking forever


def test_a_pdb_blocking_forever(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    approved(world, capsys)
    world.config.write_text(world.config.read_text().replace("drainTimeout: 20s", "drainTimeout: 2s"))

    def fault(method: str, path: str, query: dict[str, str]) -> Any:
        if method == "POST" and path.endswith("/eviction"):
            return (
                429,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "message": "Cannot evict pod as it would violate the pod's disruption budget.",
                    "reason": "TooManyRequests",
                    "details": {
                        "causes": [
                            {
                                "reason": "DisruptionBudget",
                                "message": "The disruption budget web needs 1 healthy pods and has 1"
                                " currently",
                            }
                        ]
                    },
                    "code": 429,
                },
            )
        return None

    world.kube.fault = fault
    result = world.cli(capsys, "apply")
    world.kube.fault = None
    assert result.code == 1
    untouched(world)


# ------------------------------------------------------------------------------- --ref tricks


def test_ref_tricks(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    """The bot pushes a tag and a branch named like main's tip's relatives; --ref to the notes ref."""
    world.kube.put(pod("web-b2", "node-b", "1500m"))
    assert world.cli(capsys, "plan").code == 0
    assert world.cli(capsys, "apply").code == 0
    BOB.commit(world.remote, "side", {MAIN_PATH: listing_b(world)}, "side: drop b")
    for ref in ("side", NOTES, "origin/side", "main^2", "HEAD"):
        result = world.cli(capsys, "apply", "--ref", ref)
        assert result.code in (2, 3, 0)
    untouched(world)


# -------------------------------------------------------------- un-taint failing forever, 409s


def test_node_patch_conflicts_forever(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    approved(world, capsys)
    world.kube.fault = lambda m, p, q: (409, None) if (m == "PATCH" and p == "/api/v1/nodes/node-b") else None
    result = world.cli(capsys, "apply")
    world.kube.fault = None
    assert result.code == 1
    untouched(world)


def test_dropped_connections_on_evictions(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    from reconciler.demo.kube_api import DROP

    approved(world, capsys)
    count = {"n": 0}

    def fault(method: str, path: str, query: dict[str, str]) -> Any:
        if method == "POST" and path.endswith("/eviction"):
            count["n"] += 1
            return DROP if count["n"] <= 2 else None
        return None

    world.kube.fault = fault
    result = world.cli(capsys, "apply")
    world.kube.fault = None
    assert result.code == 0 and world.b_id not in world.in_service()
    _ = subprocess  # keep import


# --------------------------------------------- a withdrawal applied while the key was unreadable


def test_withdrawal_applied_without_the_key_then_replayed(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hole 2 through a key outage: W (no removals) is applied while apply.signingKey is unreadable:
    its record is unsigned, so 'the last applied commit' stays before M. Key back; the bot pushes Z
    with M's tree and parents [M, W]."""
    assert world.cli(capsys, "plan").code == 0
    assert world.cli(capsys, "apply").code == 0  # signed record on P (no removals yet)
    assert world.cli(capsys, "approve", "scale-down").code == 0
    merge = git("rev-parse", "main", cwd=world.remote).strip()
    withdrawn = (
        manifest_on_main(world)
        .replace(f"      - {world.b_id}", "")
        .replace("removeInstances:\n", "removeInstances: []\n")
    )
    BOB.commit(world.remote, "main", {MAIN_PATH: withdrawn}, "withdraw b (capacity needed again)")
    key = world.tmp / "record-key"
    key.rename(world.tmp / "record-key.away")  # the Secret is briefly not mounted
    notes_before = git("for-each-ref", NOTES, cwd=world.remote)
    without_key = world.cli(capsys, "apply")
    assert without_key.code == 2, without_key.out + without_key.err  # no run leaves an untrusted trace
    assert "apply.signingKey" in without_key.err and len(without_key.err.strip().splitlines()) == 1
    assert git("for-each-ref", NOTES, cwd=world.remote) == notes_before
    (world.tmp / "record-key.away").rename(key)
    assert world.cli(capsys, "apply").code == 0  # W applied, signed: now Z would skip it
    w = git("rev-parse", "main", cwd=world.remote).strip()
    z = git(
        "commit-tree", f"{merge}^{{tree}}", "-p", merge, "-p", w, "-m", "replay",
        cwd=world.remote, env=BOB.env(),
    ).strip()  # fmt: skip
    git("update-ref", "refs/heads/main", z, w, cwd=world.remote)
    result = world.cli(capsys, "apply")
    assert result.code == 3, result.out + result.err
    assert world.b_id in world.in_service(), "BROKE: the withdrawn approval M was replayed"


# ------------------------------------------------ approve (as documented) after the bot rewrote it


def test_approve_with_expect_refuses_a_proposal_rewritten_after_review(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Alice reviews the proposal (b only). The bot then force-pushes the proposal branch adding c
    (idle too). Alice approves with `--expect <the commit she reviewed>`, as docs/approval.md shows:
    refused, nothing merged."""
    c_id = world.add_node("node-c")
    world.kube.put(pod("web-c", "node-c", "1100m"))  # c not idle enough for the planner to propose it
    assert world.cli(capsys, "plan").code == 0
    proposal = "asg-reconciler/prod/scale-down"
    reviewed = git("show", f"{proposal}:{MAIN_PATH}", cwd=world.remote)
    reviewed_tip = git("rev-parse", proposal, cwd=world.remote).strip()
    assert c_id not in reviewed
    world.kube.delete_object("Pod", "shop", "web-c")
    world.kube.put(pod("web-c", "node-c", "100m"))  # c idle now
    rewritten = reviewed.replace(f"      - {world.b_id}", f"      - {world.b_id}\n      - {c_id}")
    BOB.commit(world.remote, proposal, {MAIN_PATH: rewritten}, "bot: also c")
    moved = world.cli(capsys, "approve", "scale-down", "--expect", reviewed_tip)
    assert moved.code == 3, moved.out + moved.err  # the documented way: approve what you reviewed
    assert "review it again" in moved.err
    assert c_id in world.in_service() and world.b_id in world.in_service()
