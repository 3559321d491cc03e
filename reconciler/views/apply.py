"""An apply run for people: one line per group, like the plan table, then what was noted."""

from __future__ import annotations

from reconciler.apply.outcome import FAILED, NONE, REFUSED, ApplyReport

_SIGNS = {NONE: " ", REFUSED: "!", FAILED: "x"}


def render_apply_table(report: ApplyReport) -> str:
    lines = [f"Apply {report.commit[:12]}{' (dry run: nothing changes)' if report.dry_run else ''}:", ""]
    width = max((len(g.name) for g in report.groups), default=0)
    for g in report.groups:
        sign = _SIGNS.get(g.action, "~")
        change = (
            f"{g.desired_before} -> {g.desired_after}"
            if g.desired_after != g.desired_before
            else f"{g.desired_before}"
        )
        lines.append(f"  {sign} {g.name.ljust(width)}  {change:<9} {g.action}".rstrip())
        lines += [f"      {note}" for note in g.notes]
    if not report.groups:
        lines.append("  (no node groups in the manifest)")
    if report.given_back or report.stuck:
        lines += ["", "Drain taints:"]
        lines += [f"  ~ {line}" for line in report.given_back]
        lines += [f"  x {line}" for line in report.stuck]
    lines += [f"  ! {w}" for w in report.warnings]
    if report.interrupted:
        lines += ["", "Interrupted (SIGTERM or Ctrl-C): the removals stopped; this is what was done."]
    return "\n".join(lines) + "\n"
