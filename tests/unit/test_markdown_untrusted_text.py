"""Text a ref, a commit, a manifest, a node group or an error brought cannot add structure to
check's comment or a proposal's pull-request body: no HTML, heading, link, mention, table cell or
row, and a code span shows a ref exactly (backticks included)."""

from __future__ import annotations

import pytest

from reconciler.apply.outcome import ApplyReport, GroupOutcome
from reconciler.domain.markdown import code, fenced, inline
from reconciler.gitops.plan_edits import ProposalRow, proposal_body
from reconciler.runtime.check_comment import comment_marker
from reconciler.views.check import render_check_markdown, render_failed_markdown
from reconciler.views.check_report import FAST_FORWARD, MERGE, CheckReport, GateLine
from tests.support.markdown_shape import (
    cells,
    code_spans,
    outside_fences,
    shown,
    unescaped,
    without_code_spans,
)

MARKER = comment_marker("prod")
HEADING = "x/<h1>APPROVED-by-platform-admins</h1>"
HOSTILE = [
    HEADING,
    "@org/platform-admins please approve",
    "a|b\\|c\\",
    "line one\n\n# a heading\n| x | y |\n---",
    "`code` ``` [link](https://evil.example) ![img](https://evil.example/i.png) <!-- hidden",
    "**ok** _emphasis_ ~~struck~~",
    "&lt;h1&gt;entities&lt;/h1&gt;",
    "ends with a backslash\\",
    "`starts with a backtick",
    "<img src=x onerror=alert(1)>",
]
A_SHA, B_SHA, TIP = "a" * 40, "b" * 40, "c" * 40


def assert_inert(text: str) -> None:
    """No HTML, no heading, list or quote of its own, no link, no mention, in any line outside
    fenced blocks; our own headings and the marker excepted."""
    lines = outside_fences(text)
    assert lines[0] == MARKER
    for line in map(without_code_spans, lines[1:]):
        assert "<" not in line and ">" not in line.replace("->", ""), line
        assert not line.lstrip().startswith(("#", ">", "<", "---", "===")) or line.startswith("###"), line
        assert "](" not in line.replace("\\](", ""), line
        assert "@org" not in line, line


@pytest.mark.parametrize("hostile", HOSTILE)
def test_inline_text_is_one_inert_line(hostile: str) -> None:
    rendered = inline(hostile)
    assert "\n" not in rendered and "<" not in rendered and ">" not in rendered
    assert unescaped(rendered, "`*_[]|~") == []
    assert "@org" not in rendered  # a zero-width joiner after the @: no ping
    assert code_spans(f"x {rendered} `ours`") == ["ours"]  # nothing it holds pairs with our spans


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_code_span_shows_the_text_exactly(hostile: str) -> None:
    one_line = " ".join(hostile.split())
    assert code_spans(code(hostile)) == [one_line]
    row = f"| {code(hostile, in_table=True)} | {inline(hostile)} |"
    assert [shown(cell) for cell in cells(row)] == [one_line, one_line]


def test_a_fenced_block_cannot_be_closed_from_inside() -> None:
    text = "before\n```\n````\n# not a heading\n<h1>x</h1>\nafter"
    block = fenced(text)
    assert outside_fences("\n".join(["intro", *block, "outro"])) == ["intro", "outro"]


def report(hostile: str, **changes: object) -> CheckReport:
    base = CheckReport(
        ref=hostile,
        commit=A_SHA,
        branch="main",
        tip=TIP,
        landing=MERGE,
        manifest_path="capacity/prod.yaml",
        approval_mode="signed",
        landed=B_SHA,
        warnings=(hostile,),
        notes=(hostile,),
        verdicts=(
            GateLine(hostile, hostile, B_SHA, False, hostile),
            GateLine("general", "i-0123456789abcdef0", A_SHA, True, f"signed by {hostile}"),
        ),
        dry_run=ApplyReport(
            commit=B_SHA,
            dry_run=True,
            groups=(GroupOutcome(hostile, "refused", 3, 2, notes=(hostile, "```", "````")),),
            warnings=(hostile,),
        ),
    )
    return CheckReport(**{**base.__dict__, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_the_check_comment_keeps_its_structure_whatever_the_ref_group_or_reason(hostile: str) -> None:
    text = render_check_markdown(report(hostile), MARKER)
    assert_inert(text)
    rows = [line for line in outside_fences(text) if line.startswith("|")]
    assert len(rows) == 4 and all(len(cells(row)) == 4 for row in rows)
    one_line = " ".join(hostile.split())
    group, instance, by, _ = cells(rows[2])  # the unapproved one, listed first
    assert (shown(group), shown(instance)) == (one_line, one_line)
    assert by.startswith("the merge of ") and shown(by.removeprefix("the merge of ")) == one_line
    title = outside_fences(text)[1]
    assert code_spans(title)[0] == " ".join(hostile.split())  # the ref, exactly, in a code span


@pytest.mark.parametrize("hostile", HOSTILE)
def test_errors_and_gate_failures_are_escaped_too(hostile: str) -> None:
    assert_inert(render_check_markdown(report(hostile, errors=(hostile,)), MARKER))
    assert_inert(render_check_markdown(report(hostile, gate_error=hostile, verdicts=()), MARKER))
    assert_inert(render_check_markdown(report(hostile, dry_run_error=hostile, landing=FAST_FORWARD), MARKER))


def test_a_branch_named_like_a_heading_stays_in_its_code_span_in_the_failed_comment() -> None:
    """Found by review: `check --ref 'x/<h1>APPROVED-by-platform-admins</h1>'` (a legal branch
    name) that cannot be read put the ref raw into the failed comment: it rendered as a heading."""
    text = render_failed_markdown(MARKER, HEADING, f"--ref {HEADING}: no such commit or branch")
    assert_inert(text)
    assert code_spans(text.split("\n")[1])[0] == HEADING
    assert "&lt;h1&gt;APPROVED" in text  # the error message, escaped: shown, not rendered


@pytest.mark.parametrize("hostile", HOSTILE)
def test_the_proposal_body_keeps_one_row_per_instance(hostile: str) -> None:
    rows = [
        ProposalRow(hostile, "3 -> 2", f"i-{n:017x}", hostile, "12%", hostile, "2024-05-01 10:00 UTC")
        for n in range(3)
    ]
    text = proposal_body("prod", "asg-reconciler/prod/scale-down:capacity/prod.yaml", rows)
    table = [line for line in outside_fences(text) if line.startswith("|")]
    assert len(table) == 5 and all(len(cells(row)) == 7 for row in table)
    assert_inert(MARKER + "\n" + text)
