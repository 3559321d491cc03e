"""Drainability rule: a pod below the expendable priority cutoff neither moves nor keeps its node.

cluster-autoscaler: none: CA leaves such pods out of its snapshot.
"""

from __future__ import annotations

from reconciler.domain.model import Pod
from reconciler.planning.drainability.base import STAYS_PUT, Drain, DrainContext


def expendable(pod: Pod, ctx: DrainContext) -> Drain | None:
    """A pod below the expendable cutoff is not in CA's simulation at all: it needs no new home and
    keeps no node, whatever the rules below would say (preemption or the node's end takes it)."""
    return STAYS_PUT if pod.is_expendable(ctx.expendable_cutoff) else None
