"""StatusConfigMap against the fake API over HTTP: created when absent, written only when the text
changes, a concurrent writer never overwritten blindly, API trouble returned as False."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client

from reconciler.demo.kube_api import FakeKubeAPI
from reconciler.kube.status_configmap import LAST_UPDATED_ANNOTATION, StatusConfigMap
from tests.support.kube import make_api_client

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
PATH = "/api/v1/namespaces/kube-system/configmaps"


def configmap(kube_api: FakeKubeAPI) -> dict[str, Any]:
    found = kube_api.get_object("ConfigMap", "kube-system", "asg-reconciler-status")
    assert found is not None
    return found


def writes(kube_api: FakeKubeAPI) -> list[str]:
    return [r.method for r in kube_api.requests if r.path.startswith(PATH) and r.method != "GET"]


def test_created_when_absent_then_written_only_on_change(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    status = StatusConfigMap(kube_client, "kube-system")
    assert status.publish("autoscalerStatus: Running\n", T0) is True
    created = configmap(kube_api)
    assert created["data"] == {"status": "autoscalerStatus: Running\n"}
    assert created["metadata"]["annotations"] == {LAST_UPDATED_ANNOTATION: "2026-06-01T12:00:00Z"}
    version = created["metadata"]["resourceVersion"]

    written = [
        status.publish("autoscalerStatus: Running\n", T0 + timedelta(seconds=30 * i)) for i in range(20)
    ]
    assert written == [False] * 20
    assert writes(kube_api) == ["POST"]
    assert configmap(kube_api)["metadata"]["resourceVersion"] == version

    assert status.publish("autoscalerStatus: Suspended\n", T0 + timedelta(minutes=15)) is True
    changed = configmap(kube_api)
    assert changed["data"] == {"status": "autoscalerStatus: Suspended\n"}
    assert changed["metadata"]["annotations"] == {LAST_UPDATED_ANNOTATION: "2026-06-01T12:15:00Z"}
    assert writes(kube_api) == ["POST", "PATCH"]


def test_a_restart_finds_the_same_text_and_writes_nothing(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    StatusConfigMap(kube_client, "kube-system").publish("a: 1\n", T0)
    assert StatusConfigMap(kube_client, "kube-system").publish("a: 1\n", T0 + timedelta(hours=1)) is False
    assert writes(kube_api) == ["POST"]


def test_what_others_keep_there_stays(kube_api: FakeKubeAPI, kube_client: client.ApiClient) -> None:
    kube_api.put(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "asg-reconciler-status",
                "namespace": "kube-system",
                "labels": {"team": "platform"},
                "annotations": {"note": "kept"},
            },
            "data": {"status": "old\n", "extra": "mine"},
        }
    )
    assert StatusConfigMap(kube_client, "kube-system").publish("new\n", T0) is True
    found = configmap(kube_api)
    assert found["data"] == {"status": "new\n", "extra": "mine"}
    assert found["metadata"]["labels"] == {"team": "platform"}
    assert found["metadata"]["annotations"] == {
        "note": "kept",
        LAST_UPDATED_ANNOTATION: "2026-06-01T12:00:00Z",
    }


def test_a_concurrent_writer_makes_it_read_again(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    """Someone writes between our read and our patch: the stale resourceVersion gets a 409, we read
    again and decide again (here: still different, so we write)."""
    status = StatusConfigMap(kube_client, "kube-system")
    status.publish("one\n", T0)
    raced = []

    def someone_writes_first(method: str, path: str, query: dict[str, str]) -> None:
        if method == "PATCH" and not raced:
            raced.append(path)
            current = configmap(kube_api)
            current["data"] = {"status": "theirs\n"}
            kube_api.put(current)
        return None

    kube_api.fault = someone_writes_first
    assert status.publish("two\n", T0 + timedelta(minutes=1)) is True
    assert configmap(kube_api)["data"] == {"status": "two\n"}
    assert writes(kube_api) == ["POST", "PATCH", "PATCH"]


def test_two_creators_race(kube_api: FakeKubeAPI, kube_client: client.ApiClient) -> None:
    """Absent at our read, present at our create (another replica): read again; same text, no write."""
    status = StatusConfigMap(kube_client, "kube-system")

    def another_replica_creates(method: str, path: str, query: dict[str, str]) -> None:
        if method == "POST":
            kube_api.fault = None
            kube_api.put(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "asg-reconciler-status", "namespace": "kube-system"},
                    "data": {"status": "same\n"},
                }
            )
        return None

    kube_api.fault = another_replica_creates
    assert status.publish("same\n", T0) is False
    assert configmap(kube_api)["data"] == {"status": "same\n"}


def test_api_trouble_returns_false(kube_api: FakeKubeAPI, kube_client: client.ApiClient) -> None:
    status = StatusConfigMap(kube_client, "kube-system")
    kube_api.fault = lambda method, path, query: (500, None) if "/configmaps" in path else None
    assert status.publish("x\n", T0) is False
    kube_api.fault = lambda method, path, query: (403, None) if method == "POST" else None
    assert status.publish("x\n", T0) is False
    kube_api.fault = None
    assert status.publish("x\n", T0) is True


def test_unreachable_api_returns_false() -> None:
    dead = make_api_client("http://127.0.0.1:9")
    try:
        assert StatusConfigMap(dead, "kube-system", request_timeout=2).publish("x\n", T0) is False
    finally:
        dead.close()
