"""The fake Kubernetes API behaves as our code expects of a real one, through the official client
(which validates every reply) and kubectl."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import urllib3
from kubernetes import client, config, watch

from reconciler.demo.kube_api import DROP, FakeKubeAPI, serve_in_subprocess
from tests.data import EKS_T3SMALL
from tests.support import k8s_objects as k
from tests.support.kube import make_api_client

EKS_FIXTURES = EKS_T3SMALL


@pytest.fixture
def v1(kube_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(kube_client)


def raw_list(v1: client.CoreV1Api, **kwargs: Any) -> dict[str, Any]:
    """One page as JSON, the way our reader lists (no model classes)."""
    resp = v1.list_pod_for_all_namespaces(_preload_content=False, **kwargs)
    data: dict[str, Any] = orjson.loads(resp.data)
    return data


def all_pages(v1: client.CoreV1Api, limit: int, **kwargs: Any) -> tuple[list[str], int]:
    names: list[str] = []
    pages, cont = 0, None
    while True:
        page = raw_list(v1, limit=limit, _continue=cont, **kwargs)
        pages += 1
        names += [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in page["items"]]
        cont = page["metadata"].get("continue")
        if not cont:
            return names, pages


# ------------------------------------------------------------------------------ discovery, models


def test_version_and_discovery(kube_client: client.ApiClient) -> None:
    assert client.VersionApi(kube_client).get_code().git_version.startswith("v1.")
    assert client.CoreApi(kube_client).get_api_versions().versions == ["v1"]
    groups = {g.name for g in client.ApisApi(kube_client).get_api_versions().groups}
    assert {"apps", "policy", "coordination.k8s.io"} <= groups
    core = client.CoreV1Api(kube_client).get_api_resources()
    names = {r.name for r in core.resources}
    assert {"pods", "pods/eviction", "nodes", "configmaps", "events", "persistentvolumes"} <= names


def test_every_factory_deserialises_through_the_client(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    objs = [
        k.node("n1", taints=["dedicated=gpu:NoSchedule"], unschedulable=True, ready="Unknown"),
        k.pod(
            "p1",
            requests=[{"cpu": "100m"}, {"memory": "1Gi"}],
            init_requests={"cpu": "1"},
            node_name="n1",
            host_ports=[8080],
            volumes=[k.empty_dir_volume("tmp"), k.pvc_volume("data", "data")],
            owner_kind="ReplicaSet",
            owner_name="web-abc",
            priority=1000,
            node_selector={"a": "b"},
            affinity={"nodeAffinity": {}},
            tolerations=[{"key": "x", "operator": "Exists"}],
        ),
        k.pod("pending", scheduled="False", scheduled_reason="Unschedulable"),
        k.pod("done", node_name="n1", phase="Succeeded"),
        k.realistic_pod("web-7d9f8c6b5d-abcde", node_name="n1"),
        k.pdb("web", disruptions_allowed=0),
        k.daemonset("fluentd", requests={"cpu": "100m", "memory": "200Mi"}),
        k.replicaset("web-abc"),
        k.deployment("web"),
        k.configmap("cluster-autoscaler-status", "kube-system", data={"status": "ok"}),
        k.lease("asg-reconciler-apply-prod", holder="me"),
        k.event("e1", reason="ScaleUp", message="asg-a 3 -> 5"),
        k.namespace("team-a"),
        k.pv("pv-1", claim="default/data"),
        k.pvc("data", volume_name="pv-1"),
    ]
    kube_api.put_many(objs)
    core, apps = client.CoreV1Api(kube_client), client.AppsV1Api(kube_client)
    policy, coord = client.PolicyV1Api(kube_client), client.CoordinationV1Api(kube_client)
    assert core.read_node("n1").spec.taints[0].key == "dedicated"
    pod = core.read_namespaced_pod("p1", "default")
    assert pod.spec.containers[1].resources.requests == {"memory": "1Gi"}
    assert pod.spec.containers[0].ports[0].host_port == 8080
    assert core.read_namespaced_pod("pending", "default").status.conditions[0].reason == "Unschedulable"
    assert len(core.list_pod_for_all_namespaces().items) == 4
    assert policy.read_namespaced_pod_disruption_budget("web", "default").status.disruptions_allowed == 0
    assert apps.read_namespaced_daemon_set("fluentd", "kube-system").spec.template.spec.containers
    assert (
        apps.read_namespaced_replica_set("web-abc", "default").metadata.owner_references[0].kind
        == "Deployment"
    )
    assert apps.read_namespaced_deployment("web", "default").spec.replicas == 1
    assert core.read_namespaced_config_map("cluster-autoscaler-status", "kube-system").data == {
        "status": "ok"
    }
    assert (
        coord.read_namespaced_lease("asg-reconciler-apply-prod", "kube-system").spec.holder_identity == "me"
    )
    assert core.list_namespaced_event("default").items[0].reason == "ScaleUp"
    assert core.read_namespace("team-a").status.phase == "Active"
    assert core.read_persistent_volume("pv-1").spec.claim_ref.name == "data"
    assert core.read_namespaced_persistent_volume_claim("data", "default").spec.volume_name == "pv-1"
    for lister in (
        core.list_node,
        core.list_namespace,
        core.list_persistent_volume,
        core.list_persistent_volume_claim_for_all_namespaces,
        core.list_event_for_all_namespaces,
        core.list_config_map_for_all_namespaces,
        apps.list_daemon_set_for_all_namespaces,
        apps.list_replica_set_for_all_namespaces,
        apps.list_deployment_for_all_namespaces,
        policy.list_pod_disruption_budget_for_all_namespaces,
        coord.list_lease_for_all_namespaces,
    ):
        assert lister().items


def test_real_cluster_typed_list_items_load_with_explicit_kind(
    kube_api: FakeKubeAPI, v1: client.CoreV1Api
) -> None:
    for kind, file in (("Node", "nodes.json"), ("Pod", "pods.json"), ("DaemonSet", "daemonsets.json")):
        items = json.loads((EKS_FIXTURES / file).read_text())["items"]
        assert kube_api.put_many(items, kind=kind) == len(items)
    node = v1.list_node().items[0]
    assert node.status.allocatable["pods"] == "11"
    assert len(v1.list_namespaced_pod("kube-system").items) == 6


# ----------------------------------------------------------------------------------------- lists


def test_list_pages_with_limit_and_continue(kube_api: FakeKubeAPI, v1: client.CoreV1Api) -> None:
    kube_api.put_many(k.pod(f"p{i:04d}", f"ns{i % 3}", node_name="n1") for i in range(1234))
    first = raw_list(v1, limit=500)
    assert first["kind"] == "PodList" and first["apiVersion"] == "v1"
    assert int(first["metadata"]["resourceVersion"]) == kube_api.resource_version
    assert first["metadata"]["remainingItemCount"] == 734
    assert "kind" not in first["items"][0]  # as the real server prints list items
    names, pages = all_pages(v1, 500)
    assert pages == 3 and len(names) == 1234 and len(set(names)) == 1234
    ns_names = []
    cont = None
    while True:
        page = v1.list_namespaced_pod("ns1", limit=100, _continue=cont)
        ns_names += [p.metadata.name for p in page.items]
        cont = page.metadata._continue
        if not cont:
            break
    assert len(ns_names) == 411 and all(int(n[1:]) % 3 == 1 for n in ns_names)


def test_paging_never_skips_or_duplicates_unchanged_items(
    kube_api: FakeKubeAPI, v1: client.CoreV1Api
) -> None:
    kube_api.put_many(k.pod(f"p{i:03d}") for i in range(0, 300, 2))
    page = raw_list(v1, limit=50)
    seen = [p["metadata"]["name"] for p in page["items"]]
    kube_api.delete_object("Pod", "default", seen[0])  # already served
    kube_api.put(k.pod("p001"))  # before the cursor
    kube_api.put(k.pod("p299"))  # after the cursor: not served either, the list is a snapshot
    cont = page["metadata"]["continue"]
    while cont:
        page = raw_list(v1, limit=50, _continue=cont)
        seen += [p["metadata"]["name"] for p in page["items"]]
        cont = page["metadata"].get("continue")
    assert len(seen) == len(set(seen)) == 150
    assert set(seen) == {f"p{i:03d}" for i in range(0, 300, 2)}  # as at the first page


def test_bad_continue_token_is_400(v1: client.CoreV1Api) -> None:
    with pytest.raises(client.ApiException) as e:
        v1.list_pod_for_all_namespaces(limit=5, _continue="garbage")
    assert e.value.status == 400 and json.loads(e.value.body)["reason"] == "BadRequest"


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", {"web-1", "web-2"}),
        ("app==web", {"web-1", "web-2"}),
        ("app!=web", {"db-1", "bare"}),
        ("app in (web, db)", {"web-1", "web-2", "db-1"}),
        ("app notin (web)", {"db-1", "bare"}),
        ("tier", {"web-2", "db-1"}),
        ("!tier", {"web-1", "bare"}),
        ("app=web,tier", {"web-2"}),
        ("app in (web),tier notin (back)", {"web-1", "web-2"}),
    ],
)
def test_label_selectors(
    kube_api: FakeKubeAPI, v1: client.CoreV1Api, selector: str, expected: set[str]
) -> None:
    kube_api.put(k.pod("web-1", labels={"app": "web"}))
    kube_api.put(k.pod("web-2", labels={"app": "web", "tier": "front"}))
    kube_api.put(k.pod("db-1", labels={"app": "db", "tier": "back"}))
    kube_api.put(k.pod("bare"))
    got = {p.metadata.name for p in v1.list_namespaced_pod("default", label_selector=selector).items}
    assert got == expected


def test_field_selectors(kube_api: FakeKubeAPI, v1: client.CoreV1Api) -> None:
    kube_api.put(k.pod("a", "ns1", node_name="n1"))
    kube_api.put(k.pod("b", "ns1", node_name="n2"))
    kube_api.put(k.pod("done", "ns2", node_name="n1", phase="Succeeded"))
    kube_api.put(k.pod("failed", "ns2", node_name="n1", phase="Failed"))
    kube_api.put(k.pod("pending", "ns2"))

    def names(**kw: Any) -> set[str]:
        return {p.metadata.name for p in v1.list_pod_for_all_namespaces(**kw).items}

    assert names(field_selector="spec.nodeName=n1") == {"a", "done", "failed"}
    assert names(field_selector="spec.nodeName==n1,status.phase=Running") == {"a"}
    assert names(field_selector="status.phase!=Succeeded,status.phase!=Failed") == {"a", "b", "pending"}
    assert names(field_selector="spec.nodeName=") == {"pending"}
    assert names(field_selector="metadata.namespace=ns1,metadata.name!=a") == {"b"}
    assert names(field_selector="status.podIP!=", label_selector="") == {"a", "b", "done", "failed"}
    # paging and selectors together
    assert all_pages(v1, 1, field_selector="spec.nodeName=n1") == (["ns1/a", "ns2/done", "ns2/failed"], 3)
    with pytest.raises(client.ApiException) as e:
        v1.list_pod_for_all_namespaces(field_selector="spec.bogus=1")
    assert e.value.status == 400
    kube_api.put(k.node("n1", unschedulable=True))
    kube_api.put(k.node("n2"))
    assert [n.metadata.name for n in v1.list_node(field_selector="spec.unschedulable=false").items] == ["n2"]


# ---------------------------------------------------------------------------------------- writes


def test_create_get_conflict_and_generate_name(kube_api: FakeKubeAPI, v1: client.CoreV1Api) -> None:
    created = v1.create_namespaced_config_map("default", k.configmap("c1", data={"a": "1"}))
    assert created.metadata.resource_version == str(kube_api.resource_version)
    assert created.metadata.uid and created.metadata.creation_timestamp
    with pytest.raises(client.ApiException) as e:
        v1.create_namespaced_config_map("default", k.configmap("c1"))
    status = json.loads(e.value.body)
    assert e.value.status == 409 and status["kind"] == "Status" and status["reason"] == "AlreadyExists"
    generated = v1.create_namespaced_event(
        "default", {"metadata": {"generateName": "scale-"}, "involvedObject": {"kind": "Node", "name": "n1"}}
    )
    assert generated.metadata.name.startswith("scale-") and len(generated.metadata.name) == 11
    with pytest.raises(client.ApiException) as e:
        v1.read_namespaced_config_map("missing", "default")
    assert e.value.status == 404 and json.loads(e.value.body)["details"] == {
        "name": "missing",
        "kind": "configmaps",
    }


def test_update_with_stale_resource_version_is_409(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    coord = client.CoordinationV1Api(kube_client)
    # a fraction that is not zero: the client's models print a whole second without one, which the
    # API server (and so the fake) refuses as a MicroTime
    lease = coord.create_namespaced_lease(
        "kube-system", k.lease("apply", holder="a", acquire_time="2026-01-01T00:00:00.250000Z")
    )
    rv0 = lease.metadata.resource_version
    lease.spec.holder_identity = "b"
    updated = coord.replace_namespaced_lease("apply", "kube-system", lease)
    assert int(updated.metadata.resource_version) > int(rv0) and updated.spec.holder_identity == "b"
    lease.spec.holder_identity = "c"  # still carries rv0
    with pytest.raises(client.ApiException) as e:
        coord.replace_namespaced_lease("apply", "kube-system", lease)
    assert e.value.status == 409 and json.loads(e.value.body)["reason"] == "Conflict"
    assert kube_api.get_object("Lease", "kube-system", "apply")["spec"]["holderIdentity"] == "b"


def test_resource_version_is_global_and_noop_writes_keep_it(
    kube_api: FakeKubeAPI, v1: client.CoreV1Api
) -> None:
    a = kube_api.put(k.configmap("a"))
    b = kube_api.put(k.node("n1"))
    assert int(b["metadata"]["resourceVersion"]) == int(a["metadata"]["resourceVersion"]) + 1
    before = kube_api.resource_version
    v1.patch_node("n1", {"metadata": {"labels": {"kubernetes.io/hostname": "n1"}}})  # already so
    assert kube_api.resource_version == before


def test_patches(kube_api: FakeKubeAPI, v1: client.CoreV1Api) -> None:
    kube_api.put(k.node("n1"))
    kube_api.put(k.pod("p", node_name="n1", requests=[{"cpu": "1"}, {"cpu": "2"}]))
    # a dict body goes as a strategic merge patch
    node = v1.patch_node(
        "n1", {"spec": {"unschedulable": True, "taints": [{"key": "drain", "effect": "NoSchedule"}]}}
    )
    assert node.spec.unschedulable and node.spec.taints[0].key == "drain"
    # strategic merge patches merge containers by name; a merge patch replaces the list
    pod = v1.patch_namespaced_pod(
        "p", "default", {"spec": {"containers": [{"name": "app-1", "image": "new"}]}}
    )
    assert [c.image for c in pod.spec.containers] == [k.DEFAULT_IMAGE, "new"]
    cm = kube_api.put(k.configmap("c", data={"a": "1", "b": "2"}))
    merged = v1.patch_namespaced_config_map(
        "c", "default", {"data": {"a": None, "c": "3"}}, _content_type="application/merge-patch+json"
    )
    assert merged.data == {"b": "2", "c": "3"}
    # a list body goes as a JSON patch; `test` guards it
    patched = v1.patch_node(
        "n1",
        [
            {"op": "test", "path": "/spec/unschedulable", "value": True},
            {"op": "remove", "path": "/spec/taints/0"},
            {"op": "add", "path": "/metadata/annotations/x~1y", "value": "z"},
        ],
    )
    assert patched.spec.taints == [] and patched.metadata.annotations["x/y"] == "z"
    with pytest.raises(client.ApiException) as e:
        v1.patch_node("n1", [{"op": "test", "path": "/spec/unschedulable", "value": False}])
    assert e.value.status == 422
    # a patch carrying a stale resourceVersion is a conflict
    with pytest.raises(client.ApiException) as e:
        v1.patch_namespaced_config_map(
            "c", "default", {"metadata": {"resourceVersion": cm["metadata"]["resourceVersion"]}}
        )
    assert e.value.status == 409


def test_status_subresource_is_separate(kube_api: FakeKubeAPI, v1: client.CoreV1Api) -> None:
    kube_api.put(k.pod("p", node_name="n1"))
    # the main resource ignores status changes...
    pod = v1.patch_namespaced_pod(
        "p", "default", {"status": {"phase": "Failed"}, "metadata": {"labels": {"a": "b"}}}
    )
    assert pod.status.phase == "Running" and pod.metadata.labels == {"a": "b"}
    # ...the status subresource merges conditions by type and ignores the rest
    cond = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
    pod = v1.patch_namespaced_pod_status(
        "p", "default", {"status": {"conditions": [cond]}, "metadata": {"labels": {}}}
    )
    assert {c.type for c in pod.status.conditions} >= {"Ready", "PodScheduled", "DisruptionTarget"}
    assert pod.metadata.labels == {"a": "b"}


def test_server_side_apply_creates_then_merges(kube_api: FakeKubeAPI, v1: client.CoreV1Api) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "state"}, "data": {"a": "1"}}
    for _ in range(2):
        v1.patch_namespaced_config_map(
            "state",
            "default",
            body,
            field_manager="asg-reconciler",
            force=True,
            _content_type="application/apply-patch+yaml",
        )
    assert kube_api.get_object("ConfigMap", "default", "state")["data"] == {"a": "1"}


def test_delete(kube_api: FakeKubeAPI, v1: client.CoreV1Api) -> None:
    kube_api.put(k.pod("p", node_name="n1"))
    kube_api.put(k.configmap("c"))
    assert v1.delete_namespaced_pod("p", "default").metadata.name == "p"  # pods answer with the object
    status = v1.delete_namespaced_config_map("c", "default")
    assert status["status"] == "Success"
    with pytest.raises(client.ApiException) as e:
        v1.delete_namespaced_pod("p", "default")
    assert e.value.status == 404
    kube_api.put_many(k.pod(f"x{i}", labels={"batch": "1" if i < 3 else "2"}) for i in range(5))
    v1.delete_collection_namespaced_pod("default", label_selector="batch=1")
    assert [p["metadata"]["name"] for p in kube_api.objects("Pod")] == ["x3", "x4"]


def test_python_api(kube_api: FakeKubeAPI) -> None:
    kube_api.put(k.pod("p", "ns1"))
    kube_api.put(k.node("n1"), kind="nodes")
    assert kube_api.get_object("Pod", "ns1", "p")["kind"] == "Pod"
    assert kube_api.get_object("Node", None, "n1")["metadata"]["name"] == "n1"
    assert kube_api.get_object("Pod", "ns2", "p") is None
    assert [o["metadata"]["name"] for o in kube_api.objects("Pod", "ns1")] == ["p"]
    assert kube_api.count("po") == 1
    assert kube_api.delete_object("Pod", "ns1", "p") and not kube_api.delete_object("Pod", "ns1", "p")
    kube_api.reset()
    assert kube_api.count("Node") == 0
    with pytest.raises(KeyError):
        kube_api.put({"kind": "Secret", "metadata": {"name": "s"}})


# ------------------------------------------------------------------------------------------ watch


def test_watch_streams_added_modified_deleted(kube_api: FakeKubeAPI, v1: client.CoreV1Api) -> None:
    kube_api.put(k.pod("old"))
    rv = v1.list_namespaced_pod("default").metadata.resource_version

    def writer() -> None:
        time.sleep(0.1)
        kube_api.put(k.pod("new", labels={"app": "web"}))
        kube_api.put(k.pod("other", "elsewhere"))
        v1.patch_namespaced_pod("new", "default", {"metadata": {"labels": {"x": "y"}}})
        v1.delete_namespaced_pod("new", "default")

    t = threading.Thread(target=writer)
    t.start()
    events = []
    w = watch.Watch()
    for ev in w.stream(v1.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=2):
        events.append((ev["type"], ev["object"].metadata.name))
        if len(events) == 3:
            w.stop()
    t.join()
    assert events == [("ADDED", "new"), ("MODIFIED", "new"), ("DELETED", "new")]


def test_watch_without_resource_version_starts_with_current_objects(
    kube_api: FakeKubeAPI, v1: client.CoreV1Api
) -> None:
    kube_api.put(k.pod("a", labels={"app": "web"}))
    kube_api.put(k.pod("b"))
    t0 = time.monotonic()
    events = [
        (e["type"], e["raw_object"]["metadata"]["name"])
        for e in watch.Watch().stream(
            v1.list_namespaced_pod, "default", label_selector="app=web", timeout_seconds=1
        )
    ]
    assert events == [("ADDED", "a")]
    assert 0.9 < time.monotonic() - t0 < 5  # ends at timeoutSeconds


def test_watch_selector_moves_are_added_and_deleted(kube_api: FakeKubeAPI, v1: client.CoreV1Api) -> None:
    rv = str(kube_api.resource_version)
    kube_api.put(k.pod("p", labels={"app": "db"}))
    kube_api.put(k.pod("p", labels={"app": "web"}))
    kube_api.put(k.pod("p", labels={"app": "db"}))
    got = []
    w = watch.Watch()
    for e in w.stream(
        v1.list_namespaced_pod, "default", label_selector="app=web", resource_version=rv, timeout_seconds=5
    ):
        got.append(e["type"])
        if len(got) == 2:
            w.stop()
    assert got == ["ADDED", "DELETED"]


def test_watch_from_expired_resource_version_is_410(kube_api: FakeKubeAPI, v1: client.CoreV1Api) -> None:
    kube_api.max_events = 4
    rv = str(kube_api.resource_version)
    kube_api.put_many(k.configmap(f"c{i}") for i in range(10))
    with pytest.raises(client.ApiException) as e:
        list(
            watch.Watch().stream(
                v1.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=1
            )
        )
    assert e.value.status == 410
    kube_api.max_events = 200_000


# --------------------------------------------------------------------------------------- eviction


def evict(v1: client.CoreV1Api, name: str, namespace: str = "default") -> Any:
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))
    return v1.create_namespaced_pod_eviction(name, namespace, body)


def test_eviction_respects_pod_disruption_budgets(kube_api: FakeKubeAPI, v1: client.CoreV1Api) -> None:
    for name in ("web-1", "web-2"):
        kube_api.put(k.pod(name, node_name="n1", labels={"app": "web"}))
    kube_api.put(k.pod("lonely", node_name="n1"))
    kube_api.put(k.pod("web-x", "other", node_name="n1", labels={"app": "web"}))
    kube_api.put(k.pdb("web-pdb", match_labels={"app": "web"}, disruptions_allowed=1))

    evict(v1, "lonely")  # no PDB: evicted
    evict(v1, "web-1")  # takes the one allowed disruption
    pdb = kube_api.get_object("PodDisruptionBudget", "default", "web-pdb")
    assert pdb["status"]["disruptionsAllowed"] == 0 and "web-1" in pdb["status"]["disruptedPods"]
    with pytest.raises(client.ApiException) as e:
        evict(v1, "web-2")
    status = json.loads(e.value.body)
    assert e.value.status == 429 and status["reason"] == "TooManyRequests"
    assert status["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert status["details"]["causes"] == [  # the budget is named in the cause only, as the real server
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget web-pdb needs 1 healthy pods and has 2 currently",
        }
    ]
    evict(v1, "web-x", "other")  # a PDB only covers its own namespace
    assert [p["metadata"]["name"] for p in kube_api.objects("Pod")] == ["web-2"]
    with pytest.raises(client.ApiException) as e:
        evict(v1, "gone")
    assert e.value.status == 404


def test_eviction_of_pod_under_two_pdbs_is_refused_like_the_real_server(
    kube_api: FakeKubeAPI, v1: client.CoreV1Api
) -> None:
    kube_api.put(k.pod("p", node_name="n1", labels={"app": "web"}))
    kube_api.put(k.pdb("a", match_labels={"app": "web"}))
    kube_api.put(k.pdb("b", selector={}))  # empty selector: every pod of the namespace
    with pytest.raises(client.ApiException) as e:
        evict(v1, "p")
    assert (
        e.value.status == 500 and "more than one PodDisruptionBudget" in json.loads(e.value.body)["message"]
    )


def test_graceful_termination_keeps_the_pod_until_its_grace_period_ends(
    kube_api: FakeKubeAPI, v1: client.CoreV1Api
) -> None:
    kube_api.pod_termination_seconds = 0.3
    kube_api.put(k.pod("p", node_name="n1"))
    evict(v1, "p")
    terminating = v1.read_namespaced_pod("p", "default")
    assert terminating.metadata.deletion_timestamp is not None
    deadline = time.monotonic() + 5
    while kube_api.get_object("Pod", "default", "p") is not None:
        assert time.monotonic() < deadline
        time.sleep(0.05)


# ------------------------------------------------------------------------------- faults, counters


def test_fault_hook_and_call_counts(kube_api: FakeKubeAPI, v1: client.CoreV1Api) -> None:
    kube_api.put(k.node("n1"))
    v1.list_node()
    v1.list_node()
    assert kube_api.calls[("GET", "/api/v1/nodes")] == 2

    kube_api.fault = lambda method, path, query: (503, None) if path == "/api/v1/nodes" else None
    with pytest.raises(client.ApiException) as e:
        v1.list_node()
    assert e.value.status == 503 and json.loads(e.value.body)["kind"] == "Status"
    assert v1.read_node("n1").metadata.name == "n1"

    kube_api.fault = lambda method, path, query: (
        429,
        {"kind": "Status", "code": 429, "reason": "TooManyRequests"},
    )
    with pytest.raises(client.ApiException) as e:
        v1.list_node()
    assert e.value.status == 429

    kube_api.fault = lambda method, path, query: 0.3
    t0 = time.monotonic()
    v1.list_node()
    assert time.monotonic() - t0 >= 0.3

    kube_api.fault = lambda method, path, query: DROP
    with pytest.raises(urllib3.exceptions.HTTPError):
        v1.list_node(_request_timeout=2)
    kube_api.fault = None
    assert v1.list_node().items
    assert kube_api.requests[0].query == {}
    assert kube_api.requests[0].headers["authorization"] == "Bearer fake-token"


# ----------------------------------------------------------------------------- kubectl, config


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_kubectl_get_pods_pages(kube_api: FakeKubeAPI, kubeconfig_path: Path, tmp_path: Path) -> None:
    kube_api.put_many(k.pod(f"p{i:04d}", f"ns{i % 3}", node_name="n1") for i in range(1234))
    out = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            str(kubeconfig_path),
            "--cache-dir",
            str(tmp_path / "cache"),
            "get",
            "pods",
            "-A",
            "-o",
            "json",
            "--chunk-size=500",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    items = json.loads(out)["items"]
    keys = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in items}
    assert len(items) == len(keys) == 1234
    pages = [r for r in kube_api.requests if r.path == "/api/v1/pods"]
    assert [r.query.get("limit") for r in pages] == ["500"] * 3
    assert ["continue" in r.query for r in pages] == [False, True, True]


def test_kubeconfig_loads_with_the_official_loader(kube_api: FakeKubeAPI, kubeconfig_path: Path) -> None:
    kube_api.put(k.node("n1"))
    api_client = config.new_client_from_config(config_file=str(kubeconfig_path))
    try:
        assert [n.metadata.name for n in client.CoreV1Api(api_client).list_node().items] == ["n1"]
    finally:
        api_client.close()


def test_stopped_server_refuses_connections() -> None:
    api = FakeKubeAPI().start()
    api_client = make_api_client(api.url)
    v1 = client.CoreV1Api(api_client)
    assert v1.list_node().items == []
    api.stop()
    with pytest.raises(urllib3.exceptions.HTTPError):
        client.CoreV1Api(make_api_client(api_client.configuration.host)).list_node(_request_timeout=2)
    api_client.close()


def test_serve_in_subprocess(tmp_path: Path) -> None:
    path = tmp_path / "objects.jsonl"
    k.write_jsonl(path, [k.node("n1"), *(k.realistic_pod(f"web-{i}", node_name="n1") for i in range(20))])
    with serve_in_subprocess(path) as (url, proc):
        api_client = make_api_client(url)
        try:
            names, pages = all_pages(client.CoreV1Api(api_client), 7)
            assert len(names) == 20 and pages == 3
        finally:
            api_client.close()
    assert proc.poll() is not None


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("2026-12-04T03:00:00.000000Z", True),
        ("2026-12-04T03:00:00.250000+00:00", True),
        ("2026-12-04T03:00:00Z", False),  # what the client's own isoformat() makes of a whole second
        ("2026-12-04T03:00:00.25Z", False),
        ("2026-12-04T03:00:00.2500001Z", False),
        ("yesterday", False),
    ],
)
def test_lease_times_must_be_micro_time_as_the_api_server_parses_them(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, value: str, accepted: bool
) -> None:
    """metav1.MicroTime decodes with RFC3339Micro: six fractional digits exactly, on create, update
    and patch alike."""
    kube_api.put(k.lease("l", holder="me"))
    leases = f"{kube_api.url}/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
    writes = [
        ("PATCH", f"{leases}/l", "application/merge-patch+json", {"spec": {"renewTime": value}}),
        ("POST", leases, "application/json", {"metadata": {"name": "new"}, "spec": {"acquireTime": value}}),
    ]
    for method, url, content_type, body in writes:
        response = kube_client.call_api(method, url, {"Content-Type": content_type}, body)
        response.read()
        if accepted:
            assert response.status in (200, 201), response.data
            continue
        assert response.status == 400
        message = orjson.loads(response.data)["message"]
        assert f'cannot be handled as a Lease: parsing time "{value}"' in message
    if accepted:
        assert kube_api.get_object("Lease", "kube-system", "l")["spec"]["renewTime"] == value  # type: ignore[index]
