"""The fake API (reconciler/demo/kube_api/) held to the real one: the same scripted calls — paged
lists and their continue tokens, selectors, gets, refused writes, ConfigMap and Lease writes,
merge, strategic-merge and JSON patches, conflicts, evictions under a budget the disruption
controller keeps, a continue token and a watch from before an etcd compaction — go to both over
HTTP, and their answers, reduced to what our code reads (status code, Status reason, item names,
the fields written), must be equal. A difference the fake keeps on purpose is listed in
DELIBERATE with its reason, and the test checks it is still a difference (so the list stays true)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import pytest

from reconciler.demo.kube_api import FakeKubeAPI
from tests.controlplane.cluster import ControlPlane
from tests.support import k8s_objects as k
from tests.support.kube import FAKE_TOKEN
from tests.support.real_cluster import RealCluster

pytestmark = pytest.mark.xdist_group("realcluster")  # one control plane, one worker (conftest.py)

NS = "diff"
JSON, MERGE, STRATEGIC, JSON_PATCH = (
    "application/json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/json-patch+json",
)

# step -> why the fake answers differently on purpose (each is checked to still differ)
_NO_WATCH_CACHE = (
    "kube-apiserver 1.34 serves lists (continue tokens included, ListFromCacheSnapshot) and watches "
    "from its watch cache, which still holds the revisions etcd has just compacted: 200, where the "
    "fake, which has no watch cache, answers as etcd does: 410 Expired. The real server answers 410 "
    "too once the revision has left its cache (after a restart: test_run_split.py; or past its "
    "window), so the fake keeps the strict answer: it is what exercises our 410 handling"
)
DELIBERATE: dict[str, str] = {
    "list: continue token from before a compaction": _NO_WATCH_CACHE,
    "watch: from a compacted revision": _NO_WATCH_CACHE,
}


class Server(Protocol):
    def request(
        self, method: str, path: str, body: Any = None, content_type: str = JSON
    ) -> tuple[int, Any]: ...

    def compact(self) -> None: ...


def _call(url: str, method: str, body: Any, content_type: str, opener: Callable[..., Any]) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": content_type})
    try:
        with opener(request) as reply:
            return reply.status, _decode(reply.read())
    except urllib.error.HTTPError as error:
        raw = error.read()
        try:
            return error.code, json.loads(raw)
        except ValueError:
            return error.code, raw.decode(errors="replace")


def _decode(raw: bytes) -> Any:
    """A JSON body, or a watch stream's first event (one JSON object a line)."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return json.loads(raw.splitlines()[0])


class Fake:
    def __init__(self, api: FakeKubeAPI) -> None:
        self.api = api

    def request(self, method: str, path: str, body: Any = None, content_type: str = JSON) -> tuple[int, Any]:
        def opener(request: urllib.request.Request) -> Any:
            request.add_header("Authorization", f"Bearer {FAKE_TOKEN}")
            return urllib.request.urlopen(request, timeout=30)

        return _call(self.api.url + path, method, body, content_type, opener)

    def compact(self) -> None:
        self.api.compact()


class Real:
    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane

    def request(self, method: str, path: str, body: Any = None, content_type: str = JSON) -> tuple[int, Any]:
        context = self.plane.ssl_context()
        return _call(
            self.plane.url + path,
            method,
            body,
            content_type,
            lambda request: urllib.request.urlopen(request, timeout=30, context=context),
        )

    def compact(self) -> None:
        self.plane.compact()


def reason(answer: tuple[int, Any]) -> tuple[int, str]:
    code, body = answer
    return code, (body.get("reason", "") if isinstance(body, dict) and body.get("kind") == "Status" else "")


def names(answer: tuple[int, Any]) -> tuple[int, list[str], bool]:
    code, body = answer
    if code != 200:
        return code, [], False
    return code, [i["metadata"]["name"] for i in body["items"]], bool(body["metadata"].get("continue"))


def new(obj: Mapping[str, Any]) -> dict[str, Any]:
    fresh = json.loads(json.dumps(obj))
    fresh.pop("status", None)
    for key in ("uid", "resourceVersion", "creationTimestamp", "generation"):
        fresh["metadata"].pop(key, None)
    return fresh


def running(server: Server, name: str) -> None:
    """A pod bound to n1, then Running and Ready through pods/status, as the kubelet reports it."""
    pod = new(k.pod(name, NS, labels={"app": "web"}, node_name="n1", requests={"cpu": "10m"}))
    code, created = server.request("POST", f"/api/v1/namespaces/{NS}/pods", pod)
    assert code == 201, created
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {
        "phase": "Running",
        "conditions": [
            {"type": t, "status": "True", "lastTransitionTime": now}
            for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
    }
    code, answered = server.request(
        "PATCH", f"/api/v1/namespaces/{NS}/pods/{name}/status", {"status": status}, MERGE
    )
    assert code == 200, answered


def pdb_allows(server: Server, allowed: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code, pdb = server.request("GET", f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/web")
        status = pdb.get("status", {}) if code == 200 else {}
        if status.get("observedGeneration") == pdb["metadata"].get("generation") and (
            status.get("disruptionsAllowed") == allowed
        ):
            return
        time.sleep(0.2)
    raise AssertionError(f"the PDB never allowed {allowed}: {pdb}")


def evict(server: Server, name: str) -> tuple[int, Any]:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS}}
    return server.request("POST", f"/api/v1/namespaces/{NS}/pods/{name}/eviction", body)


def script(server: Server) -> Iterator[tuple[str, Any]]:
    """The calls, in order; yields (step, the answer as our code reads it)."""
    code, _ = server.request("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    assert code in (201, 409)
    node = new(k.node("n1", allocatable={"cpu": "4", "memory": "8Gi", "pods": "110"}))
    code, answered = server.request("POST", "/api/v1/nodes", node)
    assert code == 201, answered
    for i in range(5):
        running(server, f"web-{i}")

    path = f"/api/v1/namespaces/{NS}/pods"
    first = server.request("GET", f"{path}?limit=2")
    yield "list: first page of 2", names(first)
    yield "list: remainingItemCount", first[1]["metadata"].get("remainingItemCount")
    token = first[1]["metadata"]["continue"]
    second = server.request("GET", f"{path}?limit=2&continue={token}")
    yield "list: second page", names(second)
    third = server.request("GET", f"{path}?limit=2&continue={second[1]['metadata']['continue']}")
    yield "list: last page", names(third)
    yield (
        "list: selectors",
        names(server.request("GET", f"{path}?labelSelector=app%3Dweb&fieldSelector=spec.nodeName%3Dn1")),
    )
    yield (
        "list: field selector on phase",
        names(server.request("GET", f"{path}?fieldSelector=status.phase%3DPending")),
    )
    yield "get: missing pod", reason(server.request("GET", f"{path}/nope"))

    cms = f"/api/v1/namespaces/{NS}/configmaps"
    yield (
        "configmap: bad key",
        reason(server.request("POST", cms, {"metadata": {"name": "bad"}, "data": {"a b": "1"}})),
    )
    big = {"metadata": {"name": "big"}, "data": {"k": "x" * (1024 * 1024 + 1)}}
    yield "configmap: over 1 MiB", reason(server.request("POST", cms, big))
    code, cm = server.request("POST", cms, {"metadata": {"name": "status"}, "data": {"a": "1", "b": "2"}})
    yield "configmap: create", code
    yield (
        "configmap: merge patch",
        reason(server.request("PATCH", f"{cms}/status", {"data": {"b": None, "c": "3"}}, MERGE)),
    )
    yield "configmap: after merge patch", server.request("GET", f"{cms}/status")[1]["data"]
    stale = {"metadata": {"name": "status", "resourceVersion": cm["metadata"]["resourceVersion"]}, "data": {}}
    yield (
        "configmap: update with a stale resourceVersion",
        reason(server.request("PUT", f"{cms}/status", stale)),
    )

    leases = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
    whole = "2026-12-04T03:00:00Z"
    yield (
        "lease: MicroTime without fractions",
        reason(server.request("POST", leases, {"metadata": {"name": "l1"}, "spec": {"renewTime": whole}})),
    )
    micro = "2026-12-04T03:00:00.000000Z"
    lease = {
        "metadata": {"name": "l2"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": micro},
    }
    yield "lease: create", reason(server.request("POST", leases, lease))
    yield (
        "lease: negative duration",
        reason(server.request("PATCH", f"{leases}/l2", {"spec": {"leaseDurationSeconds": -1}}, MERGE)),
    )
    yield (
        "lease: merge patch holder",
        server.request("PATCH", f"{leases}/l2", {"spec": {"holderIdentity": "b"}}, MERGE)[1]["spec"][
            "holderIdentity"
        ],
    )

    yield (
        "pod: strategic merge of labels",
        server.request("PATCH", f"{path}/web-0", {"metadata": {"labels": {"extra": "1"}}}, STRATEGIC)[1][
            "metadata"
        ]["labels"],
    )
    taint = [
        {"op": "add", "path": "/spec/taints", "value": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}
    ]
    yield (
        "node: JSON patch adds a taint",
        server.request("PATCH", "/api/v1/nodes/n1", taint, JSON_PATCH)[1]["spec"]["taints"],
    )
    failing = [{"op": "test", "path": "/spec/unschedulable", "value": True}]
    yield (
        "node: JSON patch whose test fails",
        reason(server.request("PATCH", "/api/v1/nodes/n1", failing, JSON_PATCH)),
    )
    stale_rv = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
        {"op": "add", "path": "/metadata/labels/x", "value": "y"},
    ]
    yield (
        "node: JSON patch testing a stale resourceVersion",
        reason(server.request("PATCH", "/api/v1/nodes/n1", stale_rv, JSON_PATCH)),
    )

    pdb = new(k.pdb("web", NS, match_labels={"app": "web"}, min_available=5))
    yield (
        "pdb: create",
        reason(server.request("POST", f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets", pdb)),
    )
    pdb_allows(server, 0)
    code, body = evict(server, "web-0")
    yield (
        "eviction: budget used up",
        (code, body.get("reason"), [c.get("message") for c in body.get("details", {}).get("causes", [])]),
    )
    server.request(
        "PATCH",
        f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/web",
        {"spec": {"minAvailable": 4}},
        MERGE,
    )
    pdb_allows(server, 1)
    yield "eviction: allowed", reason(evict(server, "web-0"))
    code, body = evict(server, "web-1")
    yield "eviction: the next one refused", (code, body.get("reason"))
    yield "eviction: missing pod", reason(evict(server, "nope"))

    before = server.request("GET", f"{path}?limit=1")
    revision = before[1]["metadata"]["resourceVersion"]
    server.request("PATCH", f"{cms}/status", {"data": {"d": "4"}}, MERGE)  # history moves on
    server.compact()
    yield (
        "list: continue token from before a compaction",
        reason(server.request("GET", f"{path}?limit=1&continue={before[1]['metadata']['continue']}")),
    )
    watch = server.request("GET", f"{path}?watch=true&resourceVersion={revision}&timeoutSeconds=1")
    yield "watch: from a compacted revision", watch_code(watch)


def watch_code(answer: tuple[int, Any]) -> int:
    """410 whether the server says it in the reply's status or as the stream's ERROR event."""
    code, body = answer
    if code != 200:
        return code
    return int(body["object"]["code"]) if isinstance(body, dict) and body.get("type") == "ERROR" else code


@pytest.fixture
def fake() -> Iterator[FakeKubeAPI]:
    api = FakeKubeAPI().start()
    api.run_controllers(disruption=True, replicasets=True)
    try:
        yield api
    finally:
        api.stop()


def test_the_fake_answers_as_the_real_api_server(real_cluster: RealCluster, fake: FakeKubeAPI) -> None:
    real_answers = dict(script(Real(real_cluster.plane)))
    fake_answers = dict(script(Fake(fake)))
    assert list(real_answers) == list(fake_answers)
    differences = {
        step: {"real": real_answers[step], "fake": fake_answers[step]}
        for step in real_answers
        if real_answers[step] != fake_answers[step] and step not in DELIBERATE
    }
    assert not differences, json.dumps(differences, indent=2, default=str)
    for step in DELIBERATE:
        assert real_answers[step] != fake_answers[step], f"{step}: no longer differs; drop it from DELIBERATE"
