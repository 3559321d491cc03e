"""A dump printed by the real kubectl from the real API server (the command the README gives) plans
exactly as the live read of the same cluster: pending pods the real scheduler marked Unschedulable,
a PDB with the real disruption controller's status, pods on tainted, labelled nodes of two groups."""

from __future__ import annotations

import json

import pytest

from tests.support import k8s_objects as k
from tests.support.real_cluster import as_new
from tests.support.real_world import RealWorld, healthy

pytestmark = pytest.mark.xdist_group("realcluster")  # one control plane, one worker (conftest.py)

DUMP = ("get", "nodes,pods,pdb,daemonsets,pv,pvc,namespaces", "-A", "-o", "json")


def test_a_kubectl_dump_of_the_real_server_plans_as_the_live_read(
    real_world: RealWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    world, cluster = real_world, real_world.cluster
    world.group("general", "m5.large", desired=2)
    world.group(
        "gpu",
        "t3.large",
        desired=1,
        tags={
            "k8s.io/cluster-autoscaler/node-template/label/workload": "batch",
            "k8s.io/cluster-autoscaler/node-template/taint/dedicated": "batch:NoSchedule",
        },
    )
    batch = as_new(k.deployment("batch", "jobs", replicas=4, requests={"cpu": "900m"}))
    batch["spec"]["template"]["spec"]["nodeSelector"] = {"workload": "batch"}
    batch["spec"]["template"]["spec"]["tolerations"] = [
        {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}
    ]
    cluster.apply(
        as_new(k.deployment("web", "shop", replicas=8, requests={"cpu": "500m", "memory": "1Gi"})),
        as_new(k.pdb("web", "shop", match_labels={"app": "web"}, min_available=6)),
        batch,
    )
    cluster.wait(
        lambda: healthy(cluster.pods("shop"), "web") + healthy(cluster.pods("jobs"), "batch") >= 8,
        90,
        "the scheduler to place what fits",
    )
    cluster.wait(
        lambda: sum(1 for p in cluster.pods() if not p.spec.node_name) == len(cluster.pods()) - 8,
        60,
        "the rest pending",
    )
    snapshot = world.tmp / "dump.json"
    snapshot.write_text(cluster.kubectl(*DUMP))

    live = world.cli(capsys, "plan", "--dry-run", "--output", "json")
    dumped = world.cli(capsys, "plan", "--dry-run", "--snapshot", str(snapshot), "--output", "json")
    assert live.code == 0 and dumped.code == 0, live.err + dumped.err
    live_plan, dump_plan = json.loads(live.out), json.loads(dumped.out)
    assert live_plan["pendingPods"], live_plan  # something to plan
    assert dump_plan == live_plan
