"""Kubernetes JSON objects (as the API or kubectl print them) into the domain model.

One reader for both sources (live API and snapshots), so both give the same ClusterState. This is
the hot path of listing 150k pods: identical label maps, scheduling specs and request vectors are
interned, so pods of one controller share one copy, and only the annotations the planner reads are
kept (a pod's `last-applied-configuration` alone can be kilobytes).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import msgspec

from reconciler.domain.errors import UserError
from reconciler.domain.model import (
    CPU,
    DEFAULT_GRACE_PERIOD_SECONDS,
    LEGACY_ZONE_LABEL,
    MEMORY,
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
from reconciler.domain.quantity import QuantityError, int_value, milli_value
from reconciler.kube.schema import UNREADABLE_KEY

Raw = Mapping[str, Any]

ZONE_KEYS = (ZONE_LABEL, LEGACY_ZONE_LABEL, "topology.ebs.csi.aws.com/zone")
_KEPT_POD_ANNOTATION_PREFIXES = ("cluster-autoscaler.kubernetes.io/", MIRROR_POD)
_KEPT_ANNOTATIONS = re.compile(b"|".join(re.escape(p.encode()) for p in _KEPT_POD_ANNOTATION_PREFIXES))
_MISSING = object()
# Resources that are bookkeeping, not something a pod can request from the scheduler's view.
_IGNORED_RESOURCES = frozenset({"hugepages-1Gi", "hugepages-2Mi", "attachable-volumes-aws-ebs"})


class Interner:
    """Shares equal label maps across objects; one per read, so memory is freed with it."""

    def __init__(self) -> None:
        self._maps: dict[Any, Any] = {}

    def mapping(self, raw: Mapping[str, str] | None) -> Mapping[str, str]:
        if not raw:
            return _EMPTY
        key = tuple(raw.items())
        found = self._maps.get(key)
        if found is None:
            found = self._maps[key] = dict(raw)
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
    """Quantity map (`{"cpu": "100m", "memory": "2Gi"}`) into integer units; `where`: the map's field
    path (`spec.containers[app].resources.requests`), which a QuantityError names."""
    return Resources({k: v for k, v in _amounts(raw, where).items() if v})


def _amounts(raw: Mapping[str, Any] | None, where: str) -> dict[str, int]:
    """A quantity map's amounts, zeros kept (a pod-level `cpu: 0` still replaces the containers')."""
    if not raw:
        return {}
    values: dict[str, int] = {}
    for name, quantity in raw.items():
        if name in _IGNORED_RESOURCES:
            continue
        text = quantity if isinstance(quantity, str) else str(quantity)
        try:
            values[name] = milli_value(text) if name == CPU else int_value(text)
        except QuantityError as exc:
            raise QuantityError(f"{where}.{name}: {exc}") from None
    return values


class Unreadable(UserError):
    """A field of an object that cannot be read; the message names the field."""


# What reading one object may raise when it holds something no API server would serve (a snapshot
# or a fake edited by hand): the object is left out with a warning (`left_out`), never the read.
UNREADABLE = (UserError, ValueError, TypeError, AttributeError, KeyError, IndexError, msgspec.DecodeError)


def _int(value: Any, field: str) -> int:
    """An integer field; Unreadable naming it when it is not one."""
    if not isinstance(value, bool) and isinstance(value, int | str):
        try:
            return int(value)
        except ValueError:
            pass
    shown = repr(value)
    raise Unreadable(f"{field}: {shown if len(shown) <= 40 else shown[:40] + '...'} is not an integer")


def readable(raw: Raw) -> Raw:
    """`raw`, or Unreadable when its schema refused it (kube/schema.py's UNREADABLE_KEY)."""
    if UNREADABLE_KEY in raw:
        raise Unreadable(str(raw[UNREADABLE_KEY]))
    return raw


def left_out(kind: str, raw: Any, exc: BaseException) -> str:
    """The warning for an object that cannot be read: what it is, the field and why. A tenant's
    object is input, never a reason to stop: it is left out of the plan, and the read goes on."""
    metadata = raw.get("metadata") if isinstance(raw, Mapping) else None
    metadata = metadata if isinstance(metadata, Mapping) else {}
    namespace, name = metadata.get("namespace") or "", metadata.get("name") or "?"
    who = f"{namespace}/{name}" if namespace else str(name)
    why = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
    return f"{kind.lower()} {who} left out of the plan: it cannot be read: {why}"


def _add_into(total: dict[str, int], part: Resources) -> None:
    for name, amount in part.values.items():
        total[name] = total.get(name, 0) + amount


def _at_least(*parts: Resources) -> Resources:
    """The per-resource maximum (helpers.go's `max` of ResourceLists)."""
    merged: dict[str, int] = {}
    for part in parts:
        for name, amount in part.values.items():
            if amount > merged.get(name, 0):
                merged[name] = amount
    return Resources(merged)


def _pod_level(name: str) -> bool:
    """The resources a pod may request as a whole (helpers.go IsSupportedPodLevelResource)."""
    return name in (CPU, MEMORY) or name.startswith("hugepages-")


def resize_infeasible(status: Raw | None) -> bool:
    """The kubelet found a pending in-place resize infeasible (PodResizePending, reason
    Infeasible): the scheduler then counts what the node gave the containers, not their spec."""
    for condition in (status or {}).get("conditions") or ():
        if condition.get("type") == "PodResizePending":
            return bool(condition.get("reason") == "Infeasible")
    return False


def pod_requests(
    spec: Raw, where: str, status: Raw | None = None, *, infeasible: bool | None = None
) -> Resources:
    """What the scheduler reserves for a pod (Kubernetes' PodRequests, as kube-scheduler and
    cluster-autoscaler 1.33-1.35 call it):

    - each container's requests; with in-place resize, a container whose status reports resources
      counts max(spec, status allocatedResources, status resources.requests), or, when the resize is
      infeasible, max(allocated, actuated) (plain init containers always count their spec);
    - max(app containers + sidecars, each init container + the sidecars started before it);
    - pod-level `spec.resources.requests` (PodLevelResources) replace that for each of cpu, memory
      and hugepages-* they set; the rest stays the containers';
    - plus overhead.

    `infeasible` overrides what the status's conditions say of the resize. `where` prefixes the
    field paths a QuantityError names (`spec.template.` for a template's spec, "" for a pod's).
    """
    statuses: dict[str, Raw] = {}
    for key in ("containerStatuses", "initContainerStatuses"):  # the latter wins a name, as in Go
        for found in (status or {}).get(key) or ():
            statuses[found.get("name", "")] = found
    if infeasible is None:
        infeasible = bool(statuses) and resize_infeasible(status)

    def requests_of(container: Raw, field: str) -> Resources:
        name = container.get("name", "")
        requests = resources_from(
            (container.get("resources") or {}).get("requests"),
            f"{where}spec.{field}[{name}].resources.requests",
        )
        found = statuses.get(name)
        if found is None or found.get("resources") is None:
            return requests
        status_field = (
            f"status.{'initContainerStatuses' if field == 'initContainers' else 'containerStatuses'}"
        )
        actuated = resources_from(
            (found.get("resources") or {}).get("requests"), f"{status_field}[{name}].resources.requests"
        )
        allocated = resources_from(
            found.get("allocatedResources"), f"{status_field}[{name}].allocatedResources"
        )
        return _at_least(actuated, allocated) if infeasible else _at_least(requests, actuated, allocated)

    total: dict[str, int] = {}
    for container in spec.get("containers") or ():
        _add_into(total, requests_of(container, "containers"))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in spec.get("initContainers") or ():
        if container.get("restartPolicy") == "Always":  # a sidecar: runs alongside the app
            requests = requests_of(container, "initContainers")
            _add_into(sidecars, requests)
            _add_into(total, requests)
            continue
        requests = resources_from(
            (container.get("resources") or {}).get("requests"),
            f"{where}spec.initContainers[{container.get('name', '')}].resources.requests",
        )
        for name, amount in requests.values.items():
            init_peak[name] = max(init_peak.get(name, 0), amount + sidecars.get(name, 0))
    for name, amount in init_peak.items():
        total[name] = max(total.get(name, 0), amount)
    pod_level = _amounts((spec.get("resources") or {}).get("requests"), f"{where}spec.resources.requests")
    for name, amount in pod_level.items():
        if _pod_level(name):
            total[name] = amount
    _add_into(total, resources_from(spec.get("overhead"), f"{where}spec.overhead"))
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
            tuple(term.get("matchLabelKeys") or ()),
            tuple(term.get("mismatchLabelKeys") or ()),
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
            HostPort(
                _int(p["hostPort"], "spec.containers[].ports[].hostPort"),
                p.get("protocol") or "TCP",
                p.get("hostIP") or "",
            )
            for p in host_ports
        ),
        pod_affinity=_affinity_terms(pod_affinity),
        pod_anti_affinity=_affinity_terms(anti),
        topology_spread=tuple(
            TopologySpreadConstraint(
                _int(c.get("maxSkew", 1), "spec.topologySpreadConstraints[].maxSkew"),
                c.get("topologyKey", ""),
                c.get("whenUnsatisfiable", "DoNotSchedule"),
                label_selector(c.get("labelSelector")),
                c.get("minDomains"),
                c.get("nodeAffinityPolicy") or "Honor",
                c.get("nodeTaintsPolicy") or "Ignore",
                tuple(c.get("matchLabelKeys") or ()),
            )
            for c in spread or ()
        ),
    )


def _volumes(raw: Iterable[Raw] | None, pod_name: str) -> Volumes:
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


_SPEC_KEYS = (
    "containers",
    "initContainers",
    "overhead",
    "resources",
    "nodeSelector",
    "affinity",
    "tolerations",
    "topologySpreadConstraints",
)


def _spec_key(spec: Raw) -> bytes:
    """Everything `pod_requests` and `scheduling_from` read (whole containers: they are identical
    across a controller's pods, and hashing their bytes is cheaper than picking them apart)."""
    parts = []
    for key in _SPEC_KEYS:
        value = spec.get(key)
        if value is not None:
            parts.append(key.encode())
            parts.append(bytes(value) if type(value) is msgspec.Raw else repr(value).encode())
    return b"|".join(parts)


_STATUS_LISTS = (("containerStatuses", b"c"), ("initContainerStatuses", b"i"))


def _status_key(status: Raw) -> bytes:
    """What `pod_requests` reads of a pod's container statuses: each one that reports resources
    (name, actuated and allocated); b"" when none does, so such a pod shares its spec's requests.
    Pods of one controller at one size give equal keys. (Whether a resize is infeasible is asked
    of the conditions only when it changes the answer: `ObjectReader.pod`.)"""
    parts: list[bytes] = []
    for key, tag in _STATUS_LISTS:
        statuses = status.get(key)
        if not statuses:
            continue
        for found in statuses:
            resources = found.get("resources")
            if resources is None:
                continue
            allocated = found.get("allocatedResources")
            parts += (
                tag,
                found.get("name", "").encode(),
                bytes(resources) if type(resources) is msgspec.Raw else repr(resources).encode(),
                bytes(allocated) if type(allocated) is msgspec.Raw else repr(allocated).encode(),
            )
    return b"|".join(parts) if parts else b""


def _resize_infeasible_in(conditions: Any) -> bool:
    """`resize_infeasible` of a pod's conditions, still encoded or not (a byte search first)."""
    if not conditions or b"PodResizePending" not in _part(conditions):
        return False
    return resize_infeasible({"conditions": _decoded(conditions)})


def _grace_period(value: Any) -> int:
    """terminationGracePeriodSeconds; 0 is a valid value, absent means the API's default."""
    return (
        DEFAULT_GRACE_PERIOD_SECONDS if value is None else _int(value, "spec.terminationGracePeriodSeconds")
    )


def _controller(refs: Iterable[Raw] | None) -> OwnerRef | None:
    """The controlling owner reference, else the first."""
    refs = list(refs or ())
    if not refs:
        return None
    chosen = next((r for r in refs if r.get("controller")), refs[0])
    return OwnerRef(chosen.get("kind", ""), chosen.get("name", ""), bool(chosen.get("controller")))


def _decoded(value: Any) -> Any:
    return msgspec.json.decode(value) if isinstance(value, msgspec.Raw) else value


def plain_spec(spec: Raw) -> dict[str, Any]:
    """A pod spec with the parts `kube.schema` left encoded decoded, for the converters below."""
    plain = {key: _decoded(value) for key, value in spec.items()}
    for key in ("containers", "initContainers"):
        if plain.get(key):
            plain[key] = [{k: _decoded(v) for k, v in c.items()} for c in plain[key]]
    return plain


def plain_status(status: Raw) -> dict[str, Any]:
    """A pod status with the parts `kube.schema` left encoded decoded, for `pod_requests`."""
    plain = {key: _decoded(value) for key, value in status.items()}
    for key in ("containerStatuses", "initContainerStatuses"):
        if plain.get(key):
            plain[key] = [{k: _decoded(v) for k, v in found.items()} for found in plain[key]]
    return plain


class ObjectReader:
    """Converts raw objects of every kind we read; holds the interning tables for one read."""

    def __init__(self) -> None:
        self.interner = Interner()
        self._scheduling: dict[bytes, Scheduling] = {}
        self._requests: dict[bytes, Resources] = {}
        # (spec, statuses) -> requests if the resize is feasible, and if it is not: most often the
        # same object, and then a pod's conditions need not be searched
        self._resized: dict[tuple[bytes, bytes], tuple[Resources, Resources]] = {}
        self._by_bytes: dict[bytes, Mapping[str, str]] = {}
        self._owners: dict[bytes, OwnerRef | None] = {}
        self._volume_sets: dict[bytes, Volumes] = {}

    def pod(self, raw: Raw) -> Pod:
        metadata = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        namespace = metadata.get("namespace", "")
        name = metadata.get("name", "")
        node_name = spec.get("nodeName") or ""
        # Cached on the spec's bytes (this runs 150k times per listing): scheduling by the spec;
        # requests by the spec and, with in-place resize, the container statuses' resources. Since
        # 1.33 a kubelet reports those for every running container; pods of one controller at one
        # size give the same bytes, and share one Resources.
        key = _spec_key(spec)
        scheduling = self._scheduling.get(key)
        plain = None
        if scheduling is None:
            plain = plain_spec(spec)
            scheduling = self._scheduling[key] = scheduling_from(plain)
        requests = self._requests.get(key)
        if requests is None:
            plain = plain if plain is not None else plain_spec(spec)
            requests = self._requests[key] = pod_requests(plain, "")
        resize_key = _status_key(status)
        if resize_key:
            both = (key, resize_key)
            pair = self._resized.get(both)
            if pair is None:  # equal results share the spec's object (the planner's caches go by it)
                plain = plain if plain is not None else plain_spec(spec)
                statuses = plain_status(status)
                where = ""
                feasible = pod_requests(plain, where, statuses, infeasible=False)
                feasible = requests if feasible == requests else feasible
                infeasible = pod_requests(plain, where, statuses, infeasible=True)
                pair = self._resized[both] = (feasible, feasible if infeasible == feasible else infeasible)
            requests, otherwise = pair
            if otherwise is not requests and _resize_infeasible_in(status.get("conditions")):
                requests = otherwise
        scheduled_status = scheduled_reason = ""
        scheduled_since = None
        if not node_name:  # only an unbound pod's PodScheduled condition matters
            for condition in _decoded(status.get("conditions")) or ():
                if condition.get("type") == "PodScheduled":
                    scheduled_status = condition.get("status", "")
                    scheduled_reason = condition.get("reason", "")
                    scheduled_since = parse_time(condition.get("lastTransitionTime"))
                    break
        return Pod(
            namespace=namespace,
            name=name,
            uid=metadata.get("uid", ""),
            requests=requests,
            node_name=node_name,
            phase=status.get("phase") or "Pending",
            created=parse_time(metadata.get("creationTimestamp")),
            labels=self._labels(metadata.get("labels")),
            annotations=self._annotations(metadata.get("annotations")),
            owner=self._owner(metadata.get("ownerReferences")),
            priority=_int(spec.get("priority") or 0, "spec.priority"),
            scheduling=scheduling,
            volumes=self._volumes(spec.get("volumes"), name),
            scheduled_status=scheduled_status,
            scheduled_reason=scheduled_reason,
            scheduled_since=scheduled_since,
            deleting_since=parse_time(metadata.get("deletionTimestamp")),
            grace_period_seconds=_grace_period(spec.get("terminationGracePeriodSeconds")),
            nominated_node="" if node_name else status.get("nominatedNodeName") or "",
        )

    def _labels(self, value: Any) -> Mapping[str, str]:
        if not isinstance(value, msgspec.Raw):
            return self.interner.mapping(value)
        key = bytes(value)
        found = self._by_bytes.get(key)
        if found is None:
            found = self._by_bytes[key] = self.interner.mapping(msgspec.json.decode(value))
        return found

    def _annotations(self, value: Any) -> Mapping[str, str]:
        """Only the annotations the planner reads; most pods carry none of them, which a byte search
        tells without decoding."""
        if isinstance(value, msgspec.Raw):
            data = bytes(value)
            if _KEPT_ANNOTATIONS.search(data) is None:
                return _EMPTY
            value = msgspec.json.decode(data)
        if not value:
            return _EMPTY
        return self.interner.mapping(
            {k: v for k, v in value.items() if k.startswith(_KEPT_POD_ANNOTATION_PREFIXES)}
        )

    def _owner(self, refs: Any) -> OwnerRef | None:
        if not refs:
            return None
        key = _part(refs)
        found = self._owners.get(key, _MISSING)
        if found is _MISSING:
            found = self._owners[key] = _controller(_decoded(refs))
        return found  # type: ignore[return-value]

    def _volumes(self, value: Any, pod_name: str) -> Volumes:
        if not value:
            return NO_VOLUMES
        key = _part(value)
        if b"ephemeral" in key:  # claim names derive from the pod's name: not shareable
            return _volumes(_decoded(value), pod_name)
        found = self._volume_sets.get(key)
        if found is None:
            found = self._volume_sets[key] = _volumes(_decoded(value), pod_name)
        return found

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
            allocatable=resources_from(status.get("allocatable"), "status.allocatable"),
            capacity=resources_from(status.get("capacity"), "status.capacity"),
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
            disruptions_allowed=_int(status.get("disruptionsAllowed") or 0, "status.disruptionsAllowed"),
            min_available=as_text(spec.get("minAvailable")),
            max_unavailable=as_text(spec.get("maxUnavailable")),
        )

    def daemonset(self, raw: Raw) -> DaemonSet:
        metadata = raw.get("metadata") or {}
        template_spec = plain_spec(((raw.get("spec") or {}).get("template") or {}).get("spec") or {})
        where = "spec.template."
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

    def namespace(self, raw: Raw) -> tuple[str, Mapping[str, str]]:
        """A Namespace's name and labels (interned), for affinity terms' namespaceSelector."""
        metadata = raw.get("metadata") or {}
        return metadata.get("name", ""), self.interner.mapping(metadata.get("labels"))


TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
