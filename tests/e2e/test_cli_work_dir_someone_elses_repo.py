"""A careless operator points `git.workDir` at a git repository of their own (their checkout of the
capacity repository, say). The tool must not take it over: it rewrote that repository's `origin`
URL and fetch refspec and deleted its lock files. Refused, naming the setting and the fix, exit 2,
the repository as it was."""

from __future__ import annotations

import pytest

from tests.e2e.test_cli_unreadable_paths import one_line, with_work_dir
from tests.support.apply_world import World
from tests.support.git import git, needs_ssh_keygen

pytestmark = needs_ssh_keygen


@pytest.mark.parametrize("bare", [False, True])
def test_a_work_dir_that_is_someone_elses_repository(
    world: World, capsys: pytest.CaptureFixture[str], bare: bool
) -> None:
    mine = world.tmp / "my-checkout"
    git("init", "--quiet", *(["--bare"] if bare else []), str(mine))
    git("remote", "add", "origin", "git@example.com:me/mine.git", cwd=mine)
    config = (mine / ("config" if bare else ".git/config")).read_text()
    with_work_dir(world, mine)
    for command in ("plan", "apply"):
        result = world.cli(capsys, command)
        assert result.code == 2, result.out + result.err
        line = one_line(result.err)
        assert f"git.workDir: {mine}" in line and "not made by asg-reconciler" in line, line
    status = world.cli(capsys, "status")  # read-only: it says why the manifest is not compared
    assert status.code == 0 and "not made by asg-reconciler" in status.out, status.out
    assert (mine / ("config" if bare else ".git/config")).read_text() == config
