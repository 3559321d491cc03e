"""A proposal merged with the forge's button under `approval.mode: signed` (the default): apply can
never accept it, so nothing may jam (issue 28, the trial: apply refused "not signed", `status` showed
"-1 approved", `approve` said "already merged", a revert left plan with "nothing to write"; only
deleting the branch by hand moved it, and nothing said so). Every stuck state names its way out,
and the plan recovers by itself: it withdraws what the unsigned merge added and proposes it again."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.support.apply_steps import show
from tests.support.apply_world import MAIN_PATH, PROPOSAL, World, manifest_on_main
from tests.support.git import BOB, git
from tests.support.github_api import FakeGitHub


def head(world: World, branch: str) -> str | None:
    found = git("for-each-ref", "--format=%(objectname)", f"refs/heads/{branch}", cwd=world.remote).strip()
    return found or None


def merged_with_the_button(world: World, capsys: pytest.CaptureFixture[str]) -> str:
    planned = world.cli(capsys, "plan")
    assert planned.code == 0, show(planned)
    # GitHub's button: a merge commit by a person, with no SSH signature (GitHub signs it with its
    # own PGP key, or not at all); the branch stays unless the repository deletes it
    return BOB.merge(
        world.remote, "main", PROPOSAL, "Merge pull request #1 from asg-reconciler/prod/scale-down"
    )


def test_every_stuck_state_names_its_way_out_and_plan_proposes_again(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    merge = merged_with_the_button(world, capsys)
    assert world.b_id in manifest_on_main(world)

    refused = world.cli(capsys, "apply")
    assert refused.code == 3, show(refused)
    assert "not approved" in refused.out and "asg-reconciler plan" in refused.out, show(refused)
    assert world.desired() == 2 and world.b_id in world.in_service()

    status = world.cli(capsys, "status")
    assert status.code == 0, show(status)
    row = next(line for line in status.out.splitlines() if line.startswith("general "))
    assert not re.search(r"[(,] ?-\d", row), row  # never a negative count ("-1 approved")
    assert "(1 listed, not approved)" in row, row
    data = json.loads(world.cli(capsys, "status", "--output", "json").out)
    (group,) = data["nodeGroups"]
    said = " ".join(group["warnings"])
    assert "not approved" in said and "asg-reconciler plan" in said, said

    again = world.cli(capsys, "approve", "scale-down")
    assert again.code == 2, show(again)
    assert "already merged" in again.err and "asg-reconciler plan" in again.err, show(again)

    planned = world.cli(capsys, "plan")
    assert planned.code == 0, show(planned)
    said = planned.out + planned.err
    assert "withdr" in said and merge[:12] in said, said
    assert "asg-reconciler approve scale-down" in said, said
    # main no longer lists it (its target unchanged), and a fresh proposal names it again
    assert world.b_id not in manifest_on_main(world)
    proposal = head(world, PROPOSAL)
    assert proposal is not None and proposal != merge
    assert world.b_id in git("show", f"{PROPOSAL}:{MAIN_PATH}", cwd=world.remote)
    merged = subprocess.run(["git", "merge-base", "--is-ancestor", proposal, "main"], cwd=world.remote)
    assert merged.returncode == 1  # a fresh proposal, not the spent one
    tips = head(world, "main"), proposal
    assert world.cli(capsys, "plan").code == 0  # settled: the next plan writes nothing more
    assert (head(world, "main"), head(world, PROPOSAL)) == tips
    subject = git("log", "-1", "--format=%s", "main", cwd=world.remote)
    assert subject.startswith("capacity(prod): withdraw 1 removal(s) merged without an approval"), subject

    approved = world.cli(capsys, "approve", "scale-down")
    assert approved.code == 0, show(approved)
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, show(applied)
    assert world.desired() == 1 and world.b_id not in world.in_service()


def test_a_reverted_merge_is_proposed_again(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    merged_with_the_button(world, capsys)
    before = git("show", "main~1:" + MAIN_PATH, cwd=world.remote)
    BOB.commit(world.remote, "main", {MAIN_PATH: before}, "Revert the scale-down merge")
    planned = world.cli(capsys, "plan")
    assert planned.code == 0, show(planned)
    said = planned.out + planned.err
    assert "nothing to write" not in said, said
    assert "already merged" in said, said
    assert world.b_id in git("show", f"{PROPOSAL}:{MAIN_PATH}", cwd=world.remote)
    approved = world.cli(capsys, "approve", "scale-down")
    assert approved.code == 0, show(approved)


def test_the_plan_withdraws_only_what_apply_refused(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    """The plan's config may not be apply's (an apply under github-reviews accepts a button merge):
    nothing is withdrawn before apply itself has refused it."""
    merge = merged_with_the_button(world, capsys)
    early = world.cli(capsys, "plan")
    assert early.code == 0, show(early)
    assert head(world, "main") == merge and world.b_id in manifest_on_main(world)
    assert world.cli(capsys, "apply").code == 3  # refused: not approved
    planned = world.cli(capsys, "plan")
    assert planned.code == 0, show(planned)
    assert world.b_id not in manifest_on_main(world)


def test_on_github_the_merged_pull_request_stays_merged_and_a_new_one_is_opened(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeGitHub(repo="org/capacity", token="ghp_test_token") as github:
        monkeypatch.setenv("GITHUB_TOKEN", "ghp_test_token")
        world.config.write_text(
            world.config.read_text()
            + f"forge: {{type: github, repo: org/capacity, baseUrl: '{github.url}'}}\n"
        )
        merge = merged_with_the_button(world, capsys)
        (first,) = github.pulls.values()
        github.merge(first.number, "carol", sha=merge)  # the button: GitHub marks it merged
        assert world.cli(capsys, "apply").code == 3
        planned = world.cli(capsys, "plan")
        assert planned.code == 0, show(planned)
        assert world.b_id not in manifest_on_main(world)
        opened = [p for p in github.pulls.values() if p.state == "open"]
        assert len(opened) == 1 and opened[0].number != first.number, [
            (p.number, p.state) for p in github.pulls.values()
        ]
        assert opened[0].head == PROPOSAL and first.state == "closed"
        assert world.cli(capsys, "approve", "scale-down").code == 0
        assert world.cli(capsys, "apply").code == 0
        assert world.desired() == 1
