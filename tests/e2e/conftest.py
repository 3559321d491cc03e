"""The end-to-end world of apply's tests: moto, the fake Kubernetes API, a bare repository, keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.demo.kube_api import FakeKubeAPI
from tests.support.apply_world import World
from tests.support.aws import MotoAws


@pytest.fixture
def world(
    aws: MotoAws, kube_api: FakeKubeAPI, bare_remote: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> World:
    return World(aws, kube_api, bare_remote, tmp_path, monkeypatch)
