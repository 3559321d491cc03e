"""The simulator against answers known by hand, with the real planner (nothing of it mocked)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from reconciler.domain.errors import UserError
from reconciler.planning import plan as planner
from reconciler.planning.types import Plan, PlanInputs
from reconciler.simulation.policies import (
    ApprovalModel,
    Autoscaler,
    ProvisioningModel,
    Reviewed,
    WorkingHours,
    parse_provisioning,
    parse_weekdays,
    parse_working_hours,
)
from reconciler.simulation.trace import parse_trace
from tests.support.simulation_world import (
    START,
    arrive,
    idle_node_trace,
    run,
    trace_of,
)

AFTER_30M = Reviewed(ApprovalModel(timedelta(minutes=30), fixed=True))


def test_a_burst_that_needs_three_nodes_gets_exactly_three_and_waits_for_them() -> None:
    # six pods of 900m: two per m5.large (1930m), so three new nodes; they arrive at 10 s, the plan at
    # 30 s launches three, the nodes join 90 s later and every pod is bound at 120 s: 110 s each
    trace = trace_of(0, *(arrive(f"burst-{i}", 10, "900m") for i in range(6)))
    for policy in (AFTER_30M, Autoscaler()):
        result = run(trace, policy, hours=0.5)
        (group,) = result.groups
        assert (group.scale_ups, group.nodes_added, group.nodes_removed) == (1, 3, 0)
        assert result.pending_pod_seconds == 6 * 110
        assert (result.time_to_schedule_p50, result.time_to_schedule_max) == (110, 110)
        assert (result.pods_arrived, result.pods_scheduled, result.pods_never_scheduled) == (6, 6, 0)
        # three instances from their launch at 30 s to the end at 1800 s
        assert group.node_hours == pytest.approx(3 * 1770 / 3600)
        assert group.cost == pytest.approx(3 * 1770 / 3600 * 0.096)
        assert result.timeline.nodes["general"][:3] == (0, 3, 3)
        assert result.timeline.pending[:5] == (0, 6, 6, 6, 0)


def test_an_idle_node_goes_after_unneeded_time_under_ca_and_after_approval_under_ours() -> None:
    trace = idle_node_trace()
    ca = run(trace, Autoscaler(), hours=2)
    ours = run(trace, AFTER_30M, hours=2)
    # CA: unneeded since the plan at 0, removed by the plan at 10m (scaleDown.unneededTime)
    assert ca.groups[0].node_hours == pytest.approx(2 + 600 / 3600)
    # ours: proposed at 10m, approved 30m later, drained and terminated by the plan at 40m
    assert ours.groups[0].node_hours == pytest.approx(2 + 2400 / 3600)
    assert ours.node_hours - ca.node_hours == pytest.approx(0.5)
    for result in (ca, ours):
        assert (result.scale_downs, result.nodes_removed, result.evictions) == (1, 1, 1)
        assert result.pending_pod_seconds == 0  # b-small is bound again at once beside a-big
    assert ca.proposals.opened == 0
    assert (ours.proposals.opened, ours.proposals.approved, ours.proposals.cancelled) == (1, 1, 0)
    assert (ours.proposals.instances_proposed, ours.proposals.instances_approved) == (1, 1)


def test_approval_waits_for_working_hours_in_the_reviewers_time_zone() -> None:
    # proposed Monday 00:10 UTC; reviewers work 09:00-17:00 Berlin (07:00-15:00 UTC in June) and take
    # 30 minutes of it: approved 07:30 UTC, removed by that step's plan
    hours = parse_working_hours("09:00-17:00", ZoneInfo("Europe/Berlin"), parse_weekdays("mon-fri"))
    ours = run(idle_node_trace(), Reviewed(ApprovalModel(timedelta(minutes=30), True, hours)), hours=10)
    assert ours.groups[0].node_hours == pytest.approx(10 + 7.5)


def test_a_proposal_the_plan_stops_naming_before_approval_is_cancelled() -> None:
    # the idle node is proposed at 10m; at 20m a pod arrives that needs it, so the plan drops it
    trace = trace_of(
        2,
        arrive("a-big", 0, "1500m"),
        arrive("b-small", 0, "100m"),
        arrive("c-big", 1200, "1500m"),
        min_size=1,
    )
    ours = run(trace, AFTER_30M, hours=2)
    assert (ours.proposals.opened, ours.proposals.approved, ours.proposals.cancelled) == (1, 0, 1)
    assert ours.proposals.instances_cancelled == 1
    assert ours.nodes_removed == 0
    assert ours.groups[0].node_hours == pytest.approx(4)


def test_a_job_leaves_after_running_for_its_time_and_its_node_goes() -> None:
    # a 30-minute job needs a new node; it runs from 120 s to 1920 s, then the node is empty and CA
    # removes it after unneededTime at the first plan 10 minutes later (2520 s)
    trace = trace_of(0, arrive("job", 10, "1500m", run_for=1800))
    ca = run(trace, Autoscaler(), hours=1)
    assert ca.groups[0].node_hours == pytest.approx((2520 - 30) / 3600)
    assert ca.pending_pod_seconds == 110


def test_the_same_seed_gives_the_same_result_and_another_seed_another() -> None:
    trace = trace_of(0, *(arrive(f"burst-{i}", 10, "900m") for i in range(6)))
    drawn = ProvisioningModel()  # the default lognormal delay around 90 s
    first = run(trace, Autoscaler(), hours=0.5, seed=7, provisioning=drawn)
    assert first == run(trace, Autoscaler(), hours=0.5, seed=7, provisioning=drawn)
    other = run(trace, Autoscaler(), hours=0.5, seed=8, provisioning=drawn)
    assert other.pending_pod_seconds != first.pending_pod_seconds
    assert other.nodes_added == first.nodes_added == 3


def test_simulate_plans_with_make_plan_once_per_step_carrying_its_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real: Callable[[PlanInputs], Plan] = planner.make_plan
    seen: list[PlanInputs] = []

    def spy(inputs: PlanInputs) -> Plan:
        seen.append(inputs)
        return real(inputs)

    monkeypatch.setattr(planner, "make_plan", spy)
    trace = idle_node_trace()
    ca = run(trace, Autoscaler(), hours=1)
    assert ca.plans == len(seen) == 3600 // 30 + 1
    assert [i.now for i in seen[:2]] == [
        datetime(2026, 6, 1, tzinfo=UTC),
        datetime(2026, 6, 1, 0, 0, 30, tzinfo=UTC),
    ]
    first_seen = next(i for i in seen if i.memory.unneeded_since)
    assert list(first_seen.memory.unneeded_since.values()) == [datetime(2026, 6, 1, tzinfo=UTC)]
    seen.clear()
    ours = run(trace, AFTER_30M, hours=1)
    assert ours.plans == len(seen)
    # while the proposal is open, the plan is told which instances it names
    proposed = [i for i in seen if i.proposed]
    assert len(proposed) == len(range(630, 2400, 30))  # the plans from 10m30s to 39m30s
    assert all(len(i.proposed) == 1 for i in proposed)


def test_working_hours_count_only_working_time_over_a_weekend() -> None:
    hours = WorkingHours(time(9), time(17), ZoneInfo("Europe/Berlin"), parse_weekdays("mon-fri"))
    friday = datetime(2026, 6, 5, 14, 50, tzinfo=UTC)  # 16:50 in Berlin
    assert hours.add(friday, timedelta(minutes=30)) == datetime(2026, 6, 8, 7, 20, tzinfo=UTC)
    assert hours.add(friday, timedelta(0)) == friday
    saturday = datetime(2026, 6, 6, 12, tzinfo=UTC)
    assert hours.add(saturday, timedelta(0)) == datetime(2026, 6, 8, 7, tzinfo=UTC)
    model = ApprovalModel(timedelta(hours=4), working_hours=hours)
    drawn = {model.approves_at(friday, seed, 1) for seed in range(20)}
    assert len(drawn) > 1
    assert all(
        datetime(2026, 6, 5, 14, 50, tzinfo=UTC) <= d <= datetime(2026, 6, 8, 10, 50, tzinfo=UTC)
        for d in drawn
    )


def test_options_are_checked_with_one_line_naming_the_option() -> None:
    with pytest.raises(UserError, match=r"--weekdays: 'monday' is not a list of weekdays"):
        parse_weekdays("monday")
    with pytest.raises(UserError, match=r"--working-hours: '9-5' is not a span of the day"):
        parse_working_hours("9-5", UTC, frozenset({0}))
    with pytest.raises(UserError, match=r"--provisioning-delay m5.large=soon: 'soon' is not a duration"):
        parse_provisioning(("m5.large=soon",))
    model = parse_provisioning(("2m", "c5.large=45s"))
    assert model.delay("c5.large", 1, "g", 1) == 45
    assert model.delay("m5.large", 1, "g", 1) == 120


def test_an_instance_type_without_facts_is_one_line_naming_the_fix() -> None:
    group = {
        "name": "odd",
        "instanceType": "x9.huge",
        "minSize": 0,
        "maxSize": 3,
        "desired": 0,
        "zones": ["us-east-1a"],
    }
    trace = parse_trace("t.jsonl", [{"kind": "cluster", "start": START, "groups": [group]}])
    with pytest.raises(
        UserError, match=r"groups.odd.instanceType: 'x9.huge' has no instance type facts .*--instance-types"
    ):
        run(trace, Autoscaler(), hours=1)


def test_a_proposal_still_waiting_at_the_end_is_counted_open() -> None:
    # proposed at 10m, approval due at 40m, the simulation ends at 30m
    ours = run(idle_node_trace(), AFTER_30M, hours=0.5)
    proposals = ours.proposals
    assert (proposals.opened, proposals.approved, proposals.cancelled, proposals.open_at_end) == (1, 0, 0, 1)
    assert ours.nodes_removed == 0
