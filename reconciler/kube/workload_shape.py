"""The types Kubernetes gives the fields of a workload that `what-if` reads, checked before reading.

A live cluster's objects passed the API server's decoder, so the pod parser (`kube.parse`) trusts
their shape. A workload file has passed nothing: `labels: app`, a null toleration or a `hostPort:
"80"` would be a traceback there, or be read as something the API server would refuse. So every
field the reader looks at is checked here first, with the type the Kubernetes API gives it (a
mapping, a list, a string, a whole number, a quantity), and a wrong one is one line naming its path.
Unknown fields are left alone (a manifest may carry any field the reader does not need); null, which
the API server takes as "absent", is accepted for any field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypedDict

import msgspec

Quantity = str | int | float


class _Metadata(TypedDict, total=False):
    name: str | None
    generateName: str | None
    namespace: str | None
    labels: dict[str, str] | None
    annotations: dict[str, str] | None


class _Requirement(TypedDict, total=False):
    key: str | None
    operator: str | None
    values: list[str] | None


class _LabelSelector(TypedDict, total=False):
    matchLabels: dict[str, str] | None
    matchExpressions: list[_Requirement] | None


class _NodeSelectorTerm(TypedDict, total=False):
    matchExpressions: list[_Requirement] | None
    matchFields: list[_Requirement] | None


class _NodeSelector(TypedDict, total=False):
    nodeSelectorTerms: list[_NodeSelectorTerm] | None


class _PreferredTerm(TypedDict, total=False):
    weight: int | None
    preference: _NodeSelectorTerm | None


class _NodeAffinity(TypedDict, total=False):
    requiredDuringSchedulingIgnoredDuringExecution: _NodeSelector | None
    preferredDuringSchedulingIgnoredDuringExecution: list[_PreferredTerm] | None


class _PodAffinityTerm(TypedDict, total=False):
    labelSelector: _LabelSelector | None
    namespaces: list[str] | None
    namespaceSelector: _LabelSelector | None
    topologyKey: str | None
    matchLabelKeys: list[str] | None
    mismatchLabelKeys: list[str] | None


class _WeightedTerm(TypedDict, total=False):
    weight: int | None
    podAffinityTerm: _PodAffinityTerm | None


class _PodAffinity(TypedDict, total=False):
    requiredDuringSchedulingIgnoredDuringExecution: list[_PodAffinityTerm] | None
    preferredDuringSchedulingIgnoredDuringExecution: list[_WeightedTerm] | None


class _Affinity(TypedDict, total=False):
    nodeAffinity: _NodeAffinity | None
    podAffinity: _PodAffinity | None
    podAntiAffinity: _PodAffinity | None


class _Toleration(TypedDict, total=False):
    key: str | None
    operator: str | None
    value: str | None
    effect: str | None
    tolerationSeconds: int | None


class _Resources(TypedDict, total=False):
    requests: dict[str, Quantity] | None
    limits: dict[str, Quantity] | None


class _Port(TypedDict, total=False):
    name: str | None
    containerPort: int | None
    hostPort: int | None
    hostIP: str | None
    protocol: str | None


class _Container(TypedDict, total=False):
    name: str | None
    image: str | None
    resources: _Resources | None
    ports: list[_Port] | None
    restartPolicy: str | None


class _SpreadConstraint(TypedDict, total=False):
    maxSkew: int | None
    topologyKey: str | None
    whenUnsatisfiable: str | None
    labelSelector: _LabelSelector | None
    minDomains: int | None
    nodeAffinityPolicy: str | None
    nodeTaintsPolicy: str | None
    matchLabelKeys: list[str] | None


class _ClaimSource(TypedDict, total=False):
    claimName: str | None


class _EmptyDir(TypedDict, total=False):
    medium: str | None
    sizeLimit: Quantity | None


class _Volume(TypedDict, total=False):
    name: str | None
    persistentVolumeClaim: _ClaimSource | None
    emptyDir: _EmptyDir | None
    ephemeral: dict[str, Any] | None


class _PodSpec(TypedDict, total=False):
    containers: list[_Container] | None
    initContainers: list[_Container] | None
    overhead: dict[str, Quantity] | None
    resources: _Resources | None
    nodeName: str | None
    nodeSelector: dict[str, str] | None
    affinity: _Affinity | None
    tolerations: list[_Toleration] | None
    topologySpreadConstraints: list[_SpreadConstraint] | None
    volumes: list[_Volume] | None
    priority: int | None
    priorityClassName: str | None
    terminationGracePeriodSeconds: int | None


class _PodTemplate(TypedDict, total=False):
    metadata: _Metadata | None
    spec: _PodSpec | None


class _ClaimTemplate(TypedDict, total=False):
    metadata: _Metadata | None


class _Ordinals(TypedDict, total=False):
    start: Any  # its count is checked where it is read, with its own message


class _ReplicatedSpec(TypedDict, total=False):
    selector: _LabelSelector | None
    template: _PodTemplate | None


class _StatefulSetSpec(_ReplicatedSpec, total=False):
    volumeClaimTemplates: list[_ClaimTemplate] | None
    ordinals: _Ordinals | None


class _ControllerSpec(TypedDict, total=False):  # a ReplicationController's selector is a plain map
    selector: dict[str, str] | None
    template: _PodTemplate | None


class _JobSpec(TypedDict, total=False):
    template: _PodTemplate | None


class _JobTemplate(TypedDict, total=False):
    metadata: _Metadata | None
    spec: _JobSpec | None


class _CronJobSpec(TypedDict, total=False):
    jobTemplate: _JobTemplate | None
    concurrencyPolicy: str | None


class _Replicated(TypedDict, total=False):
    metadata: _Metadata | None
    spec: _ReplicatedSpec | None


class _StatefulSet(TypedDict, total=False):
    metadata: _Metadata | None
    spec: _StatefulSetSpec | None


class _ReplicationController(TypedDict, total=False):
    metadata: _Metadata | None
    spec: _ControllerSpec | None


class _Job(TypedDict, total=False):
    metadata: _Metadata | None
    spec: _JobSpec | None


class _CronJob(TypedDict, total=False):
    metadata: _Metadata | None
    spec: _CronJobSpec | None


class _Pod(TypedDict, total=False):
    metadata: _Metadata | None
    spec: _PodSpec | None


SHAPES: Mapping[str, type] = {
    "Deployment": _Replicated,
    "ReplicaSet": _Replicated,
    "DaemonSet": _Replicated,
    "StatefulSet": _StatefulSet,
    "ReplicationController": _ReplicationController,
    "Job": _Job,
    "CronJob": _CronJob,
    "Pod": _Pod,
}

_PATH = re.compile(r" - at `(?:key` in `)?\$\.?(?P<path>[^`]*)`$")
_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "str": "a string",
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "null": "null",
}
_EXPECTED = re.compile(r"^Expected `(?P<want>[^`]*)`, got `(?P<got>[^`]*)`")


def shape_problem(kind: str, raw: Mapping[str, Any]) -> str | None:
    """`path: expected ..., got ...` for the first field of `raw` (a workload of `kind`, plain
    Python values) whose type Kubernetes would refuse; None when all are fine."""
    shape = SHAPES.get(kind)
    if shape is None:
        return None
    try:
        msgspec.convert(raw, type=shape, strict=True)
    except msgspec.ValidationError as exc:
        return _message(str(exc))
    return None


def _message(text: str) -> str:
    found = _PATH.search(text)
    path = found["path"].replace("[...]", "") if found else ""
    body = text[: found.start()] if found else text
    if found and text[found.start() :].startswith(" - at `key` in"):
        body += " (as a key)"
    expected = _EXPECTED.match(body)
    if expected:
        wants = [w.strip() for w in expected["want"].split("|") if w.strip() != "null"]
        want = "a quantity (e.g. 500m, 2Gi)" if set(wants) == {"str", "int", "float"} else None
        want = want or " or ".join(_WORDS.get(w, w) for w in wants)
        got = _WORDS.get(expected["got"], expected["got"])
        body = f"expected {want}, got {got}" + body[expected.end() :]
    else:
        body = body[:1].lower() + body[1:]
    return f"{path}: {body}" if path else body
