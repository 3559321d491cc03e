"""A typo in `git.branch` (`mian`) never starts a second history beside the real one: plan, status,
apply and check stop with exit 2 naming the field, the branches the remote has and the fix, and
nothing in the repository moves. An empty repository is still a first plan's to fill."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.apply_world import World
from tests.support.git import git, needs_ssh_keygen

pytestmark = needs_ssh_keygen


def _branches(remote: Path) -> dict[str, str]:
    out = git("for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads/", cwd=remote)
    return dict(line.split(" ", 1) for line in out.splitlines())


def _set_branch(world: World, branch: str) -> None:
    text = world.config.read_text()
    world.config.write_text(text.replace("git: {url:", f"git: {{branch: {branch}, url:", 1))


def test_a_misspelled_branch_stops_every_command_and_writes_nothing(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.cli(capsys, "plan").code == 0  # main, the state branch and a scale-down proposal
    before = _branches(world.remote)
    assert "main" in before and "asg-reconciler/prod/state" in before
    _set_branch(world, "mian")
    commands = (
        ("plan",),
        ("plan", "--dry-run"),
        ("status",),
        ("apply",),
        ("apply", "--dry-run"),
        ("history",),
    )
    for command in commands:
        result = world.cli(capsys, *command)
        assert result.code == 2, (command, result.out, result.err)
        said = result.err
        assert "git.branch: mian does not exist" in said, (command, said)
        assert "main" in said.split("has the branches", 1)[1], said
        assert "did you mean main?" in said and "Traceback" not in said
        assert "track" not in result.out
    assert _branches(world.remote) == before  # no orphan `mian`, the state branch untouched
    assert world.desired() == 2


def test_an_empty_repository_still_gets_its_branch_from_the_first_plan(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    _set_branch(world, "capacity")
    result = world.cli(capsys, "plan")
    assert result.code == 0, result.err
    assert "capacity" in _branches(world.remote)
    again = world.cli(capsys, "plan")  # its own branch now exists: planned as usual
    assert again.code == 0, again.err


def test_a_deliberate_new_branch_is_created_as_the_error_says(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.cli(capsys, "plan").code == 0
    _set_branch(world, "capacity")
    refused = world.cli(capsys, "plan")
    assert refused.code == 2 and "git push origin <commit>:refs/heads/capacity" in refused.err
    subprocess.run(["git", "branch", "capacity", "main"], cwd=world.remote, check=True)
    assert world.cli(capsys, "plan").code == 0
