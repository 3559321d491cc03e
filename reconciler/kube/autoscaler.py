"""Is cluster-autoscaler live on this cluster? Two writers of one ASG fight, so we must know.

Evidence, either is enough: its status ConfigMap (`cluster-autoscaler-status` by default) updated
recently, or its leader-election Lease (`cluster-autoscaler`) renewed recently, in a namespace where
the operator says it may run (`kubernetes.clusterAutoscaler.namespaces`: kube-system by default, as
on EKS; `cluster-autoscaler` or `openshift-machine-api` elsewhere). cluster-autoscaler keeps both in
the namespace it runs in (`--namespace`). An object of that name in any other namespace is a
tenant's, not evidence: anyone who may create a ConfigMap in their own namespace could otherwise make
every apply refuse for ever; it is named in a warning, so an operator who runs cluster-autoscaler
there learns which line to add. A time more than FUTURE_SKEW ahead of ours is no evidence either (a
`last-updated` in 2099 would be "fresh" for ever), and is warned about. Renamed objects
(`--status-config-map-name`, `--lease-resource-name`) are named in `kubernetes.clusterAutoscaler`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from reconciler.domain.model import AutoscalerPresence

FRESH_FOR = timedelta(minutes=10)
FUTURE_SKEW = timedelta(minutes=2)  # clocks of the cluster's nodes and ours may differ this much
DEFAULT_NAMESPACES: tuple[str, ...] = ("kube-system",)
DEFAULT_STATUS_CONFIGMAP = "cluster-autoscaler-status"
DEFAULT_LEASE = "cluster-autoscaler"
_LAST_UPDATED = "cluster-autoscaler.kubernetes.io/last-updated"
# Old text format: "Cluster-autoscaler status at 2024-01-02 10:11:12.123 +0000 UTC:"; new YAML: "time: ..."
_STATUS_TIME = re.compile(
    r"(?:status at|time:)\s*['\"]?(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d+)?"
    r"(?: ?(?:[+-]\d{2}:?\d{2}|Z))?)"
)
# Go's time.String(): "2006-01-02 15:04:05.999999999 -0700 MST" (an optional " m=+1.5" monotonic
# suffix follows in some prints), and RFC 3339 "2006-01-02T15:04:05.999Z07:00".
_TIME = re.compile(
    r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:\.\d+)?\s*(Z|[+-]\d{2}:?\d{2})?", re.IGNORECASE
)


def go_time(text: str) -> datetime | None:
    """Go's `time.String()` or RFC 3339, to an aware datetime; its UTC offset is kept (a cluster whose
    clock zone is PST writes `-0800 PST`). No offset at all is read as UTC, as Go prints UTC."""
    match = _TIME.match(text.strip())
    if not match:
        return None
    offset = match[3]
    zone = UTC
    if offset and offset.upper() != "Z":
        digits = offset.replace(":", "")
        minutes = int(digits[1:3]) * 60 + int(digits[3:5])
        zone = timezone((-1 if digits[0] == "-" else 1) * timedelta(minutes=minutes))
    try:
        return datetime.fromisoformat(f"{match[1]}T{match[2]}").replace(tzinfo=zone)
    except ValueError:
        return None


def _configmap_time(raw: Mapping[str, Any]) -> datetime | None:
    annotations = (raw.get("metadata") or {}).get("annotations") or {}
    if _LAST_UPDATED in annotations:
        return go_time(str(annotations[_LAST_UPDATED]))
    match = _STATUS_TIME.search(str((raw.get("data") or {}).get("status", "")))
    return go_time(match[1]) if match else None


def _where(kind: str, raw: Mapping[str, Any]) -> str:
    metadata = raw.get("metadata") or {}
    return f"{kind} {metadata.get('namespace', '')}/{metadata.get('name', '')}"


def judge_autoscaler(
    configmaps: Iterable[Mapping[str, Any]],
    leases: Iterable[Mapping[str, Any]],
    now: datetime,
    namespaces: Collection[str] = DEFAULT_NAMESPACES,
) -> tuple[AutoscalerPresence | None, tuple[str, ...]]:
    """The freshest evidence within FRESH_FOR of `now` among the candidates in `namespaces`, or None;
    and a warning for each candidate that is not evidence although it looks like it (another
    namespace, a time in the future)."""
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    seen: list[AutoscalerPresence] = []
    warnings: list[str] = []
    candidates: list[tuple[str, Mapping[str, Any], datetime | None]] = [
        ("configmap", configmap, _configmap_time(configmap)) for configmap in configmaps
    ]
    for lease in leases:
        spec = lease.get("spec") or {}
        renewed = spec.get("renewTime") or spec.get("acquireTime")
        candidates.append(("lease", lease, go_time(str(renewed)) if renewed else None))
    for kind, raw, when in candidates:
        if when is None:
            continue
        where = _where(kind, raw)
        namespace = (raw.get("metadata") or {}).get("namespace", "")
        if namespace not in namespaces:
            if now - when <= FRESH_FOR:
                warnings.append(
                    f"{where} looks like cluster-autoscaler's but is not taken as evidence: its namespace "
                    f"is not in kubernetes.clusterAutoscaler.namespaces ({', '.join(namespaces)}); add "
                    f"{namespace} there if cluster-autoscaler runs in it"
                )
            continue
        if when - now > FUTURE_SKEW:
            warnings.append(
                f"{where} is ignored as evidence of cluster-autoscaler: its time {when.isoformat()} is "
                f"{_ahead(when - now)} ahead of ours (more than the {FUTURE_SKEW.seconds // 60}m clocks may "
                "differ); fix the object or the clock"
            )
            continue
        seen.append(AutoscalerPresence(where, when))
    fresh = [p for p in seen if now - p.last_seen <= FRESH_FOR]
    return (max(fresh, key=lambda p: p.last_seen) if fresh else None), tuple(warnings)


def detect_autoscaler(
    configmaps: Iterable[Mapping[str, Any]],
    leases: Iterable[Mapping[str, Any]],
    now: datetime,
    namespaces: Collection[str] = DEFAULT_NAMESPACES,
) -> AutoscalerPresence | None:
    """`judge_autoscaler`'s evidence, without its warnings."""
    return judge_autoscaler(configmaps, leases, now, namespaces)[0]


def _ahead(delta: timedelta) -> str:
    days = delta.days
    if days >= 1:
        return f"{days} days"
    return f"{int(delta.total_seconds() // 60)} minutes"
