"""Fixtures for the kube test component (DESIGN §6): the fake Kubernetes API over real HTTP.

One server per test session (starting one costs little, but stopping waits on its poll loop);
`kube_api` hands each test that server freshly reset — no objects, faults, counters or open watches
left from the previous test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from reconciler.demo.kube_api import FakeKubeAPI

FAKE_TOKEN = "fake-token"


def make_api_client(url: str, *, token: str = FAKE_TOKEN) -> client.ApiClient:
    """An ApiClient for `url` (plain http, bearer token), not touching ~/.kube or the default
    Configuration that other code may have set."""
    cfg = client.Configuration()
    cfg.host = url
    cfg.api_key = {"BearerToken": token}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    return client.ApiClient(cfg)


def write_kubeconfig(path: Path, url: str, *, namespace: str = "default", token: str = FAKE_TOKEN) -> Path:
    """A kubeconfig (JSON is valid YAML) with one context pointing at `url` over insecure http."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "fake", "user": {"token": token}}],
        "contexts": [
            {"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": namespace}}
        ],
        "current-context": "fake",
        "preferences": {},
    }
    path.write_text(json.dumps(config, indent=2))
    return path


@pytest.fixture(scope="session")
def kube_api_server() -> Iterator[FakeKubeAPI]:
    """The session's fake API server; tests should use `kube_api`, which resets it."""
    api = FakeKubeAPI().start()
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture
def kube_api(kube_api_server: FakeKubeAPI) -> Iterator[FakeKubeAPI]:
    """A started, empty fake Kubernetes API (`.url`, `.put()`, `.fault`, `.calls`...)."""
    kube_api_server.reset()
    yield kube_api_server
    kube_api_server.reset()


@pytest.fixture
def kubeconfig_path(kube_api: FakeKubeAPI, tmp_path: Path) -> Path:
    """A kubeconfig file for `kube_api`, for code (and kubectl) that loads one."""
    return write_kubeconfig(tmp_path / "kubeconfig", kube_api.url)


@pytest.fixture
def kube_client(kube_api: FakeKubeAPI) -> Iterator[client.ApiClient]:
    """An official-client ApiClient connected to `kube_api`."""
    api_client = make_api_client(kube_api.url)
    try:
        yield api_client
    finally:
        api_client.close()
