"""`what-if` for people: a table in the terminal, Markdown in a pull request's one comment.

Both say the same thing in the same order: per group the nodes to add, their instance type and
monthly on-demand cost; then every pod nothing can host, with the reason; then how each workload was
counted (a workload that already runs counts only its difference).
"""

from __future__ import annotations

import re

from reconciler.domain.markdown import BODY_BUDGET, Part, code, fit, inline
from reconciler.views.whatif_report import MARKER, WhatIfReport

TABLE_PODS = 100  # unhosted pods listed in the table (JSON lists them all)
COMMENT_PODS = 30  # ... and in a comment (then cut to what GitHub accepts: `fit`)


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
    if report.on_other_nodes:
        lines.append(
            f"    (no node group)  no new node  {report.on_other_nodes} pod(s) fit nodes of no node group"
        )
    if not report.groups:
        lines.append("  (no node groups)")
    elif not report.on_other_nodes and not any(
        g.add or g.on_existing or g.kept_removals for g in report.groups
    ):
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


# In a comment, what the pull request does not own stays out: an object of another namespace
# (`anti-affinity with pod secrets/vault-0`), and the AWS identity an error names (an account, a
# role's ARN, an access key id). `ns/name` is a namespaced object when `ns` is a DNS label not
# preceded by a name character, `.` or `/` (label keys like `kubernetes.io/hostname` are not).
_NAMESPACED = re.compile(
    r"(?<![\w./@:-])([a-z0-9](?:[-a-z0-9]*[a-z0-9])?)/([a-z0-9](?:[-a-z0-9.]*[a-z0-9])?)"
)
_AWS_IDENTITY = (
    (re.compile(r"\barn:aws[\w-]*:[^\s'\"`,;()]*"), "(an AWS identity)"),
    (re.compile(r"\b(?:assumed-role|role|user)/[\w+=,.@/-]+"), "(an AWS identity)"),
    (re.compile(r"\b(?:AKIA|ASIA|AROA|AIDA)[A-Z0-9]{12,}\b"), "(an AWS key id)"),
    (re.compile(r"(?<!\d)\d{12}(?!\d)"), "(an AWS account)"),
    (re.compile(r"\bsystem:serviceaccount:[\w.:-]+"), "(a Kubernetes identity)"),
)
OTHER_NAMESPACE = "(an object of another namespace)"


def for_comment(text: str, namespaces: frozenset[str]) -> str:
    """`text` as a pull request may see it: objects outside `namespaces` (the pull request's own)
    and AWS identities replaced by what they are."""
    for pattern, what in _AWS_IDENTITY:
        text = pattern.sub(what, text)
    return _NAMESPACED.sub(lambda m: m[0] if m[1] in namespaces else OTHER_NAMESPACE, text)


def _namespaces(report: WhatIfReport) -> frozenset[str]:
    return frozenset(w.namespace for w in report.workloads)


def render_what_if_markdown(report: WhatIfReport, budget: int = BODY_BUDGET) -> str:
    """The pull request's comment; its first line is the marker `--comment` finds it by. Every name
    and reason comes from files and a cluster a pull request's author controls: made inert, with
    nothing of another namespace or of the AWS identity in it, and cut to `budget` characters
    (GitHub refuses a comment over 65,536), the verdict first and a note of what was left out."""
    mine = _namespaces(report)

    def text(value: str) -> str:
        return inline(for_comment(value, mine))

    head = [
        MARKER,
        f"### asg-reconciler what-if: capacity for cluster {code(report.cluster)}",
        "",
        f"**{text(_summary(report))}**",
        "",
    ]
    parts: list[Part] = []
    adding = [g for g in report.groups if g.add]
    if adding:
        rows = [
            f"| {inline(g.name)} | +{g.add} | {inline(g.instance_type or '?')} | "  # the operator's names
            f"{_money(g.monthly_cost)} | {g.pods} |"
            for g in adding
        ]
        header = [
            "| node group | add | instance type | monthly cost | new pods there |",
            "| --- | ---: | --- | ---: | ---: |",
        ]
        parts.append(Part(rows, "node groups", header, [""]))
    unhosted = report.unhosted
    if unhosted:
        lines = [f"- {code(p.pod)}: {text(p.reason)}" for p in unhosted[:COMMENT_PODS]]
        if len(unhosted) > COMMENT_PODS:
            lines.append(f"- ... and {len(unhosted) - COMMENT_PODS} more")
        parts.append(
            Part(lines, "pods nothing can host", [f"#### Pods nothing can host ({len(unhosted)})", ""], [""])
        )
    workloads = []
    for w in report.workloads:
        line = _workloadinline(w.kind, w.namespace, w.name, w.wanted, w.running, w.added)
        workloads.append(f"- {text(line)}{f'; {text(w.note)}' if w.note else ''}")
    if report.skipped:
        workloads.append(f"- {len(report.skipped)} object(s) that run no pods skipped")
    parts.append(Part(workloads, "workloads", ["#### Workloads", ""]))
    if report.warnings:
        parts.append(Part([f"- {text(w)}" for w in report.warnings], "warnings", ["", "#### Warnings", ""]))
    parts[-1].after.extend(
        [
            "",
            f"<sub>Prices: {text(report.prices)}, USD per hour x 730 h a month. What `plan --dry-run` adds "
            "with these pods pending; nothing was changed.</sub>",
        ]
    )
    summary = (
        "*This answer is longer than a comment may be: the CI job's log has it whole (`--output json`).*"
    )
    return fit(head, parts, budget, summary)


def render_what_if_failed(why: str, namespaces: frozenset[str]) -> str:
    """The comment that replaces an earlier answer when this head could not be judged: the reason
    without another namespace's objects or the AWS identity (the CI job's log has it whole)."""
    return (
        f"{MARKER}\n**failed**: could not work out the capacity: {inline(for_comment(why, namespaces))}\n\n"
        "<sub>An earlier answer on this pull request was for another head; the CI job's log has the "
        "details.</sub>\n"
    )
