"""The wake-up hint's two halves against the fake API (issue 20): `StatusConfigMap.mark` (the plan
stage's write of the commit it pushed) and `KeyWatch` (the apply stage's watch on it)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from kubernetes import client

from reconciler.demo.kube_api import FakeKubeAPI
from reconciler.kube.status_configmap import (
    LAST_UPDATED_ANNOTATION,
    MAX_STATUS_BYTES,
    PUSHED_KEY,
    STATUS_CONFIGMAP,
    StatusConfigMap,
)
from reconciler.kube.wake_hint import KeyWatch

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
SHA1, SHA2 = "1" * 40, "2" * 40


def until(condition: Callable[[], object], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def stored(kube_api: FakeKubeAPI) -> dict[str, object]:
    found = kube_api.get_object("ConfigMap", "kube-system", STATUS_CONFIGMAP)
    assert found is not None
    return found


def test_mark_creates_or_patches_its_key_alone(kube_api: FakeKubeAPI, kube_client: client.ApiClient) -> None:
    plan = StatusConfigMap(kube_client, "kube-system", key="status-plan")
    assert plan.mark(PUSHED_KEY, SHA1, T0)  # no ConfigMap yet: created with the key
    assert stored(kube_api)["data"] == {PUSHED_KEY: SHA1}
    apply = StatusConfigMap(kube_client, "kube-system", key="status-apply")
    assert apply.publish("apply: in sync\n", T0)
    annotations = stored(kube_api)["metadata"]["annotations"]  # type: ignore[index]
    assert plan.mark(PUSHED_KEY, SHA2, datetime(2026, 6, 1, 13, 0, tzinfo=UTC))
    after = stored(kube_api)
    assert after["data"] == {PUSHED_KEY: SHA2, "status-apply": "apply: in sync\n"}
    assert after["metadata"]["annotations"][LAST_UPDATED_ANNOTATION] == annotations[LAST_UPDATED_ANNOTATION]  # type: ignore[index]


def test_mark_beside_a_full_status_stays_under_1_mib_and_the_next_status_makes_room(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    text = "".join(f"line {i:07d}: {'x' * 40}\n" for i in range(30_000))  # ~1.6 MB: cut to the cap
    apply = StatusConfigMap(kube_client, "kube-system", key="status-apply")
    assert apply.publish(text, T0)
    assert StatusConfigMap(kube_client, "kube-system", key="status-plan").mark(PUSHED_KEY, SHA1, T0)
    values = stored(kube_api)["data"]
    assert isinstance(values, dict) and values[PUSHED_KEY] == SHA1  # accepted: far under 1 MiB
    assert apply.publish(text + "one more\n", T0)  # the next publish counts the hint among the others
    values = stored(kube_api)["data"]
    assert isinstance(values, dict)
    assert sum(len(str(v).encode()) for v in values.values()) <= MAX_STATUS_BYTES


def test_the_watch_reports_each_new_value_once_and_nothing_else(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    seen: list[str] = []
    plan = StatusConfigMap(kube_client, "kube-system", key="status-plan")
    watch = KeyWatch(kube_client, "kube-system", STATUS_CONFIGMAP, PUSHED_KEY, seen.append, watch_timeout=1)
    watch.start()
    try:
        assert plan.mark(PUSHED_KEY, SHA1, T0)
        until(lambda: seen == [SHA1], "the first value")
        assert plan.publish("plan: no change\n", T0)  # another key changes: no report
        other = {"name": "other", "namespace": "kube-system"}  # another ConfigMap with the key: not it
        kube_api.put({"kind": "ConfigMap", "apiVersion": "v1", "metadata": other, "data": {PUSHED_KEY: SHA2}})
        time.sleep(1.5)  # and the server ends the watch (timeoutSeconds 1): a new one starts, no repeat
        assert seen == [SHA1]
        assert plan.mark(PUSHED_KEY, SHA2, T0)
        until(lambda: seen == [SHA1, SHA2], "the second value")
        assert kube_api.delete_object("ConfigMap", "kube-system", STATUS_CONFIGMAP)
        assert plan.mark(PUSHED_KEY, SHA1, T0)  # recreated with an older value: still news
        until(lambda: seen == [SHA1, SHA2, SHA1], "the value after a re-creation")
        assert watch.restarts == 0
    finally:
        watch.stop()
