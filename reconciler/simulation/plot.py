"""`simulate --plot FILE.png`: nodes per group and pending pods over time, every policy in one
figure (ours solid, ca dashed), drawn headless with matplotlib's Agg backend.

matplotlib is optional (`pip install 'asg-reconciler[plot]'`): without it `--plot` is a one-line
error, and everything else works.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reconciler.domain.errors import UserError
from reconciler.simulation.report import SimulationReport

_STYLES = {"ours": "-", "ca": "--"}


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise UserError(
            "--plot needs matplotlib, which is not installed: pip install 'asg-reconciler[plot]' "
            "(or matplotlib), or leave --plot out"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    return pyplot


def write_plot(report: SimulationReport, path: Path) -> None:
    """Two panels sharing the time axis (hours since the trace's start): instances per group, and
    pending pods."""
    pyplot = _pyplot()
    figure, (nodes_axis, pending_axis) = pyplot.subplots(2, 1, figsize=(11, 7), sharex=True)
    try:
        colours = pyplot.rcParams["axes.prop_cycle"].by_key()["color"]
        for result in report.results:
            style = _STYLES.get(result.policy, ":")
            hours = [t / 3600 for t in result.timeline.times]
            for index, (group, series) in enumerate(result.timeline.nodes.items()):
                nodes_axis.step(
                    hours,
                    series,
                    where="post",
                    linestyle=style,
                    color=colours[index % len(colours)],
                    label=f"{group} ({result.policy})",
                )
            pending_axis.step(
                hours,
                result.timeline.pending,
                where="post",
                linestyle=style,
                color="black",
                label=result.policy,
            )
        nodes_axis.set_ylabel("nodes (instances)")
        nodes_axis.set_title(f"{report.trace}: nodes per group and pending pods")
        nodes_axis.legend(loc="upper left", fontsize="small")
        nodes_axis.grid(alpha=0.3)
        pending_axis.set_ylabel("pending pods")
        pending_axis.set_xlabel(f"hours since {report.start:%Y-%m-%d %H:%M} UTC")
        pending_axis.legend(loc="upper left", fontsize="small")
        pending_axis.grid(alpha=0.3)
        figure.tight_layout()
        try:
            figure.savefig(path, format="png", dpi=100)
        except OSError as exc:
            raise UserError(f"{path}: cannot write the plot: {exc.strerror or exc}") from None
    finally:
        pyplot.close(figure)
