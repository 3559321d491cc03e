"""A populated fake cluster for the live-read and cache tests, and the API's 403 Status."""

from __future__ import annotations

from reconciler.demo.kube_api import FakeKubeAPI
from tests.support import k8s_objects as k

FORBIDDEN = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403}


def populate(api: FakeKubeAPI) -> list[dict]:  # type: ignore[type-arg]
    objects = [
        k.node("node-a", zone="us-east-1a", instance_id="i-0aaa"),
        k.node("node-b", zone="us-east-1b", instance_id="i-0bbb", taints=["dedicated=gpu:NoSchedule"]),
        k.node("node-c", ready=False, unschedulable=True, instance_id="i-0ccc"),
        k.daemonset("kube-proxy", requests={"cpu": "100m"}, tolerations=[{"operator": "Exists"}]),
        k.pdb("web", "shop", match_labels={"app": "web"}, disruptions_allowed=1),
        k.pv("pv-1", zones=["us-east-1b"], claim="shop/data-0"),
        k.pvc("data-0", "shop", volume_name="pv-1"),
        k.namespace("default"),
        k.namespace("kube-system"),
        k.namespace("shop", labels={"team": "shop", "tier": "frontend"}),
        k.namespace("batch", labels={"team": "data"}),
        k.configmap(
            "cluster-autoscaler-status",
            "kube-system",
            annotations={"cluster-autoscaler.kubernetes.io/last-updated": "2026-01-01 11:59:00 +0000 UTC"},
        ),
    ]
    for i in range(7):
        objects.append(
            k.pod(
                f"web-{i}",
                "shop",
                labels={"app": "web"},
                requests={"cpu": "250m", "memory": "256Mi"},
                node_name="node-a" if i % 2 else "node-b",
                owner_kind="ReplicaSet",
                owner_name="web-abc",
                volumes=[k.pvc_volume("data", "data-0")] if i == 0 else None,
            )
        )
    objects += [
        k.pod("pending-0", "batch", requests={"cpu": "2"}, owner_kind="Job", owner_name="j"),
        k.pod(
            "stopping-0",
            "batch",
            node_name="node-b",
            owner_kind="Job",
            owner_name="j",
            deletion_timestamp="2026-01-01T11:58:00Z",
        ),
        k.pod("done-0", "batch", node_name="node-a", phase="Succeeded"),
        k.pod("failed-0", "batch", node_name="node-a", phase="Failed"),
    ]
    for obj in objects:
        api.put(obj)
    return objects
