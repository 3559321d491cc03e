"""NodeDrainer left unattended (issue 8), against the fake API over HTTP: grace periods capped as
cluster-autoscaler's --max-graceful-termination-sec, transient API failures retried, the node checked
to still be the approved instance, what is left on a node, and drains running side by side."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import orjson
import pytest
from kubernetes import client

from reconciler.demo.kube_api import DROP, FakeKubeAPI, FaultResult, Query
from reconciler.domain.errors import OperationError, RefusedError
from reconciler.domain.model import OWN_DRAIN_TAINT
from reconciler.kube.drain import DrainResult, NodeDrainer
from tests.support import k8s_objects as k
from tests.support.kube_drain import SHA, FakeClock, evictions, put_node_with_pods, taints

OURS = {"key": OWN_DRAIN_TAINT, "value": SHA, "effect": "NoSchedule"}
OLD = "i-0000000000000aaaa"  # the approved instance
NEW = "i-0000000000000bbbb"  # another instance that took the node's name


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def drainer(
    kube_client: client.ApiClient,
    clock: FakeClock,
    *,
    timeout_s: float = 30,
    poll: float = 2,
    max_grace: timedelta | None = None,
) -> NodeDrainer:
    return NodeDrainer(
        kube_client,
        timeout=timedelta(seconds=timeout_s),
        max_grace_period=max_grace,
        poll_seconds=poll,
        sleep=clock.sleep,
        monotonic=clock.monotonic,
    )


def eviction_bodies(kube_api: FakeKubeAPI) -> dict[str, Any]:
    """Pod name -> the body of its last eviction request."""
    return {r.path.split("/")[-2]: r.json() for r in kube_api.requests if r.path.endswith("/eviction")}


def uid_of(name: str) -> dict[str, str]:
    """The preconditions every eviction carries: the uid of the pod it was decided for."""
    return {"uid": k.make_uid("Pod", "shop", name)}


def pod_with_grace(name: str, grace: int | None) -> dict[str, Any]:
    pod = k.pod(name, "shop", node_name="n1", owner_kind="ReplicaSet")
    if grace is not None:
        pod["spec"]["terminationGracePeriodSeconds"] = grace
    return pod


# ------------------------------------------------------------------------------------ grace periods


def test_each_eviction_asks_for_the_pods_grace_period_capped_by_max_grace_period(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.put(k.node("n1"))
    kube_api.put_many(
        [pod_with_grace("quick", 5), pod_with_grace("slow", 3600), pod_with_grace("default", None)]
    )
    result = drainer(kube_client, clock, max_grace=timedelta(minutes=1)).drain("n1")
    assert result.complete, result.reason
    bodies = eviction_bodies(kube_api)
    assert {name: body["deleteOptions"] for name, body in bodies.items()} == {
        "quick": {"gracePeriodSeconds": 5, "preconditions": uid_of("quick")},  # the pod's own, below the cap
        "slow": {"gracePeriodSeconds": 60, "preconditions": uid_of("slow")},  # capped
        "default": {  # no terminationGracePeriodSeconds: Kubernetes' 30
            "gracePeriodSeconds": 30,
            "preconditions": uid_of("default"),
        },
    }
    assert bodies["quick"]["kind"] == "Eviction" and bodies["quick"]["apiVersion"] == "policy/v1"


def test_without_a_cap_evictions_leave_the_grace_period_to_the_pod(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.put(k.node("n1"))
    kube_api.put(pod_with_grace("slow", 3600))
    assert drainer(kube_client, clock).drain("n1").complete
    assert eviction_bodies(kube_api)["slow"]["deleteOptions"] == {"preconditions": uid_of("slow")}


def test_a_cap_below_one_second_is_one_second_and_a_pods_own_zero_stays(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    """gracePeriodSeconds 0 makes the API server drop the pod object at once, kubelet or not: a cap
    never asks for that, but a pod that asks for it itself gets what the server would give it."""
    kube_api.put(k.node("n1"))
    kube_api.put_many([pod_with_grace("web", 30), pod_with_grace("instant", 0)])
    d = drainer(kube_client, clock, max_grace=timedelta(milliseconds=300))
    assert d.max_grace_seconds == 1
    assert d.drain("n1").complete
    bodies = eviction_bodies(kube_api)
    assert bodies["web"]["deleteOptions"] == {"gracePeriodSeconds": 1, "preconditions": uid_of("web")}
    assert bodies["instant"]["deleteOptions"] == {"gracePeriodSeconds": 0, "preconditions": uid_of("instant")}


def test_the_capped_grace_period_ends_a_pod_that_would_take_forever(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    """The fake's kubelet stops the pod when the grace period asked for ends, as the real one does."""
    kube_api.put(k.node("n1"))
    kube_api.put(pod_with_grace("stubborn", 3600))
    kube_api.pod_termination_seconds = math.inf  # the process never stops by itself
    d = NodeDrainer(
        kube_client, timeout=timedelta(seconds=20), max_grace_period=timedelta(seconds=1), poll_seconds=0.05
    )
    started = time.monotonic()
    result = d.drain("n1")
    assert result == DrainResult("n1", ("shop/stubborn",), True, "")
    assert 0.9 <= time.monotonic() - started < 15


def test_the_fake_honours_a_deletes_grace_period_too(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    kube_api.put(k.pod("p", "shop", node_name="n1"))
    kube_api.pod_termination_seconds = math.inf
    v1 = client.CoreV1Api(kube_client)
    v1.delete_namespaced_pod("p", "shop", grace_period_seconds=1)
    pod = kube_api.get_object("Pod", "shop", "p")
    assert pod is not None and pod["metadata"]["deletionGracePeriodSeconds"] == 1
    deadline = time.monotonic() + 10
    while kube_api.get_object("Pod", "shop", "p") is not None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    (delete,) = [r for r in kube_api.requests if r.method == "DELETE"]
    assert delete.query["gracePeriodSeconds"] == "1"


# ------------------------------------------------------------------------------- transient faults


class EveryOther:
    """A fault hook failing every other request of `methods` with `answer` (a status code, or DROP),
    counted per method, path and query (so concurrent callers cannot take each other's successes).
    A 429 is never given to an eviction: there it means "not now", not a fault."""

    def __init__(self, answer: int | str, methods: tuple[str, ...] = ("GET", "PATCH", "POST")) -> None:
        self.answer, self.methods = answer, methods
        self.failed: list[tuple[str, str]] = []
        self._counts: Counter[tuple[str, str, tuple[tuple[str, str], ...]]] = Counter()
        self._lock = threading.Lock()

    def __call__(self, method: str, path: str, query: Query) -> FaultResult:
        if method not in self.methods or (self.answer == 429 and path.endswith("/eviction")):
            return None
        key = (method, path, tuple(sorted(query.items())))
        with self._lock:
            self._counts[key] += 1
            if self._counts[key] % 2 == 0:
                return None
            self.failed.append((method, path))
        return DROP if self.answer == DROP else (int(self.answer), None)


@pytest.mark.parametrize("answer", [500, 502, 503, 504, 429, DROP])
def test_mark_drain_and_unmark_complete_when_every_other_call_fails(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock, answer: int | str
) -> None:
    put_node_with_pods(kube_api)
    kube_api.put(k.pdb("web", "shop", match_labels={"app": "web"}, disruptions_allowed=1))
    kube_api.fault = flaky = EveryOther(answer)
    d = drainer(kube_client, clock)

    d.mark("n1", SHA, instance=k.instance_id_for("n1"))
    assert taints(kube_api) == [OURS]
    result = d.drain("n1", instance=k.instance_id_for("n1"))
    assert result.complete, result.reason
    assert sorted(result.evicted) == ["default/bare", "shop/web-0"]
    assert d.remaining("n1") == []
    d.unmark("n1")
    assert taints(kube_api) == []

    faulted = {"GET", "PATCH"} if answer == 429 else {"GET", "PATCH", "POST"}  # an eviction's 429: a PDB
    assert {method for method, _ in flaky.failed} == faulted
    assert 0.2 in clock.sleeps  # the retries waited
    pdb = kube_api.get_object("PodDisruptionBudget", "shop", "web")
    assert pdb is not None and pdb["status"]["disruptionsAllowed"] == 0  # web-0 disrupted once only


def test_an_eviction_carried_out_but_answered_503_counts_as_accepted_when_retried(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.put(k.node("n1"))
    kube_api.put(k.pod("web-0", "shop", labels={"app": "web"}, node_name="n1", owner_kind="ReplicaSet"))
    kube_api.put(k.pdb("web", "shop", match_labels={"app": "web"}, disruptions_allowed=1))
    kube_api.pod_termination_seconds = math.inf
    answered: list[str] = []

    def carried_out_then_lost(method: str, path: str, query: Query) -> FaultResult:
        if path.endswith("/eviction") and not answered:
            answered.append(path)
            body = orjson.dumps(
                {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-0"}}
            )
            kube_api.handle(method, path, query, body, "application/json")  # the server did it...
            return (503, None)  # ...but the answer was lost on the way back
        return None

    kube_api.fault = carried_out_then_lost

    def kubelet_done(n: int) -> None:
        if n == 2:  # after the retry's backoff and one poll
            kube_api.delete_object("Pod", "shop", "web-0")

    clock.on_sleep = kubelet_done
    result = drainer(kube_client, clock).drain("n1")
    assert result == DrainResult("n1", ("shop/web-0",), True, "")
    assert clock.sleeps == [0.2, 2]
    assert evictions(kube_api) == ["web-0", "web-0"]  # the retry met a terminating pod: accepted
    pdb = kube_api.get_object("PodDisruptionBudget", "shop", "web")
    assert pdb is not None and pdb["status"]["disruptionsAllowed"] == 0  # one disruption, not two


@pytest.mark.parametrize("after", ["terminating", "gone"])
def test_an_eviction_whose_every_answer_failed_but_went_through_is_not_a_failure(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock, after: str
) -> None:
    kube_api.put(k.node("n1"))
    kube_api.put(k.pod("web-0", "shop", node_name="n1", owner_kind="ReplicaSet"))

    def carried_out_every_answer_lost(method: str, path: str, query: Query) -> FaultResult:
        if not path.endswith("/eviction"):
            return None
        pod = kube_api.get_object("Pod", "shop", "web-0")
        if pod is not None and after == "gone":
            kube_api.delete_object("Pod", "shop", "web-0")
        elif pod is not None and "deletionTimestamp" not in pod["metadata"]:
            pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"  # the kubelet is stopping it
            kube_api.put(pod)
        return (500, None)

    kube_api.fault = carried_out_every_answer_lost

    def kubelet_done(n: int) -> None:
        if n > 3:  # after the three backoffs, the first poll
            kube_api.delete_object("Pod", "shop", "web-0")

    clock.on_sleep = kubelet_done
    result = drainer(kube_client, clock).drain("n1")
    assert result.complete, result.reason
    assert result.evicted == ()  # we cannot tell it was ours, only that it is leaving
    assert evictions(kube_api) == ["web-0"] * 4


ALWAYS: dict[str, tuple[Callable[[NodeDrainer], object], str, str]] = {
    "read node": (
        lambda d: d.mark("n1", SHA),
        "GET /api/v1/nodes/n1",
        r"^Kubernetes API: read node n1: HTTP 503 injected fault 503 \(gave up after 4 attempts\)$",
    ),
    "patch node": (
        lambda d: d.unmark("n1"),
        "PATCH /api/v1/nodes/n1",
        r"^Kubernetes API: unmark node n1: HTTP 503 injected fault 503 \(gave up after 4 attempts\)$",
    ),
    "list pods": (
        lambda d: d.drain("n1"),
        "GET /api/v1/pods",
        r"^Kubernetes API: list pods: HTTP 503 injected fault 503 \(gave up after 4 attempts\)$",
    ),
    "list nodes": (
        lambda d: d.marked(),
        "GET /api/v1/nodes",
        r"^Kubernetes API: list nodes: HTTP 503 injected fault 503 \(gave up after 4 attempts\)$",
    ),
    "instance": (
        lambda d: d.instance_of("n1"),
        "GET /api/v1/nodes/n1",
        r"^Kubernetes API: read node n1: HTTP 503 injected fault 503 \(gave up after 4 attempts\)$",
    ),
}


@pytest.mark.parametrize("what", sorted(ALWAYS))
def test_a_call_that_keeps_failing_is_one_clear_operation_error_after_four_tries(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock, what: str
) -> None:
    kube_api.put(k.node("n1", taints=[OURS]))
    act, failing, message = ALWAYS[what]
    method, path = failing.split(" ")
    kube_api.fault = lambda m, p, q: (503, None) if (m, p) == (method, path) else None
    with pytest.raises(OperationError, match=message):
        act(drainer(kube_client, clock))
    assert kube_api.calls[(method, path)] == 4
    assert clock.sleeps == [0.2, 0.4, 0.8]


def test_an_eviction_that_keeps_failing_is_tried_until_the_timeout_saying_why(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.put(k.node("n1"))
    kube_api.put(k.pod("web-0", "shop", node_name="n1", owner_kind="ReplicaSet"))
    kube_api.fault = lambda m, p, q: (502, None) if p.endswith("/eviction") else None
    result = drainer(kube_client, clock, timeout_s=10).drain("n1")
    assert result == DrainResult(
        "n1",
        (),
        False,
        "1 pod still on the node after 10s: shop/web-0 (eviction answered HTTP 502 injected fault 502)",
    )
    assert clock.sleeps[:3] == [0.2, 0.4, 0.8]  # quick retries of the call...
    assert 0.5 <= clock.sleeps[3] <= 1  # ...then the drain's jittered backoff
    assert kube_api.get_object("Pod", "shop", "web-0") is not None


def test_a_connection_dropped_every_time_is_one_clear_operation_error(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.put(k.node("n1"))
    kube_api.fault = lambda m, p, q: DROP if m == "PATCH" else None
    with pytest.raises(
        OperationError,
        match=rf"^cannot reach the Kubernetes API at {kube_api.url}: .*\(gave up after 4 attempts\)$",
    ):
        drainer(kube_client, clock).mark("n1", SHA)
    assert kube_api.calls[("PATCH", "/api/v1/nodes/n1")] == 4
    assert taints(kube_api) == []


def test_forbidden_is_not_retried(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.fault = lambda m, p, q: (403, None)
    with pytest.raises(OperationError, match=r"^Kubernetes API: read node n1: forbidden"):
        drainer(kube_client, clock).mark("n1", SHA)
    assert kube_api.calls[("GET", "/api/v1/nodes/n1")] == 1
    assert clock.sleeps == []


# ----------------------------------------------------------------------------- the approved instance


def test_instance_of_reads_the_provider_id(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.put(k.node("n1", instance_id=OLD, zone="eu-west-1b"))
    kube_api.put(k.node("bare", provider_id=""))
    kube_api.put(k.node("gce", provider_id="gce://project/zone/vm-1"))
    d = drainer(kube_client, clock)
    assert d.instance_of("n1") == OLD
    assert d.instance_of("bare") == ""
    assert d.instance_of("gce") == ""
    assert d.instance_of("gone") is None


def test_mark_refuses_a_node_that_is_not_the_approved_instance(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.put(k.node("n1", instance_id=NEW))
    kube_api.put(k.node("bare", provider_id=""))
    d = drainer(kube_client, clock)
    with pytest.raises(
        RefusedError,
        match=rf"^not marking node n1 for draining: node n1 is now instance {NEW}, not the approved {OLD}$",
    ) as refused:
        d.mark("n1", SHA, instance=OLD)
    assert refused.value.kind == "instance-changed"
    with pytest.raises(RefusedError, match=r"^not marking node bare for draining: .* names no AWS instance"):
        d.mark("bare", SHA, instance=OLD)
    assert not [r for r in kube_api.requests if r.method == "PATCH"]
    with pytest.raises(OperationError, match="it is not in the cluster"):
        d.mark("gone", SHA, instance=OLD)
    d.mark("n1", SHA, instance=NEW)
    assert taints(kube_api) == [OURS]


def test_mark_judges_the_instance_on_the_read_its_guarded_write_is_based_on(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    """The node changes hands between our read and our write: the write fails on its stale
    resourceVersion, and the read that follows sees the new instance."""
    kube_api.put(k.node("n1", instance_id=OLD))

    def replaced_before_the_write(method: str, path: str, query: Query) -> FaultResult:
        if method == "PATCH" and kube_api.calls[("PATCH", path)] == 1:
            kube_api.delete_object("Node", None, "n1")
            kube_api.put(k.node("n1", instance_id=NEW))
        return None

    kube_api.fault = replaced_before_the_write
    with pytest.raises(RefusedError, match=f"node n1 is now instance {NEW}, not the approved {OLD}"):
        drainer(kube_client, clock).mark("n1", SHA, instance=OLD)
    assert kube_api.calls[("PATCH", "/api/v1/nodes/n1")] == 1  # the one 409
    assert taints(kube_api) == []


def test_drain_of_a_node_that_is_another_instance_evicts_nothing(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.put(k.node("n1", instance_id=NEW, taints=[OURS]))
    kube_api.put(k.pod("web-0", "shop", node_name="n1", owner_kind="ReplicaSet"))
    result = drainer(kube_client, clock).drain("n1", instance=OLD)
    assert result == DrainResult("n1", (), False, f"node n1 is now instance {NEW}, not the approved {OLD}")
    assert evictions(kube_api) == []


@pytest.mark.parametrize("change", ["replaced", "gone"])
def test_drain_stops_when_the_node_stops_being_the_approved_instance(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock, change: str
) -> None:
    put_node_with_pods(kube_api)
    kube_api.put(k.node("n1", instance_id=OLD))
    kube_api.put(k.pdb("web", "shop", match_labels={"app": "web"}, disruptions_allowed=0))

    def hands_change(n: int) -> None:
        if n == 2:
            kube_api.delete_object("Node", None, "n1")
            if change == "replaced":
                kube_api.put(k.node("n1", instance_id=NEW))

    clock.on_sleep = hands_change
    result = drainer(kube_client, clock).drain("n1", instance=OLD)
    assert not result.complete
    assert result.evicted == ("default/bare",)
    assert result.reason == (
        f"node n1 is now instance {NEW}, not the approved {OLD}"
        if change == "replaced"
        else f"node n1 is no longer in the cluster (the approved instance was {OLD})"
    )
    assert evictions(kube_api).count("web-0") == 2  # refused on the two looks before the change
    assert clock.sleeps == [2, 2]


def test_drain_with_the_right_instance_completes(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    put_node_with_pods(kube_api)
    result = drainer(kube_client, clock).drain("n1", instance=k.instance_id_for("n1"))
    assert result == DrainResult("n1", ("default/bare", "shop/web-0"), True, "")


# ------------------------------------------------------------------------------------- remaining


def test_remaining_lists_the_pods_still_on_the_node_that_a_drain_does_not_leave(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    put_node_with_pods(kube_api)
    kube_api.put(k.pod("leaving", "shop", node_name="n1", deletion_timestamp="2026-01-01T00:00:00Z"))
    d = drainer(kube_client, clock)
    # a pod being deleted is still there, running its shutdown: never terminated under it
    assert sorted(p["metadata"]["name"] for p in d.remaining("n1")) == ["bare", "leaving", "web-0"]
    assert d.remaining("nowhere") == []
    kube_api.delete_object("Pod", "shop", "leaving")
    assert d.drain("n1").complete
    assert d.remaining("n1") == []
    kube_api.put(k.pod("late", "shop", node_name="n1", owner_kind="ReplicaSet"))  # landed after the drain
    assert [p["metadata"]["name"] for p in d.remaining("n1")] == ["late"]


# -------------------------------------------------------------------------------- parallel drains


def test_three_drains_at_once_over_one_client(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    """apply.maxParallelDrains: one NodeDrainer and one ApiClient shared by three threads, under
    transient faults. The first eviction of each node waits until all three are in flight, so the
    test fails (the barrier breaks) unless the drains really overlap."""
    nodes = ["n1", "n2", "n3"]
    for node in nodes:
        kube_api.put(k.node(node))
        kube_api.put_many(
            k.pod(f"{node}-web-{i}", "shop", node_name=node, owner_kind="ReplicaSet") for i in range(3)
        )
    kube_api.pod_termination_seconds = 0.2
    barrier = threading.Barrier(len(nodes), timeout=10)
    broken: list[str] = []
    flaky = EveryOther(503, ("GET",))
    first: set[str] = set()
    lock = threading.Lock()

    def fault(method: str, path: str, query: Query) -> FaultResult:
        if path.endswith("/eviction"):
            node = path.split("/")[-2].split("-web-")[0]
            with lock:
                wait = node not in first
                first.add(node)
            if wait:
                try:
                    barrier.wait()
                except threading.BrokenBarrierError:
                    broken.append(node)
            return None
        return flaky(method, path, query)

    kube_api.fault = fault
    d = NodeDrainer(
        kube_client,
        timeout=timedelta(seconds=30),
        max_grace_period=timedelta(seconds=5),
        poll_seconds=0.02,
    )
    caplog.set_level(logging.WARNING, logger="urllib3")

    def mark_and_drain(node: str) -> DrainResult:
        d.mark(node, SHA, instance=k.instance_id_for(node))
        return d.drain(node, instance=k.instance_id_for(node))

    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        futures = {node: pool.submit(mark_and_drain, node) for node in nodes}
        results = {node: future.result(timeout=60) for node, future in futures.items()}
    assert broken == []
    for node in nodes:
        assert results[node].complete, results[node].reason
        assert sorted(results[node].evicted) == [f"shop/{node}-web-{i}" for i in range(3)]
        assert taints(kube_api, node) == [OURS]
    assert kube_api.objects("Pod") == []
    assert not [r for r in caplog.records if "pool is full" in r.getMessage()]
