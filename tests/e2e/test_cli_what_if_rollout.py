"""A changed pod template of a running Deployment or StatefulSet replaces its pods: what-if plans the
cluster after the rollout (the old pods gone, every wanted pod at the new requests) and says so.
Raising the requests of a running Deployment 18x used to answer "no new node": its running pods
were counted as they run, at the old requests. Found by the attack on issue 28."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli_what_if import cluster, config, group, snapshot, what_if
from tests.support import k8s_objects as k
from tests.support.aws import MotoAws
from tests.support.what_if_world import deployment, manifest, pod_template, write_yaml


def running(
    name: str, count: int, memory: str, owner_kind: str, owner: str, **labels: str
) -> list[dict[str, Any]]:
    return [
        k.pod(
            f"{owner}-{n}" if owner_kind == "ReplicaSet" else f"{name}-{n}",
            "apps",
            node_name=f"n{1 + n % 2}",
            requests={"memory": memory},
            labels={"app": name, **labels},
            owner_kind=owner_kind,
            owner_name=owner,
        )
        for n in range(count)
    ]


def test_raising_a_running_deployments_requests_18x_needs_a_node(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """3 pods of 300Mi run on two m5.large (5.9Gi free each beside the 1Gi pods); at 5400Mi only
    one fits each node after the old ones go: the third needs a new node."""
    objects = cluster(aws) + running(
        "web", 3, "300Mi", "ReplicaSet", "web-5d8f7c", **{"pod-template-hash": "5d8f7c"}
    )
    cfg, snap = config(tmp_path), snapshot(tmp_path, objects)

    same = what_if(
        capsys, cfg, snap, str(write_yaml(tmp_path / "same.yaml", deployment("web", 3, {"memory": "300Mi"})))
    )
    assert same["add"] == 0 and same["workloads"][0]["added"] == 0  # nothing changes: nothing rolls

    raised = what_if(
        capsys, cfg, snap, str(write_yaml(tmp_path / "up.yaml", deployment("web", 3, {"memory": "5400Mi"})))
    )
    (web,) = raised["workloads"]
    assert (web["wanted"], web["running"], web["added"]) == (3, 3, 3)
    assert web["note"].startswith(
        "rollout: the template changes its pods' requests (memory 300Mi -> memory 5.3Gi), so its 3 running "
        "pod(s) are replaced by 3 at the new requests"
    )
    general = group(raised, "general")
    assert general["add"] == 1 and (general["pods"], general["podsOnExistingNodes"]) == (1, 2)


def test_a_statefulset_rolls_its_ordinals_unless_on_delete(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = cluster(aws) + running("db", 3, "300Mi", "StatefulSet", "db")
    cfg, snap = config(tmp_path), snapshot(tmp_path, objects)

    def db(**spec: Any) -> dict[str, Any]:
        return manifest(
            "StatefulSet",
            "db",
            replicas=3,
            selector={"matchLabels": {"app": "db"}},
            template=pod_template("db", {"memory": "5400Mi"}),
            **spec,
        )

    rolled = what_if(capsys, cfg, snap, str(write_yaml(tmp_path / "db.yaml", db())))
    assert {p["pod"] for p in rolled["pods"]} == {"apps/db-0", "apps/db-1", "apps/db-2"}
    assert rolled["add"] == 1

    kept = what_if(
        capsys, cfg, snap, str(write_yaml(tmp_path / "od.yaml", db(updateStrategy={"type": "OnDelete"})))
    )
    assert kept["add"] == 0 and kept["workloads"][0]["added"] == 0  # OnDelete: running pods stay as they are


def test_a_running_daemonset_with_larger_requests_is_replaced_node_by_node(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The agent runs at 100m on both nodes; at 1500m it no longer fits n2 (beside its 1-CPU pod): that
    node's pod has nowhere to go, and new nodes start with the larger agent."""
    objects = cluster(aws)
    objects.append(k.daemonset("agent", "kube-system", requests={"cpu": "100m"}))
    objects += [
        k.pod(
            f"agent-{n}",
            "kube-system",
            node_name=n,
            requests={"cpu": "100m"},
            owner_kind="DaemonSet",
            owner_name="agent",
        )
        for n in ("n1", "n2")
    ]
    objects.append(k.pod("hog", "apps", node_name="n2", requests={"cpu": "1"}, owner_kind="ReplicaSet"))
    cfg, snap = config(tmp_path), snapshot(tmp_path, objects)

    def agent(cpu: str) -> dict[str, Any]:
        return manifest(
            "DaemonSet",
            "agent",
            "kube-system",
            selector={"matchLabels": {"app": "agent"}},
            template=pod_template("agent", {"cpu": cpu}),
        )

    same = what_if(capsys, cfg, snap, str(write_yaml(tmp_path / "same.yaml", agent("100m"))))
    assert same["pods"] == [] and "unchanged" in same["workloads"][0]["note"]

    larger = what_if(capsys, cfg, snap, str(write_yaml(tmp_path / "big.yaml", agent("1500m"))))
    pods = {p["pod"]: p for p in larger["pods"]}
    assert pods["kube-system/agent-n1"]["nodeGroup"] == "general"
    assert pods["kube-system/agent-n2"]["nodeGroup"] is None
    assert "insufficient cpu" in pods["kube-system/agent-n2"]["reason"]
    assert larger["workloads"][0]["note"].startswith(
        "rollout: the template changes its pods' requests (cpu 100m -> cpu 1500m)"
    )
