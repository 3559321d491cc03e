"""`asg-reconciler simulate trace ...`: write workload traces for `simulate --trace` (docs/traces.md).

Parsing options and calling `reconciler.simulation` only, as the rest of the CLI does; mistakes are
UserErrors, which the entry point turns into one line and exit code 2.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from reconciler.domain.errors import UserError
from reconciler.simulation.generate import DEFAULT_START, KINDS
from reconciler.simulation.trace import RawTrace

F = TypeVar("F", bound=Callable[..., Any])


def _output_file(function: F) -> F:
    return click.option(
        "--output",
        "output",
        type=click.Path(dir_okay=False, path_type=Path),
        metavar="FILE",
        help="Write the trace to FILE (default: standard output).",
    )(function)


def _emit(trace: RawTrace, output: Path | None) -> None:
    """Checked as the simulator would read it before anything is written."""
    if output is None or str(output) == "-":
        click.echo("".join(f"{line}\n" for line in trace.lines("trace")), nl=False)
        return
    trace.write(output)
    arrivals = sum(1 for event in trace.events if event["kind"] == "arrive")
    hours = max((float(event["at"]) for event in trace.events), default=0.0) / 3600
    click.echo(
        f"wrote {output}: {len(trace.groups)} groups, {arrivals} arrivals, "
        f"{len(trace.events) - arrivals} departures, the last event at {hours:.1f}h",
        err=True,
    )


def _start(value: str | None) -> datetime:
    if value is None:
        return DEFAULT_START
    try:
        start = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(
            f"--start: {value!r} is not a time (use RFC 3339, e.g. 2026-06-01T00:00:00Z)"
        ) from None
    if start.tzinfo is None:
        raise UserError(f"--start: {value!r} has no time zone (add Z for UTC, e.g. 2026-06-01T00:00:00Z)")
    return start.astimezone(UTC)


@click.group(name="trace")
def trace() -> None:
    """Write workload traces for `simulate --trace`: synthetic ones, or from kubectl dumps."""


@trace.command()
@click.option(
    "--kind",
    type=click.Choice(KINDS),
    default="mixed",
    show_default=True,
    help="diurnal: a web service following a day; batch: a nightly burst of jobs; steady: a constant "
    "base; mixed: all three.",
)
@click.option("--hours", type=float, default=24.0, show_default=True, help="How long the trace lasts.")
@click.option("--seed", type=int, default=1, show_default=True, help="The same seed gives the same trace.")
@click.option(
    "--start",
    metavar="TIME",
    help="The trace's start, RFC 3339 (default 2026-06-01T00:00:00Z); times of day follow its UTC clock.",
)
@click.option(
    "--groups",
    "groups_file",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="YAML or JSON `groups: [...]` as in a trace's cluster line, instead of the default groups.",
)
@_output_file
def generate(
    kind: str, hours: float, seed: int, start: str | None, groups_file: Path | None, output: Path | None
) -> None:
    """A synthetic trace, on the default groups (general m5.large 1..50, batch m5.2xlarge 0..20)."""
    from reconciler.simulation.generate import generate as generate_trace
    from reconciler.simulation.trace import read_groups

    groups = None if groups_file is None else read_groups(groups_file)
    _emit(
        generate_trace(kind, hours, seed, start=_start(start), groups=groups, hours_field="--hours"), output
    )


@trace.command()
@click.argument("dumps", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="DUMP...")
@_output_file
def convert(dumps: tuple[Path, ...], output: Path | None) -> None:
    """A trace from kubectl dumps taken over time: files or directories of `dump-<RFC 3339 time>.json`
    (`kubectl get nodes,pods -A -o json`); pods arrive and depart between dumps."""
    from reconciler.simulation.convert import convert as convert_dumps
    from reconciler.simulation.convert import dump_paths

    _emit(convert_dumps(dump_paths(dumps)), output)
