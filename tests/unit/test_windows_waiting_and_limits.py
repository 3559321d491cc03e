"""Fixes from the adversarial review of scaleDown.windows (issue 13): the reviewer's failing attacks,
kept as regression tests, and the cases around them.

W1 a removal waiting for its window is waiting, not refused (exit 0, kind `window`, a gauge);
W2 only the tz database's names load; W4 windows that can never open are refused at load, and the
wait's text is worked out once per run; W5 an overlong duration is a one-line config error; W6 a
day a zone skipped whole has no fire.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

import reconciler.apply.window_gate as window_gate
from reconciler.apply.outcome import REFUSED, SCALE_DOWN, ApplyReport, GroupOutcome
from reconciler.config.settings import load_config
from reconciler.domain.durations import parse_duration
from reconciler.domain.errors import UserError
from reconciler.domain.windows import MAX_DURATION, Window, allowed_removals, next_opening, parse_cron, zone
from reconciler.telemetry.metrics import REFUSAL_KINDS, Metrics
from tests.support import windows_world as harness
from tests.support.plan_world import NOW

H = timedelta(hours=1)
CONFIG = "cluster: c\nregion: us-east-1\nnodeGroups:\n  explicit: ['0:6:my-asg']\nscaleDown:\n  windows:\n"
EVENING = Window("0 20 * * *", 2 * H, 2)  # NOW is 12:00 on Monday 1 June 2026: closed
DAY = Window("0 9 * * 1-5", 8 * H, 2)  # open, two removals per run


def load(tmp_path: Path, windows: str) -> object:
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG + windows)
    return load_config(path)


def error_of(tmp_path: Path, windows: str) -> str:
    with pytest.raises(UserError) as info:
        load(tmp_path, windows)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


# ---------------------------------------------------------------- W1: waiting is not a refusal


def test_waiting_for_a_window_is_not_an_apply_refusal_that_pages() -> None:
    report, _ = harness.run([EVENING])  # 12:00, window at 20:00
    # docs/operations.md alerts on errors_total{stage="apply",kind!="suspended"}: a cycle with exit 3
    # is counted kind="refused", so every cycle outside the window paged, and the kind was "other"
    assert report.exit_code == 0, f"exit {report.exit_code}: the run loop counts it as a refused cycle"
    assert [g.refusals for g in report.groups] == [()]
    assert [len(g.waiting) for g in report.groups] == [len(harness.APPROVED)]


def test_the_note_says_when_the_window_opens_and_the_removal_stays_approved() -> None:
    report, cloud = harness.run([EVENING])
    assert cloud.terminated == [] and cloud.drained == []
    (group,) = report.groups
    assert group.action != REFUSED and group.waiting == harness.APPROVED
    assert list(group.notes) == [
        f"{i}: waits for the scale-down window: opens 2026-06-01 20:00 UTC (in 8h); stays approved"
        for i in harness.APPROVED
    ]
    assert report.to_dict()["nodeGroups"][0]["waitingForWindow"] == list(harness.APPROVED)


def test_a_dry_run_agrees_with_the_run_outside_the_window() -> None:
    real, _ = harness.run([EVENING])
    dry, _ = harness.run([EVENING], dry_run=True)
    assert real.exit_code == dry.exit_code == 0
    assert [(g.action, g.notes, g.waiting) for g in real.groups] == [
        (g.action, g.notes, g.waiting) for g in dry.groups
    ]


def test_the_rest_past_max_nodes_wait_for_a_later_run_and_the_run_exits_0() -> None:
    report, cloud = harness.run([DAY])
    assert cloud.terminated == ["i-n3", "i-n4"]
    (group,) = report.groups
    assert group.action == SCALE_DOWN and group.waiting == ("i-n5",) and report.exit_code == 0
    (waits,) = [n for n in group.notes if n.startswith("i-n5")]
    assert waits == (
        "i-n5: waits for a later run: the scale-down window allows 2 removal(s) per apply run "
        "(scaleDown.windows maxNodes) and this run has started them; stays approved"
    )
    assert group.refusals == ()


def test_a_window_closing_while_the_run_works_leaves_the_rest_waiting() -> None:
    times = [NOW, NOW + 5 * H + timedelta(minutes=1)]  # the second batch would start after 17:00

    def clock() -> datetime:
        return times.pop(0) if len(times) > 1 else times[0]

    report, cloud = harness.run([Window("0 9 * * 1-5", 8 * H, 5)], clock=clock)
    assert cloud.terminated == ["i-n3"]
    (group,) = report.groups
    assert group.action == SCALE_DOWN and report.exit_code == 0 and group.waiting == ("i-n4", "i-n5")
    assert group.notes[-1] == (
        "i-n5: waits for the scale-down window (it closed while this run worked): opens "
        "2026-06-02 09:00 UTC (in 16h); stays approved"
    )


def test_a_removal_refused_for_another_reason_still_makes_the_run_refused() -> None:
    groups = {"general": (5, ("i-n4", "i-n5")), "spot": (5, ("i-gone",))}  # not in the group
    report, _ = harness.run([EVENING], groups=groups)
    assert report.exit_code == 3
    general, spot = report.groups
    assert general.action != REFUSED and general.waiting == ("i-n4", "i-n5")
    assert spot.action == REFUSED and spot.waiting == ()


def scrape(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_waiting_removals_are_a_gauge_never_a_refusal() -> None:
    waits = "i-2: waits for the scale-down window: opens 2026-06-01 20:00 UTC (in 8h); stays approved"
    metrics = Metrics()
    metrics.apply(
        ApplyReport(
            "c" * 40,
            False,
            (
                GroupOutcome(
                    "general",
                    REFUSED,
                    3,
                    3,
                    notes=("i-1: not approved: unsigned", waits),
                    waiting=("i-2",),
                    refusals=("not-approved",),
                ),
                GroupOutcome("spot", "none", 2, 2, notes=(waits.replace("i-2", "i-3"),), waiting=("i-3",)),
            ),
        )
    )
    got = scrape(metrics)
    assert got[("asg_reconciler_apply_removals_waiting_for_window", ())] == 2
    refusals = {
        dict(k[1])["reason"]: v for k, v in got.items() if k[0] == "asg_reconciler_apply_refusals_total"
    }
    assert set(refusals) == set(REFUSAL_KINDS) and "window" not in REFUSAL_KINDS
    assert {k: v for k, v in refusals.items() if v} == {"not-approved": 1}
    metrics.apply(ApplyReport("d" * 40, False, (GroupOutcome("general", "none", 3, 3),)))
    assert scrape(metrics)[("asg_reconciler_apply_removals_waiting_for_window", ())] == 0


def test_the_wait_is_worked_out_once_per_run(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[datetime] = []

    def counted(windows: Sequence[Window], now: datetime) -> datetime | None:
        calls.append(now)
        return next_opening(windows, now)

    monkeypatch.setattr(window_gate, "next_opening", counted)
    groups = {"general": (5, ("i-n3", "i-n4", "i-n5")), "spot": (5, ("i-sn3", "i-sn4", "i-sn5"))}
    report, _ = harness.run([EVENING], groups=groups)
    assert sum(len(g.waiting) for g in report.groups) == 6 and len(calls) == 1


# ------------------------------------------------------ W4: windows that can never open


def test_a_window_that_can_never_open_is_refused_at_load(tmp_path: Path) -> None:
    message = error_of(
        tmp_path,
        "    - {schedule: '0 9 * * *', duration: 30m, maxNodes: 5}\n"
        "    - {schedule: '0 8 * * *', duration: 2h, maxNodes: 0}\n",
    )
    assert "c.yaml:6: scaleDown.windows: no approved removal could be applied for the next 9 years" in (
        message
    )
    assert "move or shorten the maxNodes 0 window" in message


def test_a_blackout_that_leaves_a_gap_loads(tmp_path: Path) -> None:
    load(
        tmp_path,
        "    - {schedule: '0 9 * * *', duration: 30m, maxNodes: 5}\n"
        "    - {schedule: '0 8 * * *', duration: 45m, maxNodes: 0}\n",
    )


# ------------------------------------------------------------- W5: durations too long


def test_a_huge_duration_is_a_config_error_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG + "    - {schedule: '0 9 * * *', duration: 19200000h}\n")
    try:
        config = load_config(path)
    except UserError:
        return
    allowed_removals(config.scale_down.windows, datetime(2026, 6, 1, tzinfo=UTC))  # OverflowError


@pytest.mark.parametrize("duration", ["19200000h", "99999999999999h", "8785h", "9" * 400 + "h"])
def test_a_duration_above_a_year_names_the_key_and_the_limit(tmp_path: Path, duration: str) -> None:
    message = error_of(tmp_path, f"    - {{schedule: '0 9 * * *', duration: {duration}}}\n")
    assert f"c.yaml:7: scaleDown.windows.0.duration: {duration} is above 366 days (8784h)" in message


def test_a_window_of_a_whole_year_loads(tmp_path: Path) -> None:
    load(tmp_path, "    - {schedule: '0 9 * * *', duration: 8784h}\n")
    with pytest.raises(ValueError, match="above 366 days"):
        Window("0 9 * * *", MAX_DURATION + timedelta(seconds=1))


@pytest.mark.parametrize("text", ["99999999999999h", "9" * 400 + "h"])
def test_parse_duration_says_value_error_when_too_long(text: str) -> None:
    with pytest.raises(ValueError, match="too long a duration"):
        parse_duration(text)


# ------------------------------------------------------------------ W2: zone names


def test_localtime_is_not_an_iana_zone(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG + "    - {schedule: '0 9 * * *', duration: 8h, timeZone: localtime}\n")
    with pytest.raises(UserError):
        load_config(path)


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("localtime", "localtime is whatever zone the machine reading the config has; name that zone"),
        ("europe/berlin", "did you mean Europe/Berlin?"),
        ("utc", "did you mean UTC?"),
        ("posixrules", ""),
        ("Z", ""),
        ("posix/Europe/Berlin", ""),
        ("../zoneinfo/UTC", ""),
    ],
)
def test_only_the_tz_databases_names_load(tmp_path: Path, name: str, hint: str) -> None:
    message = error_of(tmp_path, f"    - {{schedule: '0 9 * * *', duration: 8h, timeZone: '{name}'}}\n")
    assert f"scaleDown.windows.0.timeZone: {name!r} is not an IANA time zone (e.g. UTC, Europe/Berlin)" in (
        message
    )
    assert hint in message


@pytest.mark.parametrize(
    "name", ["UTC", "Etc/UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires", "US/Pacific"]
)
def test_the_tz_databases_names_load(name: str) -> None:
    zone(name)


# -------------------------------------------------------- W6: a day a zone skipped


def test_a_zone_that_skipped_a_whole_day() -> None:
    window = Window("0 0 * * *", H, None, "Pacific/Apia")  # 2011-12-30 did not exist in Samoa
    next_opening([window], datetime(2011, 12, 29, 12, tzinfo=UTC))


def test_the_skipped_midnight_has_no_fire_and_the_next_one_opens() -> None:
    apia = zone("Pacific/Apia")
    daily = Window("0 0 * * *", H, None, "Pacific/Apia")
    fires = list(daily.fires(datetime(2011, 12, 27, 12, tzinfo=UTC), datetime(2011, 12, 30, 12, tzinfo=UTC)))
    assert [f.astimezone(apia).isoformat() for f in fires] == [
        "2011-12-28T00:00:00-10:00",
        "2011-12-29T00:00:00-10:00",
        "2011-12-31T00:00:00+14:00",  # 30 December 2011 never was
    ]
    # midnight on the 31st, when the clock resumed: 10:00 UTC on the 30th
    assert next_opening([daily], datetime(2011, 12, 29, 12, tzinfo=UTC)) == datetime(
        2011, 12, 30, 10, tzinfo=UTC
    )


def test_a_later_time_of_the_skipped_day_fires_when_the_clock_resumes() -> None:
    """As for a time a DST change skips: 09:00 on the missing day fires at 00:00 on the 31st."""
    apia = zone("Pacific/Apia")
    window = Window("0 9 * * *", H, None, "Pacific/Apia")
    fires = list(window.fires(datetime(2011, 12, 29, tzinfo=UTC), datetime(2011, 12, 30, 20, tzinfo=UTC)))
    assert [f.astimezone(apia).isoformat() for f in fires] == [
        "2011-12-29T09:00:00-10:00",
        "2011-12-31T00:00:00+14:00",
        "2011-12-31T09:00:00+14:00",
    ]


# ------------------------------------------------- W7: day fields as Vixie cron (docs/apply.md)


def test_a_day_field_written_star_step_counts_as_star_as_vixie_cron() -> None:
    """`0 9 */2 * 1`: odd days that are Mondays (Vixie cron), not odd days or Mondays (robfig/cron)."""
    cron = parse_cron("0 9 */2 * 1")
    assert cron.any_day and not cron.any_weekday
    assert cron.day_matches(date(2026, 6, 1))  # Monday the 1st
    assert not cron.day_matches(date(2026, 6, 8))  # Monday the 8th: an even day
    assert not cron.day_matches(date(2026, 6, 3))  # Wednesday the 3rd: not a Monday
