"""The drainability family's interface: a rule looks at one pod and answers "stays", "moves",
"blocks" (with the reason a person reads in the plan) or None (no opinion: the next rule decides)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from reconciler.config.settings import ScaleDownConfig
from reconciler.domain.model import Pod

STAYS = "stays"
MOVES = "moves"
BLOCKS = "blocks"


@dataclass(frozen=True, slots=True)
class Drain:
    """One rule's verdict on one pod."""

    outcome: str  # STAYS | MOVES | BLOCKS
    reason: str = ""


STAYS_PUT = Drain(STAYS)
MOVES_OK = Drain(MOVES)


@dataclass(frozen=True, slots=True)
class DrainContext:
    """What the rules need besides the pod: the flags, the time, whether a PDB covers a pod, and
    scaleUp.expendablePriorityCutoff (CA has one cutoff for scale-up and scale-down)."""

    config: ScaleDownConfig
    now: datetime
    has_pdb: Callable[[Pod], bool]
    expendable_cutoff: int


Rule = Callable[[Pod, DrainContext], Drain | None]
