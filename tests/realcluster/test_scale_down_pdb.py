"""A reviewed scale-down of an under-used node whose Deployment has a PodDisruptionBudget, against
the real control plane: the plan proposes the node's instance by name, Alice approves with her
signature, and `apply` drains it through the real eviction subresource. The real disruption
controller keeps the budget, so the second and third evictions get 429 until the ReplicaSet
controller's replacement is scheduled elsewhere by kube-scheduler and running; then the instance is
terminated and its Node goes. The budget holds at every moment."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.gitops.manifest import parse_manifest
from tests.support import k8s_objects as k
from tests.support.git import git
from tests.support.real_cluster import as_new
from tests.support.real_world import MAIN_PATH, PROPOSAL, RealWorld


def healthy(pods: list[Any], app: str) -> int:
    """Pods the disruption controller counts as healthy: Ready and not being deleted."""
    return sum(
        1
        for p in pods
        if (p.metadata.labels or {}).get("app") == app
        and p.metadata.deletion_timestamp is None
        and any(c.type == "Ready" and c.status == "True" for c in (p.status.conditions or []))
    )


def test_reviewed_scale_down_drains_through_the_real_budget(
    real_world: RealWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    world, cluster = real_world, real_world.cluster
    world.group("general", "m5.large", desired=2)
    busy, idle = sorted(n.metadata.name for n in world.nodes_of("general"))
    idle_instance = next(
        n.spec.provider_id.rsplit("/", 1)[-1] for n in world.nodes_of("general") if n.metadata.name == idle
    )

    # web's three replicas all land on `idle` (the other node cordoned meanwhile), then `busy` gets a
    # 1200m pod of its own: 62% used, kept; `idle` at 16% is the one to remove
    cluster.kubectl("cordon", busy)
    cluster.apply(
        as_new(k.deployment("web", "shop", replicas=3, requests={"cpu": "100m", "memory": "128Mi"})),
        as_new(k.pdb("web", "shop", match_labels={"app": "web"}, max_unavailable=1)),
    )
    cluster.wait(
        lambda: healthy(cluster.pods("shop"), "web") == 3, 90, "web's 3 pods running on the idle node"
    )
    assert {p.spec.node_name for p in cluster.pods("shop")} == {idle}
    cluster.kubectl("uncordon", busy)
    big = as_new(k.deployment("big", "shop", replicas=1, requests={"cpu": "1200m"}))
    big["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": busy}
    cluster.apply(big)
    cluster.wait(lambda: healthy(cluster.pods("shop"), "big") == 1, 90, "big running on the busy node")
    cluster.wait(
        lambda: (
            cluster.kubectl("get", "pdb", "web", "-n", "shop", "-o", "jsonpath={.status.disruptionsAllowed}")
            == "1"
        ),
        60,
        "the disruption controller to allow one disruption of web",
    )

    planned = world.cli(capsys, "plan")
    assert planned.code == 0, planned.out + planned.err
    proposal = parse_manifest(git("show", f"{PROPOSAL}:{MAIN_PATH}", cwd=world.remote), PROPOSAL).group(
        "general"
    )
    assert proposal is not None and proposal.removal_ids == (idle_instance,), planned.out

    approved = world.cli(capsys, "approve", "scale-down")
    assert approved.code == 0, approved.out + approved.err

    lowest: list[int] = []
    world.simulator.observers.append(lambda pods: lowest.append(healthy(pods, "web")))
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert world.desired("general") == 1
    assert idle_instance not in world.in_service("general")
    world.wait_nodes("general", 1)
    assert [n.metadata.name for n in cluster.nodes()] == [busy]
    cluster.wait(
        lambda: (
            healthy(cluster.pods("shop"), "web") == 3
            and {p.spec.node_name for p in cluster.pods("shop")} == {busy}
        ),
        90,
        "web's 3 replicas running again on the remaining node",
    )
    assert lowest and min(lowest) >= 2, lowest  # maxUnavailable 1 of 3: never fewer than 2 healthy
    print(applied.out, applied.err)
