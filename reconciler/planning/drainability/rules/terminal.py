"""Drainability rule: a finished pod needs no new home.

cluster-autoscaler: simulator/drainability/rules/terminal.
"""

from __future__ import annotations

from reconciler.domain.model import Pod
from reconciler.planning.drainability.base import STAYS_PUT, Drain, DrainContext
from reconciler.planning.simnode import TERMINAL_PHASES


def terminal(pod: Pod, ctx: DrainContext) -> Drain | None:
    """A pod that finished holds nothing and needs no new home."""
    return STAYS_PUT if pod.phase in TERMINAL_PHASES else None
