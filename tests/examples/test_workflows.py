"""The GitHub Actions examples (examples/github-actions/): valid workflows, and the safety properties
docs/ci.md promises — apply in its protected environment, never two at once, least permissions, no
credential in a workflow a pull request can edit, and an install pinned to a commit."""

from __future__ import annotations

import re
import shutil
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
# actionlint (`go install github.com/rhysd/actionlint/cmd/actionlint@latest`) checks what the schema
# cannot: expressions, contexts each key may use, needs/outputs, and shellcheck on run: when present.
ACTIONLINT = shutil.which("actionlint") or shutil.which("actionlint", path=str(Path.home() / "go" / "bin"))
PINNED = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")
INSTALL = re.compile(r'pip install "asg-reconciler @ git\+https://github\.com/OWNER/asg-reconciler@([^"]*)"')
# Part 1 (on pull_request, the pull request's own copy) -> part 2 (workflow_run, the default branch's).
HALVES = {"check-pr.yml": "check.yml", "what-if-pr.yml": "what-if.yml"}


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
    """Five for the capacity repository (check in two parts), what-if's two for an application's."""
    assert [f.name for f in FILES] == [
        "apply.yml",
        "check-pr.yml",
        "check.yml",
        "plan.yml",
        "report.yml",
        "what-if-pr.yml",
        "what-if.yml",
    ]


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


@pytest.mark.skipif(ACTIONLINT is None, reason="actionlint is not installed")
def test_the_workflows_pass_actionlint() -> None:
    assert ACTIONLINT is not None
    result = subprocess.run(
        [ACTIONLINT, "-no-color", *map(str, FILES)],
        capture_output=True,
        text=True,
        check=False,
        cwd=WORKFLOWS,
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
        if path.name == "report.yml" or path.name in HALVES:
            continue  # report reads Git only; the pull-request halves hold nothing (tests below)
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


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_workflow_a_pull_request_can_edit_holds_a_credential(path: Path) -> None:
    """Found by review (issue 28): check.yml and what-if.yml ran on `pull_request` with
    `id-token: write`, and `pull_request` runs the pull request's own copy of the file: a pull
    request could rewrite a step to use the AWS role. What a pull request runs gets no OIDC token, no
    secret, no environment, no write scope and no comment token; never pull_request_target."""
    workflow = load(path.name)
    triggers = on(workflow)
    assert "pull_request_target" not in triggers, path.name
    if "pull_request" not in triggers:
        return
    assert set(triggers) == {"pull_request"}, "a pull request's copy must not also run on other events"
    assert workflow["permissions"] == {"contents": "read"}, path.name
    text = path.read_text()
    assert "secrets." not in text and "id-token" not in text and "aws-actions/" not in text
    assert "ROLE_ARN" not in text and "update-kubeconfig" not in text
    for job in workflow["jobs"].values():
        assert "permissions" not in job and "environment" not in job, path.name
        for step in job["steps"]:
            assert not {"GIT_TOKEN", "GITHUB_TOKEN", "GH_TOKEN"} & set(step.get("env") or {}), step
            assert "token" not in (step.get("with") or {}), step


@pytest.mark.parametrize(("part1", "part2"), HALVES.items())
def test_the_privileged_half_runs_the_default_branchs_file_on_workflow_run(part1: str, part2: str) -> None:
    """Part 2 starts when part 1 completes; GitHub runs part 2's file as it is on the default branch.
    It acts only for a pull request of this repository whose head is the commit part 1 ran on, in an
    environment limited to the default branch, and takes the pull request and commit from GitHub's
    event (never from part 1's output, which the pull request controls)."""
    privileged = load(part2)
    assert on(privileged) == {"workflow_run": {"workflows": [load(part1)["name"]], "types": ["completed"]}}
    assert privileged["permissions"]["id-token"] == "write"
    assert privileged["permissions"]["pull-requests"] == "write"
    (job,) = privileged["jobs"].values()
    condition = " ".join(job["if"].split())
    for clause in (
        "github.event.workflow_run.event == 'pull_request'",
        "github.event.workflow_run.head_repository.full_name == github.repository",
        "github.event.workflow_run.pull_requests[0].head.sha == github.event.workflow_run.head_sha",
    ):
        assert clause in condition, clause
    assert "conclusion" in condition  # a cancelled part 1 (a newer head came) starts nothing
    assert isinstance(job["environment"], str) and job["environment"]
    steps = job["steps"]
    for step in steps:
        assert "${{" not in str(step.get("run", "")).replace("${{ vars.", ""), (
            f"{step}: event data reaches a script only through env"
        )
        assert "actions/checkout" not in str(step.get("uses", "")), (
            "nothing of the pull request is checked out"
        )
    (comment,) = [s for s in steps if str(s.get("run", "")).startswith("asg-reconciler ")]
    assert comment["env"]["PR"] == "${{ github.event.workflow_run.pull_requests[0].number }}"
    assert '--comment "$PR"' in comment["run"]


def test_check_judges_the_head_github_reports_through_git_only() -> None:
    workflow = load("check.yml")
    (job,) = workflow["jobs"].values()
    assert job["environment"] == "capacity-check"
    assert workflow["permissions"] == {"contents": "read", "pull-requests": "write", "id-token": "write"}
    (command,) = [s for s in job["steps"] if str(s.get("run", "")).startswith("asg-reconciler ")]
    assert command["run"] == 'asg-reconciler check --ref "$HEAD_SHA" --comment "$PR"'
    assert command["env"]["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"
    assert "actions/download-artifact" not in (WORKFLOWS / "check.yml").read_text()  # needs nothing of part 1
    part1 = load("check-pr.yml")
    assert on(part1)["pull_request"] == {"branches": ["main"], "paths": ["capacity/**"]}
    runs = [s.get("run", "") for job in part1["jobs"].values() for s in job["steps"]]
    assert "asg-reconciler validate capacity/*.yaml" in runs


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


@pytest.mark.parametrize("name", [f.name for f in FILES])
def test_git_and_forge_tokens_reach_only_the_step_that_runs_asg_reconciler(name: str) -> None:
    """Found by review: job-level tokens were in the environment of `pip install` and the AWS CLI."""
    for job in load(name)["jobs"].values():
        assert not {"GIT_TOKEN", "GITHUB_TOKEN"} & set(job.get("env") or {}), name
        for step in job["steps"]:
            holds = {"GIT_TOKEN", "GITHUB_TOKEN"} & set(step.get("env") or {})
            assert not holds or str(step.get("run", "")).lstrip().startswith("asg-reconciler"), (name, step)


def test_what_if_comments_the_capacity_an_application_pull_request_needs() -> None:
    """Runs in the application's repository. Part 1 copies the pull request's changed manifests
    into an artifact (its file names never reach a script: they are the author's to choose); part 2
    reads that artifact as untrusted data, refusing anything but regular files before any credential
    exists, and keeps one comment on the pull request."""
    part1 = load("what-if-pr.yml")
    assert "paths" in on(part1)["pull_request"]
    (collect,) = part1["jobs"].values()
    (checkout,) = [s for s in collect["steps"] if s.get("uses", "").startswith("actions/checkout@")]
    assert checkout["with"]["persist-credentials"] is False
    (changed,) = [s for s in collect["steps"] if "git diff" in str(s.get("run", ""))]
    assert "${{" not in changed["run"]  # base and head come through the environment
    assert (
        "git diff --name-only --diff-filter=AMR -z" in changed["run"] and '[ ! -L "$file" ]' in changed["run"]
    )
    (upload,) = [s for s in collect["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["with"]["name"] == "what-if-manifests"

    workflow = load("what-if.yml")
    assert workflow["permissions"] == {"actions": "read", "pull-requests": "write", "id-token": "write"}
    (job,) = workflow["jobs"].values()
    assert job["environment"] == "what-if"
    assert "github.event.workflow_run.conclusion == 'success'" in job["if"]
    steps = job["steps"]
    (download,) = [s for s in steps if s.get("uses", "").startswith("actions/download-artifact@")]
    assert download["with"]["name"] == "what-if-manifests"
    assert download["with"]["run-id"] == "${{ github.event.workflow_run.id }}"
    line = next(x for x in (WORKFLOWS / "what-if.yml").read_text().splitlines() if "download-artifact@" in x)
    version = tuple(int(n) for n in re.findall(r"# v(\d+)\.(\d+)\.(\d+)", line)[0])
    assert version >= (4, 1, 7)  # CVE-2024-42471: earlier versions extract ../ paths out of the folder
    (data,) = [s for s in steps if s.get("id") == "data"]
    assert "! -type f ! -type d" in data["run"] and "exit 1" in data["run"]
    first_credential = min(
        i
        for i, s in enumerate(steps)
        if s.get("uses", "").startswith(("aws-actions/", "actions/setup-python@"))
        or "pip install" in s.get("run", "")
    )
    assert steps.index(download) < steps.index(data) < first_credential  # checked before anything runs
    command = " ".join(" ".join(s.get("run", "").split()) for s in steps)
    assert 'asg-reconciler what-if . --comment "$PR"' in command
    (what_if,) = [s for s in steps if str(s.get("run", "")).startswith("asg-reconciler what-if")]
    assert what_if["working-directory"] == "${{ runner.temp }}/what-if/manifests"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_asg_reconciler_is_installed_by_commit_not_by_a_movable_tag(path: Path) -> None:
    """Found by review (issue 28): `@v0.1.0` named a tag that does not exist, and a tag moves if
    someone moves it. The example pins a commit (a 40-hex placeholder to replace) that docs/ci.md
    says how to find and update."""
    text = path.read_text()
    pins = INSTALL.findall(text)
    runs = [str(s.get("run", "")) for job in load(path.name)["jobs"].values() for s in job["steps"]]
    if any(run.startswith("asg-reconciler ") for run in runs):
        assert pins, f"{path.name}: runs asg-reconciler but installs it from nowhere the example shows"
    assert "@v0." not in text and "release tag" not in text
    for pin in pins:
        assert re.fullmatch(r"[0-9a-f]{40}", pin), f"{path.name}: @{pin} is not a full commit SHA"


def test_the_docs_pin_the_same_commit_and_say_how_to_update_it() -> None:
    pins = {pin for path in FILES for pin in INSTALL.findall(path.read_text())}
    assert len(pins) == 1, f"the workflows pin different commits: {pins}"
    ci = (ROOT / "docs" / "ci.md").read_text()
    assert "@v0.1.0" not in ci
    assert (
        set(re.findall(r"git\+https://github\.com/OWNER/asg-reconciler@([^\"\s`]+)", ci)) == pins
    )  # GitLab's too
    assert "git ls-remote https://github.com/OWNER/asg-reconciler" in ci and "rev-parse" in ci
