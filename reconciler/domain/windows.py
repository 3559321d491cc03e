"""Scale-down windows (`scaleDown.windows`): when approved removals may be applied, and how many per
apply run. Pure: no I/O and no clock, every answer is for the `now` it is given, so apply, plan and
the simulator decide alike.

A window opens each time its 5-field cron `schedule` fires, read on the wall clock of `time_zone`,
and stays open for `duration` of elapsed time, as Karpenter's disruption budgets (`schedule`,
`duration`, `nodes`) do. Karpenter's budgets limit disruption and let it run free when none is
active; windows here permit it: once any is configured, removals are applied only while one is
open. Overlapping windows: the most restrictive wins (the fewest `max_nodes`), as for Karpenter's
budgets, so a window with `max_nodes` 0 is a blackout inside the others.

Wall-clock times that a daylight-saving change skips fire when the clock resumes (as Vixie cron
does, so a daily window is never lost for a day); times that occur twice fire once, at the first.
A time the clock then does not show for a whole day (midnight of the 30 December 2011 that
Pacific/Apia skipped) has no fire. Durations are elapsed time (at most MAX_DURATION): an 8h window
over a DST change ends 7 or 9 wall-clock hours later.

Day fields follow Vixie cron as written: a day-of-month and a day-of-week both restricted match
either, and a field written `*/N` counts as `*` for that rule. robfig/cron, which Karpenter's budgets
use, counts `*/N` (N above 1) as restricted, so `0 9 */2 * 1` differs: here the odd days that are
Mondays, there the odd days and every Monday.
"""

from __future__ import annotations

import calendar
import heapq
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from functools import cache, lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

__all__ = [
    "MAX_DURATION",
    "Cron",
    "Window",
    "allowed_removals",
    "closed_notice",
    "describe_time",
    "next_closing",
    "next_opening",
    "open_window",
    "parse_cron",
    "zone",
    "zone_names",
]

# How far ahead next_opening/next_closing look: a schedule on 29 February (every 4 years, 8 across
# 2100) still opens within it. And how many fire times one answer may walk, so that a schedule that
# fires every minute and never lets a window open cannot make an answer take seconds.
HORIZON = timedelta(days=9 * 366)
_MAX_STEPS = 200_000
# The longest window: a year (and a day) covers every schedule that fires at least once a year; a
# longer one is a mistake, and past some millions of hours no longer a time at all.
MAX_DURATION = timedelta(days=366)

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_DAYS = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
# (name, low, high, names) of the five fields; day-of-week takes 7 for Sunday too
_NO_NAMES: dict[str, int] = {}
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, _NO_NAMES),
    ("hour", 0, 23, _NO_NAMES),
    ("day-of-month", 1, 31, _NO_NAMES),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 0, 7, _DAYS),
)
_ITEM = re.compile(r"^(?P<range>\*|\?|[0-9a-z]+(?:-[0-9a-z]+)?)(?:/(?P<step>[0-9]+))?$")


@dataclass(frozen=True)
class Cron:
    """A parsed 5-field schedule: the values each field allows, and whether day-of-month and
    day-of-week were written with `*` or `*/N` (Vixie cron: when both are restricted, either
    matches)."""

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool
    any_weekday: bool

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        in_month = day.day in self.days
        in_week = (day.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return in_month and in_week
        return in_month or in_week


@cache
def parse_cron(text: str) -> Cron:
    """Parse `minute hour day-of-month month day-of-week` (numbers, `*`, `a-b`, `/step`, lists,
    month and day names, `@daily` and the other macros). Raises ValueError saying what is wrong."""
    spec = _MACROS.get(text.strip().lower(), text)
    fields = spec.split()
    if len(fields) != 5:
        raise ValueError(
            f"{text!r} has {len(fields)} field(s), not 5 (minute hour day-of-month month day-of-week)"
        )
    parsed = [_field(value, *shape) for value, shape in zip(fields, _FIELDS, strict=True)]
    (minutes, _), (hours, _), (days, any_day), (months, _), (weekdays, any_weekday) = parsed
    cron = Cron(
        tuple(sorted(minutes)),
        tuple(sorted(hours)),
        frozenset(days),
        frozenset(months),
        frozenset(d % 7 for d in weekdays),
        any_day,
        any_weekday,
    )
    if (cron.any_day or cron.any_weekday) and not any(
        day <= _longest(month) for month in cron.months for day in cron.days
    ):
        raise ValueError(f"{text!r} never fires: no month in it has such a day")
    return cron


def _longest(month: int) -> int:
    return 29 if month == 2 else calendar.monthrange(2001, month)[1]


def _field(value: str, name: str, low: int, high: int, names: dict[str, int]) -> tuple[set[int], bool]:
    """The values one field allows, and whether it was written with `*` (or `?`)."""
    allowed: set[int] = set()
    star = False
    for item in value.lower().split(","):
        match = _ITEM.match(item)
        if not match:
            raise ValueError(f"{name} {value!r}: {item!r} is not a value, a range a-b or a step /n")
        step = int(match["step"]) if match["step"] is not None else 1
        if step < 1:
            raise ValueError(f"{name} {value!r}: step {step} must be at least 1")
        if match["range"] in ("*", "?"):
            first, last, star = low, high, True
        else:
            bounds = [_value(part, name, value, low, high, names) for part in match["range"].split("-")]
            first = bounds[0]
            last = bounds[-1] if len(bounds) == 2 else (high if match["step"] is not None else first)
            if first > last:
                raise ValueError(f"{name} {value!r}: range {item!r} goes backwards")
        allowed.update(range(first, last + 1, step))
    return allowed, star


def _value(part: str, name: str, value: str, low: int, high: int, names: dict[str, int]) -> int:
    if part in names:
        return names[part]
    if not part.isdigit():
        raise ValueError(f"{name} {value!r}: {part!r} is not a number{_names_hint(names)}")
    number = int(part)
    if not low <= number <= high:
        raise ValueError(f"{name} {value!r}: {number} is out of range {low}-{high}")
    return number


def _names_hint(names: dict[str, int]) -> str:
    return f" or a name ({', '.join(list(names)[:3])}, ...)" if names else ""


@cache
def zone_names() -> frozenset[str]:
    """The names a time zone may be given by: the tz database's identifiers (this machine's
    zoneinfo, else the tzdata package) and `UTC`. Not `localtime`, a link some systems keep to their
    own zone: the same config would mean another zone on another machine."""
    return frozenset(available_timezones() - {"localtime", "posixrules"}) | {"UTC"}


@cache
def zone(name: str) -> tzinfo:
    """The IANA time zone `name` (`UTC`, `Europe/Berlin`), spelled exactly as the tz database does;
    ValueError (one line, with the fix) for any other name."""
    if name in ("UTC", "Etc/UTC"):
        return UTC
    if name in zone_names():
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
    raise ValueError(_not_a_zone(name))


def _not_a_zone(name: str) -> str:
    said = f"{name!r} is not an IANA time zone (e.g. UTC, Europe/Berlin)"
    if name.strip().lower() == "localtime":
        return f"{said}: localtime is whatever zone the machine reading the config has; name that zone"
    spelled = [n for n in zone_names() if n.lower() == name.strip().lower()]
    return f"{said}: did you mean {spelled[0]}?" if spelled else said


@dataclass(frozen=True)
class Window:
    """One window: opens at every fire of `schedule` in `time_zone`, for `duration`; at most
    `max_nodes` removals per apply run while it is open (None: no limit of its own; 0: none, a
    blackout). Invalid values raise ValueError at construction, so a Window is always usable."""

    schedule: str
    duration: timedelta
    max_nodes: int | None = None
    time_zone: str = "UTC"

    def __post_init__(self) -> None:
        parse_cron(self.schedule)
        zone(self.time_zone)
        if self.duration <= timedelta(0):
            raise ValueError(f"duration {self.duration} must be above 0 (e.g. 8h)")
        if self.duration > MAX_DURATION:
            raise ValueError(f"duration {self.duration} is above {MAX_DURATION.days} days (e.g. 8h)")
        if self.max_nodes is not None and self.max_nodes < 0:
            raise ValueError(f"maxNodes {self.max_nodes} must be 0 or more")

    @property
    def blackout(self) -> bool:
        return self.max_nodes == 0

    def fires(self, after: datetime, until: datetime) -> Iterator[datetime]:
        """The times (UTC) it opens, `after` < t <= `until`, in order."""
        return _fires(parse_cron(self.schedule), zone(self.time_zone), after, until)

    def active(self, now: datetime) -> bool:
        """Open at `now`: it fired in (now - duration, now] (half-open: closed at its end)."""
        return next(self.fires(now - self.duration, now), None) is not None

    def covered_until(self, now: datetime, limit: datetime) -> datetime | None:
        """When it stops being open, for a window open at `now` (one fire's span running into the
        next's counts as one); None when that is after `limit` or too far to walk."""
        end = None
        for steps, fire in enumerate(self.fires(now - self.duration, limit)):
            if steps > _MAX_STEPS:
                return None
            if end is not None and fire > end:
                return end
            end = fire + self.duration
        return end if end is not None and end <= limit else None


def _fires(cron: Cron, where: tzinfo, after: datetime, until: datetime) -> Iterator[datetime]:
    """Walk wall-clock candidates day by day from `after`'s own wall-clock minute. Local wall time to
    UTC never goes backwards (a skipped time maps to the end of the gap, a repeated one to its first
    occurrence), so the instants come in order and one after `until` ends the walk."""
    after, until = _utc(after), _utc(until)
    local = after.astimezone(where).replace(tzinfo=None, second=0, microsecond=0)
    last_day = until.astimezone(where).date() + timedelta(days=2)
    day, previous = local.date(), None
    while day <= last_day:
        if cron.day_matches(day):
            for hour in cron.hours:
                if day == local.date() and hour < local.hour:
                    continue
                for minute in cron.minutes:
                    wall = datetime(day.year, day.month, day.day, hour, minute)
                    if wall < local:
                        continue
                    instant = _instant(wall, where)
                    if instant is None:  # a whole day the zone skipped: no such time, no fire
                        continue
                    if instant > until:
                        return
                    if instant > after and instant != previous:
                        previous = instant
                        yield instant
        day += timedelta(days=1)


def _instant(wall: datetime, where: tzinfo) -> datetime | None:
    """The UTC instant of a wall-clock time: the first of two at a fall-back, the end of the gap
    for one a spring-forward skips; None when the clock shows no time in the 24 hours from it (a
    zone that skipped a whole day, as Pacific/Apia did on 30 December 2011)."""
    if where is UTC:
        return wall.replace(tzinfo=UTC)
    probe = wall
    for _ in range(24 * 60):
        instant = probe.replace(tzinfo=where).astimezone(UTC)  # fold=0: the first occurrence
        if instant.astimezone(where).replace(tzinfo=None) == probe:
            return instant
        probe += timedelta(minutes=1)  # inside a gap: the first minute the clock shows again
    return None


# ------------------------------------------------------------------------------ the answers


def allowed_removals(windows: Sequence[Window], now: datetime) -> int | None:
    """How many removals an apply run starting at `now` may apply: None for no limit (no windows
    configured, or only open ones without maxNodes), 0 when no window is open (or a blackout is)."""
    if not windows:
        return None
    active = [w for w in windows if w.active(now)]
    if not active:
        return 0
    limits = [w.max_nodes for w in active if w.max_nodes is not None]
    return min(limits) if limits else None


def open_window(windows: Sequence[Window], now: datetime) -> Window | None:
    """The window that lets removals through at `now` (the most restrictive of those open), or None
    when removals wait: no window open, or a blackout. Also None with no windows at all, when
    nothing waits: ask allowed_removals for the decision."""
    active = [w for w in windows if w.active(now)]
    if not active or any(w.blackout for w in active):
        return None
    return min(active, key=lambda w: (w.max_nodes is None, w.max_nodes or 0))


def next_opening(windows: Sequence[Window], now: datetime) -> datetime | None:
    """The first time at or after `now` when removals may be applied (`now` itself while a window
    is open). None with no windows (nothing waits), and when none opens within HORIZON."""
    if not windows:
        return None
    limit = now + HORIZON
    permits = [w for w in windows if not w.blackout]
    blackouts = [w for w in windows if w.blackout]
    t: datetime | None = now
    for _ in range(_MAX_STEPS):
        if t is None or t > limit:
            return None
        ended = _covered_until(blackouts, t, limit)  # a blackout open now: wait for its end
        if ended != t:
            t = ended
            continue
        if any(w.active(t) for w in permits):
            return t
        t = _first(w.fires(t, limit) for w in permits)  # nothing opens removals but a permit's start
    return None


def next_closing(windows: Sequence[Window], now: datetime) -> datetime | None:
    """The first time at or after `now` when removals stop being allowed (`now` itself while they
    wait). None with no windows (never), and when that is beyond HORIZON."""
    if not windows:
        return None
    if open_window(windows, now) is None:
        return now
    limit = now + HORIZON
    permits = [w for w in windows if not w.blackout]
    ends = _covered_until(permits, now, limit)
    starts = _first(w.fires(now, limit) for w in windows if w.blackout)
    candidates = [t for t in (ends, starts) if t is not None]
    return min(candidates) if candidates else None


def _covered_until(windows: Sequence[Window], now: datetime, limit: datetime) -> datetime | None:
    """The first time at or after `now` when none of `windows` is open (`now` if none is); None
    beyond `limit`."""
    t = now
    for _ in range(_MAX_STEPS):
        open_now = [w for w in windows if w.active(t)]
        if not open_now:
            return t
        ends = [w.covered_until(t, limit) for w in open_now]
        if any(end is None for end in ends):
            return None
        t = max(end for end in ends if end is not None)
    return None


def _utc(t: datetime) -> datetime:
    """Aware UTC; a naive time is taken as UTC (the project's clock), never as the machine's zone."""
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _first(streams: Iterable[Iterator[datetime]]) -> datetime | None:
    return next(heapq.merge(*streams), None)


# --------------------------------------------------------------------------- for people


def describe_time(windows: Sequence[Window], when: datetime, now: datetime) -> str:
    """`2026-06-01 07:00 UTC (09:00 Europe/Berlin, in 3h)`: UTC, the wall clock of the windows' time
    zone when they all use one other than UTC, and roughly how long from `now` (coarse, so a line
    that repeats it changes rarely)."""
    shown = _utc(when)
    text = shown.strftime("%Y-%m-%d %H:%M" + (":%S" if shown.second else "")) + " UTC"
    extra = []
    zones = {w.time_zone for w in windows if zone(w.time_zone) is not UTC}
    if len(zones) == 1 and all(zone(w.time_zone) is not UTC for w in windows):
        (name,) = zones
        wall = shown.astimezone(zone(name))
        day = f" on {wall:%a %d %b}" if wall.date() != shown.date() else ""
        extra.append(f"{wall:%H:%M} {name}{day}")
    extra.append(_relative(shown - _utc(now)))
    return f"{text} ({', '.join(extra)})"


def _relative(delta: timedelta) -> str:
    """`in 35m`, `in 3h`, `in 4d`: to the nearest 5 minutes, hour or day."""
    seconds = delta.total_seconds()
    if seconds <= 0:
        return "now"
    minutes = seconds / 60
    if minutes < 60:
        return f"in {max(5, 5 * round(minutes / 5))}m"
    if minutes < 48 * 60:
        return f"in {round(minutes / 60)}h"
    return f"in {round(minutes / 1440)}d"


def closed_notice(windows: Sequence[Window], now: datetime) -> str | None:
    """The plan's line while approved removals wait for a window; None when they may be applied."""
    if allowed_removals(windows, now) != 0:
        return None
    opening = next_opening(windows, now)
    if opening is None:
        return (
            "scale-down window closed: approved removals wait, and no window of scaleDown.windows "
            f"opens within {HORIZON.days // 366} years (check its schedules and maxNodes)"
        )
    return f"scale-down window closed: approved removals wait until {describe_time(windows, opening, now)}"


_SPAN = timedelta(days=15)  # two weeks and a day: every weekly pattern shows its longest gap


def longest_wait(windows: Sequence[Window], now: datetime) -> timedelta:
    """The longest stretch in the next two weeks during which approved removals must wait for a
    window (zero with no windows): an approval older than scaleDown.proposalTTL when its window
    opens has expired, so a gap longer than the TTL lets approvals lapse unapplied."""
    return _longest_wait(tuple(windows), now.replace(minute=0, second=0, microsecond=0))


@lru_cache(maxsize=64)
def _longest_wait(windows: tuple[Window, ...], now: datetime) -> timedelta:
    """Per hour, not per plan: `run` and `simulate` plan every 30 s."""
    if not windows:
        return timedelta(0)
    longest, t, end = timedelta(0), now, now + _SPAN
    for _ in range(1000):
        if t >= end:
            break
        opening = next_opening(windows, t)
        if opening is None:
            return HORIZON
        longest = max(longest, opening - t)
        closing = next_closing(windows, opening)
        if closing is None or closing <= opening:
            break  # open for good from here
        t = closing
    return longest
