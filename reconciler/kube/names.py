"""Kubernetes names and labels, as the API server validates them (apimachinery's validation).

A workload file has passed no API server: a name like `https://evil.example` or `#1` would be
refused there, and what-if must refuse it too, before it becomes a pod name in a pull request's
comment. Each check returns what is wrong in a few words, or None.
"""

from __future__ import annotations

import re

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
