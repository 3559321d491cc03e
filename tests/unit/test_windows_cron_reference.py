"""Review of scaleDown.windows (issue 13): the cron matcher and the window arithmetic against an
independent brute-force reference, minute by minute, across daylight-saving changes.

The reference reads each field as Vixie cron does (a day field counts as unrestricted when it
starts with `*`; when both day fields are restricted either matches) and applies the DST rules the
module documents: a wall-clock time that occurs twice fires at its first occurrence only; wall-clock
times a spring-forward skips fire at the first instant after the gap.
"""

from __future__ import annotations

import bisect
import calendar
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from reconciler.domain.windows import Window, allowed_removals, next_closing, next_opening, parse_cron

M = timedelta(minutes=1)
H = timedelta(hours=1)
_MONTHS = {n.lower(): i for i, n in enumerate(calendar.month_abbr) if n}
_DAYS = {n: i for i, n in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_BOUNDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}),
    (0, 23, {}),
    (1, 31, {}),
    (1, 12, _MONTHS),
    (0, 7, _DAYS),
)
_MACROS = {"@daily": "0 0 * * *", "@hourly": "0 * * * *", "@weekly": "0 0 * * 0", "@monthly": "0 0 1 * *"}


def _field(text: str, low: int, high: int, names: dict[str, int]) -> tuple[set[int], bool]:
    values: set[int] = set()
    for item in text.lower().split(","):
        span, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        if span == "*":
            first, last = low, high
        else:
            ends = [names[p] if p in names else int(p) for p in span.split("-")]
            first, last = ends[0], ends[-1] if len(ends) == 2 else (high if step_text else ends[0])
        values.update(range(first, last + 1, step))
    return values, text.startswith("*")


def _reference(text: str) -> Callable[[datetime], bool]:
    fields = [_field(t, *b) for t, b in zip(_MACROS.get(text, text).split(), _BOUNDS, strict=True)]
    (mi, _), (ho, _), (dm, dom_star), (mo, _), (dw, dow_star) = fields
    dw = {d % 7 for d in dw}

    def matches(w: datetime) -> bool:
        if w.minute not in mi or w.hour not in ho or w.month not in mo:
            return False
        a, b = w.day in dm, (w.isoweekday() % 7) in dw
        return (a and b) if (dom_star or dow_star) else (a or b)

    return matches


def reference_fires(text: str, where: str, start: datetime, end: datetime) -> list[datetime]:
    """Every UTC minute in (start, end] that fires, by scanning minutes."""
    matches = _reference(text)
    z = UTC if where == "UTC" else ZoneInfo(where)
    out = []
    t = start.replace(second=0, microsecond=0)
    previous = t.astimezone(z).replace(tzinfo=None)
    t += M
    while t <= end:
        wall = t.astimezone(z).replace(tzinfo=None)
        hit = matches(wall) and wall.replace(tzinfo=z, fold=0).astimezone(UTC) == t
        skipped = previous + M
        while not hit and skipped < wall:  # a spring-forward gap: its times fire now
            hit = matches(skipped)
            skipped += M
        if hit and t > start:
            out.append(t)
        previous = wall
        t += M
    return out


def transitions(where: str, year: int) -> list[datetime]:
    """The UTC hours of `year` at which `where`'s offset changes."""
    z = ZoneInfo(where)
    t, found = datetime(year, 1, 1, tzinfo=UTC), []
    while t.year == year:
        if (t + H).astimezone(z).utcoffset() != t.astimezone(z).utcoffset():
            found.append(t + H)
        t += H
    return found


ZONES = ["America/New_York", "Europe/Berlin", "America/Santiago", "Australia/Lord_Howe", "America/Havana"]
SCHEDULES = [
    "30 2 * * *",  # inside the US/EU spring gap, twice in the fall
    "*/20 0-3 * * *",
    "0 * * * *",
    "@daily",  # midnight: skipped in Havana and Santiago
    "0 0 */2 * 1",  # */2 day-of-month: unrestricted for Vixie, so "and"
    "15 1 1,15 * 5",  # both restricted: "or"
    "45 23 28-31 * *",  # month ends
]


@pytest.mark.parametrize("where", ZONES)
def test_fire_times_around_every_dst_change_match_a_minute_scan(where: str) -> None:
    for change in transitions(where, 2026):
        start, end = change - timedelta(days=2), change + timedelta(days=2)
        for text in SCHEDULES:
            got = list(Window(text, H, None, where).fires(start, end))
            assert got == reference_fires(text, where, start, end), (text, where, change)


def test_fire_times_in_utc_over_a_year_end_and_a_leap_day() -> None:
    start, end = datetime(2027, 12, 27, tzinfo=UTC), datetime(2028, 3, 2, tzinfo=UTC)
    for text in [
        "59 23 31 12 *",
        "0 0 29 2 *",
        "0 12 * * 7",
        "0 0 1-7 * mon",
        "@monthly",
        "*/30 22-23 * * sat",
    ]:
        assert list(Window(text, H).fires(start, end)) == reference_fires(text, "UTC", start, end), text


CONFIGS = [
    # a weekday window in Berlin with a lunch blackout: the spring change is on a Sunday
    [Window("0 9 * * 1-5", 8 * H, 4, "Europe/Berlin"), Window("0 12 * * *", H, 0, "Europe/Berlin")],
    # a window across midnight and the US fall-back, overlapped by a stricter one
    [
        Window("0 22 * * *", 5 * H, None, "America/New_York"),
        Window("30 1 * * *", 90 * M, 1, "America/New_York"),
    ],
    # a window longer than its period (always open) with a blackout inside the repeated hour
    [
        Window("0 0 * * *", 25 * H, 3, "America/New_York"),
        Window("*/20 1 * * *", 10 * M, 0, "America/New_York"),
    ],
    # at midnight in Havana, where the spring change skips midnight
    [Window("@daily", 2 * H, 2, "America/Havana"), Window("0 1 * * 0", 30 * M, 0, "America/Havana")],
]


@pytest.mark.parametrize("index", range(len(CONFIGS)))
def test_allowed_removals_and_the_next_opening_and_closing_match_a_minute_scan(index: int) -> None:
    windows = CONFIGS[index]
    where = windows[0].time_zone
    for change in transitions(where, 2026):
        start, end = change - timedelta(days=2), change + timedelta(days=2)
        horizon = end + timedelta(days=3)
        fires = [reference_fires(w.schedule, where, start - w.duration - M, horizon) for w in windows]

        def brute(t: datetime, fires: list[list[datetime]] = fires) -> int | None:
            open_now = []
            for w, times in zip(windows, fires, strict=True):
                i = bisect.bisect_right(times, t)
                if i and times[i - 1] > t - w.duration:
                    open_now.append(w)
            if not open_now:
                return 0
            limits = [w.max_nodes for w in open_now if w.max_nodes is not None]
            return min(limits) if limits else None

        minutes, t = [], start
        while t <= horizon - timedelta(days=1):
            minutes.append((t, brute(t)))
            t += M
        for t, expected in minutes:
            if t > end:
                break
            assert allowed_removals(windows, t) == expected, t
        for i in range(0, len(minutes) // 2, 37):  # every 37 minutes: openings and closings
            t = minutes[i][0]
            opening = next((u for u, v in minutes[i:] if v != 0), None)
            if opening is not None:
                assert next_opening(windows, t) == opening, t
                closing = next((u for u, v in minutes if u >= opening and v == 0), None)
                if closing is not None:
                    assert next_closing(windows, opening) == closing, opening


def test_a_vixie_star_day_field_is_unrestricted_even_with_a_step() -> None:
    """`*/2` in day-of-month counts as written with `*` (Vixie: the field starts with `*`), so the
    two day fields are and-ed: Mondays that are an odd day of the month. (robfig/cron, which
    Karpenter uses, clears the star for a step above 1 and would or them: odd days or Mondays.)"""
    cron = parse_cron("0 0 */2 * 1")
    assert cron.any_day and not cron.any_weekday
    june = (datetime(2026, 5, 31, tzinfo=UTC), datetime(2026, 7, 1, tzinfo=UTC))
    fired = list(Window("0 0 */2 * 1", H).fires(*june))
    assert [f.day for f in fired] == [1, 15, 29]
