"""What a node of an instance type offers to pods before it exists (docs/node-templates.md).

Pure arithmetic, each piece replaceable through `nodeTemplates:` in the config. The defaults follow the
EKS optimized AMI's bootstrap (VPC CNI max pods, kube-reserved CPU and memory, 100Mi hard eviction),
because a template that promises more than the real node gives makes the planner scale up groups whose
nodes then cannot take the pods.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from reconciler.config.settings import NodeTemplatesConfig
from reconciler.domain.model import CPU, MEMORY, PODS, Resources

KI = 2**10
MI = 2**20
# EKS bootstrap: basis points (1/100 of a percent) of CPU reserved per millicore range.
_CPU_RESERVATION_STEPS: tuple[tuple[int, int | None, int], ...] = (
    (0, 1000, 600),  # 6% of the first core
    (1000, 2000, 100),  # 1% of the second
    (2000, 4000, 50),  # 0.5% of cores 3-4
    (4000, None, 25),  # 0.25% of every core above 4
)
EKS_RESERVED_MEMORY_BASE = 255 * MI
EKS_RESERVED_MEMORY_PER_POD = 11 * MI


@dataclass(frozen=True)
class NodeResources:
    """Capacity and allocatable, with the pieces in between so a report can show its working."""

    capacity: Resources
    allocatable: Resources
    max_pods: int
    reserved_cpu_milli: int
    reserved_memory: int
    eviction_memory: int


def vpc_cni_max_pods(max_enis: int, ipv4_per_eni: int) -> int:
    """Each ENI's primary address is the node's own; +2 for the host-network aws-node and kube-proxy."""
    return max_enis * (ipv4_per_eni - 1) + 2


def memory_capacity(memory_mib: int, vm_overhead: float) -> int:
    """Bytes the kernel reports: the instance's memory less the VM's share, rounded down to a KiB."""
    total = Fraction(memory_mib * MI) * (1 - Fraction(str(vm_overhead)))
    return int(total) // KI * KI


def eks_reserved_cpu_milli(vcpus: int) -> int:
    """EKS kube-reserved CPU, with the bootstrap script's integer division per range."""
    total = vcpus * 1000
    reserved = 0
    for start, end, basis_points in _CPU_RESERVATION_STEPS:
        top = total if end is None else min(total, end)
        if top > start:
            reserved += (top - start) * basis_points // 10000
    return reserved


def eks_reserved_memory(max_pods: int) -> int:
    return EKS_RESERVED_MEMORY_BASE + EKS_RESERVED_MEMORY_PER_POD * max_pods


def node_resources(
    vcpus: int,
    memory_mib: int,
    max_enis: int,
    ipv4_per_eni: int,
    settings: NodeTemplatesConfig,
    pods: int | None = None,
) -> NodeResources:
    """CPU, memory and pods of one node; `pods` (a per-group tag) beats `settings.max_pods`, which
    beats the VPC CNI formula, and the chosen number also sizes kube-reserved memory."""
    max_pods = (
        pods
        if pods is not None
        else settings.max_pods
        if settings.max_pods is not None
        else vpc_cni_max_pods(max_enis, ipv4_per_eni)
    )
    max_pods = max(max_pods, 0)
    cpu = vcpus * 1000
    memory = memory_capacity(memory_mib, settings.vm_memory_overhead_percent)
    reserved_cpu = (
        settings.reserved_cpu_milli
        if settings.reserved_cpu_milli is not None
        else eks_reserved_cpu_milli(vcpus)
    )
    reserved_memory = settings.reserved_memory
    if reserved_memory is None:
        reserved_memory = eks_reserved_memory(max_pods)
    eviction = settings.eviction_hard_memory
    return NodeResources(
        capacity=_nonzero({CPU: cpu, MEMORY: memory, PODS: max_pods}),
        allocatable=_nonzero(
            {
                CPU: max(cpu - reserved_cpu, 0),
                MEMORY: max(memory - reserved_memory - eviction, 0),
                PODS: max_pods,
            }
        ),
        max_pods=max_pods,
        reserved_cpu_milli=reserved_cpu,
        reserved_memory=reserved_memory,
        eviction_memory=eviction,
    )


def _nonzero(values: dict[str, int]) -> Resources:
    """Resources keeps only non-zero entries so that equality is by content."""
    return Resources({name: amount for name, amount in values.items() if amount})
