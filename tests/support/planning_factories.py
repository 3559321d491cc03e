"""Small builders for hand-made planning states: a pod, a node, a template, in one line each."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.domain.model import (
    HOSTNAME_LABEL,
    NO_SCHEDULING,
    NO_VOLUMES,
    ZONE_LABEL,
    LabelSelector,
    Node,
    NodeTemplate,
    OwnerRef,
    Pod,
    Resources,
    Scheduling,
    Taint,
    Volumes,
)
from reconciler.planning.simnode import SimNode

GI = 2**30
MI = 2**20


def res(cpu: int = 0, mem_gi: float = 0, pods: int = 0, **extra: int) -> Resources:
    """CPU in millicores, memory in GiB."""
    return Resources.of(cpu=cpu, memory=int(mem_gi * GI), pods=pods, **extra)


def pod(
    name: str = "p",
    cpu: int = 100,
    mem_gi: float = 0.125,
    *,
    namespace: str = "default",
    owner: str | None = "rs",
    labels: Mapping[str, str] | None = None,
    scheduling: Scheduling = NO_SCHEDULING,
    volumes: Volumes = NO_VOLUMES,
    node_name: str = "",
    extra: Mapping[str, int] | None = None,
) -> Pod:
    requests = Resources.of(cpu=cpu, memory=int(mem_gi * GI), **dict(extra or {}))
    return Pod(
        namespace=namespace,
        name=name,
        uid=f"uid-{namespace}-{name}",
        requests=requests,
        node_name=node_name,
        phase="Running" if node_name else "Pending",
        created=None,
        labels=dict(labels) if labels is not None else {"app": owner or name},
        owner=OwnerRef("ReplicaSet", owner) if owner else None,
        scheduling=scheduling,
        volumes=volumes,
    )


def node(
    name: str = "n1",
    cpu: int = 4000,
    mem_gi: float = 16,
    pods: int = 110,
    *,
    labels: Mapping[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
    zone: str = "us-east-1a",
    unschedulable: bool = False,
    extra: Mapping[str, int] | None = None,
) -> Node:
    all_labels = {HOSTNAME_LABEL: name, ZONE_LABEL: zone, **dict(labels or {})}
    alloc = Resources.of(cpu=cpu, memory=int(mem_gi * GI), pods=pods, **dict(extra or {}))
    return Node(
        name=name,
        labels=all_labels,
        taints=taints,
        allocatable=alloc,
        capacity=alloc,
        ready=True,
        ready_since=None,
        unschedulable=unschedulable,
        provider_id=f"aws:///{zone}/i-{abs(hash(name)) % 16**8:08x}",
        created=None,
    )


def sim(name: str = "n1", cpu: int = 4000, mem_gi: float = 16, pods: int = 110, **kw: Any) -> SimNode:
    """An empty real node as a SimNode."""
    return SimNode.from_node(node(name, cpu, mem_gi, pods, **kw), ())


def template(
    cpu: int = 4000,
    mem_gi: float = 16,
    pods: int = 110,
    *,
    labels: Mapping[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
    capacity: Resources | None = None,
    instance_type: str = "m5.xlarge",
    extra: Mapping[str, int] | None = None,
) -> NodeTemplate:
    alloc = Resources.of(cpu=cpu, memory=int(mem_gi * GI), pods=pods, **dict(extra or {}))
    return NodeTemplate(
        instance_type=instance_type,
        labels=dict(labels or {}),
        taints=taints,
        capacity=capacity or alloc,
        allocatable=alloc,
        source=f"test {instance_type}",
    )


def selector(**labels: str) -> LabelSelector:
    return LabelSelector(match_labels=tuple(sorted(labels.items())))
