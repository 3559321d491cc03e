"""The node-template arithmetic (docs/node-templates.md), checked against a real EKS t3.small."""

from __future__ import annotations

import json

import pytest

from reconciler.aws.allocatable import (
    KI,
    MI,
    eks_reserved_cpu_milli,
    eks_reserved_memory,
    memory_capacity,
    node_resources,
    vpc_cni_max_pods,
)
from reconciler.config.settings import NodeTemplatesConfig
from reconciler.domain.quantity import int_value, milli_value
from tests.data import EKS_T3SMALL

FIXTURE = EKS_T3SMALL / "nodes.json"


def real_t3small_allocatable() -> dict[str, str]:
    nodes = json.loads(FIXTURE.read_text())
    node = nodes["items"][0]
    assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "t3.small"
    return dict(node["status"]["allocatable"])


@pytest.mark.parametrize(("enis", "ipv4", "pods"), [(3, 4, 11), (3, 10, 29), (4, 15, 58), (15, 50, 737)])
def test_vpc_cni_max_pods(enis: int, ipv4: int, pods: int) -> None:
    assert vpc_cni_max_pods(enis, ipv4) == pods


@pytest.mark.parametrize(
    ("vcpus", "milli"),
    # EKS's published reservations: 1→60m, 2→70m, 4→80m, 8→90m, 16→110m, 48→190m, 96→310m
    [(1, 60), (2, 70), (3, 75), (4, 80), (5, 82), (8, 90), (16, 110), (48, 190), (96, 310)],
)
def test_eks_reserved_cpu(vcpus: int, milli: int) -> None:
    assert eks_reserved_cpu_milli(vcpus) == milli


def test_eks_reserved_memory() -> None:
    assert eks_reserved_memory(11) == 376 * MI
    assert eks_reserved_memory(110) == (255 + 1210) * MI


def test_memory_capacity_rounds_down_to_a_kib() -> None:
    assert memory_capacity(2048, 0.075) == 1939865 * KI
    assert memory_capacity(1024, 0) == 1024 * MI


def test_t3small_matches_the_real_node() -> None:
    real = real_t3small_allocatable()
    got = node_resources(vcpus=2, memory_mib=2048, max_enis=3, ipv4_per_eni=4, settings=NodeTemplatesConfig())
    assert got.allocatable.cpu == milli_value(real["cpu"]) == 1930
    assert got.allocatable.pods == int_value(real["pods"]) == 11
    real_memory = int_value(real["memory"])
    assert abs(got.allocatable.memory - real_memory) / real_memory < 0.03
    assert got.capacity.cpu == 2000
    assert got.reserved_cpu_milli == 70
    assert got.reserved_memory == 376 * MI
    assert got.eviction_memory == 100 * MI


def test_config_overrides_each_piece() -> None:
    settings = NodeTemplatesConfig(
        vm_memory_overhead_percent=0.0,
        reserved_cpu_milli=100,
        reserved_memory=500 * MI,
        eviction_hard_memory=200 * MI,
        max_pods=110,
    )
    got = node_resources(2, 2048, 3, 4, settings)
    assert got.capacity.memory == 2048 * MI
    assert got.allocatable.cpu == 1900
    assert got.allocatable.memory == (2048 - 500 - 200) * MI
    assert got.allocatable.pods == got.capacity.pods == 110


def test_max_pods_from_config_sizes_reserved_memory() -> None:
    got = node_resources(2, 2048, 3, 4, NodeTemplatesConfig(max_pods=20))
    assert got.reserved_memory == (255 + 11 * 20) * MI


def test_a_pods_tag_beats_the_config_and_the_formula() -> None:
    got = node_resources(2, 2048, 3, 4, NodeTemplatesConfig(max_pods=20), pods=8)
    assert got.max_pods == 8
    assert got.reserved_memory == (255 + 88) * MI


def test_allocatable_never_goes_negative() -> None:
    got = node_resources(1, 256, 2, 2, NodeTemplatesConfig(max_pods=100))
    assert got.allocatable.memory == 0
    assert got.allocatable.cpu == 940
