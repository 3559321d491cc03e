"""What travels between the HTTP layer and the API: requests, replies, watches; discovery documents,
body decoding, MicroTime checks and continue tokens."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from reconciler.demo.kube_api.errors import ApiError
from reconciler.demo.kube_api.resources import _GROUPS, _VERBS, RESOURCES, Resource
from reconciler.demo.kube_api.types import Obj, Query
from reconciler.domain.quantity import QuantityError, parse_quantity

# ------------------------------------------------------------------------------------- the API


@dataclass(frozen=True)
class RecordedRequest:
    """One request as served: path without the query string, header names lower-cased, the body
    as sent (empty for none)."""

    method: str
    path: str
    query: Query
    headers: Mapping[str, str]
    body: bytes = b""

    def json(self) -> Any:
        """The body decoded from JSON; None when there is none."""
        return orjson.loads(self.body) if self.body.strip() else None


@dataclass
class _Reply:
    code: int
    body: bytes | list[bytes]  # a list is sent as is, scatter-gather, without joining


@dataclass
class _Watch:
    res: Resource
    namespace: str | None
    query: Query


_WATCHED_BY_CONTROLLERS = frozenset({"Pod", "PodDisruptionBudget", "ReplicaSet", "Deployment", "StatefulSet"})


_VERSION = {
    "major": "1",
    "minor": "31",
    "emulationMajor": "1",
    "emulationMinor": "31",
    "gitVersion": "v1.31.0-fake",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.22.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def _group_entry(group: str) -> Obj:
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in _GROUPS[group]]
    return {"name": group, "versions": versions, "preferredVersion": versions[0]}


def _group_list() -> Obj:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group_entry(g) for g in _GROUPS]}


def _api_group(group: str) -> Obj:
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group)}


def _resource_list(group: str, version: str) -> Obj:
    resources: list[Obj] = []
    for r in RESOURCES:
        if r.group != group or r.version != version:
            continue
        entry: Obj = {
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": _VERBS,
        }
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        if r.kind in ("Pod", "DaemonSet", "ReplicaSet", "Deployment", "StatefulSet"):
            entry["categories"] = ["all"]
        resources.append(entry)
        if r.has_status:
            resources.append(
                {
                    "name": f"{r.plural}/status",
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        if r.kind == "Pod":
            resources.append(
                {
                    "name": "pods/eviction",
                    "singularName": "",
                    "namespaced": True,
                    "group": "policy",
                    "version": "v1",
                    "kind": "Eviction",
                    "verbs": ["create"],
                }
            )
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}


# metav1.MicroTime's parser (RFC3339Micro, "2006-01-02T15:04:05.000000Z07:00"): Go's time.Parse wants
# exactly six fractional digits there, so "...:00Z" or "...:00.25Z" is refused with a 400.
_MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)")
_MICRO_TIME_FIELDS = {"Lease": ("acquireTime", "renewTime")}


def _check_micro_times(res: Resource, obj: Mapping[str, Any]) -> None:
    """A written object's MicroTime fields as the API server decodes them (a Lease's acquireTime and
    renewTime): anything but RFC3339 with six fractional digits cannot be handled."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    for name in _MICRO_TIME_FIELDS.get(res.kind, ()):
        value = spec.get(name)
        if value is not None and not (isinstance(value, str) and _MICRO_TIME.fullmatch(value)):
            raise ApiError(
                400,
                "BadRequest",
                f'{res.kind} in version "{res.version}" cannot be handled as a {res.kind}: parsing time '
                f'"{value}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse it as RFC3339Micro',
            )


_QUANTITY_FORMAT = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
# Where a pod spec sits in each kind that carries one (a CronJob's is one level deeper still).
_POD_SPEC_PATHS = {
    "Pod": ("spec",),
    "DaemonSet": ("spec", "template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


def _quantity_maps(res: Resource, obj: Mapping[str, Any]) -> list[Any]:
    """The resource maps (name -> quantity) of a written object that the API server decodes as
    Quantity: a pod spec's containers', init containers', pod-level and overhead; a node's."""
    if res.kind == "Node":
        status = obj.get("status")
        return [status.get(k) for k in ("capacity", "allocatable")] if isinstance(status, dict) else []
    spec: Any = obj
    for key in _POD_SPEC_PATHS.get(res.kind, ()):
        spec = spec.get(key) if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or res.kind not in _POD_SPEC_PATHS:
        return []
    maps = [spec.get("overhead")]
    for section in (spec, *(c for k in ("containers", "initContainers") for c in spec.get(k) or ())):
        resources = section.get("resources") if isinstance(section, dict) else None
        if isinstance(resources, dict):
            maps += [resources.get("requests"), resources.get("limits")]
    return maps


def _check_quantities(res: Resource, obj: Mapping[str, Any]) -> None:
    """Every Quantity a written object carries, as the API server decodes it (apimachinery's
    ParseQuantity): text it cannot parse is a 400 before validation; a value past int64 (`1e33`)
    is accepted and served back as written, as a real server does."""
    for found in _quantity_maps(res, obj):
        if not isinstance(found, dict):
            continue
        for value in found.values():
            try:
                parse_quantity(value if isinstance(value, str) else str(value))
            except QuantityError:
                raise ApiError(
                    400,
                    "BadRequest",
                    f'{res.kind} in version "{res.version}" cannot be handled as a {res.kind}: '
                    + _QUANTITY_FORMAT,
                ) from None


def _dumps_exact(obj: Any) -> bytes:
    """orjson.dumps into a right-sized buffer: orjson's own result keeps its over-allocated buffer
    (~8 KB behind a 4 KB pod), which doubles the memory of 150k stored objects."""
    return bytes(memoryview(orjson.dumps(obj)))


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body) if body else None
    except orjson.JSONDecodeError as e:
        raise ApiError(400, "BadRequest", f"the body of the request could not be decoded: {e}") from None


def _json_or_yaml(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        from reconciler.config.documents import parse_yaml, yaml_loader
        from reconciler.domain.errors import UserError

        try:  # the shared guarded loader: an apply patch with an anchor bomb is refused, not expanded
            return parse_yaml(body.decode("utf-8", errors="replace"), "body", yaml_loader("safe"))
        except UserError as e:
            raise ApiError(400, "BadRequest", f"the body of the request could not be decoded: {e}") from None


def _int_param(query: Query, name: str, default: int = 0) -> int:
    raw = query.get(name)
    if raw in (None, ""):
        return default
    try:
        return int(raw)
    except ValueError:
        raise ApiError(400, "BadRequest", f"invalid {name}: {raw!r}") from None


def _dry_run(query: Query) -> bool:
    return query.get("dryRun") == "All"


def _encode_continue(res: Resource, last_key: str, rv: int) -> str:
    token = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": f"{res.plural}/{last_key}"})
    return base64.urlsafe_b64encode(token).decode().rstrip("=")


def _decode_continue(token: str, res: Resource) -> tuple[str, int]:
    """(the last key served, the revision the list is read at; -1: the latest), as
    `storage.DecodeContinue` checks them."""
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        start, rv = data["start"], data["rv"]
        prefix = f"{res.plural}/"
        if not isinstance(start, str) or not start.startswith(prefix) or type(rv) is not int or rv == 0:
            raise ValueError(start)
        return start[len(prefix) :], rv
    except (ValueError, KeyError, TypeError, binascii.Error, orjson.JSONDecodeError):
        raise ApiError(
            400,
            "BadRequest",
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ) from None
