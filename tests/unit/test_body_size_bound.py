"""A check comment or a proposal's pull-request body fits what GitHub accepts (65,536 characters),
with the verdict first and a line saying what was cut and where the whole report is."""

from __future__ import annotations

from reconciler.apply.outcome import ApplyReport, GroupOutcome
from reconciler.domain.markdown import BODY_BUDGET, GITHUB_BODY_LIMIT
from reconciler.gitops.plan_edits import ProposalRow, proposal_body
from reconciler.runtime.check_comment import comment_marker
from reconciler.views.check import render_check_markdown
from reconciler.views.check_report import FAST_FORWARD, CheckReport, GateLine
from tests.support.markdown_shape import cells, outside_fences

MARKER = comment_marker("prod")
SHA = "d" * 40
REASON = (
    f"{SHA[:12]} is not signed; approve a proposal with `asg-reconciler approve scale-down` (a merge "
    "signed with your own key), or sign the commit that adds the removal"
)


def big_report(removals: int, groups: int) -> CheckReport:
    verdicts = tuple(
        GateLine(f"group-{n % 40:03d}", f"i-{n:017x}", SHA, n % 50 == 0, REASON) for n in range(removals)
    )
    outcomes = tuple(
        GroupOutcome(
            f"group-{n:05d}", "scale-down", 5, 4, notes=(f"would drain node-{n} and terminate i-{n:017x}",)
        )
        for n in range(groups)
    )
    return CheckReport(
        ref="asg-reconciler/prod/scale-down",
        commit=SHA,
        branch="main",
        tip="e" * 40,
        landing=FAST_FORWARD,
        manifest_path="capacity/prod.yaml",
        approval_mode="signed",
        landed=SHA,
        verdicts=verdicts,
        dry_run=ApplyReport(commit=SHA, dry_run=True, groups=outcomes),
    )


def test_400_unapproved_removals_fit_with_the_verdict_first() -> None:
    """Found by review: 400 unapproved removals made a 100,690-character comment, which GitHub
    refuses (422), so check exited 1 and the earlier "ok" stayed."""
    report = big_report(400, 400)
    whole = render_check_markdown(report, MARKER)
    assert len(whole) > GITHUB_BODY_LIMIT  # printed whole in the CI log
    text = render_check_markdown(report, MARKER, budget=BODY_BUDGET)
    assert len(text) <= BODY_BUDGET
    lines = outside_fences(text)
    assert lines[0] == MARKER and lines[3].startswith("**refused**")  # the verdict, first
    summary = next(line for line in lines if "shortened" in line)
    assert lines.index(summary) < lines.index("#### 1. validate `capacity/prod.yaml`")
    assert "of 400 rows of the approval gate's table" in summary and "lines of the dry run" in summary
    assert "`asg-reconciler check --ref dddddddddddd`" in summary and "CI job" in summary
    rows = [line for line in lines if line.startswith("| group-")]
    assert 50 < len(rows) < 400 and all(len(cells(row)) == 4 for row in rows)
    assert all("**not approved**" in row for row in rows)  # the unapproved ones come first
    assert any(line.startswith("*... ") and "more rows" in line for line in lines)


def test_10000_groups_fit_and_each_section_keeps_a_share() -> None:
    report = big_report(3, 10_000)
    assert len(render_check_markdown(report, MARKER)) > 500_000
    text = render_check_markdown(report, MARKER, budget=BODY_BUDGET)
    assert len(text) <= BODY_BUDGET
    lines = outside_fences(text)
    assert len([line for line in lines if line.startswith("| group-")]) == 3  # the small table, whole
    cut = next(line for line in lines if "more lines of the dry run not shown" in line)
    assert 15_000 < int(cut.split()[1]) < 20_000  # of 20,001 lines (a group and its note each)
    assert "rows of the approval gate" not in next(line for line in lines if "shortened" in line)


def test_a_small_report_is_not_touched() -> None:
    report = big_report(2, 2)
    assert render_check_markdown(report, MARKER, budget=BODY_BUDGET) == render_check_markdown(report, MARKER)
    assert "shortened" not in render_check_markdown(report, MARKER, budget=BODY_BUDGET)


def test_a_proposal_of_1000_instances_fits_in_its_pull_request() -> None:
    """Found by review: the proposal's body has a row per instance; about 400 overflow GitHub's limit."""
    rows = [
        ProposalRow(
            f"group-{n % 7}",
            "900 -> 0",
            f"i-{n:017x}",
            f"ip-10-0-{n // 250}-{n % 250}.eu-west-1.compute.internal",
            "3%",
            "every pod fits on another node; utilisation below scaleDown.utilizationThreshold",
            "2024-05-01 10:00 UTC",
        )
        for n in range(1_000)
    ]
    label = "asg-reconciler/prod/scale-down:capacity/prod.yaml"
    assert len(proposal_body("prod", label, rows, budget=10**9)) > GITHUB_BODY_LIMIT
    text = proposal_body("prod", label, rows)
    assert len(text) <= BODY_BUDGET
    lines = outside_fences(text)
    assert lines[0].startswith("Scale-down proposed by asg-reconciler for cluster `prod`")
    summary = next(line for line in lines if "shortened" in line)
    assert "`removeInstances` of `asg-reconciler/prod/scale-down:capacity/prod.yaml`" in summary
    assert "of 1000 instances" in summary
    table = [line for line in lines if line.startswith("| group-")]
    assert 100 < len(table) < 1000 and all(len(cells(row)) == 7 for row in table)
    assert lines[-2].startswith("approval; after that it may only shrink")  # the closing words stay
