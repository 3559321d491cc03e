"""A drain's surroundings for the drain tests: a clock, a node with pods, what was evicted and tainted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes.client import CoreV1Api  # noqa: F401  # a ~1 s import: paid at collection, not in a test

from reconciler.demo.kube_api import FakeKubeAPI
from reconciler.domain.model import MIRROR_POD
from tests.support import k8s_objects as k

SHA = "a" * 40


class FakeClock:
    """sleep() moves monotonic() on at once; `on_sleep` runs first (to change the world mid-drain)."""

    def __init__(self) -> None:
        self.t = 1000.0
        self.sleeps: list[float] = []
        self.on_sleep: Callable[[int], None] = lambda n: None

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.on_sleep(len(self.sleeps))
        self.t += seconds


def node_obj(kube_api: FakeKubeAPI, name: str = "n1") -> dict[str, Any]:
    obj = kube_api.get_object("Node", None, name)
    assert obj is not None
    return obj


def taints(kube_api: FakeKubeAPI, name: str = "n1") -> list[dict[str, Any]]:
    return list(node_obj(kube_api, name)["spec"].get("taints") or [])


def evictions(kube_api: FakeKubeAPI) -> list[str]:
    return [r.path.split("/")[-2] for r in kube_api.requests if r.path.endswith("/eviction")]


def put_node_with_pods(kube_api: FakeKubeAPI) -> None:
    kube_api.put(k.node("n1"))
    kube_api.put(k.node("n2"))
    kube_api.put_many(
        [
            k.pod("web-0", "shop", labels={"app": "web"}, node_name="n1", owner_kind="ReplicaSet"),
            k.pod("bare", "default", node_name="n1"),
            k.pod("proxy", "kube-system", node_name="n1", owner_kind="DaemonSet", owner_name="kube-proxy"),
            k.pod("static", "kube-system", node_name="n1", annotations={MIRROR_POD: "abc"}),
            k.pod("done", "batch", node_name="n1", phase="Succeeded", owner_kind="Job"),
            k.pod("failed", "batch", node_name="n1", phase="Failed", owner_kind="Job"),
            k.pod("elsewhere", "shop", labels={"app": "web"}, node_name="n2", owner_kind="ReplicaSet"),
        ]
    )
