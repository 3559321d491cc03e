"""Windows rarer than scaleDown.proposalTTL let approvals lapse: the plan says so (found by the
new-user trial: a weekly window with the default 24h TTL had 20 of 24 approvals expire in simulate)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reconciler.domain.windows import Window, longest_wait
from reconciler.planning.types import Plan
from tests.support.plan_world import World

H = timedelta(hours=1)
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)  # a Monday
NIGHTLY = Window("0 2 * * *", 2 * H)
WEEKLY = Window("0 2 * * 6", 2 * H)
OFFICE = Window("0 9 * * 1-5", 8 * H)


def test_the_longest_wait_is_the_largest_gap_between_windows() -> None:
    assert longest_wait((), NOW) == timedelta(0)
    assert longest_wait((NIGHTLY,), NOW) == 22 * H
    assert longest_wait((WEEKLY,), NOW) == 7 * 24 * H - 2 * H
    assert longest_wait((OFFICE,), NOW) == 64 * H  # Friday 17:00 to Monday 09:00
    assert longest_wait((Window("* * * * *", 24 * H),), NOW) == timedelta(0)  # always open


def idle_plan(windows: tuple[Window, ...], ttl: timedelta) -> Plan:
    w = World().group("general", min_size=1)
    w.node("general", "n1").running("n1", "web", cpu=3000)
    w.node("general", "n2")
    return w.plan(scale_down={"windows": windows, "unneeded_time": timedelta(0), "proposal_ttl": ttl})


def lapsing(plan: Plan) -> list[str]:
    return [line for line in plan.warnings if "longer than scaleDown.proposalTTL" in line]


def test_a_plan_with_removals_warns_when_windows_are_rarer_than_the_ttl() -> None:
    (line,) = lapsing(idle_plan((WEEKLY,), 24 * H))
    assert line == (
        "scaleDown.windows: approved removals may wait 166h for a window, longer than "
        "scaleDown.proposalTTL 24h: approvals made earlier than that expire before apply may act on "
        "them (raise proposalTTL, or open windows more often)"
    )
    assert not lapsing(idle_plan((WEEKLY,), 8 * 24 * H))
    assert not lapsing(idle_plan((NIGHTLY,), 24 * H))
