"""A trace from kubectl dumps taken over time (`simulate trace convert`): the closest thing to a
recorded workload most teams already can produce, with a cron job running
`kubectl get nodes,pods -A -o json > dump-$(date -u +%FT%TZ).json`.

Dumps are read in every shape `--snapshot` accepts (the snapshot reader's own file parsing). A pod
arrives at the first dump it is in and departs at the first dump it is gone from (or replaced: same
name, another uid); pods of the first dump arrive at 0. Node groups come from the nodes' labels.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import msgspec

from reconciler.domain.errors import UserError
from reconciler.domain.model import INSTANCE_TYPE_LABEL, LEGACY_ZONE_LABEL, MIRROR_POD, ZONE_LABEL, Node
from reconciler.kube.parse import TERMINAL_PHASES, ObjectReader
from reconciler.kube.schema import UNREADABLE_KEY
from reconciler.kube.snapshot import read_objects as snapshot_objects
from reconciler.simulation.trace import RawTrace

DUMP_COMMAND = "kubectl get nodes,pods -A -o json > dump-$(date -u +%FT%TZ).json"
# Where a node's group is written, first found wins (EKS managed node groups, eksctl); nodes with
# none are grouped by instance type.
GROUP_LABELS = ("eks.amazonaws.com/nodegroup", "alpha.eksctl.io/nodegroup-name")
FARGATE_NODE_LABEL = "eks.amazonaws.com/compute-type"
FARGATE_POD_LABEL = "eks.amazonaws.com/fargate-profile"
_LEGACY_INSTANCE_TYPE = "beta.kubernetes.io/instance-type"
# Per-node labels that would pin a simulated group's every node to one machine or zone.
_PER_NODE_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        ZONE_LABEL,
        LEGACY_ZONE_LABEL,
        "topology.ebs.csi.aws.com/zone",
        "topology.k8s.aws/zone-id",
        "alpha.eksctl.io/instance-id",
    }
)
# Taints a node carries for a while (not ready, cordoned, being removed), not from its group.
_PASSING_TAINT_PREFIXES = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/", "asg-reconciler.dev/")
_PASSING_TAINTS = frozenset({"ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler"})
# An RFC 3339 time in a file name, extended (2026-06-01T00:00:00Z) or basic (20260601T000000Z).
_TIME_IN_NAME = re.compile(
    r"(\d{4})-?(\d{2})-?(\d{2})T(\d{2}):?(\d{2}):?(\d{2})(?:\.\d+)?(Z|[+-]\d{2}:?\d{2})"
)
# What scheduling reads of a container; env, probes, images and the rest are left out of the trace.
_CONTAINER_KEYS = ("name", "restartPolicy")
_SPEC_KEYS = (
    "initContainers",
    "overhead",
    "nodeSelector",
    "affinity",
    "tolerations",
    "topologySpreadConstraints",
    "priority",
    "terminationGracePeriodSeconds",
    "volumes",
)


@dataclass(frozen=True)
class Dump:
    """What one dump holds: its nodes, and its pods as trace pod objects by namespace/name."""

    at: datetime
    path: Path
    nodes: tuple[Node, ...]
    pods: Mapping[str, tuple[str, dict[str, Any]]]  # namespace/name -> (uid, pod object)


def dump_time(path: Path) -> datetime:
    """The time in a dump's file name (`dump-2026-06-01T00:00:00Z.json`, or basic format)."""
    match = _TIME_IN_NAME.search(path.name)
    if match is None:
        raise UserError(
            f"{path}: no time in the file name (name dumps by when they were taken: {DUMP_COMMAND})"
        )
    year, month, day, hour, minute, second, zone = match.groups()
    zone = "+00:00" if zone == "Z" else f"{zone[:3]}:{zone[-2:]}"
    try:
        return datetime.fromisoformat(f"{year}-{month}-{day}T{hour}:{minute}:{second}{zone}").astimezone(UTC)
    except ValueError as exc:
        raise UserError(f"{path}: the time in the file name is not a real time: {exc}") from None


def dump_paths(paths: Iterable[Path]) -> list[tuple[datetime, Path]]:
    """Files and directories of dumps as (time, file), by time; a directory gives its .json and
    .yaml files (not its subdirectories: one file is one dump)."""
    found: list[tuple[datetime, Path]] = []
    for path in paths:
        if path.is_dir():
            files = sorted(
                p for p in path.iterdir() if p.suffix in (".json", ".yaml", ".yml") and p.is_file()
            )
            if not files:
                raise UserError(f"{path}: no .json or .yaml dumps in this directory ({DUMP_COMMAND})")
            found += [(dump_time(file), file) for file in files]
        elif path.is_file():
            found.append((dump_time(path), path))
        else:
            raise UserError(f"{path}: dump not found")
    found.sort()
    for (earlier, first), (later, second) in pairwise(found):
        if earlier == later:
            raise UserError(f"{second}: taken at the same time as {first} (keep one of them)")
    return found


def read_dump(at: datetime, path: Path) -> Dump:
    """The nodes and the workload's pods of one dump: pods that come with nodes (DaemonSet and
    static pods) and finished pods are not workload."""
    reader = ObjectReader()
    nodes: list[Node] = []
    pods: dict[str, tuple[str, dict[str, Any]]] = {}
    saw_pods = False
    for found in snapshot_objects(path):
        kind, raw = found
        if UNREADABLE_KEY in raw:  # a field of the wrong type: its pruned schema refused it
            metadata = raw.get("metadata") or {}
            where = f"{metadata.get('namespace') or ''}/{metadata.get('name') or '?'}".lstrip("/")
            raise UserError(f"{path}: {kind} {where}: {raw[UNREADABLE_KEY]}")
        if kind == "Node":
            node = reader.node(raw)
            if node.labels.get(FARGATE_NODE_LABEL) != "fargate":
                nodes.append(node)
        elif kind == "Pod":
            saw_pods = True
            pod = _plain(raw)
            metadata = pod.get("metadata") or {}
            if _is_workload(pod):
                key = f"{metadata.get('namespace') or 'default'}/{metadata.get('name', '')}"
                pods[key] = (metadata.get("uid") or "", trace_pod(pod))
    if not nodes or not saw_pods:
        missing = "Node" if not nodes else "Pod"
        raise UserError(f"{path}: no {missing} objects (a dump needs both: {DUMP_COMMAND})")
    return Dump(at, path, tuple(nodes), pods)


def _plain(value: Any) -> Any:
    """The snapshot reader leaves parts encoded (msgspec.Raw): decode them for the trace."""
    if isinstance(value, msgspec.Raw):
        return msgspec.json.decode(value)
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _is_workload(pod: Mapping[str, Any]) -> bool:
    if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
        return False
    metadata = pod.get("metadata") or {}
    if MIRROR_POD in (metadata.get("annotations") or {}):
        return False
    if FARGATE_POD_LABEL in (metadata.get("labels") or {}):  # runs on Fargate, never on a group
        return False
    owners = metadata.get("ownerReferences") or ()
    return not any(owner.get("kind") == "DaemonSet" for owner in owners)


def trace_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A dumped pod reduced to what scheduling reads, without where it ran or its status."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    kept_metadata: dict[str, Any] = {
        "name": metadata.get("name", ""),
        "namespace": metadata.get("namespace") or "default",
    }
    for key in ("labels", "annotations", "ownerReferences"):
        if metadata.get(key):
            kept_metadata[key] = metadata[key]
    if "annotations" in kept_metadata:
        kept = {
            k: v
            for k, v in kept_metadata["annotations"].items()
            if k.startswith("cluster-autoscaler.kubernetes.io/")
        }
        if kept:
            kept_metadata["annotations"] = kept
        else:
            del kept_metadata["annotations"]
    kept_spec: dict[str, Any] = {"containers": [_container(c) for c in spec.get("containers") or ()]}
    for key in _SPEC_KEYS:
        if spec.get(key) not in (None, [], {}):
            kept_spec[key] = spec[key]
    if "initContainers" in kept_spec:
        kept_spec["initContainers"] = [_container(c) for c in kept_spec["initContainers"]]
    pod_level = (spec.get("resources") or {}).get("requests")
    if pod_level:  # pod-level resources: they, not the containers', are what the pod asks for
        kept_spec["resources"] = {"requests": pod_level}
    return {"metadata": kept_metadata, "spec": kept_spec}


def _container(container: Mapping[str, Any]) -> dict[str, Any]:
    kept = {key: container[key] for key in _CONTAINER_KEYS if key in container}
    requests = (container.get("resources") or {}).get("requests")
    if requests:
        kept["resources"] = {"requests": requests}
    host_ports = [port for port in container.get("ports") or () if port.get("hostPort")]
    if host_ports:
        kept["ports"] = host_ports
    return kept


def convert(dumps: Sequence[tuple[datetime, Path]]) -> RawTrace:
    """A trace from dumps as (time taken, file); the first dump's time is the trace's start."""
    if not dumps:
        raise UserError(f"no dumps given (take them over time with {DUMP_COMMAND})")
    ordered = sorted(dumps)
    read = [read_dump(at, path) for at, path in ordered]
    start = read[0].at
    events: list[dict[str, Any]] = []
    previous: Mapping[str, tuple[str, dict[str, Any]]] = {}
    for dump in read:
        at = round((dump.at - start).total_seconds(), 3)
        current = dump.pods
        gone = sorted(
            key for key, (uid, _) in previous.items() if key not in current or current[key][0] != uid
        )
        for key in gone:
            namespace, name = key.split("/", 1)
            events.append({"kind": "depart", "at": at, "namespace": namespace, "pod": name})
        came = sorted(
            key for key, (uid, _) in current.items() if key not in previous or previous[key][0] != uid
        )
        events += [{"kind": "arrive", "at": at, "pod": current[key][1]} for key in came]
        previous = current
    return RawTrace(start, tuple(infer_groups(read)), tuple(events))


def group_of(node: Node) -> str:
    for label in GROUP_LABELS:
        if node.labels.get(label):
            return node.labels[label]
    return _instance_type(node) or "unlabelled"


def _instance_type(node: Node) -> str:
    return node.labels.get(INSTANCE_TYPE_LABEL) or node.labels.get(_LEGACY_INSTANCE_TYPE) or ""


def infer_groups(dumps: Sequence[Dump]) -> list[dict[str, Any]]:
    """One group per group label (else per instance type): its most common instance type, the
    zones and the labels and taints all its nodes share; desired is its node count in the first
    dump, min and max the fewest and most nodes seen."""
    nodes_by_group: dict[str, list[Node]] = {}
    counts: dict[str, list[int]] = {}
    for index, dump in enumerate(dumps):
        for node in dump.nodes:
            nodes_by_group.setdefault(group_of(node), []).append(node)
        seen = Counter(group_of(node) for node in dump.nodes)
        for name in set(seen) | set(counts):
            counts.setdefault(name, [0] * index).append(seen.get(name, 0))
    groups: list[dict[str, Any]] = []
    for name in sorted(nodes_by_group):
        nodes = nodes_by_group[name]
        types = Counter(t for t in map(_instance_type, nodes) if t)
        if not types:
            raise UserError(
                f"{dumps[0].path}: nodes of group {name!r} (e.g. {nodes[0].name}) have no "
                f"{INSTANCE_TYPE_LABEL} label (the trace needs each group's instance type)"
            )
        zones = sorted({node.zone for node in nodes if node.zone})
        if not zones:
            raise UserError(
                f"{dumps[0].path}: nodes of group {name!r} (e.g. {nodes[0].name}) have no zone "
                f"(neither an aws:/// providerID nor a {ZONE_LABEL} label)"
            )
        group: dict[str, Any] = {
            "name": name,
            "instanceType": types.most_common(1)[0][0],
            "minSize": min(counts[name]),
            "maxSize": max(counts[name]),
            "desired": counts[name][0],
            "zones": zones,
        }
        labels = _shared_labels(nodes)
        if labels:
            group["labels"] = labels
        taints = _shared_taints(nodes)
        if taints:
            group["taints"] = taints
        groups.append(group)
    return groups


def _shared_labels(nodes: Sequence[Node]) -> dict[str, str]:
    shared = {k: v for k, v in nodes[0].labels.items() if k not in _PER_NODE_LABELS and v != nodes[0].name}
    for node in nodes[1:]:
        shared = {k: v for k, v in shared.items() if node.labels.get(k) == v}
    return dict(sorted(shared.items()))


def _shared_taints(nodes: Sequence[Node]) -> list[str]:
    shared = {
        str(t)
        for t in nodes[0].taints
        if not t.key.startswith(_PASSING_TAINT_PREFIXES) and t.key not in _PASSING_TAINTS
    }
    for node in nodes[1:]:
        shared &= {str(t) for t in node.taints}
    return sorted(shared)
