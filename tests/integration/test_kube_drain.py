"""NodeDrainer against the fake API over HTTP: the mark is our taint only (never a person's cordon),
drains go through the eviction subresource and wait for PodDisruptionBudgets instead of forcing."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from kubernetes import client
from kubernetes.client import CoreV1Api  # noqa: F401  # a ~1 s import: paid at collection, not in a test

from reconciler.demo.kube_api import FakeKubeAPI
from reconciler.domain.errors import OperationError
from reconciler.domain.model import OWN_DRAIN_TAINT
from reconciler.kube.drain import DrainResult, NodeDrainer
from tests.support import k8s_objects as k
from tests.support.kube import make_api_client
from tests.support.kube_drain import SHA, FakeClock, evictions, node_obj, put_node_with_pods, taints

NEWER = "b" * 40
PERSON = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def drainer(
    kube_client: client.ApiClient, clock: FakeClock, timeout_s: float = 30, poll: float = 2
) -> NodeDrainer:
    return NodeDrainer(
        kube_client,
        timeout=timedelta(seconds=timeout_s),
        poll_seconds=poll,
        sleep=clock.sleep,
        monotonic=clock.monotonic,
    )


# ------------------------------------------------------------------------------------------- mark


def test_mark_and_unmark_touch_only_our_taint_never_a_cordon(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.put(k.node("n1", unschedulable=True, taints=[PERSON]))
    d = drainer(kube_client, clock)

    d.mark("n1", SHA)
    assert taints(kube_api) == [PERSON, {"key": OWN_DRAIN_TAINT, "value": SHA, "effect": "NoSchedule"}]
    assert node_obj(kube_api)["spec"]["unschedulable"] is True
    version = node_obj(kube_api)["metadata"]["resourceVersion"]
    d.mark("n1", SHA)  # idempotent: no write at all
    assert node_obj(kube_api)["metadata"]["resourceVersion"] == version

    d.unmark("n1")
    assert taints(kube_api) == [PERSON]
    assert node_obj(kube_api)["spec"]["unschedulable"] is True  # the person's cordon stays
    version = node_obj(kube_api)["metadata"]["resourceVersion"]
    d.unmark("n1")
    assert node_obj(kube_api)["metadata"]["resourceVersion"] == version


def test_unmark_of_the_only_taint_leaves_no_taints_and_no_cordon(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.put(k.node("n1"))
    d = drainer(kube_client, clock)
    d.mark("n1", SHA)
    d.unmark("n1")
    spec = node_obj(kube_api)["spec"]
    assert "taints" not in spec
    assert "unschedulable" not in spec  # we never cordon


def test_mark_adopts_a_mark_from_another_commit_and_marked_lists_ours(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.put(
        k.node("n1", taints=[{"key": OWN_DRAIN_TAINT, "value": SHA, "effect": "NoSchedule"}, PERSON])
    )
    kube_api.put(k.node("n2", unschedulable=True))  # a person's cordon is not our drain
    kube_api.put(k.node("n3", taints=[PERSON]))
    kube_api.put(k.node("n4", taints=[{"key": OWN_DRAIN_TAINT, "value": SHA, "effect": "NoSchedule"}]))
    d = drainer(kube_client, clock)
    assert d.marked() == {"n1": SHA, "n4": SHA}

    d.mark("n1", NEWER)
    assert taints(kube_api) == [{"key": OWN_DRAIN_TAINT, "value": NEWER, "effect": "NoSchedule"}, PERSON]
    assert d.marked() == {"n1": NEWER, "n4": SHA}


def test_mark_missing_node_is_a_clear_error_and_unmark_is_a_no_op(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    d = drainer(kube_client, clock)
    with pytest.raises(OperationError, match=r"cannot mark node gone for draining: it is not in the cluster"):
        d.mark("gone", SHA)
    d.unmark("gone")
    with pytest.raises(ValueError, match="40-hex"):
        d.mark("gone", "abc123")


def test_mark_rereads_on_conflict_and_keeps_a_taint_added_meanwhile(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.put(k.node("n1"))
    raced = []

    def someone_taints_first(method: str, path: str, query: dict[str, str]) -> None:
        if method == "PATCH" and not raced:
            raced.append(path)
            kube_api.put(k.node("n1", taints=[PERSON]))  # our read is now stale: 409
        return None

    kube_api.fault = someone_taints_first
    drainer(kube_client, clock).mark("n1", SHA)
    assert raced
    assert kube_api.calls[("PATCH", "/api/v1/nodes/n1")] == 2
    assert taints(kube_api) == [PERSON, {"key": OWN_DRAIN_TAINT, "value": SHA, "effect": "NoSchedule"}]


def test_mark_gives_up_after_repeated_conflicts(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.put(k.node("n1"))
    kube_api.fault = lambda method, path, query: (409, None) if method == "PATCH" else None
    with pytest.raises(OperationError, match=r"mark node n1: it kept changing under us \(5 conflicts\)"):
        drainer(kube_client, clock).mark("n1", SHA)


# ------------------------------------------------------------------------------------------ drain


def test_drain_evicts_movable_pods_and_leaves_daemonset_mirror_and_finished_ones(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    put_node_with_pods(kube_api)
    result = drainer(kube_client, clock).drain("n1")
    assert result == DrainResult("n1", ("default/bare", "shop/web-0"), True, "")
    left = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in kube_api.objects("Pod")}
    assert left == {
        ("kube-system", "proxy"),
        ("kube-system", "static"),
        ("batch", "done"),
        ("batch", "failed"),
        ("shop", "elsewhere"),
    }
    assert sorted(evictions(kube_api)) == ["bare", "web-0"]
    assert not [r for r in kube_api.requests if r.method == "DELETE"]  # never a direct delete
    assert clock.sleeps == []  # nothing to wait for


def test_drain_waits_while_a_pdb_forbids_and_evicts_once_it_allows(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    put_node_with_pods(kube_api)
    kube_api.put(k.pdb("web", "shop", match_labels={"app": "web"}, disruptions_allowed=0))

    def pdb_allows_on_third_poll(n: int) -> None:
        if n == 3:
            kube_api.put(k.pdb("web", "shop", match_labels={"app": "web"}, disruptions_allowed=1))

    clock.on_sleep = pdb_allows_on_third_poll
    result = drainer(kube_client, clock, timeout_s=30, poll=2).drain("n1")
    assert result.complete, result.reason
    assert set(result.evicted) == {"default/bare", "shop/web-0"}
    assert clock.sleeps == [2, 2, 2]
    assert evictions(kube_api).count("web-0") == 4  # refused three times, then accepted
    assert kube_api.get_object("Pod", "shop", "web-0") is None
    assert kube_api.get_object("Pod", "shop", "elsewhere") is not None


def test_drain_times_out_naming_the_pdb_that_blocks(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    put_node_with_pods(kube_api)
    kube_api.put(k.pdb("web", "shop", match_labels={"app": "web"}, disruptions_allowed=0))
    result = drainer(kube_client, clock, timeout_s=10, poll=3).drain("n1")
    assert not result.complete
    assert result.evicted == ("default/bare",)
    assert result.reason == (
        "1 pod still on the node after 10s: shop/web-0 (pdb shop/web allows no disruption: needs 1 healthy "
        "pods, has 1)"
    )
    assert clock.sleeps == [3, 3, 3, 1]  # never sleeps past the deadline
    assert kube_api.get_object("Pod", "shop", "web-0") is not None


def test_drain_waits_for_terminating_pods_until_they_are_gone(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    put_node_with_pods(kube_api)
    kube_api.pod_termination_seconds = 0.2  # the kubelet takes a moment to stop them
    d = NodeDrainer(kube_client, timeout=timedelta(seconds=10), poll_seconds=0.02)
    result = d.drain("n1")
    assert result.complete, result.reason
    assert set(result.evicted) == {"default/bare", "shop/web-0"}
    assert kube_api.get_object("Pod", "shop", "web-0") is None
    assert sorted(evictions(kube_api)) == ["bare", "web-0"]  # terminating pods are not evicted again


def test_drain_reports_pods_that_never_finish_terminating(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.put(k.node("n1"))
    kube_api.put(k.pod("stuck", "shop", node_name="n1", deletion_timestamp="2026-01-01T00:00:00Z"))
    kube_api.put(k.pod("web-0", "shop", node_name="n1", owner_kind="ReplicaSet"))
    kube_api.pod_termination_seconds = math.inf
    result = drainer(kube_client, clock, timeout_s=4, poll=2).drain("n1")
    assert not result.complete
    assert result.evicted == ("shop/web-0",)
    assert result.reason == (
        "2 pods still on the node after 4s: shop/stuck (still terminating), shop/web-0 (still terminating)"
    )
    assert evictions(kube_api) == ["web-0"]  # a pod already being deleted is left to finish


def test_drain_names_at_most_five_pods(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.put(k.node("n1"))
    kube_api.put(k.pdb("web", "shop", match_labels={"app": "web"}, disruptions_allowed=0))
    kube_api.put_many(
        k.pod(f"web-{i}", "shop", labels={"app": "web"}, node_name="n1", owner_kind="ReplicaSet")
        for i in range(7)
    )
    result = drainer(kube_client, clock, timeout_s=1, poll=1).drain("n1")
    assert result.reason.startswith("7 pods still on the node after 1s: shop/web-0 (pdb shop/web")
    assert result.reason.endswith(
        "shop/web-4 (pdb shop/web allows no disruption: needs 1 healthy pods, has 1), and 2 more"
    )


@pytest.mark.parametrize(
    ("message", "why"),
    [
        (  # an older server: the budget only in the message, after a sentence naming no budget
            "Cannot evict pod as it would violate the pod's disruption budget. "
            "The disruption budget web-pdb.v2 needs 2 healthy pods and has 2 currently",
            "pdb shop/web-pdb.v2 allows no disruption: needs 2 healthy pods, has 2",
        ),
        (  # API priority and fairness, not a budget: still only a reason to wait
            "Too many requests, please try again later.",
            "eviction refused for now: HTTP 429 Too many requests, please try again later.",
        ),
    ],
)
def test_drain_reads_why_an_eviction_is_refused_for_now(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock, message: str, why: str
) -> None:
    kube_api.put(k.node("n1"))
    kube_api.put(k.pod("web-0", "shop", node_name="n1", owner_kind="ReplicaSet"))
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message}
    body |= {"reason": "TooManyRequests", "code": 429}
    kube_api.fault = lambda method, path, query: (429, body) if path.endswith("/eviction") else None
    result = drainer(kube_client, clock, timeout_s=2, poll=1).drain("n1")
    assert result.reason == f"1 pod still on the node after 2s: shop/web-0 ({why})"
    assert evictions(kube_api) == ["web-0"] * 3


def test_drain_treats_a_pod_gone_before_its_eviction_as_done(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.put(k.node("n1"))
    kube_api.put(k.pod("web-0", "shop", node_name="n1", owner_kind="ReplicaSet"))

    def vanish_first(method: str, path: str, query: dict[str, str]) -> None:
        if path.endswith("/eviction"):
            kube_api.delete_object("Pod", "shop", "web-0")  # its controller was faster: 404
        return None

    kube_api.fault = vanish_first
    result = drainer(kube_client, clock).drain("n1")
    assert result == DrainResult("n1", (), True, "")
    assert evictions(kube_api) == ["web-0"]


def test_drain_of_a_node_that_keeps_getting_pods_ends_at_the_timeout_without_spinning(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.put(k.node("n1"))
    created: list[str] = []

    def a_new_pod_per_listing(method: str, path: str, query: dict[str, str]) -> None:
        if method == "GET" and path == "/api/v1/pods":  # an unmarked node: its controller refills it
            created.append(f"web-{len(created)}")
            kube_api.put(k.pod(created[-1], "shop", node_name="n1", owner_kind="ReplicaSet"))
        return None

    kube_api.fault = a_new_pod_per_listing
    result = drainer(kube_client, clock, timeout_s=10, poll=2).drain("n1")
    assert not result.complete
    assert result.reason.startswith("1 pod still on the node after 10s: shop/web-")
    assert result.reason.endswith(" (evicted just now)")
    assert clock.sleeps == [2, 2, 2, 2, 2]  # one immediate second look per poll, never a busy loop
    assert len(created) == 11
    assert result.evicted == tuple(f"shop/{name}" for name in created)


def test_drain_of_an_empty_or_missing_node_is_complete(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.put(k.pod("web-0", "shop", node_name="n2", owner_kind="ReplicaSet"))
    assert drainer(kube_client, clock).drain("n1") == DrainResult("n1", (), True, "")
    assert kube_api.get_object("Pod", "shop", "web-0") is not None


def test_listing_failures_raise_operation_errors(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.fault = lambda method, path, query: (403, None) if method == "GET" else None
    d = drainer(kube_client, clock)
    with pytest.raises(
        OperationError, match=r"^Kubernetes API: list pods: forbidden \(check the credentials"
    ):
        d.drain("n1")
    with pytest.raises(OperationError, match=r"^Kubernetes API: list nodes: forbidden"):
        d.marked()
    with pytest.raises(OperationError, match=r"^Kubernetes API: read node n1: forbidden"):
        d.mark("n1", SHA)


def test_unreachable_api_is_one_line() -> None:
    api_client = make_api_client("http://127.0.0.1:9")
    try:
        waits: list[float] = []
        d = NodeDrainer(api_client, timeout=timedelta(seconds=1), sleep=waits.append)
        with pytest.raises(
            OperationError,
            match=r"^cannot reach the Kubernetes API at http://127.0.0.1:9: .*\(gave up after 4 attempts\)$",
        ):
            d.drain("n1")
        assert waits == [0.2, 0.4, 0.8]
    finally:
        api_client.close()
