"""The parts of Kubernetes objects the planner reads, as pruned JSON schemas for msgspec.

A real pod is ~4 KB of JSON of which the planner needs a few hundred bytes; managedFields, env,
probes and container statuses (all but their resources) are most of it. Decoding against these
TypedDicts skips everything not declared here without building Python objects for it, which is
5-10x faster than a full `json.loads` and is what lets 150k pods list in seconds. The results are
plain dicts (with some values left as msgspec.Raw), so the same `parse.ObjectReader` reads them
and YAML snapshots alike.
"""

from __future__ import annotations

from functools import cache
from types import GenericAlias
from typing import Any, TypedDict

import msgspec


class OwnerReferenceDoc(TypedDict, total=False):
    kind: str
    name: str
    controller: bool


class MetadataDoc(TypedDict, total=False):
    name: str
    namespace: str
    resourceVersion: str  # `run`'s cache keeps an object it already has when a relist shows it unchanged
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReferenceDoc]
    creationTimestamp: str


# Most of a pod stays encoded (msgspec.Raw): pods of one controller carry byte-identical specs, labels
# and owner references, so the reader keys its caches on those bytes and decodes each distinct value
# once (`parse.ObjectReader.pod`); conditions and annotations are decoded only for the pods that need
# them. Nothing here builds a Python object per field per pod.


class PodMetadataDoc(TypedDict, total=False):
    name: str
    namespace: str
    resourceVersion: str
    uid: str
    creationTimestamp: str
    deletionTimestamp: str
    labels: msgspec.Raw
    annotations: msgspec.Raw
    ownerReferences: msgspec.Raw


class PodSpecDoc(TypedDict, total=False):
    nodeName: str
    containers: msgspec.Raw
    initContainers: msgspec.Raw
    overhead: msgspec.Raw
    resources: msgspec.Raw  # pod-level resources (PodLevelResources, on by default since 1.34)
    nodeSelector: msgspec.Raw
    affinity: msgspec.Raw
    tolerations: msgspec.Raw
    topologySpreadConstraints: msgspec.Raw
    volumes: msgspec.Raw
    priority: int
    terminationGracePeriodSeconds: int


class ConditionDoc(TypedDict, total=False):
    type: str
    status: str
    reason: str
    lastTransitionTime: str


class ContainerStatusDoc(TypedDict, total=False):
    """What in-place resize leaves in a container status for the scheduler: the resources the node
    allocated and those actuated. State, image, IDs and the rest are skipped: a status differs from
    pod to pod, so none of it is worth keeping encoded."""

    name: str
    allocatedResources: msgspec.Raw
    resources: msgspec.Raw


class PodStatusDoc(TypedDict, total=False):
    phase: str
    conditions: msgspec.Raw
    nominatedNodeName: str
    containerStatuses: list[ContainerStatusDoc]
    initContainerStatuses: list[ContainerStatusDoc]


class PodDoc(TypedDict, total=False):
    kind: str
    metadata: PodMetadataDoc
    spec: PodSpecDoc
    status: PodStatusDoc


class NodeSpecDoc(TypedDict, total=False):
    providerID: str
    taints: list[dict[str, Any]]
    unschedulable: bool


class NodeStatusDoc(TypedDict, total=False):
    capacity: dict[str, Any]
    allocatable: dict[str, Any]
    conditions: list[ConditionDoc]


class NodeDoc(TypedDict, total=False):
    kind: str
    metadata: MetadataDoc
    spec: NodeSpecDoc
    status: NodeStatusDoc


class PodTemplateDoc(TypedDict, total=False):
    spec: PodSpecDoc


class DaemonSetSpecDoc(TypedDict, total=False):
    template: PodTemplateDoc


class DaemonSetDoc(TypedDict, total=False):
    kind: str
    metadata: MetadataDoc
    spec: DaemonSetSpecDoc


class NamespaceMetadataDoc(TypedDict, total=False):
    name: str
    resourceVersion: str
    labels: dict[str, str]


class NamespaceDoc(TypedDict, total=False):
    """Only what affinity terms' namespaceSelector needs: the name and the labels."""

    kind: str
    metadata: NamespaceMetadataDoc


class KindDoc(TypedDict, total=False):
    kind: str


ListMetaDoc = TypedDict("ListMetaDoc", {"continue": str, "resourceVersion": str}, total=False)

# Kinds we read but that are small or rare: decoded whole.
_WHOLE = dict[str, Any]
_ITEM_TYPES: dict[str, Any] = {
    "Pod": PodDoc,
    "Node": NodeDoc,
    "DaemonSet": DaemonSetDoc,
    "Namespace": NamespaceDoc,
    "PodDisruptionBudget": _WHOLE,
    "PersistentVolume": _WHOLE,
    "PersistentVolumeClaim": _WHOLE,
    "ConfigMap": _WHOLE,
    "Lease": _WHOLE,
}
READ_KINDS = frozenset(_ITEM_TYPES)


def _list_type(kind: str) -> Any:
    items = GenericAlias(list, (_ITEM_TYPES[kind],))
    return TypedDict(  # type: ignore[operator]
        f"{kind}ListDoc", {"kind": str, "metadata": ListMetaDoc, "items": items}, total=False
    )


@cache
def list_decoder(kind: str) -> msgspec.json.Decoder[Any]:
    """Decoder for a list response (`PodList`, ...) of a kind we read."""
    return msgspec.json.Decoder(_list_type(kind))


@cache
def item_decoder(kind: str) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(_ITEM_TYPES[kind])


# The key under which an object its schema refused carries the problem (a field of the wrong type:
# no API server serves one, but a fake or a dump can hold it). Readers leave such an object out
# with a warning (kube/parse.py's `readable`), never the list it came in.
UNREADABLE_KEY = "<unreadable>"


class _PageDoc(TypedDict, total=False):
    metadata: ListMetaDoc
    items: list[msgspec.Raw]


_page_decoder = msgspec.json.Decoder(_PageDoc)
_any_decoder = msgspec.json.Decoder(dict[str, Any])


def decode_item(kind: str, data: bytes | msgspec.Raw) -> dict[str, Any]:
    """One object with the pruned schema of `kind`; one that does not fit it comes back as its
    metadata and the problem under UNREADABLE_KEY."""
    try:
        document: dict[str, Any] = item_decoder(kind).decode(data)
        return document
    except msgspec.ValidationError as exc:
        try:
            metadata = _any_decoder.decode(data).get("metadata")
        except msgspec.DecodeError:
            metadata = None
        return {"metadata": metadata if isinstance(metadata, dict) else {}, UNREADABLE_KEY: str(exc)}


def decode_list(kind: str, body: bytes) -> dict[str, Any]:
    """A list response of `kind`: decoded in one pass; when an item does not fit its schema, item
    by item (decode_item), so one object never fails the page. msgspec.DecodeError: not a list."""
    try:
        page: dict[str, Any] = list_decoder(kind).decode(body)
        return page
    except msgspec.ValidationError:
        loose = _page_decoder.decode(body)
        return {
            "metadata": loose.get("metadata") or {},
            "items": [decode_item(kind, raw) for raw in loose.get("items") or ()],
        }


class EnvelopeDoc(TypedDict, total=False):
    """Any document: its kind and, for lists, the still-encoded items."""

    kind: str
    items: list[msgspec.Raw]


envelope_decoder = msgspec.json.Decoder(EnvelopeDoc)
kind_decoder = msgspec.json.Decoder(KindDoc)
