"""Drainability rule: `safe-to-evict: "false"` blocks its node.

cluster-autoscaler: simulator/drainability/rules/notsafetoevict.
"""

from __future__ import annotations

from reconciler.domain.model import SAFE_TO_EVICT, Pod
from reconciler.planning.drainability.base import BLOCKS, Drain, DrainContext


def not_safe_to_evict(pod: Pod, ctx: DrainContext) -> Drain | None:
    """`safe-to-evict: "false"` pins the node."""
    if pod.annotations.get(SAFE_TO_EVICT) == "false":
        return Drain(BLOCKS, f"pod {pod.key} is annotated safe-to-evict: false")
    return None
