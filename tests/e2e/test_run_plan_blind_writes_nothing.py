"""`run` keeps planning when discovery finds no node group (a wrong region or tag, an ASG untagged,
a flaky DescribeAutoScalingGroups answering empty). Such a plan saw nothing, so it decides nothing:
an open scale-down proposal (a person's commit on it included, DESIGN §3 rule 3), the state
branch's timers and main stay as they are. Found by an attack on issue 20 item 5: the proposal was
closed and its branch deleted as "no longer wanted"."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reconciler.config.settings import load_config
from reconciler.runtime.plan_stage import plan_once
from tests.support.apply_world import MAIN_PATH, PROPOSAL, World
from tests.support.git import git


def branch_head(world: World, branch: str) -> str | None:
    found = git("for-each-ref", "--format=%(objectname)", f"refs/heads/{branch}", cwd=world.remote).strip()
    return found or None


def person_commits_to_the_proposal(world: World) -> str:
    clone = world.tmp / "alice-proposal"
    git("clone", "--quiet", "--branch", PROPOSAL, str(world.remote), str(clone))
    path = clone / MAIN_PATH
    path.write_text(path.read_text() + "# reviewed by alice: ok to remove\n")
    git("add", MAIN_PATH, cwd=clone)
    git("-c", "commit.gpgsign=false", "commit", "--quiet", "-m", "note the review", cwd=clone)
    git("push", "--quiet", "origin", PROPOSAL, cwd=clone)
    return git("rev-parse", "HEAD", cwd=clone).strip()


def test_a_run_plan_that_finds_no_node_group_leaves_the_proposal_alone(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.cli(capsys, "plan").code == 0
    assert branch_head(world, PROPOSAL) is not None, "the walkthrough proposes node-b"
    theirs = person_commits_to_the_proposal(world)
    # the region is wrong for a moment (a config edit, read at the next cycle), or AWS answers empty
    world.config.write_text(world.config.read_text().replace("region: us-east-1", "region: us-west-2"))
    run = plan_once(load_config(world.config), None, datetime.now(UTC), dry_run=False)  # as run's cycle
    assert run.searched, "discovery found nothing"
    assert branch_head(world, PROPOSAL) == theirs, (
        f"the proposal with a person's commit was {run.published.proposal_action if run.published else '?'}"
    )
