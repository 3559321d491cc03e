"""UnschedulableWatch against the fake API over HTTP: a pod that becomes unschedulable is reported
at once and once per transition; a 410 re-lists without reporting known pods again; a server that
goes away and comes back costs restarts, not reports."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from reconciler.demo.kube_api import FakeKubeAPI
from reconciler.kube.watch import UnschedulableWatch
from tests.fakes import k8s_objects as k
from tests.fixtures_kube import make_api_client


class Reports:
    """on_unschedulable's calls, in order."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self._cond = threading.Condition()

    def __call__(self, key: str) -> None:
        with self._cond:
            self.keys.append(key)
            self._cond.notify_all()

    def wait_for(self, key: str, count: int = 1, timeout: float = 2.0) -> float:
        """The time `key` had been reported `count` times, waiting up to `timeout` for it."""
        with self._cond:
            if not self._cond.wait_for(lambda: self.keys.count(key) >= count, timeout):
                raise AssertionError(f"{key} not reported {count} time(s) within {timeout}s: {self.keys}")
        return time.monotonic()


def wait_until(check: Callable[[], bool], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.01)


Make = Callable[..., tuple[UnschedulableWatch, Reports]]


@pytest.fixture
def make(kube_client: client.ApiClient) -> Iterator[Make]:
    """Builds and starts watches (on `kube_client` unless given another); all stopped at the end."""
    made: list[UnschedulableWatch] = []

    def build(api: client.ApiClient | None = None, **options: Any) -> tuple[UnschedulableWatch, Reports]:
        reports = Reports()
        options = {"initial_backoff": 0.05, "max_backoff": 0.3, **options}
        watch = UnschedulableWatch(api or kube_client, reports, **options)
        made.append(watch)
        watch.start()
        return watch, reports

    yield build
    for watch in made:
        watch.stop()


@pytest.fixture
def own_server() -> Iterator[Callable[..., FakeKubeAPI]]:
    """A fake API of the test's own on a fixed port, so it can be stopped and started again there."""
    servers: list[FakeKubeAPI] = []

    def start(**options: Any) -> FakeKubeAPI:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        server = FakeKubeAPI(port=port, **options).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def scheduled(name: str, namespace: str = "default") -> dict[str, Any]:
    return k.pod(name, namespace, node_name="node-a")


def test_reports_pods_as_they_become_unschedulable_once_per_transition(
    kube_api: FakeKubeAPI, make: Make
) -> None:
    kube_api.put(k.pod("waiting", "shop"))  # Pending, PodScheduled=False/Unschedulable
    kube_api.put(scheduled("running", "shop"))
    kube_api.put(k.pod("gated", "shop", scheduled_reason="SchedulingGated"))
    kube_api.put(k.pod("done", "shop", phase="Failed"))
    watch, reports = make()
    reports.wait_for("shop/waiting")

    created = time.monotonic()
    kube_api.put(k.pod("new", "batch", requests={"cpu": "64"}))
    latency = reports.wait_for("batch/new", timeout=1.0) - created
    assert latency < 1.0, latency

    kube_api.put(k.pod("new", "batch", requests={"cpu": "64"}, labels={"touched": "yes"}))  # still pending
    kube_api.put(k.pod("gated", "shop", scheduled_reason="SchedulingGated", labels={"touched": "yes"}))
    kube_api.put(k.pod("gated", "shop"))  # gate lifted, nowhere to go: a transition into the state
    reports.wait_for("shop/gated")
    kube_api.put(k.pod("gated", "shop", scheduled_reason="SchedulingGated"))
    kube_api.put(k.pod("gated", "shop"))  # and again
    reports.wait_for("shop/gated", count=2)

    kube_api.put(scheduled("waiting", "shop"))  # bound: leaves the selector, forgotten
    kube_api.delete_object("Pod", "batch", "new")
    kube_api.put(k.pod("new", "batch"))  # a new pod of the same name
    reports.wait_for("batch/new", count=2)
    time.sleep(0.2)
    assert reports.keys == ["shop/waiting", "batch/new", "shop/gated", "shop/gated", "batch/new"]
    assert watch.restarts == 0
    assert watch.lists == 1

    stopping = time.monotonic()
    watch.stop()  # mid-watch (timeoutSeconds 300): the stream is shut, not waited out
    assert time.monotonic() - stopping < 0.5


def test_lists_page_by_page(kube_api: FakeKubeAPI, make: Make) -> None:
    kube_api.put_many(k.pod(f"p-{i:02}", "big") for i in range(25))
    _, reports = make(page_size=10)
    reports.wait_for("big/p-24")
    assert sorted(reports.keys) == [f"big/p-{i:02}" for i in range(25)]
    lists = [r for r in kube_api.requests if r.path == "/api/v1/pods" and "watch" not in r.query]
    assert len(lists) == 3
    assert {r.query["fieldSelector"] for r in lists} == {
        "spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed"
    }
    wait_until(lambda: kube_api.calls[("GET", "/api/v1/pods")] > 3)
    watches = [r for r in kube_api.requests if r.query.get("watch") == "true"]
    assert watches[0].query["allowWatchBookmarks"] == "true"
    assert watches[0].query["resourceVersion"]


def test_a_410_gone_event_relists_without_reporting_known_pods_again(
    own_server: Callable[..., FakeKubeAPI], make: Make
) -> None:
    server = own_server(max_events=20)
    api = make_api_client(server.url)
    try:
        server.put(k.pod("known", "shop"))
        watch, reports = make(api, watch_timeout=1)  # re-watches from its kept version every second
        reports.wait_for("shop/known")
        # 60 writes the selector does not match: the server's event log moves past the kept version
        server.put_many(scheduled(f"filler-{i}") for i in range(30))
        server.put(k.pod("meanwhile", "shop"))
        server.put_many(scheduled(f"filler-{i}") for i in range(30, 60))
        wait_until(lambda: watch.lists >= 2)  # ERROR 410 on the next watch, then a list
        reports.wait_for("shop/meanwhile")
        server.put(k.pod("after", "shop"))
        reports.wait_for("shop/after")
        time.sleep(0.2)
        assert reports.keys.count("shop/known") == 1
        assert reports.keys.count("shop/meanwhile") == 1
        assert watch.restarts == 0  # a 410 is a re-list, not a failure
    finally:
        api.close()


def test_a_410_answer_to_the_watch_request_relists(kube_api: FakeKubeAPI, make: Make) -> None:
    answered: list[str] = []

    def gone_once(method: str, path: str, query: dict[str, str]) -> Any:
        if query.get("watch") == "true" and not answered:
            answered.append(path)
            return (410, None)
        return None

    kube_api.put(k.pod("known", "shop"))
    kube_api.fault = gone_once
    watch, reports = make()
    wait_until(lambda: watch.lists >= 2)
    kube_api.put(k.pod("later", "shop"))
    reports.wait_for("shop/later")
    assert reports.keys == ["shop/known", "shop/later"]
    assert watch.restarts == 0


def test_failures_restart_with_backoff_and_are_counted(
    kube_api: FakeKubeAPI, make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    failures: list[str] = []

    def fail_three_watches(method: str, path: str, query: dict[str, str]) -> Any:
        if query.get("watch") == "true" and len(failures) < 3:
            failures.append(path)
            return (500, None)
        return None

    caplog.set_level("INFO", logger="reconciler.kube.watch")
    kube_api.fault = fail_three_watches
    watch, reports = make()
    wait_until(lambda: watch.restarts == 3)
    kube_api.put(k.pod("later", "shop"))
    reports.wait_for("shop/later")
    assert watch.restarts == 3
    assert watch.lists == 1  # the kept version still serves: no list needed
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "HTTP 500" in warnings[0], warnings  # once, not per restart
    assert any("watching again" in r.getMessage() for r in caplog.records)


def test_a_server_that_goes_away_and_comes_back(own_server: Callable[..., FakeKubeAPI], make: Make) -> None:
    server = own_server()
    api = make_api_client(server.url)
    try:
        server.put(k.pod("before", "shop"))
        watch, reports = make(api)
        reports.wait_for("shop/before")
        wait_until(lambda: server.calls[("GET", "/api/v1/pods")] >= 2)  # the watch is open

        server.stop()
        time.sleep(0.4)  # refused connections meanwhile
        server.put(k.pod("while-down", "shop"))  # written to the store while nobody can watch it
        server.start()  # same port, same store, same resourceVersions
        reports.wait_for("shop/while-down", timeout=3.0)  # the watch resumed from its kept version
        assert watch.restarts > 0
        server.put(k.pod("after", "shop"))
        reports.wait_for("shop/after")
        time.sleep(0.2)
        assert reports.keys == ["shop/before", "shop/while-down", "shop/after"]
    finally:
        api.close()


def test_a_server_that_answers_every_watch_with_410_is_not_asked_in_a_tight_loop(
    kube_api: FakeKubeAPI, make: Make
) -> None:
    """Found by review: 410 after 410 re-listed at ~2,000 requests/s."""
    watches: list[str] = []

    def gone(method: str, path: str, query: dict[str, str]) -> Any:
        if query.get("watch") in ("true", "1"):
            watches.append(path)
            return (410, None)
        return None

    kube_api.fault = gone
    make(initial_backoff=0.1, max_backoff=0.5)
    time.sleep(3.0)
    kube_api.fault = None
    assert 2 <= len(watches) <= 20, len(watches)  # backed off: at most ~one every 0.5s once grown
