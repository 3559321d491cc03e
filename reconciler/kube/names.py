"""Kubernetes names and labels, as the API server validates them (apimachinery's validation).

A workload file has passed no API server: a name like `https://evil.example` or `#1` would be
refused there, and what-if must refuse it too, before it becomes a pod name in a pull request's
comment. Each check returns what is wrong in a few words, or None; `object_name_problem` and
`names_problem` apply them to a workload file's object (its name and namespace; its pods' container,
volume and claim names, labels and selector) and say the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = re.compile(rf"^{_LABEL}$")
DNS1123_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_GENERATE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*)$")  # a prefix: may end in '-' or '.'
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

SUBDOMAIN_RULE = (
    "a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting and ending with a "
    "letter or digit, at most 253 characters"
)
LABEL_RULE = (
    "a DNS-1123 label: lowercase letters, digits and '-', starting and ending with a letter or "
    "digit, at most 63 characters"
)


def subdomain_problem(name: str) -> str | None:
    if len(name) <= 253 and DNS1123_SUBDOMAIN.match(name):
        return None
    return f"not a Kubernetes name ({SUBDOMAIN_RULE})"


def label_problem(name: str) -> str | None:
    if len(name) <= 63 and DNS1123_LABEL.match(name):
        return None
    return f"not a Kubernetes name ({LABEL_RULE})"


def generate_name_problem(prefix: str) -> str | None:
    if len(prefix) <= 253 and _GENERATE_NAME.match(prefix):
        return None
    return f"not a name prefix ({SUBDOMAIN_RULE}, which may end in '-')"


def label_key_problem(key: str) -> str | None:
    """A qualified name: an optional DNS subdomain prefix and `/`, then at most 63 characters."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix)):
        return "not a label key (its prefix must be a DNS-1123 subdomain)"
    if len(name) > 63 or not _QUALIFIED.match(name):
        return "not a label key (letters, digits, '-', '_' and '.', at most 63, optionally after 'prefix/')"
    return None


def label_value_problem(value: str) -> str | None:
    if len(value) <= 63 and _LABEL_VALUE.match(value):
        return None
    return "not a label value (letters, digits, '-', '_' and '.', at most 63 characters, or empty)"


def _shown(value: str) -> str:
    """A value that failed a check, on one line and short (it may be anything)."""
    return json.dumps(value if len(value) <= 80 else value[:80] + "...")


def object_name_problem(metadata: Mapping[str, Any], default_namespace: str) -> str | None:
    """metadata.name (or generateName) and the namespace, as the API server checks them."""
    name, prefix = metadata.get("name"), metadata.get("generateName")
    if isinstance(name, str) and name:
        problem, path, value = subdomain_problem(name), "metadata.name", name
    else:
        problem, path, value = generate_name_problem(str(prefix)), "metadata.generateName", str(prefix)
    if problem is None:
        namespace = metadata.get("namespace") or default_namespace
        if not isinstance(namespace, str):
            return None  # its type is said where it is read
        problem, path, value = label_problem(namespace), "metadata.namespace", namespace
    return None if problem is None else f"{path}: {_shown(value)} is {problem}"


def names_problem(kind: str, raw: Mapping[str, Any]) -> str | None:
    """The names and labels of a workload's pods, checked as the API server would check them on
    the pods it creates: container and volume names, labels, the selector, claim templates."""
    spec = raw.get("spec") or {}
    if kind == "CronJob":
        job, base = ((spec.get("jobTemplate") or {}).get("spec") or {}), "spec.jobTemplate.spec.template"
    else:
        job, base = spec, "spec.template"
    template = (
        {"metadata": raw.get("metadata"), "spec": spec} if kind == "Pod" else (job.get("template") or {})
    )
    base = "" if kind == "Pod" else base + "."
    checks: list[tuple[str, str, Callable[[str], str | None]]] = []
    for field_name, labels in (
        ("metadata.labels", (raw.get("metadata") or {}).get("labels")),
        (f"{base}metadata.labels" if base else "", (template.get("metadata") or {}).get("labels")),
        ("spec.selector.matchLabels", (spec.get("selector") or {}).get("matchLabels")),
    ):
        for key, value in (labels or {}).items() if field_name and isinstance(labels, dict) else ():
            checks.append((f"{field_name}: key", str(key), label_key_problem))
            checks.append((f"{field_name}.{key}", str(value or ""), label_value_problem))
    pod_spec = template.get("spec") or {}
    for group in ("containers", "initContainers", "volumes"):
        for index, item in enumerate(pod_spec.get(group) or ()):
            if isinstance(item, dict) and item.get("name") is not None:
                checks.append((f"{base}spec.{group}[{index}].name", str(item["name"]), label_problem))
    if kind == "StatefulSet":
        for index, claim in enumerate(spec.get("volumeClaimTemplates") or ()):
            name = ((claim or {}).get("metadata") or {}).get("name")
            if isinstance(name, str):
                checks.append((f"spec.volumeClaimTemplates[{index}].metadata.name", name, subdomain_problem))
    for path, value, rule in checks:
        problem = rule(value)
        if problem is not None:
            return f"{path}: {_shown(value)} is {problem}"
    return None
