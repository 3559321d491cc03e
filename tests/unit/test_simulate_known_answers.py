"""Review of simulate (issue 13): answers known by hand, and pods landing only where allowed."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli.commands import cli
from reconciler.config.settings import Config
from reconciler.simulation import cluster
from reconciler.simulation.engine import Settings, _Run
from reconciler.simulation.policies import ApprovalModel, Autoscaler, Reviewed
from reconciler.simulation.trace import parse_trace
from tests.support.simulation_world import (
    FIXED_90S,
    PRICES,
    START,
    TYPES,
    arrive,
    idle_node_trace,
    run,
    trace_of,
)


def test_nothing_happening_costs_exactly_node_hours_times_price() -> None:
    trace = trace_of(3, min_size=3)
    for policy in (Reviewed(), Autoscaler()):
        result = run(trace, policy, hours=10)
        assert result.node_hours == 30
        assert result.cost == pytest.approx(30 * PRICES["m5.large"])
        assert (result.scale_ups, result.scale_downs, result.pending_pod_seconds) == (0, 0, 0)


def test_instant_approval_costs_one_interval_per_node_more_than_ca() -> None:
    """Approved at the plan that proposes, applied at the next step (docs: "at the next step")."""
    now = Reviewed(ApprovalModel(timedelta(0), fixed=True))
    for trace, nodes in ((idle_node_trace(), 1), (trace_of(3), 3)):
        ours, ca = run(trace, now, hours=2), run(trace, Autoscaler(), hours=2)
        assert ours.nodes_removed == ca.nodes_removed == nodes
        assert ours.node_hours - ca.node_hours == pytest.approx(nodes * 30 / 3600)


def test_events_after_the_duration_are_not_replayed() -> None:
    trace = trace_of(
        1, arrive("early", 0, "100m"), arrive("late", 7200, "1500m"), arrive("later", 7300, "1500m")
    )
    result = run(trace, Autoscaler(), hours=1)
    assert result.pods_arrived == 1 and result.scale_ups == 0


def test_a_pod_that_fits_no_group_waits_to_the_end_and_nothing_scales() -> None:
    trace = trace_of(1, arrive("huge", 60, "100"), max_size=5)
    for policy in (Reviewed(), Autoscaler()):
        result = run(trace, policy, hours=1)
        assert (result.pods_never_scheduled, result.scale_ups) == (1, 0)
        assert result.pending_pod_seconds == 3600 - 60
        assert result.time_to_schedule_p99 is None


def _pod(name: str, cpu: str, **spec: Any) -> dict[str, Any]:
    app = name.split("-")[0]
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": app,
        "uid": f"u-{app}",
        "controller": True,
    }
    return {
        "metadata": {"name": name, "labels": {"app": app}, "ownerReferences": [owner]},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}],
            **spec,
        },
    }


def _arrivals(at: float, names: Iterable[str], cpu: str, **spec: Any) -> list[dict[str, Any]]:
    return [{"kind": "arrive", "at": at, "pod": _pod(name, cpu, **spec)} for name in names]


def test_selectors_taints_and_tolerations_decide_where_pods_land_under_both_policies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    general = {
        "name": "general",
        "instanceType": "m5.large",
        "minSize": 1,
        "maxSize": 20,
        "desired": 1,
        "zones": ["us-east-1a", "us-east-1b", "us-east-1c"],
    }
    batch = {
        "name": "batch",
        "instanceType": "m5.2xlarge",
        "minSize": 0,
        "maxSize": 5,
        "desired": 0,
        "zones": ["us-east-1a"],
        "labels": {"workload": "batch"},
        "taints": ["dedicated=batch:NoSchedule"],
    }
    tolerate = {"tolerations": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]}
    select = {"nodeSelector": {"workload": "batch"}}
    events = [
        *_arrivals(10, (f"plain-{i}" for i in range(8)), "400m"),
        *_arrivals(20, (f"batch-{i}" for i in range(5)), "1", **select, **tolerate),
        *_arrivals(30, (f"stray-{i}" for i in range(2)), "1", **select),  # selects batch, no toleration
        *_arrivals(40, (f"free-{i}" for i in range(3)), "300m", **tolerate),  # may go anywhere
    ]
    trace = parse_trace("t", [{"kind": "cluster", "start": START, "groups": [general, batch]}, *events])
    wrong: list[tuple[str, str]] = []
    schedule = cluster.World.schedule

    def checked(world: cluster.World, keys: Any, at: float) -> Any:
        done = schedule(world, keys, at)
        for _, bound in done:
            group, name = world.node_group[bound.node], bound.pod.name
            if name.startswith("stray") or (name.startswith("plain") and group != "general"):
                wrong.append((name, group))
            if name.startswith("batch") and group != "batch":
                wrong.append((name, group))
        return done

    monkeypatch.setattr(cluster.World, "schedule", checked)
    for policy in (Reviewed(), Autoscaler()):
        settings = Settings(TYPES, PRICES, 1, FIXED_90S, duration=2 * 3600)
        result = _Run(trace, Config(cluster="sim"), settings, policy).run()
        assert wrong == []
        assert result.pods_never_scheduled == 2  # the strays
        batch_figures = next(g for g in result.groups if g.name == "batch")
        assert batch_figures.nodes_added == 1  # 5 one-CPU pods fit one m5.2xlarge (about 7.9 CPU)


def _cluster_line(desired: int = 1) -> str:
    group = {"name": "general", "instanceType": "m5.large", "minSize": 1, "maxSize": 3, "desired": desired}
    return json.dumps({"kind": "cluster", "start": START, "groups": [{**group, "zones": ["us-east-1a"]}]})


@pytest.mark.parametrize(
    "events",
    [
        [],  # nothing but the cluster
        [{"kind": "arrive", "at": 0, "pod": _pod("only-0", "100m")}],  # one event at 0
        [{"kind": "arrive", "at": 5, "pod": _pod("giant-0", "64")}],  # fits nowhere
    ],
)
def test_edge_traces_run_through_the_cli_and_repeat_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, events: list[dict[str, Any]]
) -> None:
    monkeypatch.chdir(tmp_path)  # no ./asg-reconciler.yaml
    monkeypatch.delenv("ASG_RECONCILER_CONFIG", raising=False)
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([_cluster_line(), *(json.dumps(e) for e in events)]) + "\n")
    outputs = []
    for _ in range(2):
        result = CliRunner().invoke(
            cli, ["simulate", "--trace", str(path), "--compare", "ca", "-o", "json", "--duration", "1h"]
        )
        assert result.exit_code == 0, result.output
        outputs.append(json.loads(result.stdout))
    assert outputs[0] == outputs[1]
