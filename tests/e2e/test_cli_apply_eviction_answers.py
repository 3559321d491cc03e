"""`apply` meets the answers a real API server gives evictions (issue 19): the fake's disruption and
ReplicaSet controllers run, a PodDisruptionBudget covers the pods, and the drain retries until
apply.drainTimeout as cluster-autoscaler does; a drain that cannot finish gives its node back and
terminates nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import k8s_objects as k
from tests.support.apply_world import World, approved, untouched
from tests.support.git import needs_ssh_keygen

pytestmark = needs_ssh_keygen


def covered(world: World) -> None:
    """Budget `web` over every pod of shop (min 1 available), status kept by the disruption
    controller, and the ReplicaSet that replaces an evicted pod."""
    world.kube.put(k.replicaset("web", "shop", replicas=2, owner_kind=None))
    world.kube.put(k.pdb("web", "shop", selector={}, min_available=1))
    world.kube.run_controllers(replicasets=True)
    pdb = world.kube.get_object("PodDisruptionBudget", "shop", "web")
    assert pdb is not None and pdb["status"]["disruptionsAllowed"] == 1


def test_a_drain_that_meets_two_conflicts_then_201_terminates_the_instance(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    approved(world, capsys)
    covered(world)
    answers = iter([409, 409])  # the server's PDB status write conflicted, after its own retries
    world.kube.eviction_fault = lambda namespace, pod: next(answers, None)
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert world.desired() == 1 and world.b_id not in world.in_service()
    assert world.kube.get_object("Pod", "shop", "web-b") is None
    replacement = [p for p in world.kube.objects("Pod", "shop") if p["metadata"]["name"] not in ("web-a",)]
    assert len(replacement) == 1 and replacement[0]["status"]["phase"] == "Pending"  # its ReplicaSet's
    assert sum(1 for r in world.kube.requests if r.path.endswith("/pods/web-b/eviction")) == 3


def test_a_budget_that_keeps_refusing_gives_the_node_back_and_terminates_nothing(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """The re-check found one disruption allowed; by the eviction another drain has taken it (the
    budget now wants both pods): 429 until apply.drainTimeout, then the node serves again."""
    approved(world, capsys)
    covered(world)
    world.config.write_text(world.config.read_text().replace("drainTimeout: 20s", "drainTimeout: 1s"))

    def budget_taken_first(method: str, path: str, query: dict[str, str]) -> Any:
        pdb = world.kube.get_object("PodDisruptionBudget", "shop", "web")
        if path.endswith("/eviction") and pdb is not None and pdb["spec"]["minAvailable"] == 1:
            pdb["spec"]["minAvailable"] = 2
            pdb["metadata"]["generation"] += 1
            world.kube.put(pdb)
        return None

    world.kube.fault = budget_taken_first
    failed = world.cli(capsys, "apply")
    assert failed.code == 1, failed.out + failed.err
    assert (
        f"{world.b_id}: drain of node-b did not finish: 1 pod still on the node after 1s: shop/web-b "
        "(pdb shop/web allows no disruption: needs 2 healthy pods, has 2)" in failed.out
    )
    assert "node node-b given back" in failed.out
    untouched(world)  # not terminated, the pod still there, the taint gone
    record = world.note()["records"][-1]
    assert record["complete"] is False and record["groups"][0]["action"] == "failed"
