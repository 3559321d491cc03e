"""The GitHub Actions examples (examples/github-actions/): valid workflows, and the safety properties
docs/ci.md promises — apply in its protected environment, never two at once, least permissions."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / "examples" / "github-actions"
FILES = sorted(WORKFLOWS.glob("*.yml"))
CHECK_JSONSCHEMA = Path(sys.executable).with_name("check-jsonschema")
PINNED = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")


def load(name: str) -> dict[Any, Any]:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    assert isinstance(data, dict)
    return data


def on(workflow: dict[Any, Any]) -> dict[str, Any]:
    """The triggers (PyYAML reads the bare key `on` as True)."""
    triggers = workflow.get("on", workflow.get(True))
    assert isinstance(triggers, dict)
    return triggers


def test_the_workflows_are_there() -> None:
    """Four for the capacity repository, what-if.yml for an application's."""
    assert [f.name for f in FILES] == ["apply.yml", "check.yml", "plan.yml", "report.yml", "what-if.yml"]


@pytest.mark.skipif(not CHECK_JSONSCHEMA.exists(), reason="check-jsonschema is not installed in this venv")
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_workflow_validates_against_the_github_workflows_schema(path: Path) -> None:
    result = subprocess.run(
        [str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_least_permissions_and_pinned_actions(path: Path) -> None:
    text = path.read_text()
    workflow = load(path.name)
    assert "write-all" not in text and "read-all" not in text
    assert isinstance(workflow.get("permissions"), dict), "top-level permissions: list each scope"
    assert "workflows" not in workflow["permissions"]
    for job in workflow["jobs"].values():
        assert isinstance(job.get("permissions", {}), dict)
        for step in job["steps"]:
            if "uses" in step:
                assert PINNED.match(step["uses"]), f"{step['uses']}: pin actions by full commit SHA"
    for line in text.splitlines():
        if "uses:" in line:
            assert re.search(r"# v\d+(\.\d+)*", line), f"{line.strip()}: say which version the SHA is"
    assert "aws-access-key-id" not in text and "AWS_SECRET_ACCESS_KEY" not in text  # OIDC only


def test_every_workflow_that_reaches_aws_does_so_by_oidc() -> None:
    for path in FILES:
        if path.name == "report.yml":
            continue  # reads Git only (test_report_publishes_the_capacity_history_on_a_schedule)
        workflow = load(path.name)
        assert workflow["permissions"].get("id-token") == "write"
        steps = [s for job in workflow["jobs"].values() for s in job["steps"]]
        aws = [s for s in steps if s.get("uses", "").startswith("aws-actions/configure-aws-credentials@")]
        assert len(aws) == 1 and "role-to-assume" in aws[0]["with"]


def test_plan_runs_every_five_minutes_and_by_hand() -> None:
    workflow = load("plan.yml")
    assert on(workflow)["schedule"] == [{"cron": "*/5 * * * *"}]
    assert "workflow_dispatch" in on(workflow)
    assert workflow["permissions"] == {"contents": "read", "id-token": "write"}
    runs = [s.get("run", "") for s in workflow["jobs"]["plan"]["steps"]]
    assert "asg-reconciler plan" in runs


def test_apply_runs_on_main_in_the_protected_environment_one_at_a_time() -> None:
    workflow = load("apply.yml")
    assert on(workflow)["push"]["branches"] == ["main"]
    (job,) = workflow["jobs"].values()
    assert job["environment"] == "capacity-apply"
    concurrency = workflow.get("concurrency") or job.get("concurrency")
    assert concurrency == {"group": "asg-reconciler-apply", "cancel-in-progress": False}
    assert workflow["permissions"] == {"contents": "write", "id-token": "write"}
    runs = [s.get("run", "") for s in job["steps"]]
    assert "asg-reconciler apply" in runs
    text = (WORKFLOWS / "apply.yml").read_text()
    assert "secrets.ALLOWED_SIGNERS" in text and "secrets.APPLY_RECORD_KEY" in text


def test_check_comments_on_the_pull_request_it_runs_for() -> None:
    workflow = load("check.yml")
    assert on(workflow)["pull_request"]["branches"] == ["main"]
    assert "pull_request_target" not in on(workflow)
    assert workflow["permissions"] == {"contents": "read", "pull-requests": "write", "id-token": "write"}
    (job,) = workflow["jobs"].values()
    command = " ".join(" ".join(s.get("run", "").split()) for s in job["steps"])
    assert "asg-reconciler check --ref" in command
    text = (WORKFLOWS / "check.yml").read_text()
    assert "--ref ${{ github.event.pull_request.head.sha }}" in text
    assert "--comment ${{ github.event.pull_request.number }}" in text
    assert "actions/checkout" not in text  # the pull request's files never run with these credentials


def test_the_commands_the_workflows_run_exist() -> None:
    from click.testing import CliRunner

    from reconciler.cli.commands import cli

    for args in (
        ["plan", "--help"],
        ["apply", "--help"],
        ["check", "--help"],
        ["what-if", "--help"],
        ["history", "--help"],
    ):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
    help_text = CliRunner().invoke(cli, ["check", "--help"]).output
    assert "--ref" in help_text and "--comment" in help_text
    assert "--report" in CliRunner().invoke(cli, ["history", "--help"]).output


def test_report_publishes_the_capacity_history_on_a_schedule() -> None:
    """Issue 23: the fleet's history page, built daily, kept as an artifact and served by Pages;
    it reads Git only, so it holds no AWS role, no Kubernetes access and no bot token."""
    workflow = load("report.yml")
    assert on(workflow)["schedule"] and "workflow_dispatch" in on(workflow)
    assert workflow["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    steps = [s for job in workflow["jobs"].values() for s in job["steps"]]
    runs = [" ".join(str(s.get("run", "")).split()) for s in steps]
    assert "asg-reconciler history --report site/index.html" in runs
    uses = [str(s.get("uses", "")).split("@")[0] for s in steps]
    assert {"actions/upload-artifact", "actions/upload-pages-artifact", "actions/deploy-pages"} <= set(uses)
    assert not any(u.startswith("aws-actions/") for u in uses)
    text = (WORKFLOWS / "report.yml").read_text()
    assert "secrets." not in text and "update-kubeconfig" not in text
    (deploy,) = [
        job
        for job in workflow["jobs"].values()
        if any("deploy-pages" in str(s.get("uses")) for s in job["steps"])
    ]
    assert deploy["environment"]["name"] == "github-pages"


@pytest.mark.parametrize("name", ["plan.yml", "apply.yml", "check.yml", "report.yml", "what-if.yml"])
def test_git_and_forge_tokens_reach_only_the_step_that_runs_asg_reconciler(name: str) -> None:
    """Found by review: job-level tokens were in the environment of `pip install` and the AWS CLI."""
    for job in load(name)["jobs"].values():
        assert not {"GIT_TOKEN", "GITHUB_TOKEN"} & set(job.get("env") or {}), name
        for step in job["steps"]:
            holds = {"GIT_TOKEN", "GITHUB_TOKEN"} & set(step.get("env") or {})
            assert not holds or str(step.get("run", "")).lstrip().startswith("asg-reconciler"), (name, step)


def test_what_if_comments_the_capacity_an_application_pull_request_needs() -> None:
    """Runs in the application's repository: reads the pull request's changed manifests as data and
    keeps one comment on it; nothing from the pull request runs, and its file names never reach a
    script (they are the author's to choose)."""
    workflow = load("what-if.yml")
    assert "paths" in on(workflow)["pull_request"]
    assert "pull_request_target" not in on(workflow)
    assert workflow["permissions"] == {"contents": "read", "pull-requests": "write", "id-token": "write"}
    (job,) = workflow["jobs"].values()
    assert job["if"] == "github.event.pull_request.head.repo.full_name == github.repository"
    steps = job["steps"]
    (checkout,) = [s for s in steps if s.get("uses", "").startswith("actions/checkout@")]
    assert checkout["with"]["persist-credentials"] is False
    (changed,) = [s for s in steps if s.get("id") == "changed"]
    assert "${{" not in changed["run"]  # base and head come through the environment
    assert (
        "git diff --name-only --diff-filter=AMR -z" in changed["run"] and '[ ! -L "$file" ]' in changed["run"]
    )
    aws = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("aws-actions/"))
    assert steps.index(changed) < aws  # copied before any credential exists
    command = " ".join(" ".join(s.get("run", "").split()) for s in steps)
    assert "asg-reconciler what-if . --comment ${{ github.event.pull_request.number }}" in command
    assert "./" not in command and "app/" not in command  # nothing of the checkout is executed
