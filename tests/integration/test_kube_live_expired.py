"""A paged live read whose continue token etcd compacted away (410 Expired) lists that kind again
from the start, as client-go's pager does, rather than failing the read; after LIST_RESTARTS
restarts in a row it fails with one line that says why."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from reconciler.demo.kube_api import FakeKubeAPI, Fault
from reconciler.domain.errors import OperationError
from reconciler.kube.live import LIST_RESTARTS, LiveReader
from reconciler.kube.snapshot import read_snapshot
from tests.support import k8s_objects as k
from tests.support.kube import make_api_client
from tests.support.kube_cluster import populate

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def compacting(api: FakeKubeAPI, path: str, change: Callable[[], None], times: int = 1) -> Fault:
    """A fault hook: before the next `times` continued pages of `path`, the cluster changes and etcd
    compacts, so the page's token is too old."""
    left = [times]

    def fault(method: str, where: str, query: dict[str, str]) -> None:
        if where == path and query.get("continue") and left[0] > 0:
            left[0] -= 1
            change()
            api.compact()

    return fault


def churn(api: FakeKubeAPI) -> Callable[[], None]:
    """Something else in the cluster changes (a ConfigMap nobody reads): etcd's revision moves."""
    return lambda: api.put(k.configmap(f"churn-{api.resource_version}", "default"))


def first_pages(api: FakeKubeAPI, path: str) -> int:
    return sum(1 for r in api.requests if r.path == path and "continue" not in r.query)


def test_pods_listed_again_after_an_expired_token_are_the_latest(
    kube_api: FakeKubeAPI, tmp_path: Path
) -> None:
    objects = populate(kube_api)
    late = k.pod("late-0", "batch", requests={"cpu": "1"}, owner_kind="Job", owner_name="j")

    def change() -> None:  # between two pages: a pod comes, another goes
        kube_api.put(late)
        kube_api.delete_object("Pod", "shop", "web-3")

    kube_api.fault = compacting(kube_api, "/api/v1/pods", change)
    live = LiveReader(make_api_client(kube_api.url), page_size=3).read(NOW)

    final = [o for o in objects if o["metadata"]["name"] != "web-3"] + [late]
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"kind": "List", "items": final}))
    assert live == read_snapshot(dump, NOW)  # each pod once, as the cluster is now
    assert first_pages(kube_api, "/api/v1/pods") == 2  # listed again from the start, once


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/nodes",
        "/api/v1/pods",
        "/apis/policy/v1/poddisruptionbudgets",
        "/apis/apps/v1/daemonsets",
        "/api/v1/persistentvolumes",
        "/api/v1/persistentvolumeclaims",
        "/api/v1/namespaces",
    ],
)
def test_every_paged_list_survives_an_expired_token(kube_api: FakeKubeAPI, tmp_path: Path, path: str) -> None:
    objects = populate(kube_api)
    extra: list[dict[str, Any]] = [
        k.daemonset("node-exporter", requests={"cpu": "50m"}),
        k.pdb("api", "shop", match_labels={"app": "api"}, disruptions_allowed=0),
        k.pv("pv-2", zones=["us-east-1a"]),
        k.pvc("data-1", "shop"),
    ]
    for obj in extra:
        kube_api.put(obj)
    kube_api.fault = compacting(kube_api, path, churn(kube_api))
    live = LiveReader(make_api_client(kube_api.url), page_size=1).read(NOW)

    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"kind": "List", "items": objects + extra}))
    assert live == read_snapshot(dump, NOW)
    assert first_pages(kube_api, path) == 2


def test_a_list_that_keeps_expiring_fails_in_one_line(kube_api: FakeKubeAPI) -> None:
    populate(kube_api)
    kube_api.fault = compacting(kube_api, "/api/v1/pods", churn(kube_api), times=LIST_RESTARTS + 1)
    with pytest.raises(OperationError) as raised:
        LiveReader(make_api_client(kube_api.url), page_size=3).read(NOW)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("Kubernetes API: list Pods: ")
    assert "410 Expired" in message and "kubernetes.pageSize" in message
    assert first_pages(kube_api, "/api/v1/pods") == LIST_RESTARTS + 1
