"""Live listing through the official client against the fake API equals reading the same objects
from a kubectl dump; faults become one-line errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.config.settings import KubernetesConfig
from reconciler.demo.kube_api import FakeKubeAPI
from reconciler.domain.errors import OperationError, UserError
from reconciler.kube.client import api_client
from reconciler.kube.live import NAMESPACES_FORBIDDEN, LiveReader
from reconciler.kube.snapshot import read_snapshot
from tests.support import k8s_objects as k
from tests.support.kube import make_api_client
from tests.support.kube_cluster import FORBIDDEN, populate

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_live_listing_pages_and_equals_the_snapshot(kube_api: FakeKubeAPI, tmp_path: Path) -> None:
    objects = populate(kube_api)
    live = LiveReader(make_api_client(kube_api.url), page_size=3).read(NOW)

    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": objects}))
    snapshot = read_snapshot(dump, NOW)

    assert live == snapshot
    assert len(live.pods) == 9  # terminal pods left out by the field selector
    stopping = next(p for p in live.pods if p.name == "stopping-0")
    assert stopping.deleting_since == datetime(2026, 1, 1, 11, 58, tzinfo=UTC)
    assert stopping.grace_period_seconds == 30 and stopping.is_long_terminating(NOW)
    assert [n.name for n in live.nodes] == ["node-a", "node-b", "node-c"]
    assert live.autoscaler is not None
    assert live.pvs[0].zones == ("us-east-1b",)
    # 9 non-terminal pods at 3 per page: three requests, each with the terminal-phase field selector
    pod_lists = [c for c in kube_api.calls if c[1] == "/api/v1/pods"]
    assert sum(kube_api.calls[c] for c in pod_lists) == 3
    assert kube_api.calls[("GET", "/api/v1/namespaces")] == 2  # 4 namespaces at 3 per page


def test_namespaces_and_their_labels_arrive(kube_api: FakeKubeAPI) -> None:
    populate(kube_api)
    state = LiveReader(make_api_client(kube_api.url), page_size=3).read(NOW)

    assert state.namespaces == {
        "batch": {"kubernetes.io/metadata.name": "batch", "team": "data"},
        "default": {"kubernetes.io/metadata.name": "default"},
        "kube-system": {"kubernetes.io/metadata.name": "kube-system"},
        "shop": {"kubernetes.io/metadata.name": "shop", "team": "shop", "tier": "frontend"},
    }
    assert list(state.namespaces) == ["batch", "default", "kube-system", "shop"]
    assert state.warnings == ()
    # paged like every list: the second page asks for what the first one's continue token names
    pages = [r.query for r in kube_api.requests if r.path == "/api/v1/namespaces"]
    assert [q.get("limit") for q in pages] == ["3", "3"]
    assert "continue" not in pages[0] and pages[1]["continue"]


def test_no_namespaces_listed_is_read_and_empty(kube_api: FakeKubeAPI) -> None:
    kube_api.put(k.node("node-a"))
    state = LiveReader(make_api_client(kube_api.url)).read(NOW)
    assert state.namespaces == {}  # read (the list answered), unlike None: not read


def test_namespaces_forbidden_are_not_read_and_said_so(kube_api: FakeKubeAPI) -> None:
    populate(kube_api)
    kube_api.fault = lambda method, path, query: (403, FORBIDDEN) if path == "/api/v1/namespaces" else None
    state = LiveReader(make_api_client(kube_api.url), page_size=3).read(NOW)

    assert state.namespaces is None
    assert state.warnings == (NAMESPACES_FORBIDDEN,)
    assert "list namespaces is forbidden" in NAMESPACES_FORBIDDEN
    assert "grant `list` on `namespaces`" in NAMESPACES_FORBIDDEN
    # everything else was read as usual
    assert len(state.nodes) == 3 and len(state.pods) == 9 and state.autoscaler is not None


def test_namespaces_forbidden_after_the_first_page_leave_none_half_read(kube_api: FakeKubeAPI) -> None:
    populate(kube_api)
    kube_api.fault = lambda method, path, query: (
        (403, FORBIDDEN) if path == "/api/v1/namespaces" and query.get("continue") else None
    )
    state = LiveReader(make_api_client(kube_api.url), page_size=3).read(NOW)
    assert state.namespaces is None
    assert state.warnings == (NAMESPACES_FORBIDDEN,)


def test_other_namespace_errors_still_fail_the_read(kube_api: FakeKubeAPI) -> None:
    populate(kube_api)
    kube_api.fault = lambda method, path, query: (401, None) if path == "/api/v1/namespaces" else None
    with pytest.raises(OperationError, match="list Namespaces: unauthorized"):
        LiveReader(make_api_client(kube_api.url)).read(NOW)


def test_reads_through_a_kubeconfig(kube_api: FakeKubeAPI, kubeconfig_path: Path) -> None:
    populate(kube_api)
    state = LiveReader(api_client(KubernetesConfig(kubeconfig=str(kubeconfig_path)))).read(NOW)
    assert len(state.nodes) == 3


def test_unreachable_api_server_is_one_line() -> None:
    client = make_api_client("http://127.0.0.1:9")
    client.configuration.retries = 0
    with pytest.raises(OperationError) as info:
        LiveReader(client).read(NOW)
    assert "cannot reach the Kubernetes API at http://127.0.0.1:9" in str(info.value)
    assert "\n" not in str(info.value)


def test_forbidden_names_the_list_and_the_fix(kube_api: FakeKubeAPI) -> None:
    populate(kube_api)
    kube_api.fault = lambda method, path, query: (403, FORBIDDEN) if path == "/api/v1/pods" else None
    with pytest.raises(OperationError, match="list Pods: forbidden"):
        LiveReader(make_api_client(kube_api.url)).read(NOW)


def test_missing_kubeconfig_is_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="kubernetes.kubeconfig"):
        api_client(KubernetesConfig(kubeconfig=str(tmp_path / "missing")))
