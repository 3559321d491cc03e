"""scaleDown.windows arithmetic (reconciler/domain/windows.py): cron fields, spans across midnight and
daylight-saving changes, overlapping windows, and when removals may next go."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from reconciler.domain.windows import (
    Window,
    allowed_removals,
    closed_notice,
    describe_time,
    next_closing,
    next_opening,
    open_window,
    parse_cron,
)

H = timedelta(hours=1)
MON = datetime(2026, 6, 1, tzinfo=UTC)  # a Monday, summer time in Europe
WEEKDAYS = Window("0 9 * * 1-5", 8 * H, 5)  # 09:00-17:00 UTC, Monday to Friday


def at(day: int, hour: int, minute: int = 0, second: int = 0, month: int = 6) -> datetime:
    return datetime(2026, month, day, hour, minute, second, tzinfo=UTC)


def fires(window: Window, start: datetime, end: datetime) -> list[datetime]:
    return list(window.fires(start, end))


# ------------------------------------------------------------------------------------ parsing


def test_fields_ranges_steps_lists_and_names() -> None:
    cron = parse_cron("*/20 9-17/4 1,15 jan-mar MON-fri")
    assert cron.minutes == (0, 20, 40)
    assert cron.hours == (9, 13, 17)
    assert cron.days == {1, 15}
    assert cron.months == {1, 2, 3}
    assert cron.weekdays == {1, 2, 3, 4, 5}
    assert parse_cron("0 0 * * 7").weekdays == {0}  # 7 is Sunday too
    assert parse_cron("5/15 * * * *").minutes == (5, 20, 35, 50)  # a/n: from a to the end
    assert parse_cron("@daily") == parse_cron("0 0 * * *")
    assert parse_cron("@weekly") == parse_cron("0 0 * * sun")
    assert parse_cron("  0   9 * * 1-5 ") == parse_cron("0 9 * * 1-5")


def test_day_of_month_and_day_of_week_both_set_match_either_as_cron() -> None:
    either = Window("0 12 13 * 5", H)  # the 13th, and every Friday
    got = fires(either, at(1, 0), at(30, 23))
    assert [f.day for f in got] == [5, 12, 13, 19, 26]
    both = Window("0 12 */1 * 5", H)  # day-of-month written with `*`: both must match (Fridays)
    assert [f.day for f in fires(both, at(1, 0), at(30, 23))] == [5, 12, 19, 26]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("0 9 * *", "has 4 field(s), not 5"),
        ("60 * * * *", "minute '60': 60 is out of range 0-59"),
        ("0 24 * * *", "hour '24': 24 is out of range 0-23"),
        ("0 0 0 * *", "day-of-month '0': 0 is out of range 1-31"),
        ("0 0 * 13 *", "month '13': 13 is out of range 1-12"),
        ("0 0 * * 8", "day-of-week '8': 8 is out of range 0-7"),
        ("0 17-9 * * *", "range '17-9' goes backwards"),
        ("*/0 * * * *", "step 0 must be at least 1"),
        ("0 9 * * mon-fry", "'fry' is not a number or a name"),
        ("0 9 * * 1--5", "is not a value, a range a-b or a step /n"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 4,6,9,11 *", "never fires"),
        ("@fortnightly", "has 1 field(s)"),
    ],
)
def test_a_bad_schedule_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_cron(text)
    assert says in str(info.value)


def test_a_window_checks_its_values_when_made() -> None:
    assert Window("0 0 29 2 *", H).max_nodes is None  # fires every leap year: valid
    with pytest.raises(ValueError, match="must be above 0"):
        Window("0 9 * * *", timedelta(0))
    with pytest.raises(ValueError, match="must be 0 or more"):
        Window("0 9 * * *", H, -1)
    with pytest.raises(ValueError, match="'Europe/Springfield' is not an IANA time zone"):
        Window("0 9 * * *", H, 1, "Europe/Springfield")


# ------------------------------------------------------------------------------- when it is open


def test_open_from_its_start_until_just_before_its_end() -> None:
    assert not WEEKDAYS.active(at(1, 8, 59, 59))
    assert WEEKDAYS.active(at(1, 9))
    assert WEEKDAYS.active(at(1, 16, 59, 59))
    assert not WEEKDAYS.active(at(1, 17))
    assert not WEEKDAYS.active(at(6, 12))  # Saturday


def test_a_window_spanning_midnight_stays_open_into_the_next_day() -> None:
    friday_night = Window("0 22 * * 5", 4 * H, 2)  # Friday 22:00 to Saturday 02:00
    assert friday_night.active(at(5, 23, 30))
    assert friday_night.active(at(6, 1, 59))  # Saturday, though the schedule names only Fridays
    assert not friday_night.active(at(6, 2))
    assert not friday_night.active(at(4, 23))  # Thursday night
    assert next_opening([friday_night], at(6, 2)) == at(12, 22)
    assert next_closing([friday_night], at(5, 22)) == at(6, 2)
    sunday = Window("30 23 * * 0", 2 * H)  # across midnight and the end of the month
    assert sunday.active(datetime(2026, 7, 1, 1, 0, tzinfo=UTC)) is False  # a Wednesday
    assert sunday.active(datetime(2026, 6, 29, 1, 29, tzinfo=UTC))  # Sunday 28th 23:30 + 2h


def test_a_window_longer_than_its_period_is_always_open() -> None:
    hourly = Window("@hourly", 90 * timedelta(minutes=1), 3)
    assert all(hourly.active(at(1, 0) + timedelta(minutes=7 * i)) for i in range(500))
    assert next_closing([hourly], at(1, 0)) is None  # not within the horizon


# ------------------------------------------------------------------------------ time zones, DST


BERLIN = "Europe/Berlin"  # 2026: summer time from 29 March 02:00 (to 03:00), until 25 October 03:00
NEW_YORK = "America/New_York"  # 2026: from 8 March 02:00, until 1 November 02:00


def test_the_schedule_is_read_on_the_zones_wall_clock() -> None:
    office = Window("0 9 * * *", 8 * H, 5, BERLIN)
    assert fires(office, datetime(2026, 3, 27, tzinfo=UTC), datetime(2026, 3, 31, tzinfo=UTC)) == [
        datetime(2026, 3, 27, 8, tzinfo=UTC),  # 09:00 CET (UTC+1)
        datetime(2026, 3, 28, 8, tzinfo=UTC),
        datetime(2026, 3, 29, 7, tzinfo=UTC),  # 09:00 CEST (UTC+2) from the change on
        datetime(2026, 3, 30, 7, tzinfo=UTC),
    ]
    assert office.active(datetime(2026, 6, 1, 7, tzinfo=UTC))
    assert not office.active(datetime(2026, 6, 1, 15, tzinfo=UTC))  # 17:00 in Berlin


def test_a_time_the_clock_skips_fires_when_it_resumes() -> None:
    skipped = Window("30 2 * * *", H, None, BERLIN)  # 02:30 does not exist on 29 March
    got = fires(skipped, datetime(2026, 3, 28, tzinfo=UTC), datetime(2026, 3, 30, 12, tzinfo=UTC))
    assert got == [
        datetime(2026, 3, 28, 1, 30, tzinfo=UTC),  # 02:30 CET
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),  # 03:00 CEST, as the clock resumes
        datetime(2026, 3, 30, 0, 30, tzinfo=UTC),  # 02:30 CEST
    ]
    quarter = Window("*/15 2 * * *", H, None, NEW_YORK)  # the whole hour is skipped on 8 March
    day = fires(quarter, datetime(2026, 3, 8, 5, tzinfo=UTC), datetime(2026, 3, 8, 12, tzinfo=UTC))
    assert day == [datetime(2026, 3, 8, 7, 0, tzinfo=UTC)]  # 03:00 EDT, once


def test_a_time_the_clock_repeats_fires_once_at_its_first_occurrence() -> None:
    repeated = Window("30 2 * * *", H, None, BERLIN)  # 02:30 happens twice on 25 October
    got = fires(repeated, datetime(2026, 10, 24, 12, tzinfo=UTC), datetime(2026, 10, 26, 12, tzinfo=UTC))
    assert got == [
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),  # 02:30 CEST, the first
        datetime(2026, 10, 26, 1, 30, tzinfo=UTC),  # 02:30 CET the next day
    ]
    quarter = Window("*/15 1 * * *", H, None, NEW_YORK)  # 01:00-01:59 twice on 1 November
    day = fires(quarter, datetime(2026, 11, 1, 4, tzinfo=UTC), datetime(2026, 11, 1, 8, tzinfo=UTC))
    assert day == [datetime(2026, 11, 1, 5, m, tzinfo=UTC) for m in (0, 15, 30, 45)]
    # asked from inside the second 01:00-01:59, the next is the next day's
    assert next(quarter.fires(datetime(2026, 11, 1, 6, 10, tzinfo=UTC), MON.replace(month=12))) == (
        datetime(2026, 11, 2, 6, 0, tzinfo=UTC)
    )


def test_a_duration_is_elapsed_time_across_a_change() -> None:
    night = Window("0 0 * * *", 8 * H, 1, BERLIN)
    opened = datetime(2026, 3, 28, 23, tzinfo=UTC)  # midnight CET, 29 March
    assert next_opening([night], datetime(2026, 3, 28, 20, tzinfo=UTC)) == opened
    assert next_closing([night], opened) == opened + 8 * H  # 09:00 CEST on the wall clock
    autumn = datetime(2026, 10, 24, 22, tzinfo=UTC)  # midnight CEST, 25 October
    assert next_closing([night], autumn) == autumn + 8 * H  # 07:00 CET on the wall clock


def test_a_window_across_midnight_and_a_change_in_another_zone() -> None:
    late = Window("0 23 * * 6", 4 * H, 2, NEW_YORK)  # Saturday 23:00 to Sunday 03:00 local
    start = datetime(2026, 3, 8, 4, tzinfo=UTC)  # 23:00 EST on Saturday 7 March
    assert late.active(start) and late.active(start + 4 * H - timedelta(seconds=1))
    assert not late.active(start + 4 * H)  # 04:00 EDT: four hours, though the wall clock shows five


# -------------------------------------------------------------------------- several windows


def test_no_windows_means_no_limit_and_nothing_waits() -> None:
    assert allowed_removals([], MON) is None
    assert open_window([], MON) is None
    assert next_opening([], MON) is None and next_closing([], MON) is None
    assert closed_notice([], MON) is None


def test_allowed_removals_inside_and_outside() -> None:
    assert allowed_removals([WEEKDAYS], at(1, 10)) == 5
    assert allowed_removals([WEEKDAYS], at(1, 18)) == 0
    unlimited = Window("0 9 * * 1-5", 8 * H)
    assert allowed_removals([unlimited], at(1, 10)) is None
    assert allowed_removals([unlimited], at(1, 8)) == 0


def test_overlapping_windows_the_most_restrictive_wins() -> None:
    lunch = Window("0 12 * * *", H, 2)
    windows = [WEEKDAYS, lunch]
    assert allowed_removals(windows, at(1, 12, 30)) == 2
    assert open_window(windows, at(1, 12, 30)) == lunch
    assert allowed_removals(windows, at(1, 14)) == 5
    assert open_window(windows, at(1, 14)) == WEEKDAYS
    assert allowed_removals(windows, at(6, 12, 30)) == 2  # Saturday: only lunch is open


def test_a_blackout_closes_other_windows_while_it_lasts() -> None:
    freeze = Window("0 12 * * *", H, 0)
    windows = [WEEKDAYS, freeze]
    assert allowed_removals(windows, at(1, 12, 30)) == 0
    assert open_window(windows, at(1, 12, 30)) is None
    assert next_opening(windows, at(1, 12, 30)) == at(1, 13)
    assert next_closing(windows, at(1, 10)) == at(1, 12)
    assert next_opening(windows, at(1, 20)) == at(2, 9)
    whole_day = Window("0 0 * * 2", 24 * H, 0)  # Tuesdays frozen
    assert next_opening([WEEKDAYS, whole_day], at(1, 20)) == at(3, 9)


def test_back_to_back_windows_are_one_opening() -> None:
    morning, afternoon = Window("0 9 * * *", 4 * H, 3), Window("0 13 * * *", 4 * H, 3)
    assert next_closing([morning, afternoon], at(1, 10)) == at(1, 17)
    assert next_opening([morning, afternoon], at(1, 10)) == at(1, 10)  # open: now


def test_next_opening_from_the_weekend_and_never() -> None:
    assert next_opening([WEEKDAYS], at(6, 12)) == at(8, 9)  # Saturday noon -> Monday 09:00
    assert next_opening([WEEKDAYS], at(1, 17)) == at(2, 9)
    always_frozen = Window("* * * * *", 2 * timedelta(minutes=1), 0)
    assert next_opening([WEEKDAYS, always_frozen], at(1, 10)) is None
    leap = Window("0 0 29 2 *", 24 * H, 1)
    assert next_opening([leap], at(1, 0)) == datetime(2028, 2, 29, tzinfo=UTC)


@settings(deadline=None, max_examples=60)
@given(
    st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2027, 12, 31)),
    st.sampled_from(["UTC", BERLIN, NEW_YORK]),
)
def test_nothing_opens_before_next_opening(naive: datetime, where: str) -> None:
    windows = [Window("0 9 * * 1-5", 8 * H, 4, where), Window("0 12 * * 3", 2 * H, 0, where)]
    now = naive.replace(tzinfo=UTC)
    opening = next_opening(windows, now)
    assert opening is not None and opening >= now
    assert allowed_removals(windows, opening) == 4
    step = timedelta(minutes=10)
    probe = now
    while probe < opening:
        assert allowed_removals(windows, probe) == 0, probe
        probe += step
    closing = next_closing(windows, opening)
    assert closing is not None and closing > opening
    assert allowed_removals(windows, closing) == 0
    assert allowed_removals(windows, closing - timedelta(seconds=1)) == 4


@settings(deadline=None, max_examples=30)
@given(
    st.sampled_from(["*", "*/7", "0,30", "15-20"]),
    st.sampled_from(["*", "9-17", "0,23", "*/5"]),
    st.sampled_from(["*", "1", "1-7", "31"]),
    st.sampled_from(["*", "2", "*/3"]),
    st.sampled_from(["*", "0", "1-5", "sat"]),
    st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2027, 12, 1)),
)
def test_fire_times_match_a_minute_by_minute_scan(
    minute: str, hour: str, dom: str, month: str, dow: str, naive: datetime
) -> None:
    """In UTC the fire times are exactly the minutes whose fields all match (either day field when
    both are restricted)."""
    text = f"{minute} {hour} {dom} {month} {dow}"
    try:
        cron = parse_cron(text)
    except ValueError:  # "31 2": no February has a 31st, refused (test_a_bad_schedule_says_...)
        assume(False)
        raise
    start = naive.replace(tzinfo=UTC, second=0, microsecond=0)
    end = start + timedelta(days=2)
    expected = []
    t = start + timedelta(minutes=1)
    while t <= end:
        days_ok = (t.day in cron.days, t.isoweekday() % 7 in cron.weekdays)
        day = all(days_ok) if cron.any_day or cron.any_weekday else any(days_ok)
        if t.month in cron.months and day and t.hour in cron.hours and t.minute in cron.minutes:
            expected.append(t)
        t += timedelta(minutes=1)
    assert list(Window(text, H).fires(start, end)) == expected


# ------------------------------------------------------------------------------------ for people


def test_the_plans_line_says_until_when_in_utc_and_the_zone() -> None:
    office = Window("0 9 * * 1-5", 8 * H, 5, BERLIN)
    saturday = at(6, 12)
    assert closed_notice([office], saturday) == (
        "scale-down window closed: approved removals wait until 2026-06-08 07:00 UTC "
        "(09:00 Europe/Berlin, in 43h)"
    )
    assert closed_notice([WEEKDAYS], at(1, 6)) == (
        "scale-down window closed: approved removals wait until 2026-06-01 09:00 UTC (in 3h)"
    )
    assert closed_notice([WEEKDAYS], at(1, 10)) is None
    frozen = [WEEKDAYS, Window("* * * * *", 2 * timedelta(minutes=1), 0)]
    assert "no window of scaleDown.windows opens within 9 years" in str(closed_notice(frozen, at(1, 10)))


def test_how_long_is_coarse() -> None:
    nine = at(1, 9)
    assert describe_time([WEEKDAYS], nine, nine - timedelta(minutes=1)).endswith("(in 5m)")
    assert describe_time([WEEKDAYS], nine, nine - timedelta(minutes=23)).endswith("(in 25m)")
    assert describe_time([WEEKDAYS], nine, nine - timedelta(minutes=100)).endswith("(in 2h)")
    assert describe_time([WEEKDAYS], nine, nine - timedelta(days=3, hours=5)).endswith("(in 3d)")
    late = Window("0 1 * * *", H, 1, NEW_YORK)  # 01:00 New York is the next day in UTC
    assert (
        describe_time([late], at(2, 5), at(1, 22)) == "2026-06-02 05:00 UTC (01:00 America/New_York, in 7h)"
    )
    evening = Window("0 20 * * *", H, 1, NEW_YORK)  # 20:00 New York on 1 June is 00:00 UTC on 2 June
    assert describe_time([evening], at(2, 0), at(1, 22)) == (
        "2026-06-02 00:00 UTC (20:00 America/New_York on Mon 01 Jun, in 2h)"
    )
