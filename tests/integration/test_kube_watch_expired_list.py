"""The pod watch's list (the first, and every one after a 410 on the watch) starts again at once
when etcd compacts between two of its pages (410 Expired), as client-go's pager does: no failure,
no backoff, and every unschedulable pod reported once."""

from __future__ import annotations

import threading

from kubernetes import client

from reconciler.demo.kube_api import FakeKubeAPI
from reconciler.kube.watch import UnschedulableWatch
from tests.fakes import k8s_objects as k


def test_an_expired_continue_token_lists_again_without_a_failure(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    for i in range(5):
        kube_api.put(k.pod(f"web-{i}", "shop", requests={"cpu": "1"}))
    left = [1]

    def fault(method: str, path: str, query: dict[str, str]) -> None:
        if path == "/api/v1/pods" and query.get("continue") and left[0]:
            left[0] = 0
            kube_api.put(k.pod("web-5", "shop", requests={"cpu": "1"}))  # arrives, then etcd compacts
            kube_api.compact()

    kube_api.fault = fault
    reported: list[str] = []
    all_six = threading.Event()

    def report(key: str) -> None:
        reported.append(key)
        if len(reported) >= 6:
            all_six.set()

    # a failed list would wait a 30 s backoff before listing again
    watch = UnschedulableWatch(kube_client, report, page_size=2, initial_backoff=30, max_backoff=30)
    watch.start()
    try:
        assert all_six.wait(5), reported
    finally:
        watch.stop()
    assert sorted(reported) == [f"shop/web-{i}" for i in range(6)]
    assert watch.restarts == 0 and watch.lists == 1
    assert not left[0]
