"""The fake API pages a list as etcd and kube-apiserver do: every page at the first page's
resourceVersion (one consistent snapshot, whatever changed in between), and a continue token whose
revision was compacted away answers 410 Expired (`The provided continue parameter is too old ...`)
with a token to an inconsistent remainder, as `storage/etcd3` does."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from kubernetes import client

from reconciler.demo.kube_api import FakeKubeAPI
from tests.support import k8s_objects as k


@pytest.fixture
def v1(kube_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(kube_client)


def page(v1: client.CoreV1Api, **kwargs: Any) -> dict[str, Any]:
    response = v1.list_pod_for_all_namespaces(_preload_content=False, **kwargs)
    data: dict[str, Any] = orjson.loads(response.data)
    return data


def rest(
    v1: client.CoreV1Api, token: str, limit: int, **kwargs: Any
) -> tuple[list[dict[str, Any]], set[str]]:
    """The items of every page after the first, and the resourceVersions those pages carried."""
    items: list[dict[str, Any]] = []
    versions: set[str] = set()
    while token:
        got = page(v1, limit=limit, _continue=token, **kwargs)
        items += got["items"]
        versions.add(got["metadata"]["resourceVersion"])
        token = got["metadata"].get("continue", "")
    return items, versions


def test_every_page_is_served_at_the_first_pages_resource_version(
    kube_api: FakeKubeAPI, v1: client.CoreV1Api
) -> None:
    kube_api.put_many(k.pod(f"p{i:03d}", labels={"app": "web"}) for i in range(150))
    first = page(v1, limit=50)
    version = first["metadata"]["resourceVersion"]
    served = [p["metadata"]["name"] for p in first["items"]]
    # after the first page: one served pod deleted, one still to come deleted, one relabelled, one
    # new pod after the cursor, one re-created
    kube_api.delete_object("Pod", "default", "p000")
    kube_api.delete_object("Pod", "default", "p120")
    relabelled = kube_api.get_object("Pod", "default", "p100")
    assert relabelled is not None
    before = relabelled["metadata"]["resourceVersion"]
    relabelled["metadata"]["labels"] = {"app": "batch"}
    kube_api.put(relabelled)
    kube_api.put(k.pod("p999", labels={"app": "web"}))
    kube_api.delete_object("Pod", "default", "p130")
    kube_api.put(k.pod("p130", labels={"app": "other"}))

    items, versions = rest(v1, first["metadata"]["continue"], 50)
    assert versions == {version}  # every page at the first page's version
    names = served + [p["metadata"]["name"] for p in items]
    assert names == [f"p{i:03d}" for i in range(150)]  # the list as it was, nothing new, nothing gone
    by_name = {p["metadata"]["name"]: p for p in items}
    assert by_name["p100"]["metadata"]["labels"] == {"app": "web"}
    assert by_name["p100"]["metadata"]["resourceVersion"] == before
    assert by_name["p130"]["metadata"]["labels"] == {"app": "web"}

    # selectors filter the snapshot too: p100 and p130 matched app=web when the list began
    first = page(v1, limit=10, label_selector="app=web")
    kube_api.put({**relabelled, "metadata": {**relabelled["metadata"], "labels": {"app": "web"}}})
    items, versions = rest(v1, first["metadata"]["continue"], 10, label_selector="app=web")
    names = [p["metadata"]["name"] for p in first["items"] + items]
    assert "p100" not in names and "p130" not in names and "p999" in names
    assert len(names) == len(set(names)) == 147  # p001-p149 but p100, p120, p130; and p999
    assert versions == {first["metadata"]["resourceVersion"]}


def test_remaining_item_count_is_the_snapshots(kube_api: FakeKubeAPI, v1: client.CoreV1Api) -> None:
    kube_api.put_many(k.pod(f"p{i:02d}") for i in range(30))
    first = page(v1, limit=10)
    assert first["metadata"]["remainingItemCount"] == 20
    for i in range(5):
        kube_api.delete_object("Pod", "default", f"p{20 + i}")
    kube_api.put(k.pod("p99"))
    second = page(v1, limit=10, _continue=first["metadata"]["continue"])
    assert second["metadata"]["remainingItemCount"] == 10  # p20..p29 were there when it began


def test_a_compacted_continue_token_is_410_expired(kube_api: FakeKubeAPI, v1: client.CoreV1Api) -> None:
    kube_api.put_many(k.pod(f"p{i:02d}") for i in range(30))
    first = page(v1, limit=10)
    kube_api.put(k.pod("p95"))  # a change after the list began, then etcd compacts past the list
    kube_api.compact()
    with pytest.raises(client.ApiException) as raised:
        page(v1, limit=10, _continue=first["metadata"]["continue"])
    status = json.loads(raised.value.body)
    assert raised.value.status == 410
    assert (status["kind"], status["status"], status["reason"], status["code"]) == (
        "Status",
        "Failure",
        "Expired",
        410,
    )
    assert status["message"].startswith(
        "The provided continue parameter is too old to display a consistent list"
    )
    # the token in the Status goes on from the same key at the latest version (an inconsistent list)
    items, _ = rest(v1, status["metadata"]["continue"], 10)
    names = [p["metadata"]["name"] for p in items]
    assert names == [f"p{i:02d}" for i in range(10, 30)] + ["p95"]
    # a list begun after the compaction pages as usual
    again = page(v1, limit=10)
    items, versions = rest(v1, again["metadata"]["continue"], 10)
    assert len(again["items"] + items) == 31 and versions == {again["metadata"]["resourceVersion"]}


def test_a_compaction_older_than_the_list_leaves_its_token_alive(
    kube_api: FakeKubeAPI, v1: client.CoreV1Api
) -> None:
    kube_api.put_many(k.pod(f"p{i:02d}") for i in range(30))
    first = page(v1, limit=10)
    kube_api.put(k.pod("p95"))
    kube_api.compact(int(first["metadata"]["resourceVersion"]))  # up to the list's own revision
    items, versions = rest(v1, first["metadata"]["continue"], 10)
    assert len(items) == 20 and versions == {first["metadata"]["resourceVersion"]}


def test_a_watch_from_a_compacted_revision_is_410(kube_api: FakeKubeAPI, v1: client.CoreV1Api) -> None:
    kube_api.put(k.pod("p1"))
    old = kube_api.resource_version
    kube_api.put(k.pod("p2"))
    kube_api.compact()
    response = v1.list_pod_for_all_namespaces(
        watch=True, resource_version=str(old), timeout_seconds=1, _preload_content=False
    )
    [line] = [json.loads(x) for x in response.data.splitlines() if x.strip()]
    assert line["type"] == "ERROR" and line["object"]["code"] == 410
