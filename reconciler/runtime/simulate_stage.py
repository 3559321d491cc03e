"""`simulate`: read the trace, the config and the data files, run the engine once per policy.

The only I/O of the simulation (the engine is pure); the CLI renders what this returns.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path

from reconciler.config.settings import CONFIG_ENV, DEFAULT_CONFIG_FILE, Config, load_config
from reconciler.domain.durations import format_duration
from reconciler.domain.errors import UserError
from reconciler.domain.windows import allowed_removals, zone
from reconciler.runtime.price_table import load_prices, packaged, read_json
from reconciler.simulation.cluster import instance_types_from_document
from reconciler.simulation.engine import Settings, simulate, steps_of
from reconciler.simulation.policies import (
    ApprovalModel,
    Autoscaler,
    Policy,
    RemovalBudget,
    Reviewed,
    parse_duration_option,
    parse_provisioning,
    parse_weekdays,
    parse_working_hours,
)
from reconciler.simulation.report import SimulationReport
from reconciler.simulation.trace import max_seconds, read_trace


@dataclass(frozen=True)
class SimulateRequest:
    """The command line's choices, as typed (checked here, where the errors are worded)."""

    trace: Path
    config_file: str | None = None
    compare: tuple[str, ...] = ()
    seed: int = 1
    approve_within: str = "4h"
    approve_after: str | None = None
    working_hours: str | None = None
    time_zone: str = "UTC"
    weekdays: str = "mon-fri"
    provisioning_delays: tuple[str, ...] = ()
    prices: Path | None = None
    instance_types: Path | None = None
    duration: str | None = None
    given: frozenset[str] = frozenset()  # options typed on the command line (not their defaults)


def simulate_once(request: SimulateRequest) -> SimulationReport:
    config = _config(request.config_file)
    trace = read_trace(request.trace)
    types = instance_types_from_document(packaged("instance_types.json"), "instance_types.json")
    if request.instance_types is not None:
        types.update(
            instance_types_from_document(read_json(request.instance_types), str(request.instance_types))
        )
    prices = load_prices(request.prices)
    duration = None
    if request.duration is not None:
        duration = parse_duration_option(request.duration, "--duration").total_seconds()
        if duration <= 0:
            raise UserError(f"--duration: {request.duration!r} must be above 0 (e.g. 24h)")
        if duration > max_seconds():
            raise UserError(
                f"--duration: {request.duration!r} is out of range "
                f"(at most {format_duration(timedelta(seconds=max_seconds()))}: 31 days, as a trace's times)"
            )
    provisioning = parse_provisioning(request.provisioning_delays)
    used = {g.instance_type for g in trace.groups}
    unknown = sorted(t for t, _ in provisioning.fixed if t != "*" and t not in used)
    if unknown:
        raise UserError(
            f"--provisioning-delay: no group of {request.trace} launches {', '.join(unknown)} "
            f"(its groups launch {', '.join(sorted(used))}; or give DURATION alone for every type)"
        )
    settings = Settings(types, prices, request.seed, provisioning, duration, label=str(request.trace))
    policies: list[Policy] = [Reviewed(_approval(request), _budget(config))]
    if "ca" in request.compare:
        policies.append(Autoscaler())
    results = tuple(simulate(trace, config, settings, policy) for policy in policies)
    if duration is None and trace.end_at <= 0:  # checked last: every other mistake is named first
        raise UserError(
            f"{request.trace}: no event after the trace's start: nothing to replay; give --duration "
            "(e.g. 24h) to simulate the cluster as it starts"
        )
    end, _ = steps_of(trace, config, duration)
    return SimulationReport(
        trace=str(request.trace),
        start=trace.start,
        duration=end,
        interval=config.run.interval.total_seconds(),
        seed=request.seed,
        provisioning=provisioning.describe(),
        config=config.source or "defaults (no config file)",
        results=results,
    )


def _config(explicit: str | None) -> Config:
    """--config, else $ASG_RECONCILER_CONFIG, else ./asg-reconciler.yaml when there is one, else the
    schema's defaults: a simulation needs no cluster, only the planner's settings."""
    chosen = explicit or os.environ.get(CONFIG_ENV)
    if chosen:
        return load_config(Path(chosen))
    if Path(DEFAULT_CONFIG_FILE).is_file():
        return load_config(Path(DEFAULT_CONFIG_FILE))
    return Config(cluster="simulation")


def _approval(request: SimulateRequest) -> ApprovalModel:
    """Options that would be ignored are refused: a user who typed them expects them to matter."""
    if {"approve_within", "approve_after"} <= request.given:
        raise UserError(
            "--approve-after: give it or --approve-within, not both (after is exact, within a draw)"
        )
    shaping = sorted(
        f"--{name.replace('_', '-')}" for name in ("time_zone", "weekdays") if name in request.given
    )
    if shaping and request.working_hours is None:
        raise UserError(
            f"{' and '.join(shaping)}: only shape --working-hours, which is not given "
            "(add e.g. --working-hours 09:00-17:00, or drop them: approvals then come at any time)"
        )
    if request.approve_after is not None:
        within, fixed = parse_duration_option(request.approve_after, "--approve-after"), True
    else:
        within, fixed = parse_duration_option(request.approve_within, "--approve-within"), False
    hours = None
    if request.working_hours is not None:
        try:
            where = zone(request.time_zone)
        except ValueError as exc:
            raise UserError(f"--time-zone: {exc}") from None
        hours = parse_working_hours(request.working_hours, where, parse_weekdays(request.weekdays))
    return ApprovalModel(within, fixed, hours)


def _budget(config: Config) -> RemovalBudget | None:
    """scaleDown.windows, as apply honours them: how many approved removals may go now."""
    windows = config.scale_down.windows
    return partial(allowed_removals, windows) if windows else None
