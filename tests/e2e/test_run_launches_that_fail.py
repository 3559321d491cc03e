"""`run` when AWS cannot launch a raise (issue 29): the loop raises the group once, AWS launches
nothing, and from the next cycle on the group is backed off and says so where `run` speaks — a
FailedToScaleUpGroup Warning on the status ConfigMap (as cluster-autoscaler records it), CA's
backoffInfo in that ConfigMap, the launch metrics — while its desired is neither raised again nor
lowered."""

from __future__ import annotations

import signal

import pytest

from tests.support.apply_world import World
from tests.support.failing_launches import FailingLaunches
from tests.support.run_process import RunProcess, wait_for
from tests.support.run_world import pending

pytestmark = pytest.mark.xdist_group("timing")


def failed_to_scale_up(world: World) -> list[dict[str, object]]:
    return [
        e for e in world.kube.objects("Event", "kube-system") if e.get("reason") == "FailedToScaleUpGroup"
    ]


def test_run_backs_the_group_off_and_says_so_on_the_status_configmap(
    world: World, failing_launches: FailingLaunches
) -> None:
    failing_launches.fail("general")
    with RunProcess(world.config, keys={"interval": "2s"}) as run:
        wait_for(lambda: run.get("/readyz")[0] == 200, 30, "readiness", log=run.output)
        pending(world, "big-1")
        wait_for(lambda: world.desired() == 3, 20, "the raise", log=run.output)
        assert failing_launches.activities["general"], "AWS was never asked to launch"
        wait_for(lambda: failed_to_scale_up(world), 30, "the FailedToScaleUpGroup event", log=run.output)
        (event,) = failed_to_scale_up(world)
        assert event["type"] == "Warning"
        involved = event["involvedObject"]
        assert isinstance(involved, dict)
        assert (involved["kind"], involved["name"], involved["namespace"]) == (
            "ConfigMap",
            "asg-reconciler-status",
            "kube-system",
        )
        assert str(event["message"]).startswith(
            "Scale-up failed for group general: AWS could not launch 1 instance(s): "
            "InsufficientInstanceCapacity (OutOfResources)"
        )
        status = world.kube.get_object("ConfigMap", "kube-system", "asg-reconciler-status")
        assert status is not None
        text = status["data"]["status"]
        assert "backoffInfo" in text and "InsufficientInstanceCapacity" in text, text
        assert run.metric("asg_reconciler_node_group_launch_failed_nodes", node_group="general") == 1.0
        assert run.metric("asg_reconciler_node_group_backoff", node_group="general") == 1.0
        counted = run.metric(
            "asg_reconciler_failed_launches_total", node_group="general", error_class="OutOfResources"
        )
        assert counted is not None and counted >= 1
        cycles = run.metric("asg_reconciler_cycles_total", stage="plan") or 0
        wait_for(  # two more plan cycles, with the pod still pending
            lambda: (run.metric("asg_reconciler_cycles_total", stage="plan") or 0) >= cycles + 2,
            20,
            "more plan cycles",
            log=run.output,
        )
        assert world.desired() == 3  # never raised again, never lowered
        assert run.stop(signal.SIGTERM) == 0, run.output()
    assert "Traceback" not in run.output()
