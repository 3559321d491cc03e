"""Discovery that finds nothing (issue 20): one-shot `plan` and `status` exit 2 naming where they
looked (a wrong region is the common cause), writing nothing; `run` goes on, says it once in the
log and in `asg_reconciler_node_groups`, and says so again when groups appear."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.apply_world import World
from tests.support.run_process import RunProcess, wait_for

TAGS = "asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod"


def branches(world: World) -> str:
    return subprocess.run(
        ["git", "branch", "--list"], cwd=world.remote, capture_output=True, text=True, check=True
    ).stdout


def test_plan_and_status_in_the_wrong_region_exit_2_and_say_where_they_looked(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world.config.write_text(world.config.read_text().replace("region: us-east-1", "region: us-west-2"))
    for args in (("plan",), ("plan", "--dry-run"), ("status",), ("status", "--output", "json")):
        result = world.cli(capsys, *args)
        assert result.code == 2, (args, result.out, result.err)
        assert result.out == ""
        (line,) = result.err.strip().splitlines()  # one line, no traceback
        assert "asg-reconciler.yaml: nodeGroups: no node group found" in line
        assert "region us-west-2 (region: in the config)" in line
        assert "k8s.io/cluster-autoscaler/enabled (any value) and k8s.io/cluster-autoscaler/prod" in line
    assert branches(world) == ""  # nothing written to Git


def test_run_says_when_the_count_of_node_groups_changes(world: World) -> None:
    world.config.write_text(world.config.read_text().replace(TAGS, TAGS.replace("/prod", "/staging")))
    with RunProcess(world.config, stages="plan", keys={"interval": "500ms"}) as run:
        wait_for(lambda: "no node group found" in run.output(), 30, "where it looked", log=run.output)
        assert run.metric("asg_reconciler_node_groups") == 0.0
        assert "region us-east-1 (region: in the config)" in run.output()
        assert "k8s.io/cluster-autoscaler/staging (any value)" in run.output()
        cycles = run.metric("asg_reconciler_cycles_total", stage="plan") or 0
        wait_for(
            lambda: (run.metric("asg_reconciler_cycles_total", stage="plan") or 0) >= cycles + 3, 20, "cycles"
        )
        assert run.output().count("no node group found") == 1  # said when it changes, not every cycle
        run.config.write_text(
            run.config.read_text().replace("/staging", "/prod")
        )  # fixed: read at the next cycle
        wait_for(
            lambda: run.metric("asg_reconciler_node_groups") == 1.0, 20, "the group found", log=run.output
        )
        assert "node groups: 1 found (was 0): general" in run.output()
        assert run.stop() == 0


def test_an_empty_node_groups_says_so_not_the_region(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config with no nodeGroups looked for nothing: the hint is to fill nodeGroups, not the region."""
    text = world.config.read_text()
    world.config.write_text(text.replace("nodeGroups:\n  autoDiscovery:\n    - " + TAGS + "\n", ""))
    for args in (("plan", "--dry-run"), ("status",)):
        result = world.cli(capsys, *args)
        assert result.code == 2, (args, result.out, result.err)
        (line,) = result.err.strip().splitlines()
        assert "nodeGroups: no node group found: nodeGroups is empty" in line, line
        assert "nodeGroups.autoDiscovery" in line and "nodeGroups.explicit" in line
        assert "region" not in line, line
    assert branches(world) == ""
