"""What a real API server refuses, so the fake refuses it too (422 Invalid) and the next gap between
our writes and a real cluster fails a test instead of an incident.

Two layers, as in kube-apiserver:
- the registry's own validation (kubernetes/kubernetes `pkg/apis/core/validation` ValidateConfigMap,
  `pkg/apis/coordination/validation` ValidateLease), written out here: every object's
  `metadata.name` (ValidateObjectMeta with the kind's name rule: a DNS-1123 subdomain for Leases,
  ConfigMaps, Events, Pods, Nodes and most others, a DNS-1123 label for Namespaces and StatefulSets),
  ConfigMap keys and total size, Lease durations and transitions (a MicroTime the decoder cannot
  read is a 400 before this: wire.py's _check_micro_times);
- the object's shape against the official OpenAPI schema of KUBERNETES_VERSION, as the
  `kubernetes-validate` package ships it (strict: unknown fields refused). A real server drops unknown
  fields with a warning (fieldValidation=Warn); refusing them is stricter on purpose: a field we send
  that the server ignores is a bug of ours. Without that package (a demo install) only the first
  layer runs.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

KUBERNETES_VERSION = "1.34"
CONFIGMAP_MAX_BYTES = 1024 * 1024  # corev1.MaxSecretSize, which ValidateConfigMap applies
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(f"^{_LABEL}$")
_DNS1123_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
# apimachinery's messages for NameIsDNSSubdomain / NameIsDNSLabel, word for word
_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    rf"validation is '{_LABEL}(\.{_LABEL})*')"
)
_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    f"start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    f"validation is '{_LABEL}')"
)
_NAMED_AS_LABELS = frozenset({"Namespace", "StatefulSet"})  # ValidateNamespaceName, ...StatefulSetName


def name_problems(kind: str, name: str) -> list[str]:
    """ValidateObjectMeta's name check with the kind's rule (a subdomain unless the kind's own
    validation says label), so a name the real server refuses (`asg-reconciler-apply-Prod_EKS`)
    is refused here too."""
    if kind in _NAMED_AS_LABELS:
        if len(name) > 63:
            return [f"metadata.name: Invalid value: {json.dumps(name)}: must be no more than 63 characters"]
        if not _DNS1123_LABEL.match(name):
            return [f"metadata.name: Invalid value: {json.dumps(name)}: {_LABEL_MESSAGE}"]
        return []
    if len(name) > 253:
        return [f"metadata.name: Invalid value: {json.dumps(name)}: must be no more than 253 characters"]
    if not _DNS1123_SUBDOMAIN.match(name):
        return [f"metadata.name: Invalid value: {json.dumps(name)}: {_SUBDOMAIN_MESSAGE}"]
    return []


def _config_key_problems(field: str, key: str) -> list[str]:
    """IsConfigMapKey: at most 253 characters of `[-._a-zA-Z0-9]`, not `.`, `..` nor starting `..`."""
    if len(key) <= 253 and _CONFIG_KEY.match(key) and key not in (".", "..") and not key.startswith(".."):
        return []
    return [
        f"{field}[{key}]: Invalid value: {json.dumps(key)}: a valid config key must consist of "
        "alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or "
        "'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
    ]


def configmap_problems(obj: Mapping[str, Any]) -> list[str]:
    """ValidateConfigMap: every key of data and binaryData, no key in both, and the values (binaryData
    decoded) at most 1 MiB in all."""
    data = obj.get("data") or {}
    binary = obj.get("binaryData") or {}
    problems: list[str] = []
    total = 0
    for field, items in (("data", data), ("binaryData", binary)):
        if not isinstance(items, Mapping):
            continue
        for key, value in items.items():
            problems += _config_key_problems(field, str(key))
            text = str(value)
            total += len(text) * 3 // 4 if field == "binaryData" else len(text.encode())  # base64
    if isinstance(data, Mapping) and isinstance(binary, Mapping):
        for key in sorted(set(data) & set(binary)):
            problems.append(f"data[{key}]: Invalid value: {key!r}: duplicate of key present in binaryData")
    if total > CONFIGMAP_MAX_BYTES:
        problems.append(f"[]: Too long: may not be more than {CONFIGMAP_MAX_BYTES} bytes")
    return problems


def lease_problems(obj: Mapping[str, Any]) -> list[str]:
    """ValidateLeaseSpec."""
    spec = obj.get("spec") or {}
    problems: list[str] = []
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and (not isinstance(duration, int) or duration <= 0):
        problems.append(f"spec.leaseDurationSeconds: Invalid value: {duration}: must be greater than 0")
    transitions = spec.get("leaseTransitions")
    if transitions is not None and (not isinstance(transitions, int) or transitions < 0):
        problems.append(
            f"spec.leaseTransitions: Invalid value: {transitions}: must be greater than or equal to 0"
        )
    return problems


_REGISTRY_RULES = {"ConfigMap": configmap_problems, "Lease": lease_problems}


@functools.cache
def _validator(kind: str, api_version: str) -> Any:
    """A compiled validator of the official schema for (kind, apiVersion), or None where
    kubernetes-validate is not installed or has no such schema."""
    try:
        import jsonschema
        import referencing
    except ImportError:  # pragma: no cover - both are dependencies of ours
        return None
    try:
        schemas = resources.files("kubernetes_validate") / "kubernetes-json-schema"
        root = schemas / f"v{KUBERNETES_VERSION}.0-local-strict"
    except ModuleNotFoundError:
        return None
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    path = root / f"{kind.lower()}-{group}.json"
    if not path.is_file():
        return None
    schema = json.loads(path.read_text())
    definitions = json.loads((root / "_definitions.json").read_text())
    registry: Any = referencing.Registry()
    registry = referencing.Resource.from_contents(schema) @ registry  # as kubernetes-validate does
    registry = referencing.Resource.from_contents(definitions) @ registry
    return jsonschema.Draft202012Validator(schema, registry=registry)


def schema_problems(obj: Mapping[str, Any]) -> list[str]:
    validator = _validator(str(obj.get("kind", "")), str(obj.get("apiVersion", "")))
    if validator is None:
        return []
    problems = []
    for error in validator.iter_errors(obj):
        where = ".".join(str(p) for p in error.absolute_path) or "<root>"
        problems.append(f"{where}: {error.message}")
    return problems


def problems(obj: Mapping[str, Any]) -> list[str]:
    """Everything a real server (and the schema) would refuse in this object, as field: message."""
    kind = str(obj.get("kind", ""))
    rule = _REGISTRY_RULES.get(kind)
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    named = name_problems(kind, name) if isinstance(name, str) and name else []
    return named + (rule(obj) if rule else []) + schema_problems(obj)
