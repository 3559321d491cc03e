"""Review of simulate (issue 13), fixed: the reviewer's attacks (an evicted job finishing at its first
run's end; an approved node drained although apply's re-check refuses it) and the findings around
them (apply.maxStep, the missing-price warning for a group that never ran, the table's last line)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from reconciler.apply.recheck import approved_verdicts
from reconciler.config.settings import ApplyConfig, Config, ScaleDownConfig
from reconciler.domain.inventory import build_inventory
from reconciler.domain.windows import Window, allowed_removals
from reconciler.simulation.engine import Settings, _Run
from reconciler.simulation.metrics import PolicyResult
from reconciler.simulation.policies import ApprovalModel, Autoscaler, Policy, Reviewed
from reconciler.simulation.report import SimulationReport, policy_dict, render_table
from reconciler.simulation.trace import Trace, parse_trace
from tests.support.cli import run as cli
from tests.support.simulation_world import (
    FIXED_90S,
    PRICES,
    START,
    TYPES,
    arrive,
    run,
    trace_of,
)


def _run_obj(
    trace: Trace, policy: Policy, hours: float, config: Config | None = None
) -> tuple[_Run, PolicyResult]:
    settings = Settings(TYPES, PRICES, 1, FIXED_90S, duration=hours * 3600)
    r = _Run(trace, config or Config(cluster="sim"), settings, policy)
    result = r.run()
    return r, result


# ---------------------------------------------------------------------------------- S1: evicted jobs


def test_an_evicted_job_starts_its_run_for_over_where_it_lands() -> None:
    # a-big 1500m fills node 1; the job (100m, 2 h) lands on the emptier node 2, which CA removes at
    # 10 m; the job is bound again beside a-big at 600 s and must run 2 h from there: until 7800 s
    trace = trace_of(2, arrive("a-big", 0, "1500m"), arrive("job", 0, "100m", run_for=7200), min_size=1)
    r, result = _run_obj(trace, Autoscaler(), hours=7500 / 3600)
    assert result.evictions == 1
    assert "default/job" in r.world.bound, "the evicted job left at its first run's end (7200 s)"


def test_an_evicted_job_leaves_exactly_run_for_after_its_new_binding() -> None:
    trace = trace_of(2, arrive("a-big", 0, "1500m"), arrive("job", 0, "100m", run_for=7200), min_size=1)
    for policy in (Autoscaler(), Reviewed(ApprovalModel(timedelta(minutes=30), fixed=True))):
        # ca drains node 2 at 600 s, ours at 2400 s (proposed at 10 m, approved 30 m later)
        rebound = 600 if isinstance(policy, Autoscaler) else 2400
        before, first = _run_obj(trace, policy, hours=(rebound + 7200 - 10) / 3600)
        after, _ = _run_obj(trace, policy, hours=(rebound + 7200 + 10) / 3600)
        assert first.evictions == 1
        assert before.world.bound["default/job"].since == rebound
        assert "default/job" not in after.world.bound and "default/job" not in after.world.pending


def test_a_binding_never_reuses_an_earlier_bindings_serial() -> None:
    # one counter for every binding of the run, never reset: a finish event names exactly one binding
    trace = trace_of(2, arrive("a-big", 0, "1500m"), arrive("job", 0, "100m", run_for=7200), min_size=1)
    r, result = _run_obj(trace, Autoscaler(), hours=1)
    assert result.evictions == 1
    assert r.bindings == 3  # a-big, the job, the job again after the drain at 600 s
    assert r.generation == {"default/a-big": 1, "default/job": 3}


# ---------------------------------------------------------------------------------- S2: the re-check

THRESHOLD_03 = ScaleDownConfig(windows=(Window("0 3 * * *", timedelta(hours=1)),), utilization_threshold=0.3)


def _window_policy(windows: tuple[Window, ...]) -> Reviewed:
    return Reviewed(ApprovalModel(timedelta(minutes=30), fixed=True), partial(allowed_removals, windows))


def test_an_approved_node_that_got_busy_while_waiting_for_a_window_is_not_drained() -> None:
    # threshold 0.3; node 1 holds a-big (1000m of 1930m, 52%), node 2 is idle: proposed at 10m,
    # approved at 40m; the window opens at 03:00. At 01:00 `late` (700m) arrives and the scheduler
    # puts it on node 2 (least allocated): 36%, above the threshold. apply's re-check (rule 5) says
    # "no longer safe" and keeps it; the simulation drains it at 03:00 anyway.
    windows = (Window("0 3 * * *", timedelta(hours=1)),)
    config = Config(cluster="sim", scale_down=ScaleDownConfig(windows=windows, utilization_threshold=0.3))
    policy = Reviewed(ApprovalModel(timedelta(minutes=30), fixed=True), partial(allowed_removals, windows))
    trace = trace_of(2, arrive("a-big", 0, "1000m"), arrive("late", 3600, "700m"), min_size=1)
    before, _ = _run_obj(trace, policy, hours=2.99, config=config)
    at = 2.99 * 3600
    inventory = build_inventory(before.world.cluster_state(at), before.world.node_groups())
    verdicts = approved_verdicts(config, before._now(at), inventory, before._committed())
    assert verdicts and all(v is not None for v in verdicts.values()), verdicts  # apply would refuse
    _, after = _run_obj(trace, policy, hours=4, config=config)
    assert after.evictions == 0, "the simulation drained a node apply's re-check refuses"


def test_a_refused_removal_stays_approved_and_goes_when_the_re_check_passes_it() -> None:
    # as above, but `late` leaves at 03:30, inside the window: node 2 is idle again, the re-check
    # passes it and the plan at 03:30 drains it (empty: nothing evicted). Node 1 runs 4 h, node 2 3.5 h.
    config = Config(cluster="sim", scale_down=THRESHOLD_03)
    events = [
        arrive("a-big", 0, "1000m"),
        arrive("late", 3600, "700m"),
        {"kind": "depart", "at": 12600, "pod": "late"},
    ]
    r, result = _run_obj(trace_of(2, *events, min_size=1), _window_policy(THRESHOLD_03.windows), 4, config)
    assert (result.evictions, result.nodes_removed, result.scale_downs) == (0, 1, 1)
    assert result.node_hours == pytest.approx(4 + 3.5)
    assert result.proposals.instances_approved == 1
    assert result.proposals.instances_refused == 1  # held back at every step from 03:00 to 03:30
    assert result.proposals.instances_expired == 0
    assert not r.approved


def test_a_removal_the_re_check_refuses_takes_no_place_in_the_window() -> None:
    # three nodes: a-big (1000m) on node 1, nodes 2 and 3 idle, both proposed at 10 m and approved at
    # 40 m. `late` (700m) lands on node 2 at 01:00. The window (03:00, one removal per run) opens: the
    # re-check refuses node 2, so node 3 takes the window's one place at 03:00 exactly (as apply
    # gates the window last), and node 2 waits to the end.
    windows = (Window("0 3 * * *", timedelta(hours=1), max_nodes=1),)
    config = Config(cluster="sim", scale_down=ScaleDownConfig(windows=windows, utilization_threshold=0.3))
    trace = trace_of(3, arrive("a-big", 0, "1000m"), arrive("late", 3600, "700m"), min_size=1)
    r, result = _run_obj(trace, _window_policy(windows), 5, config)
    assert (result.evictions, result.nodes_removed) == (0, 1)
    assert result.node_hours == pytest.approx(5 + 5 + 3)
    assert result.proposals.instances_refused == 1
    assert len(r.approved) == 1  # node 2: still approved, refused at every step inside the window


def test_without_windows_a_removal_that_passes_the_re_check_goes_as_before() -> None:
    # the idle node of the engine's tests: the re-check passes it; removed at the step after approval
    trace = trace_of(2, arrive("a-big", 0, "1500m"), arrive("b-small", 0, "100m"), min_size=1)
    ours = run(trace, Reviewed(ApprovalModel(timedelta(minutes=30), fixed=True)), hours=2)
    assert ours.groups[0].node_hours == pytest.approx(2 + 2400 / 3600)
    assert ours.proposals.instances_refused == 0


def test_the_refusals_are_in_the_json_and_the_table() -> None:
    config = Config(cluster="sim", scale_down=THRESHOLD_03)
    events = [
        arrive("a-big", 0, "1000m"),
        arrive("late", 3600, "700m"),
        {"kind": "depart", "at": 12600, "pod": "late"},
    ]
    _, result = _run_obj(trace_of(2, *events, min_size=1), _window_policy(THRESHOLD_03.windows), 4, config)
    assert policy_dict(result)["proposals"]["instancesRefused"] == 1
    table = render_table(_report(result))
    assert "1 / 0 (1 refused by the re-check)" in table


# ---------------------------------------------------------------------------------- S4: apply.maxStep


def test_ours_raises_at_most_apply_max_step_per_group_per_step_and_ca_at_once() -> None:
    # ten pods of 900m need five new nodes: the plan at 30 s decides five; ours raises 2 at 30 s, 2 at
    # 60 s and 1 at 90 s (the plans in between count the rest as upcoming and add nothing); ca 5 at 30 s
    trace = trace_of(0, *(arrive(f"burst-{i}", 10, "900m") for i in range(10)))
    config = Config(cluster="sim", apply=ApplyConfig(max_step=2))
    ours = run(trace, Reviewed(), hours=0.5, config=config)
    ca = run(trace, Autoscaler(), hours=0.5, config=config)
    assert (ours.groups[0].scale_ups, ours.groups[0].nodes_added) == (3, 5)
    assert ours.timeline.nodes["general"][:5] == (0, 2, 4, 5, 5)
    assert (ca.groups[0].scale_ups, ca.groups[0].nodes_added) == (1, 5)
    assert ca.timeline.nodes["general"][:3] == (0, 5, 5)
    # the last node joins at 90 + 90 s: its two pods waited 170 s from their arrival at 10 s
    assert ours.time_to_schedule_max == 170
    assert ca.time_to_schedule_max == 110


def test_the_default_apply_max_step_changes_nothing_for_a_burst_the_planner_caps() -> None:
    trace = trace_of(0, *(arrive(f"burst-{i}", 10, "900m") for i in range(6)))
    ours = run(trace, Reviewed(), hours=0.5)
    assert (ours.groups[0].scale_ups, ours.groups[0].nodes_added) == (1, 3)


# ---------------------------------------------------------------------------------- S3: prices


def _two_groups(batch_desired: int) -> Trace:
    groups = [
        {"name": "general", "instanceType": "m5.large", "minSize": 1, "maxSize": 5, "desired": 1,
         "zones": ["us-east-1a"]},
        {"name": "batch", "instanceType": "m5.2xlarge", "minSize": 0, "maxSize": 5,
         "desired": batch_desired, "zones": ["us-east-1a"]},
    ]  # fmt: skip
    return parse_trace("test", [{"kind": "cluster", "start": START, "groups": groups}])


@pytest.mark.parametrize("policy", [Reviewed(), Autoscaler()], ids=["ours", "ca"])
def test_a_group_without_a_price_that_never_ran_costs_nothing_and_warns_nothing(policy: Policy) -> None:
    prices = {k: v for k, v in PRICES.items() if k != "m5.2xlarge"}
    settings = Settings(TYPES, prices, 1, FIXED_90S, duration=3600)
    result = _Run(_two_groups(0), Config(cluster="sim"), settings, policy).run()
    assert result.warnings == ()
    assert result.groups[1].cost == 0
    assert result.cost == pytest.approx(PRICES["m5.large"])
    assert "no price" not in render_table(_report(result))


def test_a_group_without_a_price_that_ran_still_warns_and_hides_the_total() -> None:
    prices = {k: v for k, v in PRICES.items() if k != "m5.2xlarge"}
    settings = Settings(TYPES, prices, 1, FIXED_90S, duration=3600)
    trace = _two_groups(1)
    config = Config(cluster="sim", scale_down=ScaleDownConfig(enabled=False))
    result = _Run(trace, config, settings, Autoscaler()).run()
    assert result.groups[1].cost is None and result.cost is None
    assert any("no price for m5.2xlarge" in w for w in result.warnings)


# ---------------------------------------------------------------------------------- output's end


def _report(result: PolicyResult) -> SimulationReport:
    return SimulationReport(
        "t.jsonl", datetime(2026, 6, 1, tzinfo=UTC), 3600, 30, 1, "fixed", "defaults", (result,)
    )


def _write(path: Path, *events: dict[str, Any]) -> Path:
    group = {"name": "general", "instanceType": "m5.large", "minSize": 1, "maxSize": 10, "desired": 2,
             "zones": ["us-east-1a"]}  # fmt: skip
    lines = [{"kind": "cluster", "start": START, "groups": [group]}, *events]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.mark.parametrize("output", ["table", "json", "csv"])
def test_every_output_ends_with_exactly_one_newline(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, output: str
) -> None:
    # a pod that fits nowhere makes a warning line: the last line is still the timing, then "\n"
    trace = _write(tmp_path / "t.jsonl", arrive("a", 0, "100m"), arrive("huge", 0, "64"))
    result = cli(capsys, "simulate", "--trace", str(trace), "--compare", "ca", "--output", output,
                 "--duration", "10m", "--provisioning-delay", "90s")  # fmt: skip
    assert result.code == 0, result
    assert result.out.endswith("\n") and not result.out.endswith("\n\n"), repr(result.out[-80:])
    if output == "table":
        assert result.out.splitlines()[-1].startswith("took ")
        assert any(line.startswith("warning: ") for line in result.out.splitlines())
