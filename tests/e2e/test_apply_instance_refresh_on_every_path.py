"""Review of issue 12 (the AWS read side asks less): apply still never acts on a group under an
instance refresh now that the check is asked only for groups it is about to change, on every path
that changes a group (a committed increase, a drift restore, dry run or not), and apply never acts on
descriptions the plan stage's reusing reader holds."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reconciler.aws.reader import AwsReader
from reconciler.config.settings import load_config
from reconciler.runtime.plan_stage import plan_once
from reconciler.runtime.world import cluster_view, read_cluster
from tests.support import k8s_objects as k
from tests.support.apply_world import World, pod
from tests.support.git import needs_ssh_keygen
from tests.support.refresh_world import refresh_under_way

pytestmark = needs_ssh_keygen


def scale_up_committed(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    """A pending pod: plan commits general 2 -> 3 to main."""
    world.kube.put(pod("web-b2", "node-b", "1500m"))
    world.kube.put(k.pod("job-0", "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="j"))
    planned = world.cli(capsys, "plan")
    assert planned.code == 0, planned.err
    assert "2 -> 3" in planned.out, planned.out


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_committed_increase_is_not_applied_during_an_instance_refresh(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, dry_run: bool
) -> None:
    scale_up_committed(world, capsys)
    asked = refresh_under_way(monkeypatch)
    result = world.cli(capsys, "apply", *(["--dry-run"] if dry_run else []))
    assert result.code == 3, result.out + result.err
    assert "an instance refresh is in progress" in result.out
    assert "would raise" not in result.out and "raised desired" not in result.out
    assert asked  # asked of AWS, right before the change
    assert world.desired() == 2


def test_a_drift_restore_is_not_applied_during_an_instance_refresh(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    world.config.write_text(world.config.read_text().replace("apply: {", "apply: {drift: restore, "))
    scale_up_committed(world, capsys)
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert world.desired() == 3
    # lowered by hand to 2 (below what apply left): restore would raise it back to 3
    world.aws.autoscaling.set_desired_capacity(AutoScalingGroupName="general", DesiredCapacity=2)
    refresh_under_way(monkeypatch)
    result = world.cli(capsys, "apply")
    assert result.code == 3, result.out + result.err
    assert "an instance refresh is in progress" in result.out
    assert world.desired() == 2


def test_apply_reads_aws_afresh_whatever_the_plan_stage_holds(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """`run` with both stages: the plan stage's reader keeps descriptions for aws.refreshInterval; an
    apply in the same process reads AWS as it is (here: desired raised by hand after the plan read)."""
    world.kube.put(pod("web-b2", "node-b", "1500m"))  # no scale-down wanted
    config = load_config(world.config)
    reader = AwsReader(config, reuse=True)
    plan_once(config, None, datetime.now(UTC), dry_run=False, reader=reader)
    world.aws.autoscaling.set_desired_capacity(AutoScalingGroupName="general", DesiredCapacity=3)
    view = cluster_view(read_cluster(config, None, datetime.now(UTC)))  # the cluster as the plan saw it
    held = reader.node_groups(config, view)
    assert held[0].desired == 2  # the plan stage still holds the old description (reuse)
    result = world.cli(capsys, "apply")
    # apply saw 3: a desired above the manifest is refused, never acted on as 2
    assert result.code == 3, result.out + result.err
    assert "AWS desired 3 is 1 above the manifest (2)" in result.out
    assert world.desired() == 3
