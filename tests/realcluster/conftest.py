"""The real tier's fixtures: one real control plane per test process (session scope), reset before
each test; the node simulator playing the kubelets of moto's instances; the world a CLI story runs in.

Every test module here puts its tests in the xdist group `realcluster`, so the whole suite starts
one control plane and the other worker runs the rest of the suite meanwhile. Where the control plane
is not cached and Go is missing, every test here skips with one line saying why
(tests/controlplane/binaries.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.controlplane import binaries
from tests.controlplane.cluster import ControlPlane
from tests.support.aws import MotoAws
from tests.support.node_simulator import NodeSimulator
from tests.support.real_cluster import RealCluster, new_api_client
from tests.support.real_world import SHIPPED_CLUSTER, RealWorld


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    reason = binaries.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    plane = ControlPlane(tmp_path_factory.mktemp("control-plane"), binaries.build()).start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture
def real_cluster(control_plane: ControlPlane) -> Iterator[RealCluster]:
    api = new_api_client(control_plane.admin_kubeconfig)
    cluster = RealCluster(control_plane, api)
    cluster.reset()
    try:
        yield cluster
    finally:
        api.close()


@pytest.fixture
def simulator(real_cluster: RealCluster, aws: MotoAws) -> Iterator[NodeSimulator]:
    sim = NodeSimulator(new_api_client(real_cluster.kubeconfig), aws.autoscaling, aws.ec2).start()
    try:
        yield sim
    finally:
        sim.stop()
        sim.api.close()
    assert not sim.errors, sim.errors


@pytest.fixture
def real_world(
    aws: MotoAws,
    real_cluster: RealCluster,
    simulator: NodeSimulator,
    bare_remote: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> RealWorld:
    return RealWorld(aws, real_cluster, simulator, bare_remote, tmp_path, monkeypatch)


@pytest.fixture
def eks_world(
    aws: MotoAws,
    real_cluster: RealCluster,
    simulator: NodeSimulator,
    bare_remote: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> RealWorld:
    """A world of the cluster the shipped overlays name (their Roles' resourceNames follow it)."""
    return RealWorld(aws, real_cluster, simulator, bare_remote, tmp_path, monkeypatch, name=SHIPPED_CLUSTER)
