"""`check` as Markdown: what a pull request's conversation shows (one comment, edited in place).

The first line is the hidden marker `check --comment` finds its own comment by; the rest is the
verdict, then validate, the approval gate and `apply --dry-run`, each in its own section.
"""

from __future__ import annotations

import re

from reconciler.apply_render import render_apply_table
from reconciler.runtime.check_stage import (
    ALREADY_ON_BRANCH,
    FAST_FORWARD,
    MARKER,
    CheckReport,
)

_VERDICT = {
    0: "**ok**: valid, approved where approval is needed, and apply would act as shown",
    1: "**failed**: something could not be checked (see below); this is not a verdict on the change",
    2: "**invalid**: fix the manifest or the configuration first",
    3: "**refused**: a safety gate says no (see below for what would approve it)",
    130: "**interrupted**",
}


def render_check_markdown(report: CheckReport) -> str:
    code = report.exit_code
    short = report.commit[:12]
    lines = [
        MARKER,
        f"### asg-reconciler check: `{_code(report.ref)}` ({short}) into `{report.branch}`",
        "",
        f"{_VERDICT.get(code, f'exit {code}')} (exit {code})",
        "",
        f"Judged as: {_landing(report)}",
        "",
        f"#### 1. validate `{report.manifest_path}`",
        "",
    ]
    if report.errors:
        lines += [f"- error: {_line(e)}" for e in report.errors]
    else:
        lines.append(f"- valid at {short}")
    lines += [f"- warning: {_line(w)}" for w in report.warnings]
    lines += [f"- {_line(n)}" for n in report.notes]
    if report.errors:
        return "\n".join(lines) + "\n"
    lines += ["", f"#### 2. Approval gate (`approval.mode: {report.approval_mode}`)", ""]
    if report.gate_error:
        lines.append(f"- could not ask the gate: {_line(report.gate_error)}")
    elif not report.verdicts:
        lines.append(f"- {_code(report.ref)} brings no removal onto `{report.branch}`: nothing to approve")
    else:
        lines += ["| group | instance | brought by | verdict |", "| --- | --- | --- | --- |"]
        for v in report.verdicts:
            by = (
                f"the merge of `{_code(report.ref)}`"
                if v.commit == report.landed and report.landing not in (ALREADY_ON_BRANCH, FAST_FORWARD)
                else f"`{v.commit[:12]}`"
            )
            verdict = ("approved: " if v.approved else "**not approved**: ") + v.reason
            lines.append(f"| {_cell(v.group)} | `{_code(v.instance)}` | {by} | {_cell(verdict)} |")
    lines += ["", "#### 3. `apply --dry-run` (live state; nothing changes)", ""]
    if report.dry_run_error:
        lines.append(f"- apply would not run: {_line(report.dry_run_error)}")
    elif report.dry_run is not None:
        lines += _fenced(render_apply_table(report.dry_run))
    text = "\n".join(lines) + "\n"
    if report.landed and report.landing not in (ALREADY_ON_BRANCH, FAST_FORWARD):
        text = text.replace(report.landed[:12], f"the local merge {report.landed[:12]}")
    return text


def _landing(report: CheckReport) -> str:
    tip, branch = report.tip[:12], report.branch
    if report.landing == ALREADY_ON_BRANCH:
        return f"already on `{branch}`: `apply --dry-run --ref {report.commit[:12]}`"
    if report.landing == FAST_FORWARD:
        return (
            f"`{branch}` fast-forwarded from {tip} to {report.commit[:12]} (REF's own commits land, so "
            "their signatures are what the gate judges); in the local clone only, nothing pushed"
        )
    return (
        f"merged into `{branch}` at {tip} by a merge commit made here, unsigned as a merge button's "
        "would be (apply judges that merge); in the local clone only, nothing pushed. A signed merge "
        "(`asg-reconciler approve`, `git merge --no-ff -S`) is judged on its own signature"
    )


def _fenced(text: str) -> list[str]:
    fence = "```"
    while fence in text:
        fence += "`"
    return [f"{fence}text", text.rstrip("\n"), fence]


_MENTION = re.compile(r"(?<![\w.])@")


def _line(text: str) -> str:
    """Untrusted text (manifest keys, values, group names, reasons) as one inert line: no HTML, no
    link or image syntax that renders, no @mention that pings (a zero-width joiner after the @)."""
    text = " ".join(text.split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("[", "\\[").replace("]", "\\]")
    return _MENTION.sub("@\u200d", text)  # alice@example.com is no mention and stays as it is


def _cell(text: str) -> str:
    return _line(text).replace("|", "\\|")


def _code(text: str) -> str:
    return text.replace("`", "'")
