"""No idle Git writes (issue 20): a `run` with nothing to do pushes no apply record and no state
commit; a cycle that raises a group pushes exactly one record. Counted on the bare remote, as a
Git host would see it: the commits of `refs/notes/asg-reconciler` and of the state branch."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.apply_world import NOTES, World
from tests.support.git import git
from tests.support.run_process import RunProcess, wait_for
from tests.support.run_world import pending

pytestmark = pytest.mark.xdist_group("timing")

STATE = "refs/heads/asg-reconciler/prod/state"


def pushes(world: World, ref: str) -> int:
    """Commits on `ref` in the bare remote (0 while it does not exist): one per push of it."""
    found = subprocess.run(
        ["git", "rev-list", "--count", ref, "--"],
        cwd=world.remote,
        capture_output=True,
        text=True,
        check=False,
    )
    return int(found.stdout.strip()) if found.returncode == 0 else 0


def note_bytes(world: World) -> int:
    sha = git("rev-parse", "main", cwd=world.remote).strip()
    return len(git("notes", f"--ref={NOTES}", "show", sha, cwd=world.remote))


def cycles(run: RunProcess, stage: str) -> float:
    return run.metric("asg_reconciler_cycles_total", stage=stage) or 0.0


def test_an_idle_run_pushes_nothing_and_a_scale_up_pushes_one_record(world: World) -> None:
    keys = {"interval": "300ms", "applyPollInterval": "300ms"}
    with RunProcess(world.config, stages="plan, apply", keys=keys) as run:
        wait_for(lambda: pushes(world, NOTES) >= 1, 30, "the first record", log=run.output)
        wait_for(lambda: cycles(run, "apply") >= 2, 30, "a settled apply cycle", log=run.output)
        notes, state, size = pushes(world, NOTES), pushes(world, STATE), note_bytes(world)
        idle_from = cycles(run, "apply")
        wait_for(lambda: cycles(run, "apply") >= idle_from + 5, 30, "five idle apply cycles", log=run.output)
        wait_for(lambda: cycles(run, "plan") >= 5, 30, "five plan cycles", log=run.output)
        assert pushes(world, NOTES) == notes, run.output()  # nothing new: no record
        assert pushes(world, STATE) == state  # rule 9: the state branch only when it changes
        assert note_bytes(world) == size  # the note on main's tip did not grow

        pending(world, "big-1")
        wait_for(lambda: world.desired() == 3, 20, "the scale-up", log=run.output)
        raised_at = cycles(run, "apply")
        wait_for(lambda: cycles(run, "apply") >= raised_at + 4, 30, "idle cycles after it", log=run.output)
        assert pushes(world, NOTES) == notes + 1, run.output()  # exactly one: the raise
        assert run.stop() == 0
