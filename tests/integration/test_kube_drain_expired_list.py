"""A drain's pod list, and the list of marked nodes, survive a continue token that etcd compacted
away (410 Expired): the list starts again from the beginning, as client-go's pager does, instead of
ending the drain (and giving the node back half drained)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from kubernetes import client

from reconciler.demo.kube_api import FakeKubeAPI, Fault
from reconciler.domain.errors import OperationError
from reconciler.domain.model import OWN_DRAIN_TAINT
from reconciler.kube import drain as drain_module
from reconciler.kube.drain import NodeDrainer
from reconciler.kube.live import LIST_RESTARTS
from tests.support import k8s_objects as k

SHA = "a" * 40


@pytest.fixture(autouse=True)
def _small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drain_module, "_PAGE", 2)  # a few objects make several pages


def drainer(kube_client: client.ApiClient) -> NodeDrainer:
    return NodeDrainer(kube_client, timeout=timedelta(seconds=30), poll_seconds=1, sleep=lambda s: None)


def compacting(api: FakeKubeAPI, path: str, times: int = 1) -> Fault:
    """Before the next `times` continued pages of `path`: another object changes, etcd compacts."""
    left = [times]

    def fault(method: str, where: str, query: dict[str, str]) -> None:
        if where == path and query.get("continue") and left[0] > 0:
            left[0] -= 1
            api.put(k.configmap(f"churn-{api.resource_version}", "default"))
            api.compact()

    return fault


def pod_lists(api: FakeKubeAPI) -> int:
    return sum(1 for r in api.requests if r.path == "/api/v1/pods" and "continue" not in r.query)


def test_a_drain_whose_pod_list_expires_evicts_every_pod_once(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    kube_api.put(k.node("n1"))
    for i in range(5):
        kube_api.put(k.pod(f"web-{i}", "shop", node_name="n1", owner_kind="ReplicaSet", owner_name="web"))
    kube_api.fault = compacting(kube_api, "/api/v1/pods")
    drains = drainer(kube_client)
    drains.mark("n1", SHA)
    result = drains.drain("n1")
    assert result.complete, result.reason
    assert sorted(result.evicted) == [f"shop/web-{i}" for i in range(5)]
    evicted = [r.path for r in kube_api.requests if r.path.endswith("/eviction")]
    assert len(evicted) == 5  # each pod once: the restarted list did not hand any pod twice
    assert pod_lists(kube_api) >= 3  # the expired first look, its restart, the look that found none


def test_marked_nodes_are_found_across_an_expired_node_list(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    for i in range(5):
        kube_api.put(k.node(f"n{i}"))
    drains = drainer(kube_client)
    drains.mark("n1", SHA)
    drains.mark("n4", SHA)
    kube_api.fault = compacting(kube_api, "/api/v1/nodes")
    assert drains.marked() == {"n1": SHA, "n4": SHA}
    assert all(
        t["key"] != OWN_DRAIN_TAINT
        for t in kube_api.get_object("Node", None, "n0")["spec"].get("taints") or []
    )


def test_a_pod_list_that_keeps_expiring_fails_the_drain_in_one_line(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    kube_api.put(k.node("n1"))
    for i in range(5):
        kube_api.put(k.pod(f"web-{i}", "shop", node_name="n1", owner_kind="ReplicaSet", owner_name="web"))
    kube_api.fault = compacting(kube_api, "/api/v1/pods", times=LIST_RESTARTS + 1)
    with pytest.raises(
        OperationError, match=r"^Kubernetes API: list pods: the continue token expired 4 times"
    ):
        drainer(kube_client).drain("n1")
    assert not [r for r in kube_api.requests if r.path.endswith("/eviction")]  # nothing evicted half-listed
