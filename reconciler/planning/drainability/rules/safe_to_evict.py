"""Drainability rule: `safe-to-evict: "true"` lets a pod move, overriding the blocking rules after it.

cluster-autoscaler: simulator/drainability/rules/safetoevict.
"""

from __future__ import annotations

from reconciler.domain.model import SAFE_TO_EVICT, Pod
from reconciler.planning.drainability.base import MOVES_OK, Drain, DrainContext


def safe_to_evict(pod: Pod, ctx: DrainContext) -> Drain | None:
    """`safe-to-evict: "true"`: the owner says it may go, whatever the rules below would say."""
    return MOVES_OK if pod.annotations.get(SAFE_TO_EVICT) == "true" else None
