"""The split deployment's wake-up hint (issue 20): the plan-stage process writes the commit it pushed
to main into the status ConfigMap, the apply-stage process watches that ConfigMap and asks
`git ls-remote` at once instead of at its next poll. The hint only wakes: a forged one costs an
ls-remote, never an apply cycle."""

from __future__ import annotations

import time

import pytest

from reconciler.kube.status_configmap import PUSHED_KEY, STATUS_CONFIGMAP
from tests.support.apply_world import World
from tests.support.git import git
from tests.support.run_process import RunProcess, wait_for
from tests.support.run_world import pending

pytestmark = pytest.mark.xdist_group("timing")

SLOW = {"interval": "60s", "applyPollInterval": "60s"}  # neither the interval nor the poll in time


def main(world: World) -> str:
    return git("rev-parse", "main", cwd=world.remote).strip()


def hint(world: World) -> str:
    found = world.kube.get_object("ConfigMap", "kube-system", STATUS_CONFIGMAP) or {}
    return str((found.get("data") or {}).get(PUSHED_KEY) or "")


def test_apply_acts_on_the_plan_stages_push_at_once_not_at_its_next_poll(world: World) -> None:
    with (
        RunProcess(world.config, stages="plan", keys=SLOW) as plan,
        RunProcess(world.config, stages="apply", keys=SLOW) as apply,
    ):
        wait_for(lambda: plan.get("/readyz")[0] == 200, 30, "plan ready", log=plan.output)
        wait_for(lambda: apply.get("/readyz")[0] == 200, 30, "apply ready", log=apply.output)
        wait_for(lambda: hint(world) == main(world), 30, "the first push's hint", log=plan.output)
        wait_for(
            lambda: (apply.metric("asg_reconciler_cycles_total", stage="apply") or 0) >= 1,
            30,
            "the first apply",
            log=apply.output,
        )
        started = time.monotonic()
        pending(world, "big-1")
        wait_for(lambda: world.desired() == 3, 15, "the scale-up", log=lambda: plan.output() + apply.output())
        took = time.monotonic() - started
        assert took < 10, took  # the poll and the interval are a minute: the hint woke apply
        assert hint(world) == main(world)
        assert "woken by the plan stage's push" in apply.output()
        assert plan.stop() == 0 and apply.stop() == 0


def test_a_forged_hint_costs_an_ls_remote_never_an_apply_cycle(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.cli(capsys, "plan").code == 0  # main has a commit, applied by the first cycle
    with RunProcess(world.config, stages="apply", keys=SLOW) as apply:
        wait_for(
            lambda: (apply.metric("asg_reconciler_cycles_total", stage="apply") or 0) >= 1,
            30,
            "the first apply",
            log=apply.output,
        )
        assert not apply.metric("asg_reconciler_errors_total", stage="apply", kind="config")
        before = apply.metric("asg_reconciler_cycles_total", stage="apply")
        polls = apply.output().count("apply: main is at")
        for n in range(3):  # someone with patch rights on the ConfigMap writes made-up commits
            found = world.kube.get_object("ConfigMap", "kube-system", STATUS_CONFIGMAP)
            assert found is not None  # apply's own status is there
            world.kube.put({**found, "data": {**found.get("data", {}), PUSHED_KEY: f"{n}" * 40}})
            time.sleep(0.3)
        wait_for(
            lambda: apply.output().count("apply: main is at") > polls,
            10,
            "an early ls-remote",
            log=apply.output,
        )
        time.sleep(1.0)
        assert apply.metric("asg_reconciler_cycles_total", stage="apply") == before, apply.output()
        assert apply.output().count("apply: main is at") <= polls + 3  # at most one per hint, paced
        assert apply.stop() == 0
