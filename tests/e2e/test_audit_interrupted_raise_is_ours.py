"""Ctrl-C (a real SIGINT to the `apply` process) at the worst moment of a raise: AWS took the
SetDesiredCapacity, its answer has not come back. The run waits for the answer, records what AWS
did, exits 130; the next apply finds no drift and `history` blames nobody else for our own raise
(issue 28: the next apply recorded "drift: desired raised outside the tool from 1 to 2")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.support import k8s_objects as k
from tests.support.apply_steps import show
from tests.support.apply_world import World, pod
from tests.support.aws_proxy import slow_answers
from tests.support.terminal import from_a_terminal


def apply_process(world: World, endpoint: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "reconciler", "apply", "--config", str(world.config)],
        env={**os.environ, "AWS_ENDPOINT_URL": endpoint, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=from_a_terminal,
    )


def raise_planned(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.kube.put(pod("web-b2", "node-b", "1500m"))  # node b is busy: no scale-down
    world.kube.put(k.pod("job-0", "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="j"))
    planned = world.cli(capsys, "plan")
    assert planned.code == 0, show(planned)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_while_aws_answers_a_raise_records_the_raise_as_ours(
    world: World, capsys: pytest.CaptureFixture[str], signum: int
) -> None:
    raise_planned(world, capsys)
    with slow_answers(world.aws.endpoint, "SetDesiredCapacity", delay=3.0) as proxy:
        process = apply_process(world, proxy.url)
        try:
            assert proxy.held.wait(120), process.communicate(timeout=30)
            assert world.desired() == 3  # AWS took it; the answer is on its way
            process.send_signal(signum)
            out, err = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 130, f"{out}\n{err}"
    assert "Traceback" not in err, err
    assert "finishing the AWS call under way" in err, err
    (record,) = [r for r in world.note()["records"] if r.get("phase", "done") == "done"][-1:]
    assert record["complete"] is False
    (group,) = record["groups"]
    assert (group["action"], group["desiredBefore"], group["desiredAfter"]) == ("scale-up", 2, 3)

    again = world.cli(capsys, "apply")  # the next run: nothing to do, nothing blamed
    assert again.code == 0, show(again)
    assert "drift" not in again.out, show(again)
    history = world.cli(capsys, "history", "--output", "json")
    assert history.code == 0, show(history)
    assert not [e for e in json.loads(history.out) if "outside the tool" in e["reason"]], history.out


def test_a_second_interrupt_inside_the_call_leaves_an_intent_the_next_run_resolves(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    raise_planned(world, capsys)
    with slow_answers(world.aws.endpoint, "SetDesiredCapacity", delay=30.0) as proxy:
        process = apply_process(world, proxy.url)
        try:
            assert proxy.held.wait(120), process.communicate(timeout=30)
            process.send_signal(signal.SIGINT)
            assert process.stderr is not None
            for line in process.stderr:  # the first one waits for the answer: said, then a second
                if "finishing the AWS call under way" in line:
                    break
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 130, f"{out}\n{err}"
    assert "Traceback" not in err, err
    last = world.note()["records"][-1]
    assert last["phase"] == "intent" and last["groups"][0]["desiredAfter"] == 3, last
    assert world.desired() == 3  # AWS took it after all

    again = world.cli(capsys, "apply")
    assert again.code == 0, show(again)
    assert "drift" not in again.out, show(again)
    status = world.cli(capsys, "status", "--output", "json")
    (group,) = json.loads(status.out)["nodeGroups"]
    assert not [w for w in group["warnings"] if "drift" in w], group["warnings"]
