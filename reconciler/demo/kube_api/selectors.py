"""Label selectors as the API server parses them (equality, sets, existence, Gt/Lt)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from reconciler.demo.kube_api.errors import ApiError

# ---------------------------------------------------------------------------------- selectors


_REQ_EQ = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|!=|=)\s*([A-Za-z0-9_.-]*)\s*$")
_REQ_SET = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s+(in|notin)\s*\(([^)]*)\)\s*$")
_REQ_EXISTS = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*$")
_REQ_CMP = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*([<>])\s*(-?[0-9]+)\s*$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside parentheses (`a in (x,y),b` is two requirements)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


LabelPredicate = Callable[[Mapping[str, str]], bool]


def parse_label_selector(text: str) -> LabelPredicate | None:
    """Compile a label selector string (=, ==, !=, in, notin, exists, !key, gt/lt); None if empty."""
    checks: list[LabelPredicate] = []
    for part in _split_top_level(text):
        if m := _REQ_SET.match(part):
            key, op = m.group(1), m.group(2)
            values = frozenset(v.strip() for v in m.group(3).split(",") if v.strip())
            if op == "in":
                checks.append(lambda lb, k=key, vs=values: lb.get(k) in vs)  # type: ignore[misc]  # mypy cannot type default-arg captures
            else:
                checks.append(lambda lb, k=key, vs=values: lb.get(k) not in vs)  # type: ignore[misc]  # mypy cannot type default-arg captures
        elif m := _REQ_EQ.match(part):
            key, op, value = m.groups()
            if op == "!=":
                checks.append(lambda lb, k=key, v=value: lb.get(k) != v)  # type: ignore[misc]  # mypy cannot type default-arg captures
            else:
                checks.append(lambda lb, k=key, v=value: lb.get(k) == v)  # type: ignore[misc]  # mypy cannot type default-arg captures
        elif m := _REQ_CMP.match(part):
            key, op, num = m.group(1), m.group(2), int(m.group(3))
            checks.append(lambda lb, k=key, o=op, n=num: _compare_label(lb.get(k), o, n))  # type: ignore[misc]  # mypy cannot type default-arg captures
        elif m := _REQ_EXISTS.match(part):
            neg, key = m.groups()
            if neg:
                checks.append(lambda lb, k=key: k not in lb)  # type: ignore[misc]  # mypy cannot type default-arg captures
            else:
                checks.append(lambda lb, k=key: k in lb)  # type: ignore[misc]  # mypy cannot type default-arg captures
        else:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {part.strip()!r}")
    if not checks:
        return None
    if len(checks) == 1:
        return checks[0]
    return lambda lb: all(c(lb) for c in checks)


def _compare_label(value: str | None, op: str, num: int) -> bool:
    try:
        v = int(value) if value is not None else None
    except ValueError:
        return False
    return v is not None and (v > num if op == ">" else v < num)


def match_label_selector(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector object: None matches nothing, `{}` matches everything."""
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True
