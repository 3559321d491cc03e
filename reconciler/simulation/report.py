"""`simulate` output: a side-by-side table for people, JSON and CSV with the same figures for scripts.

The JSON is the source: CSV flattens it (one row per policy, node group and figure), so the two
cannot disagree. Names are camelCase with the unit in the name, as the plan's and status's JSON.
Wall-clock timing is in the table's last line only: it differs between runs, the figures do not.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.domain.durations import format_duration
from reconciler.simulation.metrics import PolicyResult
from reconciler.views.output import csv_cell


@dataclass(frozen=True)
class SimulationReport:
    """One trace under each policy asked for (ours first), with what the run assumed."""

    trace: str
    start: datetime
    duration: float  # seconds simulated
    interval: float  # seconds between plans
    seed: int
    provisioning: str  # how new nodes' join delays are drawn
    config: str  # where the planner's settings came from
    results: tuple[PolicyResult, ...]


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def policy_dict(r: PolicyResult) -> dict[str, Any]:
    cost = r.cost
    return {
        "policy": r.policy,
        "description": r.description,
        "plans": r.plans,
        "pendingPodSeconds": round(r.pending_pod_seconds, 3),
        "timeToScheduleSeconds": {
            "p50": _round(r.time_to_schedule_p50, 3),
            "p99": _round(r.time_to_schedule_p99, 3),
            "max": _round(r.time_to_schedule_max, 3),
        },
        "podsArrived": r.pods_arrived,
        "podsScheduled": r.pods_scheduled,
        "podsNeverScheduled": r.pods_never_scheduled,
        "evictions": r.evictions,
        "nodeHours": round(r.node_hours, 4),
        "costUsd": _round(cost, 4),
        "scaleUps": r.scale_ups,
        "nodesAdded": r.nodes_added,
        "scaleDowns": r.scale_downs,
        "nodesRemoved": r.nodes_removed,
        "proposals": {
            "opened": r.proposals.opened,
            "approved": r.proposals.approved,
            "cancelled": r.proposals.cancelled,
            "instancesProposed": r.proposals.instances_proposed,
            "instancesApproved": r.proposals.instances_approved,
            "instancesCancelled": r.proposals.instances_cancelled,
            "instancesExpired": r.proposals.instances_expired,
            "instancesRefused": r.proposals.instances_refused,
            "openAtEnd": r.proposals.open_at_end,
        },
        "nodeGroups": [
            {
                "name": g.name,
                "instanceType": g.instance_type,
                "nodeHours": round(g.node_hours, 4),
                "costUsd": _round(g.cost, 4),
                "scaleUps": g.scale_ups,
                "nodesAdded": g.nodes_added,
                "scaleDowns": g.scale_downs,
                "nodesRemoved": g.nodes_removed,
            }
            for g in r.groups
        ],
        "warnings": list(r.warnings),
    }


def report_dict(report: SimulationReport) -> dict[str, Any]:
    return {
        "trace": {
            "file": report.trace,
            "start": report.start.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "durationSeconds": report.duration,
            "intervalSeconds": report.interval,
            "seed": report.seed,
            "provisioning": report.provisioning,
            "config": report.config,
            "scheduler": "least-allocated",
        },
        "policies": [policy_dict(r) for r in report.results],
    }


def render_csv(report: SimulationReport) -> str:
    """One row per (policy, node group or "" for the whole cluster, figure): every number the JSON
    has, flattened with dots (`timeToScheduleSeconds.p99`, `proposals.opened`), and a `warning` row
    per warning (a spreadsheet must not hide that pods were never scheduled)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["policy", "nodeGroup", "metric", "value"])
    for policy in report_dict(report)["policies"]:
        name = policy["policy"]
        for metric, value in _flat(policy, ("policy", "description", "nodeGroups", "warnings")):
            writer.writerow([name, "", metric, _csv_value(value)])
        for group in policy["nodeGroups"]:
            for metric, value in _flat(group, ("name",)):
                writer.writerow([name, csv_cell(group["name"]), metric, _csv_value(value)])
        for warning in policy["warnings"]:
            writer.writerow([name, "", "warning", csv_cell(warning)])
    return out.getvalue()


def _flat(data: Mapping[str, Any], skip: Sequence[str], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in data.items():
        if key in skip:
            continue
        if isinstance(value, Mapping):
            rows.extend(_flat(value, (), f"{prefix}{key}."))
        else:
            rows.append((f"{prefix}{key}", value))
    return rows


def _csv_value(value: Any) -> str:
    return "" if value is None else csv_cell(value)


# ------------------------------------------------------------------------------------------ table


def seconds(value: float | None) -> str:
    """95s, 2m05s, 1h02m; '-' when there is nothing to measure."""
    if value is None:
        return "-"
    whole = round(value)
    if whole < 60:
        return f"{value:.0f}s" if value >= 1 or value == 0 else f"{value:.1f}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


def _hours(value: float) -> str:
    return f"{value:,.1f}"


def render_table(report: SimulationReport) -> str:
    results = report.results
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, value: Any) -> None:
        rows.append((label, [value(r) for r in results]))

    row("pending pod-seconds", lambda r: f"{r.pending_pod_seconds:,.0f}")
    row(
        "time to schedule p50 / p99 / max",
        lambda r: " / ".join(
            seconds(v) for v in (r.time_to_schedule_p50, r.time_to_schedule_p99, r.time_to_schedule_max)
        ),
    )
    row("pods arrived / never scheduled", lambda r: f"{r.pods_arrived:,} / {r.pods_never_scheduled:,}")
    row("pods evicted by scale-downs", lambda r: f"{r.evictions:,}")
    names = [g.name for g in results[0].groups]
    for index, name in enumerate(names):
        kind = results[0].groups[index].instance_type
        row(f"node-hours {name} ({kind})", lambda r, i=index: _hours(r.groups[i].node_hours))
    row("node-hours total", lambda r: _hours(r.node_hours))
    if len(names) > 1:
        for index, name in enumerate(names):
            row(f"cost {name}", lambda r, i=index: _money(r.groups[i].cost))
    row("cost total (on-demand)", lambda r: _money(r.cost))
    row("scale-ups (steps / nodes)", lambda r: f"{r.scale_ups} / {r.nodes_added}")
    row("scale-downs (steps / nodes)", lambda r: f"{r.scale_downs} / {r.nodes_removed}")
    row(
        "proposals opened / approved / cancelled",
        lambda r: (
            "-"
            if r.policy == "ca"
            else f"{r.proposals.opened} / {r.proposals.approved} / {r.proposals.cancelled}"
            + (" (1 open at the end)" if r.proposals.open_at_end else "")
        ),
    )
    row(
        "instances approved / cancelled",
        lambda r: (
            "-"
            if r.policy == "ca"
            else f"{r.proposals.instances_approved} / {r.proposals.instances_cancelled}"
            + _held(r.proposals.instances_expired, r.proposals.instances_refused)
        ),
    )

    start = report.start.astimezone(UTC)
    span, every = format_duration_seconds(report.duration), format_duration_seconds(report.interval)
    lines = [
        f"Simulated {span} of {report.trace} from {start:%Y-%m-%d %H:%M} UTC: "
        f"{results[0].plans:,} plans, one every {every}, seed {report.seed}",
        f"config: {report.config}; new nodes join after: {report.provisioning}",
        "",
    ]
    width = max(len(label) for label, _ in rows) + 2
    columns = [max(len(r.policy), *(len(values[i]) for _, values in rows)) + 3 for i, r in enumerate(results)]

    def line(label: str, cells: Sequence[str]) -> str:
        return (
            label.ljust(width) + "".join(v.ljust(c) for v, c in zip(cells, columns, strict=True))
        ).rstrip()

    lines.append(line("", [r.policy for r in results]))
    lines.extend(line(label, values) for label, values in rows)
    lines.append("")
    for r in results:
        lines.append(f"{r.policy}: {r.description}")
    if len(results) > 1:
        ours, other = results[0], results[1]
        extra = ours.node_hours - other.node_hours
        text = f"{ours.policy} vs {other.policy}: {extra:+,.1f} node-hours"
        if ours.cost is not None and other.cost is not None:
            change = ours.cost - other.cost
            share = f" ({change / other.cost:+.1%})" if other.cost else ""
            text += f", {'+' if change >= 0 else '-'}${abs(change):,.2f}{share}"
        text += f", {ours.pending_pod_seconds - other.pending_pod_seconds:+,.0f} pending pod-seconds"
        lines.append(text)
    for r in results:
        lines.extend(f"warning: {r.policy}: {w}" for w in r.warnings)
    plans = sum(r.plans for r in results)
    planner = sum(r.plan_seconds for r in results)
    engine = sum(r.engine_seconds for r in results)
    lines.append(
        f"took {planner + engine:.1f}s: {1000 * (planner + engine) / plans:.1f} ms per step, "
        f"of which the planner {1000 * planner / plans:.1f} ms"
    )
    return "\n".join(lines) + "\n"


def _held(expired: int, refused: int) -> str:
    """Approved instances that waited: " (2 expired, 1 refused by the re-check)", or ""."""
    parts = [f"{expired} expired"] if expired else []
    if refused:
        parts.append(f"{refused} refused by the re-check")
    return f" ({', '.join(parts)})" if parts else ""


def format_duration_seconds(value: float) -> str:
    return format_duration(timedelta(seconds=value))
