"""Kubernetes JSON objects (as the API or kubectl print them) into the domain model.

One reader for both sources (live API and snapshots), so both give the same ClusterState. This is
the hot path of listing 150k pods: identical label maps, scheduling specs and request vectors are
interned, so pods of one controller share one copy, and only the annotations the planner reads are
kept (a pod's `last-applied-configuration` alone can be kilobytes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, TypeVar

import msgspec

from reconciler.errors import UserError
from reconciler.model import (
    CPU,
    LEGACY_ZONE_LABEL,
    MIRROR_POD,
    NO_SCHEDULING,
    NO_VOLUMES,
    ZONE_LABEL,
    DaemonSet,
    HostPort,
    LabelSelector,
    Node,
    NodeSelectorTerm,
    OwnerRef,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodAffinityTerm,
    PodDisruptionBudget,
    Resources,
    Scheduling,
    SelectorRequirement,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    Volumes,
)
from reconciler.quantity import QuantityError, int_value, milli_value

Raw = Mapping[str, Any]
T = TypeVar("T")

ZONE_KEYS = (ZONE_LABEL, LEGACY_ZONE_LABEL, "topology.ebs.csi.aws.com/zone")
_KEPT_POD_ANNOTATION_PREFIXES = ("cluster-autoscaler.kubernetes.io/", MIRROR_POD)
# Resources that are bookkeeping, not something a pod can request from the scheduler's view.
_IGNORED_RESOURCES = frozenset({"hugepages-1Gi", "hugepages-2Mi", "attachable-volumes-aws-ebs"})


class Interner:
    """Shares equal immutable values across objects; one per read, so memory is freed with it."""

    def __init__(self) -> None:
        self._maps: dict[Any, Any] = {}
        self._values: dict[Any, Any] = {}

    def mapping(self, raw: Mapping[str, str] | None) -> Mapping[str, str]:
        if not raw:
            return _EMPTY
        key = tuple(raw.items())
        found = self._maps.get(key)
        if found is None:
            found = self._maps[key] = dict(raw)
        return found

    def value(self, key: Any, build: Callable[[], T]) -> T:
        found = self._values.get(key)
        if found is None:
            found = self._values[key] = build()
        return found


_EMPTY: Mapping[str, str] = {}


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def resources_from(raw: Mapping[str, Any] | None, where: str) -> Resources:
    """Quantity map (`{"cpu": "100m", "memory": "2Gi"}`) into integer units."""
    if not raw:
        return Resources()
    values: dict[str, int] = {}
    for name, quantity in raw.items():
        if name in _IGNORED_RESOURCES:
            continue
        text = quantity if isinstance(quantity, str) else str(quantity)
        try:
            amount = milli_value(text) if name == CPU else int_value(text)
        except QuantityError as exc:
            raise UserError(f"{where}: {name}: {exc}") from None
        if amount:
            values[name] = amount
    return Resources(values)


def _add_into(total: dict[str, int], part: Resources) -> None:
    for name, amount in part.values.items():
        total[name] = total.get(name, 0) + amount


def pod_requests(spec: Raw, where: str) -> Resources:
    """What the scheduler reserves for a pod: max(app containers + sidecars, each init container +
    the sidecars started before it) + overhead, per resource (Kubernetes' PodRequests)."""
    total: dict[str, int] = {}
    for container in spec.get("containers") or ():
        _add_into(total, resources_from((container.get("resources") or {}).get("requests"), where))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in spec.get("initContainers") or ():
        requests = resources_from((container.get("resources") or {}).get("requests"), where)
        if container.get("restartPolicy") == "Always":  # a sidecar: runs alongside the app
            _add_into(sidecars, requests)
            _add_into(total, requests)
            continue
        for name, amount in requests.values.items():
            init_peak[name] = max(init_peak.get(name, 0), amount + sidecars.get(name, 0))
    for name, amount in init_peak.items():
        total[name] = max(total.get(name, 0), amount)
    overhead = resources_from(spec.get("overhead"), where)
    _add_into(total, overhead)
    return Resources({k: v for k, v in total.items() if v})


def _requirements(raw: Iterable[Raw] | None) -> tuple[SelectorRequirement, ...]:
    return tuple(
        SelectorRequirement(r.get("key", ""), r.get("operator", ""), tuple(r.get("values") or ()))
        for r in raw or ()
    )


def label_selector(raw: Raw | None) -> LabelSelector | None:
    if raw is None:
        return None
    return LabelSelector(
        tuple(sorted((raw.get("matchLabels") or {}).items())), _requirements(raw.get("matchExpressions"))
    )


def _affinity_terms(raw: Iterable[Raw] | None) -> tuple[PodAffinityTerm, ...]:
    return tuple(
        PodAffinityTerm(
            label_selector(term.get("labelSelector")),
            term.get("topologyKey", ""),
            tuple(term.get("namespaces") or ()),
            label_selector(term.get("namespaceSelector")),
        )
        for term in raw or ()
    )


def scheduling_from(spec: Raw) -> Scheduling:
    node_selector = spec.get("nodeSelector")
    affinity = spec.get("affinity") or {}
    tolerations = spec.get("tolerations")
    spread = spec.get("topologySpreadConstraints")
    host_ports = [
        port
        for container in spec.get("containers") or ()
        for port in container.get("ports") or ()
        if port.get("hostPort")
    ]
    if not (node_selector or affinity or tolerations or spread or host_ports):
        return NO_SCHEDULING
    node_affinity = (affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    pod_affinity = (affinity.get("podAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    anti = (affinity.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    return Scheduling(
        node_selector=tuple(sorted((node_selector or {}).items())),
        required_node_affinity=tuple(
            NodeSelectorTerm(_requirements(t.get("matchExpressions")), _requirements(t.get("matchFields")))
            for t in (node_affinity or {}).get("nodeSelectorTerms") or ()
        ),
        tolerations=tuple(
            Toleration(
                t.get("key") or "",
                t.get("operator") or "Equal",
                t.get("value") or "",
                t.get("effect") or "",
            )
            for t in tolerations or ()
        ),
        host_ports=tuple(
            HostPort(int(p["hostPort"]), p.get("protocol") or "TCP", p.get("hostIP") or "")
            for p in host_ports
        ),
        pod_affinity=_affinity_terms(pod_affinity),
        pod_anti_affinity=_affinity_terms(anti),
        topology_spread=tuple(
            TopologySpreadConstraint(
                int(c.get("maxSkew", 1)),
                c.get("topologyKey", ""),
                c.get("whenUnsatisfiable", "DoNotSchedule"),
                label_selector(c.get("labelSelector")),
                c.get("minDomains"),
            )
            for c in spread or ()
        ),
    )


def _volumes(spec: Raw, pod_name: str) -> Volumes:
    raw = spec.get("volumes")
    if not raw:
        return NO_VOLUMES
    local: list[str] = []
    claims: list[str] = []
    for volume in raw:
        name = volume.get("name", "")
        if "hostPath" in volume:
            local.append(name)
        elif "emptyDir" in volume:
            if (volume["emptyDir"] or {}).get("medium") != "Memory":
                local.append(name)
        elif "persistentVolumeClaim" in volume:
            claims.append(volume["persistentVolumeClaim"].get("claimName", ""))
        elif "ephemeral" in volume:  # generic ephemeral volume: its PVC is named <pod>-<volume>
            claims.append(f"{pod_name}-{name}")
    if not local and not claims:
        return NO_VOLUMES
    return Volumes(tuple(local), tuple(claims))


def _part(value: Any) -> bytes:
    """A cache-key fragment: the encoded bytes when still encoded, else the value's repr."""
    if value is None:
        return b""
    if isinstance(value, msgspec.Raw):
        return bytes(value)
    return repr(value).encode()


def _requests_key(spec: Raw) -> bytes:
    """Everything pod_requests reads, and nothing else (env, probes, images are irrelevant)."""
    parts = [_part(c.get("resources")) for c in spec.get("containers") or ()]
    parts.extend(
        _part(c.get("resources")) + b"/" + str(c.get("restartPolicy")).encode()
        for c in spec.get("initContainers") or ()
    )
    parts.append(_part(spec.get("overhead")))
    return b"|".join(parts)


def _scheduling_key(spec: Raw) -> bytes:
    parts = [_part(spec.get(key)) for key in _SCHEDULING_KEYS]
    parts.extend(_part(c.get("ports")) for c in spec.get("containers") or ())
    return b"|".join(parts)


_SCHEDULING_KEYS = ("nodeSelector", "affinity", "tolerations", "topologySpreadConstraints")


def _decoded(value: Any) -> Any:
    return msgspec.json.decode(value) if isinstance(value, msgspec.Raw) else value


def plain_spec(spec: Raw) -> dict[str, Any]:
    """A pod spec with the parts `kube.schema` left encoded decoded, for the converters below."""
    plain = {key: _decoded(value) for key, value in spec.items()}
    for key in ("containers", "initContainers"):
        if plain.get(key):
            plain[key] = [{k: _decoded(v) for k, v in c.items()} for c in plain[key]]
    return plain


class ObjectReader:
    """Converts raw objects of every kind we read; holds the interning tables for one read."""

    def __init__(self) -> None:
        self.interner = Interner()
        self._requests: dict[bytes, Resources] = {}
        self._scheduling: dict[bytes, Scheduling] = {}
        self._owners: dict[tuple[str, str, bool], OwnerRef] = {}

    def pod(self, raw: Raw) -> Pod:
        metadata = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        namespace = metadata.get("namespace", "")
        name = metadata.get("name", "")
        interner = self.interner
        annotations = metadata.get("annotations")
        if annotations:
            annotations = {
                k: v for k, v in annotations.items() if k.startswith(_KEPT_POD_ANNOTATION_PREFIXES)
            }
        scheduled_status = scheduled_reason = ""
        scheduled_since = None
        for condition in status.get("conditions") or ():
            if condition.get("type") == "PodScheduled":
                scheduled_status = condition.get("status", "")
                scheduled_reason = condition.get("reason", "")
                scheduled_since = parse_time(condition.get("lastTransitionTime"))
                break
        # Inline cache lookups: this runs 150k times per listing.
        key = _requests_key(spec)
        requests = self._requests.get(key)
        if requests is None:
            requests = self._requests[key] = pod_requests(plain_spec(spec), f"pod {namespace}/{name}")
        key = _scheduling_key(spec)
        scheduling = self._scheduling.get(key)
        if scheduling is None:
            scheduling = self._scheduling[key] = scheduling_from(plain_spec(spec))
        return Pod(
            namespace=namespace,
            name=name,
            uid=metadata.get("uid", ""),
            requests=requests,
            node_name=spec.get("nodeName") or "",
            phase=status.get("phase") or "Pending",
            created=parse_time(metadata.get("creationTimestamp")),
            labels=interner.mapping(metadata.get("labels")),
            annotations=interner.mapping(annotations),
            owner=self._owner(metadata.get("ownerReferences")),
            priority=int(spec.get("priority") or 0),
            scheduling=scheduling,
            volumes=_volumes(spec, name),
            scheduled_status=scheduled_status,
            scheduled_reason=scheduled_reason,
            scheduled_since=scheduled_since,
        )

    def _owner(self, refs: list[Raw] | None) -> OwnerRef | None:
        if not refs:
            return None
        chosen = refs[0]
        if len(refs) > 1:
            chosen = next((r for r in refs if r.get("controller")), chosen)
        key = (chosen.get("kind", ""), chosen.get("name", ""), bool(chosen.get("controller")))
        owner = self._owners.get(key)
        if owner is None:
            owner = self._owners[key] = OwnerRef(*key)
        return owner

    def node(self, raw: Raw) -> Node:
        metadata = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        name = metadata.get("name", "")
        ready, ready_since = False, None
        for condition in status.get("conditions") or ():
            if condition.get("type") == "Ready":
                ready = condition.get("status") == "True"
                ready_since = parse_time(condition.get("lastTransitionTime"))
        return Node(
            name=name,
            labels=dict(metadata.get("labels") or {}),
            taints=tuple(
                Taint(t.get("key", ""), t.get("value") or "", t.get("effect", ""))
                for t in spec.get("taints") or ()
            ),
            allocatable=resources_from(status.get("allocatable"), f"node {name} allocatable"),
            capacity=resources_from(status.get("capacity"), f"node {name} capacity"),
            ready=ready,
            ready_since=ready_since,
            unschedulable=bool(spec.get("unschedulable")),
            provider_id=spec.get("providerID") or "",
            created=parse_time(metadata.get("creationTimestamp")),
            annotations=dict(metadata.get("annotations") or {}),
        )

    def pdb(self, raw: Raw) -> PodDisruptionBudget:
        metadata = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}

        def as_text(value: Any) -> str | None:
            return None if value is None else str(value)

        return PodDisruptionBudget(
            namespace=metadata.get("namespace", ""),
            name=metadata.get("name", ""),
            selector=label_selector(spec.get("selector")),
            disruptions_allowed=int(status.get("disruptionsAllowed") or 0),
            min_available=as_text(spec.get("minAvailable")),
            max_unavailable=as_text(spec.get("maxUnavailable")),
        )

    def daemonset(self, raw: Raw) -> DaemonSet:
        metadata = raw.get("metadata") or {}
        template_spec = plain_spec(((raw.get("spec") or {}).get("template") or {}).get("spec") or {})
        where = f"daemonset {metadata.get('namespace', '')}/{metadata.get('name', '')}"
        return DaemonSet(
            namespace=metadata.get("namespace", ""),
            name=metadata.get("name", ""),
            requests=pod_requests(template_spec, where),
            scheduling=scheduling_from(template_spec),
        )

    def pv(self, raw: Raw) -> PersistentVolume:
        metadata = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        zones: set[str] = set()
        terms = (((spec.get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")) or ()
        for term in terms:
            for expression in term.get("matchExpressions") or ():
                if expression.get("key") in ZONE_KEYS and expression.get("operator") == "In":
                    zones.update(expression.get("values") or ())
        labels = metadata.get("labels") or {}
        for key in ZONE_KEYS:
            if key in labels and not zones:
                zones.update(labels[key].split("__"))
        claim = spec.get("claimRef") or {}
        return PersistentVolume(
            name=metadata.get("name", ""),
            zones=tuple(sorted(zones)),
            claim=f"{claim.get('namespace', '')}/{claim.get('name', '')}" if claim else "",
        )

    def pvc(self, raw: Raw) -> PersistentVolumeClaim:
        metadata = raw.get("metadata") or {}
        return PersistentVolumeClaim(
            namespace=metadata.get("namespace", ""),
            name=metadata.get("name", ""),
            volume_name=(raw.get("spec") or {}).get("volumeName") or "",
        )


TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
