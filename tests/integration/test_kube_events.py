"""EventRecorder against the fake API over HTTP: one Event per (object, type, reason, message) however
often and by however many processes it is recorded, counts that add up, nodes' events in `default`,
and an API in trouble that costs a count, never an exception."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from reconciler.demo.kube_api import FakeKubeAPI
from reconciler.domain.event import CONFIGMAP, NODE, NORMAL, POD, WARNING, EventSpec
from reconciler.kube.events import EmitResult, EventRecorder, event_name
from tests.support.kube import make_api_client

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
UP = EventSpec(
    POD,
    "shop",
    "web-1",
    "uid-web-1",
    NORMAL,
    "TriggeredScaleUp",
    "pod triggered scale-up: [{general 2->3 (max: 6)}]",
)
GONE = EventSpec(
    NODE, "", "ip-10-0-1-7", "ip-10-0-1-7", NORMAL, "ScaleDown", "node removed by asg-reconciler"
)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def clients(kube_api: FakeKubeAPI) -> Iterator[list[client.ApiClient]]:
    """Three API clients: three processes (replicas, or one process and its restarts)."""
    made = [make_api_client(kube_api.url) for _ in range(3)]
    yield made
    for c in made:
        c.close()


def when(text: str) -> datetime:
    """A time as stored (the client sends `+00:00` for a `Z` we give it: both are RFC 3339)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def events(kube_api: FakeKubeAPI, namespace: str | None = None) -> list[dict[str, Any]]:
    return kube_api.objects("Event", namespace)


def writes(kube_api: FakeKubeAPI) -> list[str]:
    return [r.method for r in kube_api.requests if "/events" in r.path and r.method != "GET"]


def test_one_event_counted_across_three_recorders(
    kube_api: FakeKubeAPI, clients: list[client.ApiClient]
) -> None:
    """50 occurrences, 10 s apart, round-robin over 3 recorders: one Event. Each recorder writes at
    most once a minute and folds the rest; after every recorder flushed, the count is exactly 50 and
    lastTimestamp the 50th occurrence's time."""
    recorders = [EventRecorder(c, host=f"replica-{i}") for i, c in enumerate(clients)]
    written = 0
    for i in range(50):
        result = recorders[i % 3].emit([UP], at(10 * i))
        written += result.created + result.updated
    assert written == 26  # each recorder's calls are 30 s apart: every other one writes
    [event] = events(kube_api, "shop")
    assert event["count"] + sum(r.pending for r in recorders) == 50  # the lag is what was folded
    for r in recorders:
        r.flush(at(500))
    [event] = events(kube_api, "shop")
    assert event["count"] == 50
    assert when(event["lastTimestamp"]) == at(490)  # the last occurrence's time, not the flush's
    assert when(event["firstTimestamp"]) == T0
    assert event["metadata"]["name"] == event_name(UP) and event["metadata"]["name"].startswith("web-1.")
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "web-1",
        "namespace": "shop",
        "uid": "uid-web-1",
    }
    assert (event["type"], event["reason"], event["message"]) == (NORMAL, UP.reason, UP.message)
    assert event["source"] == {"component": "asg-reconciler", "host": "replica-0"}
    assert event["reportingComponent"] == "asg-reconciler"


def test_found_as_kubectl_describe_finds_it(kube_api: FakeKubeAPI, kube_client: client.ApiClient) -> None:
    """`kubectl describe pod` lists events by involvedObject name, namespace, kind and uid; `describe
    node` in every namespace by kind and name, with the node's uid or (kubelet's way) its name."""
    EventRecorder(kube_client).emit([UP, GONE], T0)
    core = client.CoreV1Api(kube_client)
    pod = core.list_namespaced_event(
        "shop",
        field_selector="involvedObject.kind=Pod,involvedObject.name=web-1,"
        "involvedObject.namespace=shop,involvedObject.uid=uid-web-1",
    )
    assert [e.reason for e in pod.items] == ["TriggeredScaleUp"]
    node = core.list_event_for_all_namespaces(
        field_selector="involvedObject.kind=Node,involvedObject.name=ip-10-0-1-7,involvedObject.uid=ip-10-0-1-7"
    )
    [found] = node.items
    assert found.metadata.namespace == "default"  # cluster-scoped objects' events, as the kubelet's
    assert found.involved_object.namespace is None
    assert found.count == 1


def test_different_messages_are_different_events(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    other = EventSpec(
        POD, "shop", "web-1", "uid-web-1", NORMAL, "NotTriggerScaleUp", "pod didn't trigger scale-up: x"
    )
    moved = EventSpec(
        POD, "shop", "web-1", "uid-web-1", NORMAL, "NotTriggerScaleUp", "pod didn't trigger scale-up: y"
    )
    result = EventRecorder(kube_client).emit([UP, other, moved, other], T0)
    assert result == EmitResult(created=3)
    found = {e["message"]: e["count"] for e in events(kube_api, "shop")}
    assert found == {UP.message: 1, other.message: 2, moved.message: 1}


def test_a_repeat_is_one_patch_and_the_window_folds(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    recorder = EventRecorder(kube_client)
    assert recorder.emit([GONE], T0) == EmitResult(created=1)
    for second in (10, 20, 30):
        assert recorder.emit([GONE], at(second)) == EmitResult(folded=1)
    assert writes(kube_api) == ["POST"]
    assert recorder.emit([], at(61)) == EmitResult(updated=1)  # due: written even without a repeat
    assert writes(kube_api) == ["POST", "PATCH"]  # known here: no failed create first
    [event] = events(kube_api, "default")
    assert (event["count"], when(event["lastTimestamp"])) == (4, at(30))


def test_a_restart_adds_to_the_existing_count(kube_api: FakeKubeAPI, clients: list[client.ApiClient]) -> None:
    EventRecorder(clients[0]).emit([GONE, GONE], T0)
    fresh = EventRecorder(clients[1])  # a new process: nothing cached
    assert fresh.emit([GONE], at(5)) == EmitResult(updated=1)
    assert writes(kube_api) == ["POST", "POST", "PATCH"]  # the create says AlreadyExists, then the patch
    [event] = events(kube_api, "default")
    assert event["count"] == 3


def test_replicas_never_lose_each_others_counts(
    kube_api: FakeKubeAPI, clients: list[client.ApiClient]
) -> None:
    """A and B both know the Event; B patches in between, so A's patch carries a stale
    resourceVersion: 409, A reads and patches again."""
    a, b = EventRecorder(clients[0]), EventRecorder(clients[1])
    a.emit([GONE], T0)
    b.emit([GONE], at(1))
    b.emit([GONE], at(70))
    assert a.emit([GONE], at(100)) == EmitResult(updated=1)
    [event] = events(kube_api, "default")
    assert event["count"] == 4
    assert when(event["lastTimestamp"]) == at(100)


def test_an_expired_event_is_created_again(kube_api: FakeKubeAPI, kube_client: client.ApiClient) -> None:
    recorder = EventRecorder(kube_client)
    recorder.emit([GONE], T0)
    assert kube_api.delete_object("Event", "default", event_name(GONE))  # the TTL ran out
    assert recorder.emit([GONE], at(3700)) == EmitResult(created=1)
    [event] = events(kube_api, "default")
    assert (event["count"], when(event["firstTimestamp"])) == (1, at(3700))


def test_api_trouble_is_counted_not_raised(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    """A 500: the first failure ends this emit's writes (no burst at a server in trouble), all are
    counted failed, nothing raises; the occurrences are written, counted, once the API answers."""
    kube_api.fault = lambda method, path, query: (500, None) if "/events" in path else None
    recorder = EventRecorder(kube_client)
    warn = EventSpec(NODE, "", "n2", "n2", WARNING, "ScaleDownGivenBack", "failed to remove the taint")
    with caplog.at_level(logging.WARNING, logger="reconciler.kube.events"):
        assert recorder.emit([UP, GONE, warn], T0) == EmitResult(failed=3)
    assert len(writes(kube_api)) == 1
    [record] = caplog.records  # one line per emit, however many failed
    assert "3 of 3 not written (HTTP 500" in record.getMessage()
    kube_api.fault = None
    # the one that failed waits out its window; the two never tried go at the next emit
    assert recorder.emit([UP], at(30)) == EmitResult(created=2, folded=1)
    assert recorder.emit([], at(61)) == EmitResult(created=1)
    counts = {e["metadata"]["name"]: e["count"] for e in events(kube_api)}
    assert counts == {event_name(UP): 2, event_name(GONE): 1, event_name(warn): 1}


def test_unreachable_api_is_counted_not_raised(kube_api: FakeKubeAPI) -> None:
    dead = make_api_client("http://127.0.0.1:9")  # nothing listens on the discard port
    try:
        result = EventRecorder(dead, request_timeout=2).emit([UP, GONE], T0)
    finally:
        dead.close()
    assert result == EmitResult(failed=2)


def test_a_refusal_is_counted_and_the_rest_still_written(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    """A 403 (RBAC) on one namespace is an answer, not trouble: the other events still go."""
    kube_api.fault = lambda method, path, query: (403, None) if "/namespaces/shop/" in path else None
    result = EventRecorder(kube_client).emit([UP, GONE], T0)
    assert result == EmitResult(created=1, failed=1)
    assert [e["reason"] for e in events(kube_api)] == ["ScaleDown"]


def test_write_budget_defers_the_rest(kube_api: FakeKubeAPI, kube_client: client.ApiClient) -> None:
    many = [EventSpec(POD, "shop", f"web-{i}", f"u{i}", NORMAL, "NotTriggerScaleUp", "no") for i in range(5)]
    recorder = EventRecorder(kube_client, max_writes=2)
    assert recorder.emit(many, T0) == EmitResult(created=2, folded=3)
    assert recorder.emit([], at(1)) == EmitResult(created=2, folded=1)
    assert recorder.emit([], at(2)) == EmitResult(created=1)
    assert len(events(kube_api, "shop")) == 5


def test_what_cannot_be_written_for_an_hour_is_dropped(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    kube_api.fault = lambda method, path, query: (403, None)
    recorder = EventRecorder(kube_client)
    recorder.emit([UP], T0)
    recorder.emit([], at(1800))
    assert recorder.pending == 1
    recorder.emit([], at(3601))
    assert recorder.pending == 0


def test_a_failed_scale_up_is_found_on_the_status_configmap(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    """`kubectl describe configmap asg-reconciler-status -n kube-system` lists FailedToScaleUpGroup,
    as `describe configmap cluster-autoscaler-status` lists CA's."""
    failed = EventSpec(
        CONFIGMAP,
        "kube-system",
        "asg-reconciler-status",
        "",
        WARNING,
        "FailedToScaleUpGroup",
        "Scale-up failed for group spot: AWS could not launch 2 instance(s): InsufficientInstanceCapacity",
    )
    assert EventRecorder(kube_client).emit([failed], T0).created == 1
    found = client.CoreV1Api(kube_client).list_namespaced_event(
        "kube-system",
        field_selector="involvedObject.kind=ConfigMap,involvedObject.name=asg-reconciler-status",
    )
    [event] = found.items
    assert (event.type, event.reason, event.involved_object.namespace) == (
        "Warning",
        "FailedToScaleUpGroup",
        "kube-system",
    )
