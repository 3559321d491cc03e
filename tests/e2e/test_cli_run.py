"""`asg-reconciler run` as a real process against moto, the fake Kubernetes API and a bare repo:
triggers, leader election with takeover, metrics, health, events, faults, the kill switch, SIGTERM."""

from __future__ import annotations

import signal
import time

import pytest

from reconciler.domain.model import OWN_DRAIN_TAINT
from reconciler.kube.control import CONTROL_CONFIGMAP
from tests.support.apply_world import World, approved
from tests.support.run_process import RunProcess, wait_for
from tests.support.run_world import pending

# Real processes with timing bounds: one worker, in turn.
pytestmark = pytest.mark.xdist_group("timing")

PLAN_LEASE = "asg-reconciler-plan-leader-prod"


def holder(world: World, lease: str) -> str:
    found = world.kube.get_object("Lease", "kube-system", lease)
    return str(((found or {}).get("spec") or {}).get("holderIdentity") or "")


def test_a_pending_pod_is_planned_and_applied_before_the_next_interval(world: World) -> None:
    with RunProcess(world.config) as run:
        wait_for(lambda: run.get("/readyz")[0] == 200, 30, "readiness", log=run.output)
        assert world.desired() == 2
        started = time.monotonic()
        pending(world, "big-1")
        wait_for(lambda: world.desired() == 3, 15, "the scale-up", log=run.output)
        took = time.monotonic() - started
        assert took < 15, took  # interval is 30s: the watch triggered it
        assert run.get("/healthz")[0] == 200
        assert (
            run.metric("asg_reconciler_leader", stage="plan"),
            run.metric("asg_reconciler_leader", stage="apply"),
        ) == (1.0, 1.0)
        wait_for(  # the cycle that committed is counted once it has written events and status too
            lambda: (run.metric("asg_reconciler_cycles_total", stage="plan") or 0) >= 2,
            10,
            "the plan cycles counted",
            log=run.output,
        )
        wait_for(  # counted once the apply cycle that raised it has finished
            lambda: (run.metric("asg_reconciler_apply_actions_total", action="raise") or 0) >= 1,
            10,
            "the raise counted",
            log=run.output,
        )
        assert run.metric("asg_reconciler_node_group_desired_nodes", node_group="general") == 3.0
        assert run.metric("asg_reconciler_cache_synced", kind="Pod") == 1.0
        assert run.metric("asg_reconciler_cache_objects", kind="Node") == 2.0
        assert (
            run.metric("asg_reconciler_cache_last_event_timestamp_seconds", kind="Pod") or 0
        ) > time.time() - 120
        assert run.metric("asg_reconciler_cache_relists_total", kind="Pod", reason="expired") == 0.0
        triggered = [e for e in world.kube.objects("Event", "shop") if e.get("reason") == "TriggeredScaleUp"]
        assert triggered and triggered[0]["involvedObject"]["name"] == "big-1"
        status = world.kube.get_object("ConfigMap", "kube-system", "asg-reconciler-status")
        assert status is not None and "general" in status["data"]["status"]
        assert run.stop(signal.SIGTERM) == 0, run.output()
    assert holder(world, PLAN_LEASE) == "" and holder(world, "asg-reconciler-apply-leader-prod") == ""
    assert "Traceback" not in run.output()


def test_the_plan_stage_is_not_ready_and_does_not_plan_until_its_cache_has_listed_everything(
    world: World,
) -> None:
    def failing(method: str, path: str, query: dict[str, str]) -> object:
        return (500, None) if path == "/api/v1/pods" and not query.get("watch") else None

    world.kube.fault = failing  # the pods cannot be listed
    with RunProcess(world.config, stages="plan") as run:
        wait_for(
            lambda: run.metric("asg_reconciler_leader", stage="plan") == 1.0, 20, "leading", log=run.output
        )
        wait_for(lambda: "HTTP 500" in run.get("/readyz")[1], 20, "the reason on /readyz", log=run.output)
        code, body = run.get("/readyz")
        assert code == 503 and "waiting for the cluster cache's first list of Pods (" in body, body
        assert run.metric("asg_reconciler_cache_synced", kind="Pod") == 0.0
        assert run.metric("asg_reconciler_cache_synced", kind="Node") == 1.0
        assert not run.metric("asg_reconciler_cycles_total", stage="plan")  # no plan from half a picture
        assert "plan: waiting for the cluster cache's first list of Pods" in run.output()
        world.kube.fault = None
        wait_for(lambda: run.get("/readyz")[0] == 200, 30, "readiness", log=run.output)
        assert "plan: the cluster cache is synced (2 nodes, 2 pods)" in run.output()
        assert run.stop() == 0


def test_two_replicas_one_leader_and_takeover_on_sigterm_and_sigkill(world: World) -> None:
    first = RunProcess(world.config, stages="plan")
    with first:
        wait_for(lambda: holder(world, PLAN_LEASE), 20, "a leader", log=first.output)
        with RunProcess(world.config, stages="plan") as second:
            wait_for(lambda: second.get("/readyz")[0] == 200, 20, "the standby ready", log=second.output)
            assert first.metric("asg_reconciler_leader", stage="plan") == 1.0
            assert second.metric("asg_reconciler_leader", stage="plan") == 0.0
            leader = holder(world, PLAN_LEASE)
            assert first.stop(signal.SIGTERM) == 0, first.output()
            stopped = time.monotonic()  # it released the Lease as it exited (how long it took to end its
            # cycle under load is not what this measures)
            wait_for(lambda: holder(world, PLAN_LEASE) not in ("", leader), 3 + 2, "takeover after SIGTERM")
            released_in = time.monotonic() - stopped
            wait_for(lambda: second.metric("asg_reconciler_leader", stage="plan") == 1.0, 5, "leader gauge")
            with RunProcess(world.config, stages="plan") as third:
                wait_for(lambda: third.get("/readyz")[0] == 200, 20, "the third ready", log=third.output)
                taken = holder(world, PLAN_LEASE)
                killed = time.monotonic()
                second.stop(signal.SIGKILL)
                wait_for(
                    lambda: holder(world, PLAN_LEASE) not in ("", taken), 3 + 5, "takeover after SIGKILL"
                )
                took = time.monotonic() - killed
                assert third.metric("asg_reconciler_leader", stage="plan") == 1.0
                assert 2.0 <= took <= 8.0, took  # not before the lease duration (3s, judged by the follower)
                third.stop()
    assert released_in < 3.0, released_in  # a released Lease is taken within a retry period or so


def test_the_kill_switch_stops_apply_within_a_cycle_and_plan_keeps_planning(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.cli(capsys, "suspend", "--reason", "incident 42").code == 0
    with RunProcess(world.config, keys={"interval": "2s"}) as run:
        wait_for(lambda: run.get("/readyz")[0] == 200, 30, "readiness", log=run.output)
        pending(world, "big-1")
        wait_for(
            lambda: (run.metric("asg_reconciler_errors_total", stage="apply", kind="suspended") or 0) >= 1,
            15,
            "a suspended apply cycle",
            log=run.output,
        )
        assert run.metric("asg_reconciler_suspended") == 1.0
        wait_for(lambda: "big-1" in str(world.kube.objects("Event", "shop")), 10, "plan kept planning")
        assert world.desired() == 2  # planned and committed, not applied
        assert world.cli(capsys, "resume").code == 0
        wait_for(lambda: world.desired() == 3, 15, "the scale-up after resume", log=run.output)
        wait_for(lambda: run.metric("asg_reconciler_suspended") == 0.0, 10, "the gauge off", log=run.output)
        assert run.stop() == 0
    control = world.kube.get_object("ConfigMap", "kube-system", CONTROL_CONFIGMAP)
    assert control is not None


def test_api_500s_and_a_git_remote_gone_do_not_kill_the_loop(world: World) -> None:
    with RunProcess(world.config, keys={"interval": "1s"}) as run:
        wait_for(lambda: run.get("/readyz")[0] == 200, 30, "readiness", log=run.output)

        def broken(method: str, path: str, query: dict[str, str]) -> object:
            return (500, None) if "/leases/" not in path else None  # everything but the Leases

        world.kube.fault = broken
        # the plan stage's open watches keep its cache current (as they would on a real server whose
        # new requests fail); once they end and cannot come back, its picture goes stale (after
        # 3 x run.interval, at least 10s) and plan cycles fail as a failing live read did
        world.kube.end_watches()
        wait_for(
            lambda: (run.metric("asg_reconciler_errors_total", stage="plan", kind="kubernetes") or 0) >= 1,
            25,
            "a failed plan cycle",
            log=run.output,
        )
        assert "cluster cache is stale" in run.output()
        time.sleep(2)
        world.kube.fault = None
        hidden = world.remote.with_name("moved-away")
        world.remote.rename(hidden)
        wait_for(
            lambda: (run.metric("asg_reconciler_errors_total", stage="plan", kind="git") or 0) >= 1,
            20,
            "a failed git cycle",
            log=run.output,
        )
        hidden.rename(world.remote)
        assert run.process.poll() is None, run.output()
        pending(world, "big-1")
        wait_for(lambda: world.desired() == 3, 30, "convergence after the faults", log=run.output)
        assert run.get("/healthz")[0] == 200
        assert run.stop() == 0


def test_events_are_folded_over_many_cycles(world: World) -> None:
    world.aws.autoscaling.update_auto_scaling_group(AutoScalingGroupName="general", MaxSize=2)
    pending(world, "big-1")  # no group can take it: NotTriggerScaleUp, every cycle
    with RunProcess(world.config, stages="plan", keys={"interval": "500ms"}) as run:
        wait_for(
            lambda: (run.metric("asg_reconciler_cycles_total", stage="plan") or 0) >= 6,
            30,
            "six plan cycles",
            log=run.output,
        )
        assert run.stop() == 0
    events = [e for e in world.kube.objects("Event", "shop") if e["involvedObject"]["name"] == "big-1"]
    assert len(events) == 1, events
    assert events[0]["reason"] == "NotTriggerScaleUp"
    assert events[0]["count"] >= 6  # the folded repeats are written when the process stops
    status = world.kube.get_object("ConfigMap", "kube-system", "asg-reconciler-status")
    # a plan-only process's keys: its status, and the commit it pushed (the apply process's wake-up hint)
    assert status is not None and sorted(status["data"]) == ["plan-pushed", "status-plan"]


def test_healthz_is_red_when_the_loop_stalls(world: World) -> None:
    with RunProcess(world.config, stages="plan", keys={"interval": "500ms"}) as run:
        wait_for(lambda: run.get("/healthz")[0] == 200, 30, "health", log=run.output)

        def hang(method: str, path: str, query: dict[str, str]) -> object:
            # the status ConfigMap's read at the end of every cycle takes 20s: the cycle hangs (the
            # plan's cluster read comes from its watch-fed cache: no list to hang there)
            return 20.0 if path.endswith("/configmaps/asg-reconciler-status") else None

        world.kube.fault = hang
        red = wait_for(lambda: (lambda r: r if r[0] == 503 else None)(run.get("/healthz")), 15, "red")
        body = red[1]  # type: ignore[index]
        assert "plan" in body
        world.kube.fault = None
        run.stop(signal.SIGKILL)


def test_a_bad_config_exits_2_at_start(world: World) -> None:
    with RunProcess(world.config, keys={"leaseDuration": "1s"}) as run:  # renewDeadline is 2s
        code = run.process.wait(timeout=30)
    assert code == 2
    assert "run.renewDeadline: needs leaseDuration > renewDeadline" in run.output(), run.output()


# --------------------------------------------------------------------- drains and the stop request


def tainted(world: World, node: str) -> bool:
    found = world.kube.get_object("Node", None, node) or {}
    return any(t.get("key") == OWN_DRAIN_TAINT for t in found.get("spec", {}).get("taints", []))


def test_sigterm_mid_drain_gives_the_node_back_and_healthz_stays_green_while_draining(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    approved(world, capsys)  # node-b's instance approved for removal
    world.kube.pod_termination_seconds = 60.0  # web-b takes a minute to go: a long drain
    world.config.write_text(world.config.read_text().replace("drainTimeout: 20s", "drainTimeout: 5m"))
    # interval 2s: /healthz turns red after 6s without progress, far shorter than the drain (a
    # minute); the drain looks every 2s, and every look is progress
    with RunProcess(world.config, stages="apply", keys={"interval": "2s"}) as run:
        wait_for(lambda: tainted(world, "node-b"), 20, "the drain to start", log=run.output)
        for _ in range(20):  # ten seconds of draining
            time.sleep(0.5)
            assert run.get("/healthz")[0] == 200, run.output()
        stopped = time.monotonic()
        assert run.stop(signal.SIGTERM) == 0, run.output()
        assert time.monotonic() - stopped < 10  # shutdownGracePeriod 30s < drainTimeout 5m: not waited for
    assert not tainted(world, "node-b"), "BROKE: the node was not given back"
    assert world.desired() == 2 and world.b_id in world.in_service()
    assert holder(world, "asg-reconciler-apply-leader-prod") == ""
    lease = world.kube.get_object("Lease", "kube-system", "asg-reconciler-apply-prod")
    assert not (lease or {}).get("spec", {}).get("holderIdentity"), "apply's own Lease not released"


def test_apply_suspend_in_the_config_file_stops_apply_at_the_next_cycle(world: World) -> None:
    with RunProcess(world.config, keys={"interval": "1s"}) as run:
        wait_for(lambda: run.get("/readyz")[0] == 200, 30, "readiness", log=run.output)
        good = run.config.read_text()
        run.config.write_text(good + "cluster: [not, a, name]\n")  # broken: the last good config goes on
        wait_for(lambda: "going on with the last good config" in run.output(), 10, "the bad config said")
        assert run.process.poll() is None
        run.config.write_text(
            good.replace("apply: {drainTimeout: 20s", "apply: {suspend: true, drainTimeout: 20s")
        )
        pending(world, "big-1")
        wait_for(
            lambda: (run.metric("asg_reconciler_errors_total", stage="apply", kind="suspended") or 0) >= 1,
            15,
            "apply suspended by the config",
            log=run.output,
        )
        assert world.desired() == 2
        run.stop()


def test_a_failing_apply_backs_off_although_ls_remote_keeps_answering(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by the new-user trial: every poll of main looked like a new commit, so apply retried a
    dead AWS endpoint every few seconds instead of backing off."""
    assert world.cli(capsys, "plan").code == 0  # main has a commit to apply
    dead = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9"}  # nothing listens there
    keys = {"interval": "1s", "maxBackoff": "4s"}
    with RunProcess(world.config, stages="apply", keys=keys, env=dead) as run:
        wait_for(
            lambda: (run.metric("asg_reconciler_errors_total", stage="apply", kind="aws") or 0) >= 1,
            30,
            "a failed apply cycle",
            log=run.output,
        )
        time.sleep(8)  # backing off 1s, 2s, 4s, 4s: a handful of cycles, not one per 500ms poll
        failed = run.metric("asg_reconciler_errors_total", stage="apply", kind="aws") or 0
        assert failed <= 6, (failed, run.output())
        assert "backing off" in run.output()
        run.stop()
