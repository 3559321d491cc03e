"""Drainability rule: a static (mirror) pod goes with its node.

cluster-autoscaler: simulator/drainability/rules/mirror.
"""

from __future__ import annotations

from reconciler.domain.model import Pod
from reconciler.planning.drainability.base import STAYS_PUT, Drain, DrainContext


def mirror(pod: Pod, ctx: DrainContext) -> Drain | None:
    """Static pods belong to the kubelet of their node: they go with it and never block."""
    return STAYS_PUT if pod.is_mirror else None
