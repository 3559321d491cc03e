"""The command line: argument parsing and wiring only (DESIGN §5.1)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from reconciler.config.settings import Config, config_path, load_config
from reconciler.domain.errors import ReconcilerError, UserError
from reconciler.views.output import render

F = TypeVar("F", bound=Callable[..., Any])


def _config_option(function: F) -> F:
    return click.option(
        "--config",
        "config_file",
        metavar="FILE",
        help="Config file (default: $ASG_RECONCILER_CONFIG, else asg-reconciler.yaml).",
    )(function)


def _output_option(*formats: str) -> Callable[[F], F]:
    def decorate(function: F) -> F:
        return click.option(
            "--output", "-o", type=click.Choice(formats), default=formats[0], show_default=True
        )(function)

    return decorate


def _snapshot_option(function: F) -> F:
    return click.option(
        "--snapshot",
        type=click.Path(path_type=Path),
        metavar="FILE",
        help="Read kubectl output (file or dump directory) instead of the live API.",
    )(function)


def _load(config_file: str | None) -> Config:
    return load_config(config_path(config_file))


def _now() -> datetime:
    return datetime.now(UTC)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="asg-reconciler")
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    envvar="ASG_RECONCILER_LOG_FORMAT",
    show_default=True,
    help="Log lines for people (text) or collectors (json); env ASG_RECONCILER_LOG_FORMAT.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default=None,
    envvar="ASG_RECONCILER_LOG_LEVEL",
    help="Default: info for `run`, warning for one-shot commands.",
)
@click.pass_context
def cli(context: click.Context, log_format: str, log_level: str | None) -> None:
    """Desired capacity of every ASG behind a Kubernetes cluster, as reviewed Git commits."""
    from reconciler.telemetry.logs import configure_logging

    looping = context.invoked_subcommand == "run"
    configure_logging(log_format, log_level or ("info" if looping else "warning"))


@cli.command()
@_config_option
@_output_option("table", "json", "yaml", "csv")
@_snapshot_option
def status(config_file: str | None, output: str, snapshot: Path | None) -> None:
    """Node groups, nodes, pending pods, manifest vs AWS and warnings (read-only)."""
    from reconciler.runtime.status_stage import status_once
    from reconciler.views.status import render_status_table

    report = status_once(_load(config_file), snapshot, _now())
    shown = render(
        output, as_table=lambda: render_status_table(report), as_data=report.to_dict, as_csv=report.to_csv
    )
    click.echo(shown, nl=False)


@cli.command()
@_config_option
@_output_option("table", "json", "yaml", "csv")
@_snapshot_option
@click.option("--dry-run", is_flag=True, help="Compute and print the plan; write nothing to Git.")
def plan(config_file: str | None, output: str, snapshot: Path | None, dry_run: bool) -> int:
    """Compute each group's desired capacity; without --dry-run, write it to Git."""
    from reconciler.runtime.plan_stage import plan_once
    from reconciler.views.plan import render_plan_csv, render_plan_table

    config = _load(config_file)
    run = plan_once(config, snapshot, _now(), dry_run=dry_run, require_groups=True)
    shown = render(
        output,
        as_table=lambda: render_plan_table(run.plan),
        as_data=lambda: {**run.plan.to_dict(), "awsCalls": dict(run.aws_calls)},
        as_csv=lambda: render_plan_csv(run.plan),
    )
    click.echo(shown, nl=False)
    if run.published is not None:
        for note in run.published.notes or ("nothing to write: Git already says this",):
            click.echo(note, err=output != "table")
    for note in run.notes:  # a dry run's: what it would write besides the plan
        click.echo(note, err=output != "table")
    if run.published is not None and run.published.refused:
        return 3  # written what could be; a person's broken proposal refused (its note says the way out)
    return 0


@cli.command(name="apply")
@_config_option
@_output_option("table", "json", "yaml")
@click.option("--dry-run", is_flag=True, help="Say what would change; change nothing, record nothing.")
@click.option("--ref", metavar="REF", help="The commit of git.branch to apply (default: its tip).")
def apply_command(config_file: str | None, output: str, dry_run: bool, ref: str | None) -> int:
    """Sync the manifest committed on git.branch to AWS: raise desired for increases; drain and
    terminate exactly the approved instances. Never lowers desired."""
    from reconciler.runtime.apply_stage import apply_once
    from reconciler.views.apply import render_apply_table

    run = apply_once(_load(config_file), _now(), dry_run=dry_run, ref=ref)
    click.echo(
        render(output, as_table=lambda: render_apply_table(run.report), as_data=run.report.to_dict), nl=False
    )
    return run.report.exit_code


@cli.command()
@_config_option
@click.option("--ref", required=True, metavar="REF", help="The commit or branch to judge (a PR's head).")
@click.option("--comment", "pull_request", type=int, metavar="PR", help="Keep one comment on this PR.")
def check(config_file: str | None, ref: str, pull_request: int | None) -> int:
    """Pull-request feedback, as Markdown: validate the manifest at REF, the approval gate's verdict
    on what REF brings, and `apply --dry-run` as if REF had landed on git.branch (local only)."""
    from reconciler.runtime.check_comment import check_and_comment, forge_for_comments

    config = _load(config_file)
    forge = forge_for_comments(config) if pull_request is not None else None
    body, code, said = check_and_comment(config, ref, _now(), pull_request, forge)
    click.echo(body, nl=False)
    if said:
        click.echo(said, err=True)
    return code


@cli.command(name="what-if")
@_config_option
@_output_option("table", "json")
@_snapshot_option
@click.option(
    "--prices",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help='USD per hour by instance type, {"prices": {"m5.large": 0.096}}, over the shipped us-east-1 '
    "on-demand prices (as simulate --prices).",
)
@click.option(
    "--comment", "pull_request", type=int, metavar="PR", help="Keep one comment on this PR up to date."
)
@click.option(
    "--namespace",
    "-n",
    default="default",
    show_default=True,
    metavar="NS",
    help="For objects without metadata.namespace (as kubectl -n).",
)
@click.argument("files", nargs=-1, required=True, metavar="FILE...", type=click.Path(path_type=Path))
def what_if(
    config_file: str | None,
    output: str,
    snapshot: Path | None,
    prices: Path | None,
    pull_request: int | None,
    namespace: str,
    files: tuple[Path, ...],
) -> int:
    """The capacity a workload change needs: FILE's workloads (Kubernetes YAML or JSON: Deployment,
    StatefulSet, ReplicaSet, ReplicationController, Job, CronJob, Pod, DaemonSet; multi-document
    files, Lists, directories) added as pending pods to today's cluster, planned by the same code as
    `plan --dry-run`; per group the nodes to add, their instance type and monthly on-demand cost, then
    every pod nothing can host and why. A workload that already runs counts only its difference.
    Writes nothing (no Git, no AWS); exit 0 whatever the answer, 1 when the answer could not be
    posted on the pull request (docs/what-if.md)."""
    from reconciler.runtime.whatif_stage import WhatIfRequest, what_if_and_comment
    from reconciler.views.whatif import render_what_if_markdown, render_what_if_table

    request = WhatIfRequest(files, snapshot, prices, namespace)
    report, said, code = what_if_and_comment(
        lambda: _load(config_file), request, _now(), pull_request, render_what_if_markdown
    )
    click.echo(
        render(output, as_table=lambda: render_what_if_table(report), as_data=report.to_dict), nl=False
    )
    if said:
        click.echo(said, err=True)
    return code


@cli.command(name="run")
@_config_option
def run_command(config_file: str | None) -> int:
    """Serve the stages of run.stages until stopped: plan on a timer and as soon as a pod is
    unschedulable, apply when git.branch moves; leader election, /metrics, /healthz, /readyz,
    events and the status ConfigMap (docs/operations.md). SIGTERM or Ctrl-C: stop safely, exit 0."""
    from reconciler.runtime.run_loop import run_forever

    return run_forever(config_path(config_file))


@cli.command()
@_config_option
@click.argument("proposal")
@click.option("--expect", metavar="SHA", help="The proposal commit you reviewed; refuse if it moved.")
def approve(config_file: str | None, proposal: str, expect: str | None) -> None:
    """Merge a scale-down proposal into git.branch as a commit signed with your own SSH key.

    PROPOSAL is the proposal branch, or its last part (`scale-down`) for this cluster's."""
    from reconciler.runtime.approve_stage import approve_once

    sha = approve_once(_load(config_file), proposal, expect)
    click.echo(f"approved: {proposal} merged as {sha[:12]}, signed with your key")


@cli.command()
@_config_option
@click.option("--node-group", metavar="NAME", help="Only this node group (default: the whole cluster).")
@click.option("--reason", default="", metavar="TEXT", help="Why, shown by apply and status.")
@click.option(
    "--force", is_flag=True, help="With --node-group: suspend it even if discovery does not find it (yet)."
)
def suspend(config_file: str | None, node_group: str | None, reason: str, force: bool) -> None:
    """The kill switch: stop apply's AWS and drain writes (ConfigMap asg-reconciler-control)."""
    from reconciler.runtime.control_stage import switch_once

    config = _load(config_file)
    click.echo(switch_once(config, suspend=True, group=node_group, reason=reason, force=force))


@cli.command()
@_config_option
@click.option("--node-group", metavar="NAME", help="Only this node group (default: the whole cluster).")
def resume(config_file: str | None, node_group: str | None) -> None:
    """Release the kill switch that `suspend` pulled."""
    from reconciler.runtime.control_stage import switch_once

    click.echo(switch_once(_load(config_file), suspend=False, group=node_group, reason=""))


@cli.command()
@_config_option
@_output_option("table", "json", "yaml", "csv")
@click.option("--node-group", metavar="NAME", help="Only this group's entries.")
@click.option("--since", metavar="WHEN", help="A date, an ISO time, or a duration ago such as 24h or 7d.")
@click.option(
    "--report",
    metavar="FILE.html",
    help="Write one self-contained HTML page for every cluster of the capacity repository instead.",
)
@click.pass_context
def history(
    context: click.Context,
    config_file: str | None,
    output: str,
    node_group: str | None,
    since: str | None,
    report: str | None,
) -> None:
    """The capacity audit trail of every group, from commit trailers (one git log)."""
    if report is not None:
        from reconciler.runtime.report_stage import write_report

        if context.get_parameter_source("output") is not click.core.ParameterSource.DEFAULT:
            raise UserError("--output and --report: choose one (--report writes HTML; --output prints)")
        click.echo(write_report(_load(config_file), report, since, node_group))
        return

    from reconciler.runtime.history_stage import history_once
    from reconciler.views.history import render_history

    entries = history_once(_load(config_file), node_group, since)
    click.echo(render_history(entries, output), nl=False)


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
def validate(files: tuple[Path, ...]) -> int:
    """Schema-check configs and manifests (for pull-request CI); exit 2 on any error."""
    from reconciler.gitops.validate import validate_files

    report = validate_files(files)
    for problem in report.errors:
        click.echo(f"error: {problem}", err=True)
    for problem in report.warnings:
        click.echo(f"warning: {problem}", err=True)
    if not report.errors:
        click.echo(
            f"{len(files)} file(s) valid"
            + (f", {len(report.warnings)} warning(s)" if report.warnings else "")
        )
    return report.exit_code


@cli.command()
@click.option(
    "--keep",
    type=click.Path(path_type=Path, file_okay=False),
    help="Leave the demo's files in this new directory and keep the mock AWS serving until Ctrl-C.",
)
def demo(keep: Path | None) -> None:
    """The embedded walkthrough against an in-process AWS mock (what `make demo` runs)."""
    from reconciler.demo.walkthrough import run_demo

    def command(args: list[str]) -> None:
        cli.main(args=args, prog_name="asg-reconciler", standalone_mode=False)

    run_demo(click.echo, command, keep)


@cli.group(invoke_without_command=True)
@_config_option
@click.option(
    "--trace",
    "trace_file",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="The workload trace (JSONL, docs/traces.md); write one with `simulate trace generate`.",
)
@click.option(
    "--compare",
    type=click.Choice(["ca"]),
    multiple=True,
    help="Also run the trace under a cluster-autoscaler-like policy (scale-down at once after "
    "scaleDown.unneededTime, no approval) and show both side by side.",
)
@click.option(
    "--output",
    "-o",
    type=click.Choice(["table", "json", "csv"]),
    default="table",
    show_default=True,
    help="table for people; json or csv (one row per policy, group and figure) give the same figures.",
)
@click.option(
    "--plot",
    type=click.Path(path_type=Path),
    metavar="FILE.png",
    help="Draw nodes per group and "
    "pending pods over time for every policy into this PNG (needs matplotlib: the plot extra).",
)
@click.option(
    "--seed",
    type=int,
    default=1,
    show_default=True,
    help="Seeds every draw (join and approval delays): the same seed gives the same figures.",
)
@click.option(
    "--approve-within",
    default="4h",
    show_default=True,
    metavar="DURATION",
    help="A proposal is approved after a delay drawn uniformly up to this (working time with "
    "--working-hours).",
)
@click.option(
    "--approve-after",
    metavar="DURATION",
    help="A proposal is approved exactly this long after it opens (instead of --approve-within's draw).",
)
@click.option(
    "--working-hours",
    metavar="HH:MM-HH:MM",
    help="Reviewers approve only within these hours "
    "(e.g. 09:00-17:00); approval delays count working time only. Default: any time.",
)
@click.option(
    "--time-zone",
    default="UTC",
    show_default=True,
    metavar="ZONE",
    help="The reviewers' IANA time zone for --working-hours (e.g. Europe/Berlin).",
)
@click.option(
    "--weekdays",
    default="mon-fri",
    show_default=True,
    metavar="DAYS",
    help="Working days for --working-hours (mon-fri, or a list such as mon,tue,thu).",
)
@click.option(
    "--provisioning-delay",
    "provisioning_delays",
    multiple=True,
    metavar="[TYPE=]DURATION",
    help="A fixed time for a new instance to become a Ready node, for one instance type or "
    "(without TYPE=) all; repeatable. Default: lognormal around 90s, seeded.",
)
@click.option(
    "--prices",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="USD per hour by instance "
    'type, {"prices": {"m5.large": 0.096}}, over the shipped us-east-1 on-demand prices.',
)
@click.option(
    "--instance-types",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="Instance type facts (vcpus, memoryMiB, maxENIs, ipv4PerENI) for types the shipped table lacks.",
)
@click.option(
    "--duration",
    metavar="DURATION",
    help="Simulate this long (e.g. 24h). Default: up to the trace's last event.",
)
@click.pass_context
def simulate(
    context: click.Context,
    config_file: str | None,
    trace_file: Path | None,
    compare: tuple[str, ...],
    output: str,
    plot: Path | None,
    seed: int,
    approve_within: str,
    approve_after: str | None,
    working_hours: str | None,
    time_zone: str,
    weekdays: str,
    provisioning_delays: tuple[str, ...],
    prices: Path | None,
    instance_types: Path | None,
    duration: str | None,
) -> None:
    """Replay a workload trace through the planner `plan` uses, stepping a simulated clock at
    run.interval, and measure what reviewed scale-downs cost: pending pod-seconds, time to schedule,
    node-hours and on-demand cost per group, scale actions and proposals. With --compare ca, the same
    trace under a cluster-autoscaler-like policy, side by side. The config (--config, else
    $ASG_RECONCILER_CONFIG, else ./asg-reconciler.yaml if present, else defaults) gives the planner's
    settings and scaleDown.windows; the trace gives the node groups and the pods."""
    if context.invoked_subcommand is not None:
        return
    if trace_file is None:
        raise click.UsageError(
            "Missing option '--trace' (a trace file; write one with `simulate trace generate`)."
        )
    from reconciler.runtime.simulate_stage import SimulateRequest, simulate_once
    from reconciler.simulation.report import render_csv, render_table, report_dict

    if plot is not None and plot.suffix.lower() != ".png":
        raise UserError(f"--plot: {plot} must end in .png (the plot is a PNG image)")
    given = frozenset(
        name
        for name in ("approve_within", "approve_after", "time_zone", "weekdays")
        if context.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT
    )
    report = simulate_once(
        SimulateRequest(
            trace=trace_file,
            config_file=config_file,
            compare=compare,
            seed=seed,
            approve_within=approve_within,
            approve_after=approve_after,
            working_hours=working_hours,
            time_zone=time_zone,
            weekdays=weekdays,
            provisioning_delays=provisioning_delays,
            prices=prices,
            instance_types=instance_types,
            duration=duration,
            given=given,
        )
    )
    if plot is not None:
        from reconciler.simulation.plot import write_plot

        write_plot(report, plot)
    shown = render(
        output,
        as_table=lambda: render_table(report),
        as_data=lambda: report_dict(report),
        as_csv=lambda: render_csv(report),
    )
    click.echo(shown, nl=False)
    if plot is not None:
        click.echo(f"plot written to {plot}", err=True)


def _register_trace_commands() -> None:
    from reconciler.cli.trace import trace

    simulate.add_command(trace)


_register_trace_commands()


def main(argv: list[str] | None = None) -> None:
    """Entry point: user mistakes and failed operations become one line and an exit code; Ctrl-C
    (a KeyboardInterrupt anywhere, which click turns into Abort) is "aborted" and exit 130, at once.

    Run as the program (`argv` None), an interrupted command has unwound its own work by then and
    leaves without the interpreter's teardown, which joins threads that are not daemons (GitPython's
    watchdog of a `git fetch` lives its whole 120 s; a worker may sit in a socket read) and takes a
    second or more once moto is loaded. Exit handlers still run (the client's temporary credential
    files are removed, logs flushed)."""
    import atexit
    import os

    try:
        result = cli.main(args=argv, prog_name="asg-reconciler", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if isinstance(exc, click.UsageError) else exc.exit_code)
    except ReconcilerError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("aborted", err=True)
        if argv is None:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)
        sys.exit(130)
    sys.exit(result if isinstance(result, int) else 0)
