"""The plan stage's watch-fed cache (reconciler/kube/cache.py) against the fake API over HTTP.

The differential test: after seeded random sequences of adds, updates and deletes of every kind,
with forced 410s (at the watch's start, and as an ERROR event once the event log moved past the
watch), dropped watch connections, watches the server ends and failing list pages, the cache's
ClusterState equals a fresh LiveReader read. Then the pieces one by one: bookmarks, 410 -> relist,
resync timing (an injected clock), the pending-pod reports the plan is woken by, forbidden lists,
and a picture that stopped being kept current.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client

from reconciler.demo.kube_api import DROP, FakeKubeAPI
from reconciler.domain.errors import OperationError
from reconciler.domain.model import ClusterState
from reconciler.kube.cache import KINDS, ClusterCache, NotSynced
from reconciler.kube.live import NAMESPACES_FORBIDDEN, LiveReader
from tests.support import k8s_objects as k
from tests.support.kube import make_api_client
from tests.support.kube_cluster import FORBIDDEN, populate

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
Fault = Callable[[str, str, dict[str, str]], Any]


class Reports:
    """on_unschedulable's calls, in order."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self._cond = threading.Condition()

    def __call__(self, key: str) -> None:
        with self._cond:
            self.keys.append(key)
            self._cond.notify_all()

    def wait_for(self, key: str, count: int = 1, timeout: float = 3.0) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: self.keys.count(key) >= count, timeout):
                raise AssertionError(f"{key} not reported {count} time(s) within {timeout}s: {self.keys}")


def wait_until(check: Callable[[], object], timeout: float = 5.0, what: str = "the condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


Make = Callable[..., ClusterCache]


@pytest.fixture
def make(kube_client: client.ApiClient) -> Iterator[Make]:
    """Builds and starts caches (on `kube_client` unless given another), stopped at the end."""
    made: list[ClusterCache] = []

    def build(api: client.ApiClient | None = None, **options: Any) -> ClusterCache:
        options = {
            "page_size": 3,
            "initial_backoff": 0.02,
            "max_backoff": 0.2,
            "request_timeout": 5,
            **options,
        }
        cache = ClusterCache(api or kube_client, **options)
        made.append(cache)
        cache.start()
        return cache

    yield build
    for cache in made:
        cache.stop()


@pytest.fixture
def own_server() -> Iterator[Callable[..., FakeKubeAPI]]:
    """A fake API of the test's own (e.g. with a short event log: max_events)."""
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


def fresh(api: client.ApiClient) -> ClusterState:
    return LiveReader(api, page_size=4).read(NOW)


def converges(cache: ClusterCache, api: client.ApiClient, timeout: float = 20.0) -> ClusterState:
    """The cache's state once it equals a fresh read (the watches deliver within milliseconds; the
    bound only keeps a broken cache from hanging the test, and the last difference is shown; it is
    generous because a relist after a forced 410 waits out a backoff, which a loaded CI machine
    stretches: one full-suite run under load missed a 5 s bound that the same seed meets alone)."""
    deadline = time.monotonic() + timeout
    while True:
        expected = fresh(api)
        try:
            got = cache.state(NOW)
        except OperationError as exc:
            got, why = None, str(exc)
        if got == expected:
            return got
        if time.monotonic() > deadline:
            if got is None:
                raise AssertionError(f"the cache never answered: {why}")
            for field in ("nodes", "pods", "pdbs", "daemonsets", "pvs", "pvcs", "namespaces", "autoscaler"):
                ours, theirs = getattr(got, field), getattr(expected, field)
                assert ours == theirs, f"{field} differ:\ncache {ours}\nfresh {theirs}"
            assert got == expected
        time.sleep(0.02)


# ------------------------------------------------------------------------------ the differential test


class Chaos:
    """Seeded random changes of every kind the planner reads, and faults on the wire."""

    def __init__(self, api: FakeKubeAPI, seed: int) -> None:
        self.api = api
        self.rng = random.Random(seed)
        self.faults: list[Fault] = []
        api.fault = self._fault
        self.serial = 0

    def _fault(self, method: str, path: str, query: dict[str, str]) -> Any:
        for fault in list(self.faults):
            answer = fault(method, path, query)
            if answer is not None:
                self.faults.remove(fault)  # each fault once
                return answer
        return None

    def once_on_watch(self, answer: Any) -> None:
        self.faults.append(lambda m, p, q: answer if q.get("watch") == "true" else None)

    def once_on_list_page(self, answer: Any) -> None:
        self.faults.append(lambda m, p, q: answer if q.get("continue") else None)

    def step(self) -> None:
        rng, api = self.rng, self.api
        self.serial += 1
        n = self.serial
        roll = rng.random()
        nodes = [o["metadata"]["name"] for o in api.objects("Node")]
        pods = api.objects("Pod")
        if roll < 0.3:  # a new pod: pending, bound, finished, or with volumes
            node = rng.choice(nodes) if nodes and rng.random() < 0.6 else ""
            phase = rng.choice([None, None, None, "Succeeded", "Failed"])
            api.put(
                k.pod(
                    f"p-{n}",
                    rng.choice(["shop", "batch", "kube-system"]),
                    labels={"app": rng.choice(["web", "db", "job"])},
                    requests={"cpu": f"{rng.randint(1, 8) * 100}m", "memory": f"{rng.randint(1, 4)}Gi"},
                    node_name=node,
                    phase=phase,
                    owner_kind="ReplicaSet",
                    owner_name=rng.choice(["web-1", "db-1"]),
                )
            )
        elif roll < 0.45 and pods:  # bind, finish, relabel or reschedule an existing pod
            pod = rng.choice(pods)
            meta = pod["metadata"]
            change = rng.choice(["bind", "finish", "label", "unschedulable"])
            kwargs: dict[str, Any] = {"labels": {"app": "web", "v": str(n)}, "requests": {"cpu": "300m"}}
            if change == "bind" and nodes:
                kwargs["node_name"] = rng.choice(nodes)
            elif change == "finish":
                kwargs["phase"] = "Succeeded"
                kwargs["node_name"] = pod["spec"].get("nodeName", "")
            elif change == "label":
                kwargs["node_name"] = pod["spec"].get("nodeName", "")
            api.put(k.pod(meta["name"], meta["namespace"], **kwargs))
        elif roll < 0.55 and pods:
            pod = rng.choice(pods)
            api.delete_object("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"])
        elif roll < 0.65:
            name = f"node-{rng.randint(0, 6)}"
            if rng.random() < 0.3 and api.get_object("Node", None, name) is not None:
                api.delete_object("Node", None, name)
            else:
                api.put(k.node(name, ready=rng.random() < 0.8, zone=rng.choice(["us-east-1a", "us-east-1b"])))
        elif roll < 0.72:
            name = f"pdb-{rng.randint(0, 3)}"
            if rng.random() < 0.3:
                api.delete_object("PodDisruptionBudget", "shop", name)
            else:
                api.put(
                    k.pdb(name, "shop", match_labels={"app": "web"}, disruptions_allowed=rng.randint(0, 2))
                )
        elif roll < 0.78:
            name = f"ds-{rng.randint(0, 2)}"
            if rng.random() < 0.3:
                api.delete_object("DaemonSet", "kube-system", name)
            else:
                api.put(k.daemonset(name, "kube-system", requests={"cpu": f"{rng.randint(1, 3) * 50}m"}))
        elif roll < 0.84:
            name = f"ns-{rng.randint(0, 4)}"
            if rng.random() < 0.3:
                api.delete_object("Namespace", None, name)
            else:
                api.put(k.namespace(name, labels={"team": rng.choice(["a", "b"])}))
        elif roll < 0.88:
            claim = f"data-{rng.randint(0, 3)}"
            api.put(k.pv(f"pv-{claim}", zones=["us-east-1b"], claim=f"shop/{claim}"))
            api.put(k.pvc(claim, "shop", volume_name=f"pv-{claim}"))
        elif roll < 0.92:
            where = rng.choice(["kube-system", "cluster-autoscaler"])
            stamp = f"2026-01-01 11:{rng.randint(40, 59)}:00 +0000 UTC"
            annotations = {"cluster-autoscaler.kubernetes.io/last-updated": stamp}
            api.put(k.configmap("cluster-autoscaler-status", where, annotations=annotations))
        elif roll < 0.94:
            self.once_on_watch((410, None))  # the next watch request: HTTP 410 Gone
        elif roll < 0.96:
            self.once_on_watch(DROP)  # the next watch request: the connection dropped
        elif roll < 0.98:
            api.end_watches()  # every open watch ends: resumed from the last resourceVersion
        else:
            self.once_on_list_page((500, None))  # a later page of a list fails once (retried)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_after_random_events_and_faults_the_cache_equals_a_fresh_read(
    own_server: Callable[..., FakeKubeAPI], make: Make, seed: int
) -> None:
    # a short event log: a watch that falls behind (while dropped) gets ERROR 410 and lists again
    server = own_server(max_events=30)
    api = make_api_client(server.url)
    try:
        populate(server)
        cache = make(api, watch_timeout=2)
        assert cache.wait_synced(5)
        converges(cache, api)
        chaos = Chaos(server, seed)
        for _ in range(4):
            for _ in range(40):
                chaos.step()
            chaos.once_on_watch((410, None))  # at least one 410 per burst, whatever the seed drew
            server.end_watches()
            converges(cache, api)
        server.fault = None
        state = converges(cache, api)
        assert state.pods and state.nodes
        assert sum(cache.relists(kind, "expired") for kind in KINDS) >= 4
    finally:
        server.fault = None
        api.close()


def test_a_watch_that_fell_behind_the_event_log_lists_again(
    own_server: Callable[..., FakeKubeAPI], make: Make
) -> None:
    """An ERROR event with code 410 on the stream: the resourceVersion was compacted away."""
    server = own_server(max_events=4)
    api = make_api_client(server.url)
    try:
        server.put(k.pod("known", "shop", node_name="node-a"))
        cache = make(api, watch_timeout=30)
        assert cache.wait_synced(5)
        blocked = threading.Event()
        blocked.set()
        server.fault = lambda m, p, q: DROP if blocked.is_set() and q.get("watch") and "pods" in p else None
        server.end_watches()
        time.sleep(0.2)  # the pod watch cannot come back meanwhile
        for i in range(10):
            server.put(k.pod(f"meanwhile-{i}", "shop", node_name="node-a"))
        blocked.clear()
        wait_until(lambda: cache.relists("Pod", "expired") >= 1, what="a relist after the 410")
        state = converges(cache, api)
        assert len(state.pods) == 11
    finally:
        server.fault = None
        api.close()


# ------------------------------------------------------------------------------------- the pieces


def test_bookmarks_move_an_idle_kinds_resource_version(
    kube_api: FakeKubeAPI, make: Make, kube_client: Any
) -> None:
    kube_api.bookmark_interval = 0.1
    kube_api.put(k.node("node-a"))
    cache = make(watch_timeout=30)
    assert cache.wait_synced(5)
    listed = int(cache.reflector("Node").version)
    kube_api.put_many(k.pod(f"p-{i}", "shop") for i in range(5))  # other kinds move the revision
    newest = kube_api.resource_version
    assert newest > listed
    wait_until(lambda: int(cache.reflector("Node").version) >= newest, what="a bookmark for Nodes")
    kube_api.requests.clear()
    kube_api.end_watches()
    wait_until(
        lambda: any(r.path == "/api/v1/nodes" and r.query.get("watch") for r in list(kube_api.requests))
    )
    again = next(r for r in list(kube_api.requests) if r.path == "/api/v1/nodes" and r.query.get("watch"))
    assert int(again.query["resourceVersion"]) >= newest  # resumed from the bookmark, not the list
    assert again.query["allowWatchBookmarks"] == "true"
    assert cache.relists("Node", "expired") == 0
    converges(cache, kube_client)


def test_a_410_answer_to_a_watch_lists_again(kube_api: FakeKubeAPI, make: Make, kube_client: Any) -> None:
    answered: list[str] = []

    def gone_once(method: str, path: str, query: dict[str, str]) -> Any:
        if query.get("watch") == "true" and path == "/api/v1/nodes" and not answered:
            answered.append(path)
            return (410, None)
        return None

    kube_api.put(k.node("node-a"))
    kube_api.fault = gone_once
    cache = make()
    wait_until(lambda: cache.relists("Node", "expired") == 1, what="the relist")
    kube_api.put(k.node("node-b"))
    state = converges(cache, kube_client)
    assert [n.name for n in state.nodes] == ["node-a", "node-b"]
    assert cache.relists("Node", "expired") == 1
    assert sum(cache.relists(kind, "expired") for kind in KINDS) == 1


def test_a_relist_happens_when_the_resync_is_due_and_not_before(
    kube_api: FakeKubeAPI, make: Make, kube_client: Any
) -> None:
    now = [1000.0]
    kube_api.put(k.node("node-a"))
    cache = make(clock=lambda: now[0], resync=600.0, watch_timeout=1)  # watches end every second
    assert cache.wait_synced(5)
    lists = {kind: cache.reflector(kind).lists for kind in KINDS}
    assert set(lists.values()) == {1}
    kube_api.requests.clear()
    time.sleep(1.1)  # watches ended and were resumed: no list
    now[0] += 599.0
    time.sleep(1.1)
    assert {cache.reflector(kind).lists for kind in KINDS} == {1}
    assert not [r for r in list(kube_api.requests) if r.path == "/api/v1/nodes" and not r.query.get("watch")]
    now[0] += 2.0  # the resync is due: each kind lists again, once
    wait_until(lambda: all(cache.relists(kind, "resync") == 1 for kind in KINDS), what="the resync")
    time.sleep(1.1)
    assert all(cache.relists(kind, "resync") == 1 for kind in KINDS)
    kube_api.put(k.node("node-b"))
    converges(cache, kube_client)


def test_a_relist_converts_only_what_changed(kube_api: FakeKubeAPI, make: Make, kube_client: Any) -> None:
    now = [0.0]
    kube_api.put_many(k.pod(f"p-{i}", "shop", node_name="node-a") for i in range(5))
    cache = make(clock=lambda: now[0], resync=60.0, watch_timeout=1)
    before = {p.name: p for p in converges(cache, kube_client).pods}
    server_side = k.pod("p-3", "shop", node_name="node-a", labels={"v": "2"})
    kube_api.fault = lambda m, p, q: DROP if q.get("watch") and p == "/api/v1/pods" else None
    kube_api.end_watches()
    kube_api.put(server_side)  # changed while the pod watch cannot see it: only the resync does
    now[0] += 61.0
    wait_until(lambda: cache.relists("Pod", "resync") >= 1, what="the resync")
    kube_api.fault = None
    after = {p.name: p for p in converges(cache, kube_client).pods}
    assert after["p-3"] is not before["p-3"] and after["p-3"].labels == {"v": "2"}
    assert all(after[name] is before[name] for name in before if name != "p-3")  # kept, not converted


def test_pending_pods_are_reported_once_per_transition_and_a_relist_reports_only_new_ones(
    kube_api: FakeKubeAPI, make: Make
) -> None:
    reports = Reports()
    kube_api.put(k.pod("waiting", "shop"))  # Pending, PodScheduled=False/Unschedulable
    kube_api.put(k.pod("running", "shop", node_name="node-a"))
    kube_api.put(k.pod("gated", "shop", scheduled_reason="SchedulingGated"))
    kube_api.put(k.pod("done", "shop", phase="Failed"))
    cache = make(on_unschedulable=reports)
    reports.wait_for("shop/waiting")

    kube_api.put(k.pod("new", "batch", requests={"cpu": "64"}))
    reports.wait_for("batch/new", timeout=1.0)
    kube_api.put(k.pod("new", "batch", requests={"cpu": "64"}, labels={"touched": "yes"}))  # still pending
    kube_api.put(k.pod("gated", "shop"))  # gate lifted, nowhere to go: a transition into the state
    reports.wait_for("shop/gated")
    kube_api.put(k.pod("waiting", "shop", node_name="node-a"))  # bound: forgotten
    kube_api.put(k.pod("waiting", "shop"))  # unbound again (a new pod of that name): reported again
    reports.wait_for("shop/waiting", count=2)

    answered: list[str] = []

    def gone_once(method: str, path: str, query: dict[str, str]) -> Any:
        if query.get("watch") == "true" and path == "/api/v1/pods" and not answered:
            answered.append(path)
            return (410, None)
        return None

    kube_api.fault = gone_once
    kube_api.put(k.pod("meanwhile", "shop"))
    kube_api.end_watches()
    wait_until(lambda: cache.relists("Pod", "expired") == 1, what="the relist")
    reports.wait_for("shop/meanwhile")
    time.sleep(0.2)
    assert reports.keys == ["shop/waiting", "batch/new", "shop/gated", "shop/waiting", "shop/meanwhile"]
    watches = {r.query.get("fieldSelector") for r in list(kube_api.requests) if r.path == "/api/v1/pods"}
    assert watches == {"status.phase!=Succeeded,status.phase!=Failed"}  # one watch on Pods: the cache's


def test_forbidden_namespaces_and_autoscaler_lists_read_as_the_live_read_does(
    kube_api: FakeKubeAPI, make: Make, kube_client: Any
) -> None:
    populate(kube_api)

    def forbid(method: str, path: str, query: dict[str, str]) -> Any:
        if path == "/api/v1/namespaces" or (path == "/api/v1/configmaps" and not query.get("watch")):
            return (403, FORBIDDEN)
        return None

    kube_api.fault = forbid
    cache = make()
    state = converges(cache, kube_client)
    assert state.namespaces is None and state.warnings[0] == NAMESPACES_FORBIDDEN
    assert "looked for in kube-system only" in state.warnings[1]
    assert state.autoscaler is not None  # the status ConfigMap in kube-system, read each cycle
    assert all(h.synced for h in cache.health())


def test_no_picture_before_the_first_lists_and_none_once_it_stopped_being_kept_current(
    kube_api: FakeKubeAPI, make: Make, kube_client: Any
) -> None:
    kube_api.put(k.node("node-a"))
    blocked = threading.Event()
    blocked.set()
    kube_api.fault = lambda m, p, q: (500, None) if blocked.is_set() and p == "/api/v1/pods" else None
    cache = make(stale_after=0.5)
    wait_until(lambda: "HTTP 500" in cache.waiting_for(), what="the failing list reported")  # after retries
    assert not cache.synced()
    with pytest.raises(NotSynced, match=r"waiting for the cluster cache's first list of Pods \(.*HTTP 500"):
        cache.state(NOW)
    blocked.clear()
    assert cache.wait_synced(5)
    converges(cache, kube_client)

    blocked.set()  # every pod request fails: the watch ends and cannot come back
    kube_api.end_watches()
    time.sleep(0.8)
    with pytest.raises(OperationError, match=r"cluster cache is stale: .*Pods for \d+s"):
        cache.state(NOW)
    health = {h.kind: h for h in cache.health()}
    assert "HTTP 500" in health["Pod"].problem and health["Node"].problem == ""
    blocked.clear()
    converges(cache, kube_client)
    assert {h.kind: h.problem for h in cache.health()}["Pod"] == ""


def test_stop_ends_every_watch_at_once(make: Make) -> None:
    cache = make(watch_timeout=300)
    assert cache.wait_synced(5)
    time.sleep(0.1)
    stopping = time.monotonic()
    cache.stop()
    assert time.monotonic() - stopping < 1.0
    assert not cache.synced() and not cache.running
    alive = [t.name for t in threading.enumerate() if t.name.startswith("cache-")]
    assert alive == [], alive


def test_a_server_that_goes_away_and_comes_back_is_watched_again_from_the_kept_version(
    own_server: Callable[..., FakeKubeAPI], make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="reconciler.kube.cache")
    server = own_server()
    api = make_api_client(server.url)
    try:
        server.put(k.pod("before", "shop"))
        cache = make(api)
        assert cache.wait_synced(5)
        server.stop()
        time.sleep(0.4)  # refused connections meanwhile
        server.put(k.pod("while-down", "shop"))  # written while nobody can watch it
        server.start()  # same port, same store, same resourceVersions
        state = converges(cache, api)
        assert [p.name for p in state.pods] == ["before", "while-down"]
        assert all(cache.reflector(kind).lists == 1 for kind in KINDS)  # resumed, not listed again
        ours = [r for r in caplog.records if r.name == "reconciler.kube.cache"]
        warnings = [r.getMessage() for r in ours if r.levelname == "WARNING"]
        assert any("cannot reach" in w for w in warnings), warnings
        assert len(warnings) <= 3 * len(KINDS), warnings  # each kind of failure once, not per retry
    finally:
        api.close()


def test_a_server_that_answers_every_watch_with_410_is_not_asked_in_a_tight_loop(
    kube_api: FakeKubeAPI, make: Make
) -> None:
    watches: list[str] = []

    def gone(method: str, path: str, query: dict[str, str]) -> Any:
        if query.get("watch") in ("true", "1") and path == "/api/v1/nodes":
            watches.append(path)
            return (410, None)
        return None

    kube_api.fault = gone
    make(initial_backoff=0.1, max_backoff=0.5)
    time.sleep(3.0)
    kube_api.fault = None
    assert 2 <= len(watches) <= 20, len(watches)  # backed off: at most ~one every 0.5s once grown


FORMS = " (use forms like 100m, 1.5, 2Gi, 500M, 1e3)"


def test_a_tenants_quantities_never_stop_the_pod_reflector(
    kube_api: FakeKubeAPI, make: Make, kube_client: Any
) -> None:
    """Issue 28: one pod asking `memory: 1e33` failed every list and watch of pods, and the
    reflector relisted and failed for ever. The value now saturates; a pod that cannot be read at
    all (no server would serve it; planted in the fake) is left out with a warning naming it, as
    the live read does, in the list and in watch events alike."""
    kube_api.put(k.pod("greedy", "team-a", requests={"memory": "1e33"}))
    kube_api.put(k.pod("typo", "team-b", requests={"cpu": "lots"}))
    kube_api.put(k.daemonset("agent", "team-a", requests={"memory": "1e33"}))
    wrong_type = k.pod("wrong-type", "team-c")
    wrong_type["spec"]["priority"] = "high"  # a field of the wrong type fails its page's schema
    kube_api.put(wrong_type)
    cache = make()
    state = converges(cache, kube_client)
    assert [p.key for p in state.pods] == ["team-a/greedy"]
    assert state.pods[0].requests.memory == 2**63 - 1
    assert state.daemonsets[0].requests.memory == 2**63 - 1
    assert [w for w in state.warnings if "left out" in w] == [
        "pod team-b/typo left out of the plan: it cannot be read: "
        "spec.containers[app].resources.requests.cpu: 'lots' is not a Kubernetes quantity" + FORMS,
        "pod team-c/wrong-type left out of the plan: it cannot be read: "
        "Expected `int`, got `str` - at `$.spec.priority`",
    ]
    kube_api.delete_object("Pod", "team-c", "wrong-type")
    kube_api.put(k.pod("greedy", "team-a", requests={"memory": "many"}))  # a watch event breaks it
    state = converges(cache, kube_client)
    assert state.pods == ()
    assert sum("left out" in w for w in state.warnings) == 2
    kube_api.put(k.pod("typo", "team-b", requests={"cpu": "1"}))  # and one mends it
    state = converges(cache, kube_client)
    assert [p.key for p in state.pods] == ["team-b/typo"]
    assert [w for w in state.warnings if "left out" in w] == [
        "pod team-a/greedy left out of the plan: it cannot be read: "
        "spec.containers[app].resources.requests.memory: 'many' is not a Kubernetes quantity" + FORMS
    ]
    assert cache.relists("Pod", "error") == 0
    assert all(not h.problem for h in cache.health())
