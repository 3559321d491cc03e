"""Go / cluster-autoscaler style durations (`30s`, `10m`, `1h30m`, `500ms`)."""

from __future__ import annotations

import re
from datetime import timedelta

_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
# What moves in the words about a standing condition while it stands: durations ("approved 25h ago",
# "for 14m", "empty for 1h5m", "opens ... in 3h") and percentages ("utilisation 62%").
_MOVING = re.compile(r"(?<![\w.-])[0-9]+(?:\.[0-9]+)?(?:%|(?:ms|[smhdw])(?:[0-9]+(?:ms|[smhdw]))*(?!\w))")


def parse_duration(text: str) -> timedelta:
    """Parse a Go duration; raises ValueError for anything else (`"10 minutes"`, `10`), and for one
    too long to be a timedelta (`99999999999999h`), so callers' one-line error paths catch it."""
    text = text.strip()
    if text == "0":
        return timedelta(0)
    position, seconds = 0, 0.0
    for match in _PART.finditer(text):
        if match.start() != position:
            break
        seconds += float(match[1]) * _UNIT_SECONDS[match[2]]
        position = match.end()
    if position == 0 or position != len(text):
        raise ValueError(f"{text!r} is not a duration")
    try:
        return timedelta(seconds=seconds)
    except OverflowError:  # beyond timedelta's ~2.7 million years (or an infinite float)
        raise ValueError(f"{text!r} is too long a duration") from None


def format_duration(value: timedelta) -> str:
    """The shortest Go-style spelling: `1h30m`, `45s`, `0s`."""
    total = int(value.total_seconds())
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{seconds}s" if seconds else ""]
    return "".join(parts) or "0s"


def standing(text: str) -> str:
    """`text` with its durations and percentages masked: two sayings of one standing condition
    (`empty for 2s`, `empty for 1h5m`) compare equal; counts, names and ids stay. Pure."""
    return _MOVING.sub("#", text)
