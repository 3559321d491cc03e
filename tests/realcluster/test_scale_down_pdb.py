"""A reviewed scale-down of an under-used node whose Deployment has a PodDisruptionBudget, against
the real control plane: the plan proposes the node's instance by name, Alice approves with her
signature, and `apply` drains it through the real eviction subresource. The real disruption
controller keeps the budget, so the second and third evictions get 429 until the ReplicaSet
controller's replacement is scheduled elsewhere by kube-scheduler and running; then the instance is
terminated and its Node goes. The budget holds at every moment."""

from __future__ import annotations

import pytest

from reconciler.gitops.manifest import parse_manifest
from tests.support.git import git
from tests.support.real_world import (
    MAIN_PATH,
    PROPOSAL,
    RealWorld,
    evictions,
    healthy,
    under_used_node_under_a_pdb,
)

pytestmark = pytest.mark.xdist_group("realcluster")  # one control plane, one worker (conftest.py)


def test_reviewed_scale_down_drains_through_the_real_budget(
    real_world: RealWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    world, cluster = real_world, real_world.cluster
    busy, _, idle_instance = under_used_node_under_a_pdb(world)

    planned = world.cli(capsys, "plan")
    assert planned.code == 0, planned.out + planned.err
    proposal = parse_manifest(git("show", f"{PROPOSAL}:{MAIN_PATH}", cwd=world.remote), PROPOSAL)
    assert proposal.group("general").removal_ids == (idle_instance,), planned.out  # type: ignore[union-attr]

    approved = world.cli(capsys, "approve", "scale-down")
    assert approved.code == 0, approved.out + approved.err

    web = {p.metadata.name for p in cluster.pods("shop") if p.metadata.name.startswith("web-")}
    lowest: list[int] = []
    world.simulator.observers.append(lambda pods: lowest.append(healthy(pods, "web")))
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert world.desired("general") == 1
    assert idle_instance not in world.in_service("general")
    cluster.wait(
        lambda: [n.metadata.name for n in cluster.nodes()] == [busy], 30, "the removed node's Node gone"
    )
    cluster.wait(
        lambda: (
            healthy(cluster.pods("shop"), "web") == 3
            and {p.spec.node_name for p in cluster.pods("shop")} == {busy}
        ),
        90,
        "web's 3 replicas running again on the remaining node",
    )
    assert lowest and min(lowest) >= 2, lowest  # maxUnavailable 1 of 3: never fewer than 2 healthy
    answers = evictions(world, "shop", web)
    assert answers.count(201) == 3, answers  # each of the three evicted once
    assert 429 in answers, answers  # the real budget said "not now" while a replacement was starting
