"""The 20 x 2Gi burst of the OpenShift-on-AWS autoscaling guide, against the real scheduler: what the
plan adds is what the scheduler needs: `apply` raises the ASG, the new instances register as Nodes,
the real kube-scheduler binds every pod, and the next plan wants nothing more."""

from __future__ import annotations

import pytest

from reconciler.gitops.manifest import parse_manifest
from tests.support import k8s_objects as k
from tests.support.git import git
from tests.support.real_cluster import as_new
from tests.support.real_world import MAIN_PATH, RealWorld

pytestmark = pytest.mark.xdist_group("realcluster")  # one control plane, one worker (conftest.py)


def unschedulable(pod: object) -> bool:
    conditions = getattr(pod.status, "conditions", None) or []  # type: ignore[attr-defined]
    return any(
        c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable" for c in conditions
    )


def test_twenty_2gi_pods_get_exactly_the_nodes_the_real_scheduler_needs(
    real_world: RealWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    world, cluster = real_world, real_world.cluster
    world.group("general", "m5.large", desired=2)  # 2 vCPU, 8 GiB: 3 x 2Gi fit one node's allocatable
    cluster.apply(as_new(k.deployment("web", "apps", replicas=20, requests={"memory": "2Gi", "cpu": "100m"})))

    # the real scheduler fills the two nodes and marks the rest Unschedulable
    cluster.wait(
        lambda: (
            len([p for p in cluster.pods("apps") if p.spec.node_name]) == 6
            and len([p for p in cluster.pods("apps") if unschedulable(p)]) == 14
        ),
        90,
        "6 pods bound to the two nodes and 14 marked Unschedulable by kube-scheduler",
    )

    planned = world.cli(capsys, "plan")
    assert planned.code == 0, planned.out + planned.err
    committed = parse_manifest(git("show", f"main:{MAIN_PATH}", cwd=world.remote), "main").group("general")
    assert committed is not None and committed.desired == 7, planned.out  # 14 pending / 3 a node: 5 more
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert world.desired("general") == 7, applied.out

    nodes = world.wait_nodes("general", 7)
    cluster.wait(
        lambda: (
            all(p.status.phase == "Running" for p in cluster.pods("apps")) and len(cluster.pods("apps")) == 20
        ),
        120,
        "all 20 pods bound by kube-scheduler and running",
    )
    placed = {n.metadata.name: 0 for n in nodes}
    for pod in cluster.pods("apps"):
        placed[pod.spec.node_name] += 1
    assert sum(placed.values()) == 20
    assert all(count > 0 for count in placed.values()), placed  # no new node stayed empty

    again = world.plan_json(capsys)
    (general,) = again["nodeGroups"]
    assert (general["current"], general["desired"], general["action"]) == (7, 7, "none"), again
    assert again["pendingPods"] == []
