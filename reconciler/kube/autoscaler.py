"""Is cluster-autoscaler live on this cluster? Two writers of one ASG fight, so we must know.

Evidence, either is enough: its status ConfigMap (`kube-system/cluster-autoscaler-status`) updated
recently, or its leader-election Lease (`kube-system/cluster-autoscaler`) renewed recently.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.model import AutoscalerPresence

FRESH_FOR = timedelta(minutes=10)
STATUS_CONFIGMAP = ("kube-system", "cluster-autoscaler-status")
LEASE = ("kube-system", "cluster-autoscaler")
_LAST_UPDATED = "cluster-autoscaler.kubernetes.io/last-updated"
# Old text format: "Cluster-autoscaler status at 2024-01-02 10:11:12.123 +0000 UTC:"; new YAML: "time: ..."
_STATUS_TIME = re.compile(r"(?:status at|time:)\s*['\"]?(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})")


def _go_time(text: str) -> datetime | None:
    """Go's `2024-01-02 10:11:12.123456 +0000 UTC` or RFC 3339, to an aware datetime."""
    match = re.match(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})", text.strip())
    if not match:
        return None
    return datetime.fromisoformat(f"{match[1]}T{match[2]}+00:00")


def _configmap_time(raw: Mapping[str, Any]) -> datetime | None:
    annotations = (raw.get("metadata") or {}).get("annotations") or {}
    if _LAST_UPDATED in annotations:
        return _go_time(annotations[_LAST_UPDATED])
    match = _STATUS_TIME.search(str((raw.get("data") or {}).get("status", "")))
    return _go_time(match[1]) if match else None


def detect_autoscaler(
    configmap: Mapping[str, Any] | None, lease: Mapping[str, Any] | None, now: datetime
) -> AutoscalerPresence | None:
    """The freshest evidence within FRESH_FOR of `now`, or None."""
    seen: list[AutoscalerPresence] = []
    if configmap is not None:
        when = _configmap_time(configmap)
        if when is not None:
            seen.append(AutoscalerPresence("configmap kube-system/cluster-autoscaler-status", when))
    if lease is not None:
        spec = lease.get("spec") or {}
        renewed = spec.get("renewTime") or spec.get("acquireTime")
        if renewed:
            when = datetime.fromisoformat(str(renewed).replace("Z", "+00:00"))
            seen.append(AutoscalerPresence("lease kube-system/cluster-autoscaler", when))
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    fresh = [p for p in seen if now - p.last_seen <= FRESH_FOR]
    return max(fresh, key=lambda p: p.last_seen) if fresh else None
