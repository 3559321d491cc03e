"""A proposal a person broke is refused whole, decided before anything is pushed: main still gets
its scale-up, the state branch is saved, the broken branch is left as the person left it, and the
plan says the way out (issue 28: "remove 6 of 6" made plan commit a scale-up, fail before saving
its state, and fail every cycle after, naming no way out)."""

from __future__ import annotations

import pytest

from tests.support import k8s_objects as k
from tests.support.apply_steps import show
from tests.support.apply_world import MAIN_PATH, PROPOSAL, World, pod
from tests.support.git import BOB, git

STATE = "asg-reconciler/prod/state"


def head(world: World, branch: str) -> str | None:
    found = git("for-each-ref", "--format=%(objectname)", f"refs/heads/{branch}", cwd=world.remote).strip()
    return found or None


def test_a_proposal_removing_every_instance_is_refused_before_any_push(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.cli(capsys, "plan").code == 0
    proposed = git("show", f"{PROPOSAL}:{MAIN_PATH}", cwd=world.remote)
    (a_id, _), _ = world.instances
    # a person "helps": both instances listed, 2 of 2 (below minSize 1)
    broken = proposed.replace(f"- {world.b_id}", f"- {world.b_id}\n      - {a_id}", 1)
    assert broken != proposed
    edited = BOB.commit(world.remote, PROPOSAL, {MAIN_PATH: broken}, "remove them all")
    main_before = head(world, "main")
    # meanwhile pods arrive that need a node, and node-b is busy again
    world.kube.put(pod("web-b2", "node-b", "1500m"))
    world.kube.put(k.pod("job-0", "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="j"))

    planned = world.cli(capsys, "plan")
    assert planned.code == 3, show(planned)  # the proposal refused; the rest written
    said = planned.out + planned.err
    assert "Traceback" not in said
    assert f"proposal {PROPOSAL} refused" in said
    assert f"git push origin --delete {PROPOSAL}" in said  # the way out, as a command
    assert MAIN_PATH in said  # the error names the file
    assert head(world, PROPOSAL) == edited  # left exactly as the person left it
    assert head(world, "main") != main_before  # the urgent scale-up still landed
    assert "scale up general 2 -> 3" in git("log", "-1", "--format=%s", "main", cwd=world.remote)
    assert head(world, STATE) is not None  # and the planner's memory was saved

    again = world.cli(capsys, "plan")  # the next cycle: the same word, nothing written twice
    assert again.code == 3, show(again)
    assert head(world, "main") == git("rev-parse", "main", cwd=world.remote).strip()
    assert git("rev-list", "--count", f"{main_before}..main", cwd=world.remote).strip() == "1"

    status = world.cli(capsys, "status")  # status names it too, with the way out
    assert status.code == 0, show(status)
    assert f"scale-down proposal {PROPOSAL} cannot be read" in status.out, status.out
    assert f"git push origin --delete {PROPOSAL}" in status.out, status.out

    git("push", "--quiet", str(world.remote), f":refs/heads/{PROPOSAL}", cwd=world.remote)  # the way out
    mended = world.cli(capsys, "plan")
    assert mended.code == 0, show(mended)
