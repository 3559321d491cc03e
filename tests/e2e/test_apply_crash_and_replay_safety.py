"""Issue 8: the holes an adversarial review found in apply, each written as the attack, through the
CLI, against moto, the fake Kubernetes API and a bare Git repository (World in test_cli_apply.py).

The attacker holds the plan bot's Git credentials (BOB can push anything to main and to the notes
ref), or is an unlucky operator: a crash at the worst moment, faults from AWS and the API server.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from reconciler.aws import clients as aws_clients_module
from reconciler.domain.model import OWN_DRAIN_TAINT
from tests.support import k8s_objects as k
from tests.support.apply_world import (
    MAIN_PATH,
    NOTES,
    World,
    approved,
    manifest_on_main,
    pod,
    scaled_up_then_lowered_outside,
    signed_commit,
    untouched,
)
from tests.support.aws import _Body, query_error
from tests.support.git import BOB, git, needs_ssh_keygen

pytestmark = needs_ssh_keygen


def taints(world: World, node: str) -> list[dict[str, Any]]:
    found = world.kube.get_object("Node", None, node)
    assert found is not None
    return list(found["spec"].get("taints") or [])


def ours(world: World, node: str) -> bool:
    return any(t["key"] == OWN_DRAIN_TAINT for t in taints(world, node))


def listing_b(world: World) -> str:
    """The manifest on main with node b's instance under removeInstances."""
    return manifest_on_main(world).replace("removeInstances: []", f"removeInstances:\n      - {world.b_id}")


def without_b(world: World) -> str:
    """The manifest on main with node b's removal withdrawn."""
    listed = manifest_on_main(world)
    return listed.replace(f"      - {world.b_id}", "").replace("removeInstances:\n", "removeInstances: []\n")


def replayed(world: World, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """Alice approves b (signed merge M); the bot withdraws it (W) and apply applies W; the bot then
    fast-forwards main to Z, with M's tree and parents [M, W]. Returns (W, Z)."""
    approved(world, capsys)
    merge = git("rev-parse", "main", cwd=world.remote).strip()
    BOB.commit(world.remote, "main", {MAIN_PATH: without_b(world)}, "withdraw b")
    assert world.cli(capsys, "apply").code == 0  # W applied: nothing removed
    w = git("rev-parse", "main", cwd=world.remote).strip()
    tree = f"{merge}^{{tree}}"
    z = git("commit-tree", tree, "-p", merge, "-p", w, "-m", "replay", cwd=world.remote, env=BOB.env())
    git("update-ref", "refs/heads/main", z.strip(), w, cwd=world.remote)  # a fast-forward from W
    return w, z.strip()


# ------------------------------------------------------------------- hole 1: an unreadable manifest


def test_a_removal_slipped_in_with_a_broken_manifest_is_not_laundered_by_the_fix(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bot's P adds b *and* breaks the manifest; Alice fixes only the broken line (signed F).
    F's own diff does not add b: the removal is refused until it is approved again."""
    world.kube.put(pod("web-b2", "node-b", "100m"))
    assert world.cli(capsys, "plan").code == 0  # main has a manifest; b is idle (proposal aside)
    good = listing_b(world)
    broken = good.replace("desired: 2", "desired: 2\n    desired: 2", 1)  # a duplicate key
    assert broken != good
    BOB.commit(world.remote, "main", {MAIN_PATH: broken}, "drop b (and break the file)")
    bad = world.cli(capsys, "apply")
    assert bad.code == 2, bad.out + bad.err
    signed_commit(world, good, "fix the duplicate key")
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert f"{world.b_id}: cannot tell which commit added it" in refused.out
    untouched(world)


def test_approve_onto_a_broken_main_is_refused(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    assert world.cli(capsys, "plan").code == 0  # a proposal to remove b
    broken = manifest_on_main(world).replace("desired: 2", "desired: 2\n    desired: 2", 1)
    BOB.commit(world.remote, "main", {MAIN_PATH: broken}, "break the file")
    before = git("rev-parse", "main", cwd=world.remote)
    result = world.cli(capsys, "approve", "scale-down")
    assert result.code == 3, result.out + result.err
    assert "cannot be read" in result.err and len(result.err.strip().splitlines()) == 1
    assert git("rev-parse", "main", cwd=world.remote) == before  # nothing merged


# --------------------------------------------------------- hole 2: replaying a withdrawn approval


def test_a_fast_forward_that_skips_the_last_applied_commit_is_refused(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Alice approves b (signed merge M); the bot withdraws it (W) and apply applies W. The bot then
    pushes Z with M's tree and parents [M, W]: a fast-forward whose first-parent chain skips W."""
    w, _z = replayed(world, capsys)
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert f"the last applied commit {w[:12]} is not on the first-parent history" in refused.err
    untouched(world)


def test_deleting_the_records_does_not_make_the_replay_work(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hole 6 meets hole 2: the bot also deletes refs/notes/asg-reconciler. Apply's anchor (on its
    own Lease) says a record is missing: removals are refused."""
    replayed(world, capsys)
    git("update-ref", "-d", NOTES, cwd=world.remote)  # the bot deletes apply's records
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "records cannot be trusted" in refused.out
    untouched(world)


def test_a_forged_record_does_not_move_the_last_applied_commit(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bot appends an unsigned record claiming Z was applied: it counts for nothing."""
    _w, z = replayed(world, capsys)
    forged = {
        "records": [
            {
                "applier": "asg-reconciler-apply",
                "appliedAt": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
                "cluster": "prod",
                "commit": z,
                "complete": True,
                "groups": [],
            }
        ],
        "version": 1,
    }
    blob = git("hash-object", "-w", "--stdin", cwd=world.remote, input=json.dumps(forged)).strip()
    git("notes", f"--ref={NOTES}", "add", "-f", "-C", blob, z, cwd=world.remote, env=BOB.env())
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    untouched(world)


# ---------------------------------------------------------------------- hole 3: our taint leaks


def test_a_crashed_drain_refused_on_the_rerun_is_given_back(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """A crash left our taint on b, still approved; by the rerun b is busy again: refused, and the
    taint comes off anyway. A person's cordon elsewhere stays."""
    approved(world, capsys)
    node_b = world.kube.get_object("Node", None, "node-b")
    node_a = world.kube.get_object("Node", None, "node-a")
    assert node_b is not None and node_a is not None
    node_b["spec"]["taints"] = [{"key": OWN_DRAIN_TAINT, "value": "0" * 40, "effect": "NoSchedule"}]
    node_a["spec"]["unschedulable"] = True  # a person's kubectl cordon
    world.kube.put(node_b)
    world.kube.put(node_a)
    world.kube.put(pod("web-b2", "node-b", "1500m"))  # busy again
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "busy again" in refused.out
    assert "node-b: given back" in refused.out
    assert not ours(world, "node-b")
    assert world.kube.get_object("Node", None, "node-a")["spec"]["unschedulable"] is True  # type: ignore[index]


def test_a_failed_give_back_is_reported_and_the_next_run_gives_the_node_back(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """The drain fails and the un-taint PATCH keeps getting 500: exit 1 says the node is stuck; the
    next run, whose re-check refuses the removal, still gives it back."""
    approved(world, capsys)
    patches: list[int] = []

    def fault(method: str, path: str, query: dict[str, str]) -> Any:
        if path == "/api/v1/nodes/node-b" and method == "PATCH":
            patches.append(1)
            return None if len(patches) == 1 else (500, None)  # the mark passes, every unmark fails
        if method == "POST" and path.endswith("/eviction"):
            return (500, None)  # and the drain fails
        return None

    world.kube.fault = fault
    failed = world.cli(capsys, "apply")
    assert failed.code == 1, failed.out + failed.err
    assert "node-b: still carries the drain taint" in failed.out
    assert ours(world, "node-b")
    world.kube.fault = None
    world.kube.put(pod("web-b2", "node-b", "1500m"))  # busy again: the rerun refuses the removal
    rerun = world.cli(capsys, "apply")
    assert rerun.code == 3, rerun.out + rerun.err
    assert not ours(world, "node-b")
    assert world.b_id in world.in_service()


def test_an_expired_approval_on_a_crashed_drain_gives_the_node_back(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import timedelta

    approved(world, capsys)
    node_b = world.kube.get_object("Node", None, "node-b")
    assert node_b is not None
    node_b["spec"]["taints"] = [{"key": OWN_DRAIN_TAINT, "value": "0" * 40, "effect": "NoSchedule"}]
    world.kube.put(node_b)
    monkeypatch.setattr("reconciler.cli.commands._now", lambda: datetime.now(UTC) + timedelta(hours=25))
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "older than scaleDown.proposalTTL" in refused.out
    assert not ours(world, "node-b")


# ------------------------------------------------- hole 4: a node that turns busy after the re-check


def test_a_pod_landing_while_tainting_is_seen_by_the_recheck_and_the_node_stays(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Between apply's first look and the drain, a 1500m pod lands on b; nothing else has room for
    it. The re-check after the taint sees it: nothing evicted, nothing terminated, node given back."""
    approved(world, capsys)
    landed = pod("heavy", "node-b", "1500m")

    def land(method: str, path: str, query: dict[str, str]) -> None:
        if (
            method == "PATCH"
            and path == "/api/v1/nodes/node-b"
            and not world.kube.get_object("Pod", "shop", "heavy")
        ):
            world.kube.put(landed)

    world.kube.fault = land
    refused = world.cli(capsys, "apply")
    world.kube.fault = None
    assert refused.code == 3, refused.out + refused.err
    assert "no longer safe to remove (re-checked after tainting)" in refused.out
    assert world.kube.get_object("Pod", "shop", "heavy") is not None
    untouched(world)


def test_a_pod_landing_after_the_recheck_is_never_evicted(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pod arrives after the re-check (at the first eviction): the drain stops before evicting
    a pod nobody judged; the node is given back and nothing is terminated."""
    approved(world, capsys)

    def land(method: str, path: str, query: dict[str, str]) -> None:
        if (
            method == "POST"
            and path.endswith("/eviction")
            and not world.kube.get_object("Pod", "shop", "heavy")
        ):
            world.kube.put(pod("heavy", "node-b", "1500m"))

    world.kube.fault = land
    refused = world.cli(capsys, "apply")
    world.kube.fault = None
    assert refused.code == 3, refused.out + refused.err
    assert "pod shop/heavy arrived after the re-check" in refused.out
    assert world.kube.get_object("Pod", "shop", "heavy") is not None
    assert world.desired() == 2 and world.b_id in world.in_service()
    assert not ours(world, "node-b")


def test_a_second_node_is_judged_on_state_newer_than_the_first_drain(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two approved removals, one at a time. While b drains, its pod is recreated on node-a and a
    batch pod lands there too: c's pods no longer fit anywhere. The re-check before c's taint runs
    on state newer than b's drain and keeps c."""
    c_id = world.add_node("node-c")
    world.kube.put(pod("web-c", "node-c", "700m"))
    world.kube.delete_object("Pod", "shop", "web-a")
    world.kube.put(pod("web-a", "node-a", "700m"))
    assert world.cli(capsys, "plan").code == 0
    both = manifest_on_main(world).replace(
        "removeInstances: []", f"removeInstances:\n      - {world.b_id}\n      - {c_id}"
    )
    signed_commit(world, both, "remove b and c")  # Alice approves both by hand

    def replicaset(method: str, path: str, query: dict[str, str]) -> None:
        if method == "POST" and path.endswith("/web-b/eviction"):
            world.kube.put(pod("web-b-2", "node-a", "100m"))  # web-b's replacement, on a
            world.kube.put(pod("batch-1", "node-a", "900m"))  # and something else lands there

    world.kube.fault = replicaset
    result = world.cli(capsys, "apply")
    world.kube.fault = None
    assert result.code == 3, result.out + result.err
    assert f"drained node-b and terminated {world.b_id}" in result.out
    assert f"{c_id}: no longer safe to remove (re-checked after tainting)" in result.out
    assert world.desired() == 2 and c_id in world.in_service()
    assert world.kube.get_object("Pod", "shop", "web-c") is not None
    assert not ours(world, "node-c")


# -------------------------------------------------- hole 5: a crash after terminate, before the record


def test_a_crash_after_terminating_is_recognised_as_our_own_work(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    approved(world, capsys)
    from reconciler.runtime import apply_stage

    def crash(self: Any, report: Any, *args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt  # SIGKILL-like: the result is never recorded

    real_done = apply_stage._Recorder.done
    monkeypatch.setattr(apply_stage._Recorder, "done", crash)
    crashed = world.cli(capsys, "apply")
    assert crashed.code == 130
    assert world.desired() == 1 and world.b_id not in world.in_service()
    monkeypatch.setattr(apply_stage._Recorder, "done", real_done)
    rerun = world.cli(capsys, "apply")
    assert rerun.code == 0, rerun.out + rerun.err
    assert "drift" not in rerun.out
    assert f"terminated {world.b_id}: an earlier apply recorded the intent" in rerun.out
    history = world.cli(capsys, "history", "--output", "json")
    assert history.code == 0, history.err
    assert any(world.b_id in e.get("instances", []) for e in json.loads(history.out) if e["kind"] == "apply")


# ------------------------------------------------------------------ hole 7: decisions under the lock


def test_a_held_lease_stops_apply_before_it_observes_anything(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    approved(world, capsys)
    world.kube.put(
        k.lease("asg-reconciler-apply-prod", "kube-system", holder="other", renew_time=datetime.now(UTC))
    )
    world.kube.requests.clear()
    refused = world.cli(capsys, "apply")
    assert refused.code == 3
    seen = {(r.method, r.path) for r in world.kube.requests}
    assert all("lease" in path for _method, path in seen), seen  # no node or pod was listed


def test_a_node_name_reused_by_another_instance_is_not_drained(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """After apply looked, node-b's name now belongs to another instance: no taint, no eviction."""
    approved(world, capsys)
    a_id = world.instances[0][0]

    def swap(method: str, path: str, query: dict[str, str]) -> None:
        node = world.kube.get_object("Node", None, "node-b")
        mine = node is not None and world.b_id in node["spec"]["providerID"]
        if method == "GET" and path == "/api/v1/nodes/node-b" and node is not None and mine:
            node["spec"]["providerID"] = node["spec"]["providerID"].replace(world.b_id, a_id)
            world.kube.put(node)

    world.kube.fault = swap
    refused = world.cli(capsys, "apply")
    world.kube.fault = None
    assert refused.code == 3, refused.out + refused.err
    assert world.kube.get_object("Pod", "shop", "web-b") is not None
    assert world.desired() == 2 and world.b_id in world.in_service()
    assert not ours(world, "node-b")


# --------------------------------------------------------------------------- the missing gates


def test_az_rebalance_active_on_a_multi_zone_group_refuses_the_scale_down(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    approved(world, capsys)
    world.aws.autoscaling.resume_processes(AutoScalingGroupName="general", ScalingProcesses=["AZRebalance"])
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "AZRebalance is not suspended" in refused.out and "apply.allowAZRebalance" in refused.out
    untouched(world)
    world.config.write_text(
        world.config.read_text().replace("drainTimeout: 20s", "drainTimeout: 20s, allowAZRebalance: true")
    )
    allowed = world.cli(capsys, "apply")
    assert allowed.code == 0, allowed.out + allowed.err
    assert world.b_id not in world.in_service()


def test_a_group_outside_discovery_is_refused_not_skipped(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world.kube.put(pod("web-b2", "node-b", "1500m"))
    assert world.cli(capsys, "plan").code == 0
    text = manifest_on_main(world) + "  ghost:\n    desired: 3\n    minSize: 0\n    maxSize: 5\n"
    BOB.commit(world.remote, "main", {MAIN_PATH: text}, "a group of another cluster")
    result = world.cli(capsys, "apply")
    assert result.code == 3, result.out + result.err
    assert "ghost" in result.out and "not a node group of cluster prod" in result.out


def test_a_standby_instance_is_not_counted_and_not_terminated(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    approved(world, capsys)
    world.aws.autoscaling.enter_standby(
        InstanceIds=[world.b_id], AutoScalingGroupName="general", ShouldDecrementDesiredCapacity=True
    )
    assert world.desired() == 1
    result = world.cli(capsys, "apply")
    assert result.code == 3, result.out + result.err
    assert "is in Standby" in result.out
    assert world.desired() == 1  # not raised by one for an instance it cannot drain


def test_drift_adopt_records_the_outside_value(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.config.write_text(
        world.config.read_text().replace("drainTimeout: 20s", "drainTimeout: 20s, drift: adopt")
    )
    scaled_up_then_lowered_outside(world, capsys)  # 2 -> 3 applied, then 2 set by hand
    result = world.cli(capsys, "apply")
    assert result.code == 0, result.out + result.err
    assert "apply.drift adopt" in result.out and world.desired() == 2
    record = world.note()["records"][-1]
    assert record["groups"][0]["adopted"] is True and record["groups"][0]["desiredAfter"] == 2
    again = world.cli(capsys, "apply")  # before the next plan commits it: still adopted, not raised back
    assert again.code == 0, again.out + again.err
    assert world.desired() == 2 and world.note()["records"][-1]["groups"][0]["adopted"] is True


# ---------------------------------------------------------------------------- a throttling storm


def test_a_throttling_storm_and_api_errors_do_not_break_the_promises(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Half of all AWS calls throttled, the API server answering 500 now and then: apply completes,
    terminates b exactly once, and leaves nothing tainted."""
    from botocore.retries import standard

    monkeypatch.setattr(standard.ExponentialBackoff, "delay_amount", lambda self, context: 0.0)
    approved(world, capsys)
    real_session = aws_clients_module.core_session
    calls: dict[str, int] = {"n": 0}
    terminates: list[str] = []

    def session() -> Any:
        core = real_session()

        def storm(request: Any, event_name: str = "", **_: Any) -> Any:
            calls["n"] += 1
            if "TerminateInstanceInAutoScalingGroup" in event_name and calls["n"] % 2 == 1:
                terminates.append(event_name)
            if calls["n"] % 2 == 0:
                throttled = _Body(query_error("Throttling", "Rate exceeded"))
                return AWSResponse(request.url, 400, {"Content-Type": "text/xml"}, throttled)
            return None

        core.register("before-send", storm)
        return core

    monkeypatch.setattr(aws_clients_module, "core_session", session)
    api_calls = {"n": 0}

    def flaky(method: str, path: str, query: dict[str, str]) -> Any:
        api_calls["n"] += 1
        if "lease" in path:
            return None
        return (500, None) if api_calls["n"] % 7 == 0 else None

    world.kube.fault = flaky
    result = world.cli(capsys, "apply")
    world.kube.fault = None
    assert result.code == 0, result.out + result.err
    assert world.desired() == 1 and world.b_id not in world.in_service()
    assert len(terminates) == 1
    assert not any(ours(world, n) for n in ("node-a",))
    record = world.note()["records"][-1]
    assert record["complete"] is True and record["groups"][0]["terminated"] == [world.b_id]
    again = world.cli(capsys, "apply")
    assert again.code == 0, again.out + again.err
    assert world.desired() == 1


# ------------------------------------------------------------------ parallel drains, capped grace


def test_parallel_drains_taint_and_recheck_the_batch_then_drain_at_once(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """apply.maxParallelDrains 2: both nodes are tainted before the re-check and before any eviction,
    both drains run together, and each eviction's grace period is capped by apply.maxGracePeriod."""
    world.config.write_text(
        world.config.read_text().replace(
            "drainTimeout: 20s", "drainTimeout: 20s, maxParallelDrains: 2, maxGracePeriod: 5s"
        )
    )
    c_id = world.add_node("node-c")
    slow = pod("web-c", "node-c", "100m")
    slow["spec"]["terminationGracePeriodSeconds"] = 600
    world.kube.put(slow)
    world.kube.pod_termination_seconds = 1.0
    assert world.cli(capsys, "plan").code == 0
    both = manifest_on_main(world).replace(
        "removeInstances: []", f"removeInstances:\n      - {world.b_id}\n      - {c_id}"
    )
    if both == manifest_on_main(world):  # the plan already proposed them: approve its proposal
        approved(world, capsys)
    else:
        signed_commit(world, both, "remove b and c")
    world.kube.requests.clear()
    result = world.cli(capsys, "apply")
    assert result.code == 0, result.out + result.err
    assert world.desired() == 1 and not ({world.b_id, c_id} & world.in_service())
    seen = [(r.method, r.path) for r in world.kube.requests]
    marks = [
        i
        for i, (m, p) in enumerate(seen)
        if m == "PATCH" and p in ("/api/v1/nodes/node-b", "/api/v1/nodes/node-c")
    ]
    evictions = [i for i, (m, p) in enumerate(seen) if m == "POST" and p.endswith("/eviction")]
    pod_lists = [i for i, (m, p) in enumerate(seen) if m == "GET" and p == "/api/v1/pods"]
    assert len(marks) >= 2 and len(evictions) == 2
    assert max(marks[:2]) < min(evictions)  # the whole batch tainted first
    assert any(max(marks[:2]) < i < min(evictions) for i in pod_lists)  # re-checked after the taints
    bodies = {
        r.path: r.json() for r in world.kube.requests if r.method == "POST" and r.path.endswith("/eviction")
    }
    grace = {
        path.split("/")[-2]: body["deleteOptions"]["gracePeriodSeconds"] for path, body in bodies.items()
    }
    assert grace["web-c"] == 5 and grace["web-b"] == 5


# ------------------------------------------------------------------------------- the kill switch


def test_suspend_stops_apply_before_it_changes_anything_and_resume_lets_it_go(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    approved(world, capsys)
    pulled = world.cli(capsys, "suspend", "--reason", "incident 42")
    assert pulled.code == 0, pulled.err
    assert "suspended apply for prod" in pulled.out
    control = world.kube.get_object("ConfigMap", "kube-system", "asg-reconciler-control")
    assert control is not None and control["data"]["suspend"] == "true"
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "apply is" in refused.err and "suspended" in refused.err and "incident 42" in refused.err
    untouched(world)
    status = world.cli(capsys, "status")
    assert status.code == 0 and "incident 42" in status.out
    assert world.cli(capsys, "resume").code == 0
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert world.b_id not in world.in_service()


def test_a_suspended_group_is_refused_and_others_go_on(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    approved(world, capsys)
    assert world.cli(capsys, "suspend", "--node-group", "general", "--reason", "draining by hand").code == 0
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "general is suspended" in refused.out and "draining by hand" in refused.out
    untouched(world)
    assert world.cli(capsys, "resume", "--node-group", "general").code == 0
    assert world.cli(capsys, "apply").code == 0


def test_apply_suspend_in_the_config_stops_apply(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    approved(world, capsys)
    world.config.write_text(
        world.config.read_text().replace("drainTimeout: 20s", "drainTimeout: 20s, suspend: true")
    )
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "apply.suspend is true" in refused.err
    untouched(world)


def test_suspend_pulled_during_a_drain_stops_it_and_gives_the_node_back(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    approved(world, capsys)
    world.kube.pod_termination_seconds = 3.0  # the drain waits for the pod to go

    def pull(method: str, path: str, query: dict[str, str]) -> None:
        if method == "POST" and path.endswith("/eviction"):
            world.kube.put(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "asg-reconciler-control", "namespace": "kube-system"},
                    "data": {"suspend": "true", "reason": "stop now"},
                }
            )

    world.kube.fault = pull
    refused = world.cli(capsys, "apply")
    world.kube.fault = None
    assert refused.code == 3, refused.out + refused.err
    assert "stop now" in refused.out
    assert world.desired() == 2 and world.b_id in world.in_service()
    assert not ours(world, "node-b")


def test_a_terminated_instances_lingering_node_keeps_the_taint_on_the_next_run(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """The node object of an instance apply terminated lingers until the cloud controller deletes
    it; the next run (a run loop applies every few seconds) must not give it back to the scheduler."""
    approved(world, capsys)
    assert world.cli(capsys, "apply").code == 0 and world.b_id not in world.in_service()
    assert ours(world, "node-b")
    again = world.cli(capsys, "apply")
    assert again.code == 0, again.out + again.err
    assert ours(world, "node-b")
    assert "node-b" not in again.out


def test_ref_names_the_commit_even_when_the_bot_pushes_a_branch_of_that_name(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world.kube.put(pod("web-b2", "node-b", "1500m"))
    assert world.cli(capsys, "plan").code == 0
    tip = git("rev-parse", "main", cwd=world.remote).strip()
    side = BOB.commit(world.remote, "side", {"notes.txt": "a side branch\n"}, "side work")
    git("update-ref", f"refs/heads/{tip[:8]}", side, cwd=world.remote)  # a branch named like the id
    result = world.cli(capsys, "apply", "--ref", tip[:8])
    assert result.code == 0, result.out + result.err
    assert f"Apply {tip[:12]}" in result.out
