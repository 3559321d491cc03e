"""`what-if` for people: a table in the terminal, Markdown in a pull request's one comment.

Both say the same thing in the same order: per group the nodes to add, their instance type and
monthly on-demand cost; then every pod nothing can host, with the reason; then how each workload was
counted (a workload that already runs counts only its difference).
"""

from __future__ import annotations

from reconciler.domain.markdown import code, inline
from reconciler.views.whatif_report import MARKER, WhatIfReport

TABLE_PODS = 100  # unhosted pods listed in the table (JSON lists them all)
COMMENT_PODS = 30  # ... and in a comment (GitHub keeps a comment under 65,536 characters)


def _money(value: float | None) -> str:
    return "no price" if value is None else f"${value:,.2f}"


def _summary(report: WhatIfReport) -> str:
    added = sum(w.added for w in report.workloads)
    head = (
        f"+{report.add} node(s), {_money(report.monthly_cost)} a month on demand"
        if report.add
        else "no new node"
    )
    unhosted = len(report.unhosted)
    tail = f"; {unhosted} pod(s) nothing can host" if unhosted else ""
    return f"{head} for {added} new pod(s){tail}"


def _workloadinline(
    w_kind: str, namespace: str, name: str, wanted: int | None, running: int, added: int
) -> str:
    pods = "one per node it selects" if wanted is None else f"{wanted} pod(s)"
    counted = f", {running} running" if running else ""
    return f"{w_kind} {namespace}/{name}: {pods}{counted}: adds {added}"


def render_what_if_table(report: WhatIfReport) -> str:
    lines = [f"What-if for cluster {report.cluster}: {_summary(report)}", ""]
    width = max((len(g.name) for g in report.groups), default=0)
    for g in report.groups:
        if g.add:
            kind = f"+{g.add} × {g.instance_type or '?'}"
            cost = f"{_money(g.monthly_cost)}/month"
            hosted = f"{g.pods} new pod(s) on new nodes"
            if g.on_existing:
                hosted += f", {g.on_existing} on existing nodes"
            if g.pending_today:
                hosted += f"; and {g.pending_today} pod(s) pending today"
            lines.append(f"  + {g.name.ljust(width)}  {kind:<18} {cost:<16} {hosted}")
        elif g.on_existing or g.kept_removals:
            kept = f", keeps {len(g.kept_removals)} approved removal(s)" if g.kept_removals else ""
            lines.append(
                f"    {g.name.ljust(width)}  no new node        {g.on_existing} pod(s) fit its nodes{kept}"
            )
    if not report.groups:
        lines.append("  (no node groups)")
    elif not any(g.add or g.on_existing or g.kept_removals for g in report.groups):
        lines.append("  no group changes")
    unhosted = report.unhosted
    if unhosted:
        lines += ["", f"Pods nothing can host ({len(unhosted)}):"]
        lines += [f"  {p.pod}: {p.reason}" for p in unhosted[:TABLE_PODS]]
        if len(unhosted) > TABLE_PODS:
            lines.append(f"  ... and {len(unhosted) - TABLE_PODS} more (--output json lists every pod)")
    lines += ["", "Workloads:"]
    for w in report.workloads:
        text = _workloadinline(w.kind, w.namespace, w.name, w.wanted, w.running, w.added)
        lines.append(f"  {text} ({w.source}){f'; {w.note}' if w.note else ''}")
    for s in report.skipped:
        lines.append(f"  {s.kind} {s.name}: runs no pods, skipped ({s.source})")
    if report.warnings:
        lines += ["", "Warnings:"] + [f"  ! {w}" for w in report.warnings]
    lines += [
        "",
        f"Prices: {report.prices} (USD per hour x 730 h a month). The plan `plan --dry-run` makes with "
        "these pods pending; nothing was written.",
    ]
    return "\n".join(lines) + "\n"


def render_what_if_markdown(report: WhatIfReport) -> str:
    """The pull request's comment; its first line is the marker `--comment` finds it by. Every name
    and reason comes from files and a cluster a pull request's author controls: made inert."""
    lines = [
        MARKER,
        f"### asg-reconciler what-if: capacity for cluster {code(report.cluster)}",
        "",
        f"**{inline(_summary(report))}**",
        "",
    ]
    adding = [g for g in report.groups if g.add]
    if adding:
        lines += [
            "| node group | add | instance type | monthly cost | new pods there |",
            "| --- | ---: | --- | ---: | ---: |",
        ]
        for g in adding:
            lines.append(
                f"| {inline(g.name)} | +{g.add} | {inline(g.instance_type or '?')} | "
                f"{_money(g.monthly_cost)} | {g.pods} |"
            )
        lines.append("")
    unhosted = report.unhosted
    if unhosted:
        lines += [f"#### Pods nothing can host ({len(unhosted)})", ""]
        lines += [f"- {code(p.pod)}: {inline(p.reason)}" for p in unhosted[:COMMENT_PODS]]
        if len(unhosted) > COMMENT_PODS:
            lines.append(f"- ... and {len(unhosted) - COMMENT_PODS} more")
        lines.append("")
    lines += ["#### Workloads", ""]
    for w in report.workloads:
        text = _workloadinline(w.kind, w.namespace, w.name, w.wanted, w.running, w.added)
        lines.append(f"- {inline(text)}{f'; {inline(w.note)}' if w.note else ''}")
    if report.skipped:
        lines.append(f"- {len(report.skipped)} object(s) that run no pods skipped")
    if report.warnings:
        lines += ["", "#### Warnings", ""] + [f"- {inline(w)}" for w in report.warnings]
    lines += [
        "",
        f"<sub>Prices: {inline(report.prices)}, USD per hour x 730 h a month. What `plan --dry-run` adds "
        "with these pods pending; nothing was changed.</sub>",
    ]
    return "\n".join(lines) + "\n"
