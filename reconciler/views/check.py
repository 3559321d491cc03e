"""`check` as Markdown: what a pull request's conversation shows (one comment, edited in place).

The first line is the hidden marker `check --comment` finds its own comment by; the rest is the
verdict, then validate, the approval gate and `apply --dry-run`, each in its own section. Every
piece of text a ref, a commit, a manifest or an error brought is escaped (reconciler/domain/markdown.py),
and a comment is cut to what GitHub accepts with the verdict kept first.
"""

from __future__ import annotations

from reconciler.domain.markdown import GITHUB_BODY_LIMIT, Part, code, fenced, fit, inline
from reconciler.views.apply import render_apply_table
from reconciler.views.check_report import (
    ALREADY_ON_BRANCH,
    FAST_FORWARD,
    CheckReport,
)

_VERDICT = {
    0: "**ok**: valid, approved where approval is needed, and apply would act as shown",
    1: "**failed**: something could not be checked (see below); this is not a verdict on the change",
    2: "**invalid**: fix the manifest or the configuration first",
    3: "**refused**: a safety gate says no (see below for what would approve it)",
    130: "**interrupted**",
}


def render_check_markdown(report: CheckReport, marker: str, *, budget: int | None = None) -> str:
    """The whole report, or with `budget` at most that many characters: the sections cut from
    their ends (unapproved removals are listed first), and a line after the verdict saying what was
    cut and where the whole report is."""
    code_ = report.exit_code
    short = report.commit[:12]
    ref = code(report.ref)
    head = [
        marker,
        f"### asg-reconciler check: {ref} ({short}) into {code(report.branch)}",
        "",
        f"{_VERDICT.get(code_, f'exit {code_}')} (exit {code_})",
        "",
        f"Judged as: {_landing(report)}",
        "",
    ]
    found = [f"- error: {inline(e)}" for e in report.errors] or [f"- valid at {short}"]
    found += [f"- warning: {inline(w)}" for w in report.warnings]
    found += [f"- {inline(n)}" for n in report.notes]
    parts = [Part(found, "validate messages", [f"#### 1. validate {code(report.manifest_path)}", ""])]
    if not report.errors:
        parts += [_gate_part(report, ref), _dry_run_part(report)]
    if report.landed and report.landing not in (ALREADY_ON_BRANCH, FAST_FORWARD):
        merge = report.landed[:12]
        for part in parts:  # the merge commit made here is named as such wherever it shows
            part.lines = [line.replace(merge, f"the local merge {merge}") for line in part.lines]
    summary = (
        f"**This comment is shortened** to fit GitHub's limit of {GITHUB_BODY_LIMIT:,} characters. "
        "The whole report is in the log of the CI job that ran this check (check prints it in "
        f"full), or run `asg-reconciler check --ref {short}` with the same configuration."
    )
    return fit(head, parts, budget if budget is not None else 10**12, summary)


def _gate_part(report: CheckReport, ref: str) -> Part:
    heading = ["", f"#### 2. Approval gate ({code('approval.mode: ' + report.approval_mode)})", ""]
    if report.gate_error:
        return Part([f"- could not ask the gate: {inline(report.gate_error)}"], "gate messages", heading)
    if not report.verdicts:
        line = f"- {ref} brings no removal onto {code(report.branch)}: nothing to approve"
        return Part([line], "gate messages", heading)
    rows = []
    for v in sorted(report.verdicts, key=lambda v: (v.approved, v.group, v.instance)):
        by = (
            f"the merge of {code(report.ref, in_table=True)}"
            if v.commit == report.landed and report.landing not in (ALREADY_ON_BRANCH, FAST_FORWARD)
            else code(v.commit[:12], in_table=True)
        )
        verdict = ("approved: " if v.approved else "**not approved**: ") + inline(v.reason)
        rows.append(f"| {inline(v.group)} | {code(v.instance, in_table=True)} | {by} | {verdict} |")
    header = ["| group | instance | brought by | verdict |", "| --- | --- | --- | --- |"]
    return Part(rows, "rows of the approval gate's table (unapproved first)", heading + header)


def _dry_run_part(report: CheckReport) -> Part:
    heading = ["", "#### 3. `apply --dry-run` (live state; nothing changes)", ""]
    if report.dry_run_error:
        return Part([f"- apply would not run: {inline(report.dry_run_error)}"], "dry-run messages", heading)
    if report.dry_run is None:
        return Part([], "dry-run lines", heading)
    block = fenced(render_apply_table(report.dry_run))
    return Part(block[1:-1], "lines of the dry run", heading + block[:1], block[-1:])


def _landing(report: CheckReport) -> str:
    tip, branch = report.tip[:12], code(report.branch)
    if report.landing == ALREADY_ON_BRANCH:
        return f"already on {branch}: {code(f'apply --dry-run --ref {report.commit[:12]}')}"
    if report.landing == FAST_FORWARD:
        return (
            f"{branch} fast-forwarded from {tip} to {report.commit[:12]} (REF's own commits land, so "
            "their signatures are what the gate judges); in the local clone only, nothing pushed"
        )
    return (
        f"merged into {branch} at {tip} by a merge commit made here, unsigned as a merge button's "
        "would be (apply judges that merge); in the local clone only, nothing pushed. A signed merge "
        "(`asg-reconciler approve`, `git merge --no-ff -S`) is judged on its own signature"
    )


def render_failed_markdown(marker: str, ref: str, why: str, *, interrupted: bool = False) -> str:
    """The short comment that replaces the standing one when check could not judge REF (or its
    verdict could not be posted): an earlier "ok" never stands for a head that was not judged."""
    verdict = (
        f"**interrupted**: the check of {code(ref)} did not finish ({inline(why)})"
        if interrupted
        else f"**failed**: could not check {code(ref)}: {inline(why)}"
    )
    return f"{marker}\n{verdict}\n\nThis is not a verdict on the change; the CI job's log says more.\n"
