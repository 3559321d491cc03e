"""scaleDown.windows in apply: one more gate per approved removal (docs/apply.md, "Scale-down windows").

A removal this gate holds back is waiting, not refused: it stays approved in the manifest, its group's
outcome is not a refusal (apply exits 0 when nothing else is refused), and the first run inside the
next window applies it; scale-ups are never gated. `maxNodes` caps the removals one apply run
starts, across groups, in the order they are judged: a count per apply run, not of removals under
way. Karpenter's `nodes` caps the nodes being disrupted at once; here a window with `maxNodes: 5`
lets every run inside it start 5 more (apply.maxParallelDrains bounds how many drain at once).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from reconciler.domain.windows import HORIZON, Window, allowed_removals, describe_time, next_opening

# Every note of a removal held back here starts so (after its instance); the metrics tell them apart
# from refusals by it (reconciler/telemetry/metrics.py).
WAITS = "waits for "


class WindowGate:
    """The windows as they stand when the run starts: how many removals it may still start."""

    def __init__(self, windows: Sequence[Window], now: datetime) -> None:
        self.windows = tuple(windows)
        self.now = now
        self.limit = allowed_removals(self.windows, now)
        self.left = self.limit
        self._why = ""  # said once per run: naming the next opening can take a while to work out

    def take(self) -> str:
        """ "" when one more removal may go (and it is counted), else why it waits."""
        if self.left is None:
            return ""
        if self.left > 0:
            self.left -= 1
            return ""
        if not self._why:
            self._why = waiting(self.windows, self.now) if self.limit == 0 else self._full()
        return self._why

    def _full(self) -> str:
        return (
            f"{WAITS}a later run: the scale-down window allows {self.limit} removal(s) per apply run "
            "(scaleDown.windows maxNodes) and this run has started them; stays approved"
        )


def waiting(windows: Sequence[Window], now: datetime, closed: str = "") -> str:
    """Why a removal waits while no window is open (or a blackout is): when the next one opens."""
    opening = next_opening(windows, now)
    when = (
        f"opens {describe_time(windows, opening, now)}"
        if opening is not None
        else f"none of scaleDown.windows opens within {HORIZON.days // 366} years"
    )
    return f"{WAITS}the scale-down window{closed}: {when}; stays approved"


def closed_since_start(windows: Sequence[Window], now: datetime) -> str:
    """For a batch that would start at `now`, later in the run: why it waits, if every window
    closed while the run worked (a batch already started finishes)."""
    if not windows or allowed_removals(windows, now) != 0:
        return ""
    return waiting(windows, now, closed=" (it closed while this run worked)")
