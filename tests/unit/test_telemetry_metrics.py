"""The run loop's metrics, read back as Prometheus scrapes them: text format, parsed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.apply.outcome import FAILED, NONE, REFUSED, SCALE_DOWN, SCALE_UP, ApplyReport, GroupOutcome
from reconciler.planning.types import GroupPlan, Plan, PodOutcome, UnremovableNode
from reconciler.telemetry.metrics import ERROR_KINDS, REFUSAL_KINDS, Metrics
from tests.support.plan_world import World

NOW = datetime(2026, 12, 3, 11, 0, tzinfo=UTC)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(metrics: Metrics) -> Samples:
    text = generate_latest(metrics.registry).decode()
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def series(samples: Samples, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}


def group(name: str, current: int = 2, desired: int = 2, **kw: Any) -> GroupPlan:
    action = SCALE_UP if desired > current else SCALE_DOWN if desired < current else NONE
    return GroupPlan(name=name, min_size=1, max_size=6, current=current, desired=desired, action=action, **kw)


def make_plan(*groups: GroupPlan, pending: tuple[PodOutcome, ...] = ()) -> Plan:
    return Plan(cluster="prod", groups=groups, pending=pending, unremovable=())


def test_every_name_is_prefixed_and_follows_the_conventions() -> None:
    metrics = Metrics()
    metrics.cycle("plan", 1.0, None)
    for family in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        assert family.name.startswith("asg_reconciler_")
        assert not family.name.endswith("_count"), family.name  # a gauge named like a histogram part
        if family.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples)


def test_registries_are_separate() -> None:
    first, second = Metrics(), Metrics()
    first.cycle("plan", 1.0, None)
    assert value(scrape(first), "asg_reconciler_cycles_total", stage="plan") == 1
    assert ("asg_reconciler_cycles_total", (("stage", "plan"),)) not in scrape(second)


def test_cycles_durations_and_errors_by_kind() -> None:
    metrics = Metrics()
    metrics.cycle("plan", 0.3, None)
    metrics.cycle("plan", 4.0, "kubernetes")
    metrics.cycle("apply", 2.0, "a free-text reason")  # never a label: counted as other
    got = scrape(metrics)
    assert value(got, "asg_reconciler_cycles_total", stage="plan") == 2
    assert value(got, "asg_reconciler_cycle_duration_seconds_count", stage="plan") == 2
    assert value(got, "asg_reconciler_cycle_duration_seconds_sum", stage="plan") == pytest.approx(4.3)
    assert value(got, "asg_reconciler_cycle_duration_seconds_bucket", stage="plan", le="0.5") == 1
    assert value(got, "asg_reconciler_errors_total", stage="plan", kind="kubernetes") == 1
    assert value(got, "asg_reconciler_errors_total", stage="apply", kind="other") == 1
    # every kind exists at zero from the first cycle, so rate() and alerts see the series
    kinds = {dict(labels)["kind"] for labels in series(got, "asg_reconciler_errors_total")}
    assert kinds == set(ERROR_KINDS)
    assert value(got, "asg_reconciler_errors_total", stage="plan", kind="aws") == 0


def test_success_leader_and_suspension() -> None:
    metrics = Metrics()
    metrics.success("plan", NOW)
    metrics.leader("apply", True)
    metrics.leader("plan", False)
    metrics.suspended("cluster", True)
    metrics.suspended("general", True)
    got = scrape(metrics)
    assert value(got, "asg_reconciler_last_success_timestamp_seconds", stage="plan") == NOW.timestamp()
    assert value(got, "asg_reconciler_leader", stage="apply") == 1
    assert value(got, "asg_reconciler_leader", stage="plan") == 0
    assert value(got, "asg_reconciler_suspended") == 1
    assert value(got, "asg_reconciler_node_group_suspended", node_group="general") == 1
    metrics.suspended("cluster", False)
    metrics.suspended("general", False)
    got = scrape(metrics)
    assert value(got, "asg_reconciler_suspended") == 0
    assert series(got, "asg_reconciler_node_group_suspended") == {}


def test_suspensions_replace_the_whole_switch() -> None:
    metrics = Metrics()
    metrics.suspensions(False, ["a", "b"])
    metrics.suspensions(True, ["b"])
    got = scrape(metrics)
    assert value(got, "asg_reconciler_suspended") == 1
    assert series(got, "asg_reconciler_node_group_suspended") == {(("node_group", "b"),): 1}


def test_plan_gauges_per_group() -> None:
    metrics = Metrics()
    plan = Plan(
        cluster="prod",
        groups=(
            group("general", current=2, desired=4),
            group("spot", current=5, desired=4, held=False, backoff_until=NOW + timedelta(seconds=90)),
            group("gpu", current=0, desired=0, held=True, backoff_until=NOW - timedelta(seconds=5)),
        ),
        pending=(
            PodOutcome("default/a", "general"),
            PodOutcome("default/b", "general"),
            PodOutcome("batch/giant", None, "no node group can help"),
        ),
        unremovable=(UnremovableNode("ip-1", "spot", "pod default/db has local storage"),),
    )
    metrics.plan(plan, NOW)
    got = scrape(metrics)
    assert value(got, "asg_reconciler_pending_pods", helpable="true") == 2
    assert value(got, "asg_reconciler_pending_pods", helpable="false") == 1
    assert value(got, "asg_reconciler_node_groups") == 3
    assert value(got, "asg_reconciler_unremovable_nodes") == 1
    assert value(got, "asg_reconciler_node_group_current_nodes", node_group="general") == 2
    assert value(got, "asg_reconciler_node_group_desired_nodes", node_group="general") == 4
    assert value(got, "asg_reconciler_node_group_min_nodes", node_group="spot") == 1
    assert value(got, "asg_reconciler_node_group_max_nodes", node_group="spot") == 6
    assert value(got, "asg_reconciler_node_group_held", node_group="gpu") == 1
    assert value(got, "asg_reconciler_node_group_backoff", node_group="spot") == 1
    assert value(got, "asg_reconciler_node_group_backoff_remaining_seconds", node_group="spot") == 90
    assert value(got, "asg_reconciler_node_group_backoff", node_group="gpu") == 0  # its backoff is over
    assert value(got, "asg_reconciler_node_group_backoff_remaining_seconds", node_group="gpu") == 0


def test_a_group_that_left_the_plan_leaves_no_series() -> None:
    metrics = Metrics()
    metrics.plan(make_plan(group("general"), group("old")), NOW)
    metrics.plan(make_plan(group("general", desired=3)), NOW)
    got = scrape(metrics)
    for name in (
        "asg_reconciler_node_group_current_nodes",
        "asg_reconciler_node_group_desired_nodes",
        "asg_reconciler_node_group_min_nodes",
        "asg_reconciler_node_group_max_nodes",
        "asg_reconciler_node_group_held",
        "asg_reconciler_node_group_backoff",
        "asg_reconciler_node_group_backoff_remaining_seconds",
    ):
        assert set(series(got, name)) == {(("node_group", "general"),)}, name
    assert value(got, "asg_reconciler_node_group_desired_nodes", node_group="general") == 3
    assert value(got, "asg_reconciler_node_groups") == 1


def test_a_plan_the_planner_made() -> None:
    world = World().group("general", min_size=1, max_size=5).node("general", "n1", cpu=1000)
    world.pending("web", cpu=800)
    plan = world.plan()
    metrics = Metrics()
    metrics.plan(plan, NOW)
    got = scrape(metrics)
    assert value(got, "asg_reconciler_node_group_current_nodes", node_group="general") == 1
    assert (
        value(got, "asg_reconciler_node_group_desired_nodes", node_group="general")
        == plan.group("general").desired
    )
    assert value(got, "asg_reconciler_pending_pods", helpable="true") == sum(
        1 for p in plan.pending if p.node_group
    )


def test_proposals() -> None:
    metrics = Metrics()
    metrics.proposals(2, 3600.0)
    got = scrape(metrics)
    assert value(got, "asg_reconciler_open_proposals") == 2
    assert value(got, "asg_reconciler_oldest_open_proposal_age_seconds") == 3600
    metrics.proposals(0, None)
    got = scrape(metrics)
    assert value(got, "asg_reconciler_open_proposals") == 0
    assert value(got, "asg_reconciler_oldest_open_proposal_age_seconds") == 0


def report(*groups: GroupOutcome, given_back: tuple[str, ...] = (), dry_run: bool = False) -> ApplyReport:
    return ApplyReport("c" * 40, dry_run, groups, given_back=given_back)


def test_apply_actions() -> None:
    metrics = Metrics()
    metrics.apply(
        report(
            GroupOutcome("general", SCALE_UP, 2, 4, notes=("raised desired 2 -> 4",)),
            GroupOutcome(
                "spot",
                SCALE_DOWN,
                5,
                2,
                terminated=("i-1", "i-2", "i-3"),
                notes=(
                    "terminated i-1: an earlier apply recorded the intent and stopped before recording "
                    "the result (completed here)",
                    "drained ip-2 and terminated i-2",
                    "terminated i-3 (no node)",
                ),
            ),
            given_back=("ip-9: given back (not approved; drain taint from cccccccccccc)",),
        )
    )
    got = scrape(metrics)
    assert value(got, "asg_reconciler_apply_actions_total", action="raise") == 1
    assert value(got, "asg_reconciler_apply_actions_total", action="drain") == 1
    assert value(got, "asg_reconciler_apply_actions_total", action="terminate") == 2  # not the recovered one
    assert value(got, "asg_reconciler_apply_actions_total", action="give_back") == 1
    assert value(got, "asg_reconciler_node_group_drift_nodes", node_group="general") == 0


def test_a_dry_run_counts_no_action() -> None:
    metrics = Metrics()
    metrics.apply(
        report(
            GroupOutcome("general", SCALE_UP, 2, 4, notes=("would raise desired 2 -> 4",)),
            GroupOutcome("spot", SCALE_DOWN, 5, 4, notes=("would drain ip-2 and terminate i-2",)),
            given_back=("ip-9: would be given back (not approved; drain taint from cccccccccccc)",),
            dry_run=True,
        )
    )
    got = scrape(metrics)
    assert all(v == 0 for v in series(got, "asg_reconciler_apply_actions_total").values())


def test_refusals_are_counted_by_a_bounded_kind() -> None:
    metrics = Metrics()
    metrics.apply(
        report(
            GroupOutcome(
                "general",
                REFUSED,
                3,
                3,
                notes=(
                    "drift: desired lowered outside the tool from 4 to 3 since the last apply",
                    "apply.drift warn: not raised back (apply.drift restore would)",
                    "i-1: not approved: the commit that added it is not signed by an allowed signer",
                    "i-2: approved 2d ago in 0123456789ab, older than scaleDown.proposalTTL 24h; the next "
                    "plan proposes again if still unneeded",
                    "i-3: no longer safe to remove (re-checked after tainting): pod default/db cannot move; "
                    "node ip-3 given back",
                ),
                refusals=("not-approved", "expired", "busy"),
            ),
            GroupOutcome("gpu", REFUSED, 1, 1, notes=("a gate no kind was given for",), refusals=("other",)),
            GroupOutcome(
                "spot",
                FAILED,
                4,
                4,
                notes=(
                    "i-5: drain of ip-5 did not finish: eviction timed out",  # a failure, not a refusal
                    "i-6: removing it would take spot below its min size 3",
                ),
                refusals=("limits",),
            ),
        )
    )
    metrics.refused("suspended")
    metrics.refused("lease")
    got = scrape(metrics)
    refusals = {
        dict(labels)["reason"]: v for labels, v in series(got, "asg_reconciler_apply_refusals_total").items()
    }
    assert set(refusals) == set(REFUSAL_KINDS)
    assert {k: v for k, v in refusals.items() if v} == {
        "not-approved": 1,
        "expired": 1,
        "busy": 1,
        "other": 1,
        "limits": 1,
        "suspended": 1,
        "lease": 1,
    }
    assert value(got, "asg_reconciler_apply_actions_total", action="give_back") == 1
    assert value(got, "asg_reconciler_node_group_drift_nodes", node_group="general") == -1


def test_a_refusal_s_words_are_never_read_for_its_kind() -> None:
    """A note worded like a refusal of another kind (or like none) counts as the kind apply gave it."""
    metrics = Metrics()
    metrics.apply(
        report(
            GroupOutcome(
                "general",
                REFUSED,
                3,
                3,
                notes=("i-1: another apply holds lease x; cluster-autoscaler is live; proposalTTL",),
                refusals=("busy",),
            ),
            GroupOutcome(
                "spot", FAILED, 2, 2, notes=("i-2: not approved: is in Standby; below its min size",)
            ),
        )
    )
    refusals = series(scrape(metrics), "asg_reconciler_apply_refusals_total")
    assert {dict(labels)["reason"]: v for labels, v in refusals.items() if v} == {"busy": 1}


def test_a_group_that_left_the_report_leaves_no_drift_series() -> None:
    metrics = Metrics()
    drifted = "drift: desired raised outside the tool from 2 to 5 since the last apply"
    metrics.apply(report(GroupOutcome("a", NONE, 5, 5, notes=(drifted,)), GroupOutcome("b", NONE, 1, 1)))
    assert value(scrape(metrics), "asg_reconciler_node_group_drift_nodes", node_group="a") == 3
    metrics.apply(report(GroupOutcome("b", NONE, 1, 1)))
    assert set(series(scrape(metrics), "asg_reconciler_node_group_drift_nodes")) == {(("node_group", "b"),)}


def test_every_metric_is_in_docs_metrics_md() -> None:
    documented = (Path(__file__).parents[2] / "docs" / "metrics.md").read_text()
    metrics = Metrics()
    metrics.cycle("plan", 1.0, "aws")
    metrics.suspended("general", True)
    metrics.plan(make_plan(group("general")), NOW)
    metrics.apply(report(GroupOutcome("general", NONE, 2, 2)))
    for family in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        if family.name.endswith("_created"):  # prometheus_client's start time of every counter/histogram
            continue
        name = family.name + ("_total" if family.type == "counter" else "")
        assert f"`{name}`" in documented, f"{name} is missing from docs/metrics.md"
    for kind in (*ERROR_KINDS, *REFUSAL_KINDS):
        assert f"`{kind}`" in documented, f"{kind} is missing from docs/metrics.md"


def test_the_cluster_caches_health_is_scraped_per_kind() -> None:
    from reconciler.kube.cache import KindHealth

    health = [
        KindHealth("Pod", True, 150_000, 1_800_000_000.0, {"expired": 2, "resync": 5}, ""),
        KindHealth("Namespace", False, 0, None, {}, "HTTP 500 Internal Server Error"),
    ]
    metrics = Metrics()
    metrics.cluster_cache(lambda: health)
    samples = scrape(metrics)
    assert value(samples, "asg_reconciler_cache_synced", kind="Pod") == 1
    assert value(samples, "asg_reconciler_cache_synced", kind="Namespace") == 0
    assert value(samples, "asg_reconciler_cache_objects", kind="Pod") == 150_000
    assert value(samples, "asg_reconciler_cache_last_event_timestamp_seconds", kind="Pod") == 1_800_000_000.0
    assert value(samples, "asg_reconciler_cache_last_event_timestamp_seconds", kind="Namespace") == 0
    assert value(samples, "asg_reconciler_cache_relists_total", kind="Pod", reason="expired") == 2
    assert value(samples, "asg_reconciler_cache_relists_total", kind="Pod", reason="resync") == 5
    assert value(samples, "asg_reconciler_cache_relists_total", kind="Namespace", reason="error") == 0
    health[1] = KindHealth("Namespace", True, 12, 1_800_000_001.0, {"error": 1}, "")  # read at each scrape
    assert value(scrape(metrics), "asg_reconciler_cache_relists_total", kind="Namespace", reason="error") == 1
