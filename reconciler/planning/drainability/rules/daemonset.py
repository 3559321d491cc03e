"""Drainability rule: a DaemonSet pod is not evicted by a drain.

cluster-autoscaler: simulator/drainability/rules/daemonset.
"""

from __future__ import annotations

from reconciler.domain.model import Pod
from reconciler.planning.drainability.base import STAYS_PUT, Drain, DrainContext


def daemonset(pod: Pod, ctx: DrainContext) -> Drain | None:
    """DaemonSet pods are not evicted by a drain; every node runs its own."""
    return STAYS_PUT if pod.is_daemonset else None
