"""scaleDown.windows in apply: one more gate per approved removal (docs/apply.md, "Scale-down windows").

A removal refused here stays approved in the manifest, so the first run inside the next window
applies it; scale-ups are never gated. The count is per apply run, across groups, in the order
removals are judged, as Karpenter's `nodes` bounds the disruptions under way at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from reconciler.windows import HORIZON, Window, allowed_removals, describe_time, next_opening, open_window


class WindowGate:
    """The windows as they stand when the run starts: how many removals it may still start."""

    def __init__(self, windows: Sequence[Window], now: datetime) -> None:
        self.windows = tuple(windows)
        self.now = now
        self.limit = allowed_removals(self.windows, now)
        self.left = self.limit

    def take(self) -> str:
        """ "" when one more removal may go (and it is counted), else why it may not."""
        if self.left is None:
            return ""
        if self.left > 0:
            self.left -= 1
            return ""
        if self.limit == 0 or open_window(self.windows, self.now) is None:
            return outside(self.windows, self.now)
        return (
            f"the scale-down window allows {self.limit} removal(s) per apply run (scaleDown.windows "
            "maxNodes) and this run has started them: stays approved, for a later run"
        )


def outside(windows: Sequence[Window], now: datetime, closed: str = "") -> str:
    """The refusal of a removal while no window is open, naming when the next one opens."""
    opening = next_opening(windows, now)
    when = (
        f"the next window opens {describe_time(windows, opening, now)}"
        if opening is not None
        else f"no window of scaleDown.windows opens within {HORIZON.days // 366} years"
    )
    return f"outside the scale-down window{closed}: stays approved; {when}"


def closed_since_start(windows: Sequence[Window], now: datetime) -> str:
    """For a batch that would start at `now`, later in the run: why not, if every window closed
    while the run worked (a batch already started finishes)."""
    if not windows or allowed_removals(windows, now) != 0:
        return ""
    return outside(windows, now, closed=" (it closed while this run worked)")
