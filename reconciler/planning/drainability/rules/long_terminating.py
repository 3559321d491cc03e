"""Drainability rule: a pod stuck terminating past its grace period does not pin its node.

cluster-autoscaler: simulator/drainability/rules/longterminating.
"""

from __future__ import annotations

from reconciler.domain.model import Pod
from reconciler.planning.drainability.base import STAYS_PUT, Drain, DrainContext


def long_terminating(pod: Pod, ctx: DrainContext) -> Drain | None:
    """A pod deleted longer ago than its grace period (plus 30 s) is stuck on a dead or wedged
    kubelet: it will not be rescheduled and must not pin its node (CA's LongTerminating rule)."""
    return STAYS_PUT if pod.is_long_terminating(ctx.now) else None
