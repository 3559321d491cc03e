"""What apply reads from the cluster (issue 20: apply acts within a second of the push, also at
150,000 pods): pods, PDBs, DaemonSets and volumes only judge removals, so an apply whose manifest lists
none reads the nodes (its drain taints to give back) and cluster-autoscaler's presence, not every pod.
An apply with an approved removal reads everything, live, as before."""

from __future__ import annotations

import pytest

from tests.support.apply_world import World


def listed(world: World) -> set[str]:
    """The collections the fake API was asked to list since the last call (path tails)."""
    found = {r.path.rsplit("/", 1)[-1] for r in world.kube.requests if r.method == "GET"}
    world.kube.requests.clear()
    return found


def test_an_apply_without_removals_reads_no_pods_and_one_with_removals_reads_them(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.cli(capsys, "plan").code == 0  # main: the group; the scale-down is a proposal
    listed(world)
    raised = world.cli(capsys, "apply")
    assert raised.code == 0, raised.err
    seen = listed(world)
    assert "nodes" in seen  # its drain taints to give back, cluster-autoscaler's presence
    assert not seen & {"pods", "poddisruptionbudgets", "daemonsets", "persistentvolumes"}, seen

    assert world.cli(capsys, "approve", "scale-down").code == 0
    listed(world)
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert {"nodes", "pods", "poddisruptionbudgets", "daemonsets"} <= listed(world)
    assert world.desired() == 1  # drained and terminated, judged on every pod
