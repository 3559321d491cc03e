"""A kubeconfig or a `git.workDir` that cannot be read or written is a user's mistake: one line
naming the setting, the path and the fix, exit 2, never a traceback (issue 28).

The tests may run as root, for whom `chmod 000` changes nothing: unreadable is also a FIFO (whose
open() would wait for a writer for ever), bytes that are not UTF-8, a directory, and a path through
a regular file (what a read-only root filesystem does to a default cache directory: mkdir fails)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.apply_world import World
from tests.support.git import needs_ssh_keygen

pytestmark = needs_ssh_keygen


def with_kubeconfig(world: World, path: Path) -> None:
    text = world.config.read_text()
    world.config.write_text(re.sub(r"kubeconfig: '[^']*'", f"kubeconfig: '{path}'", text))


def with_work_dir(world: World, path: Path) -> None:
    text = world.config.read_text()
    world.config.write_text(re.sub(r"workDir: '[^']*'", f"workDir: '{path}'", text))


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_kubeconfig_that_is_a_directory(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    folder = world.tmp / "kube-folder"
    folder.mkdir()
    with_kubeconfig(world, folder)
    result = world.cli(capsys, "status")
    assert result.code == 2
    line = one_line(result.err)
    assert f"kubernetes.kubeconfig: {folder}" in line and "is a directory" in line
    assert "point kubernetes.kubeconfig at the kubeconfig file" in line


def test_a_kubeconfig_that_is_not_utf8(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    latin = world.tmp / "latin1-kubeconfig"
    latin.write_bytes(b"apiVersion: v1\nkind: Config\n# caf\xe9\nclusters: []\n")
    with_kubeconfig(world, latin)
    result = world.cli(capsys, "status")
    assert result.code == 2
    line = one_line(result.err)
    assert f"kubernetes.kubeconfig: {latin}:3: not UTF-8 text" in line and "save it as UTF-8" in line


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_a_kubeconfig_without_read_permission(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    locked = world.tmp / "locked-kubeconfig"
    locked.write_text("apiVersion: v1\n")
    locked.chmod(0)
    with_kubeconfig(world, locked)
    result = world.cli(capsys, "status")
    assert result.code == 2
    line = one_line(result.err)
    assert f"kubernetes.kubeconfig: {locked}: cannot read it (Permission denied)" in line


def test_a_kubeconfig_that_is_a_fifo_is_refused_without_waiting(world: World) -> None:
    """A FIFO (or any file that is not a regular one) would block open() until a writer comes."""
    fifo = world.tmp / "kubeconfig-fifo"
    os.mkfifo(fifo)
    with_kubeconfig(world, fifo)
    result = subprocess.run(
        [sys.executable, "-m", "reconciler", "status", "--config", str(world.config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "AWS_ENDPOINT_URL": world.aws.endpoint},
    )
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert f"kubernetes.kubeconfig: {fifo}: not a regular file" in line


def test_a_git_work_dir_that_cannot_be_created(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    """As under readOnlyRootFilesystem: the directory cannot be made where the config puts it."""
    blocker = world.tmp / "a-file"
    blocker.write_text("not a directory\n")
    with_work_dir(world, blocker / "work")
    result = world.cli(capsys, "status")
    assert result.code == 2
    line = one_line(result.err)
    assert f"git.workDir: {blocker / 'work'}: cannot write there" in line
    assert "emptyDir" in line


def test_a_git_work_dir_that_is_a_file(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = world.tmp / "work-file"
    blocker.write_text("not a directory\n")
    with_work_dir(world, blocker)
    for command in ("status", "plan"):
        result = world.cli(capsys, command)
        assert result.code == 2, result.err
        assert f"git.workDir: {blocker}: cannot write there" in one_line(result.err)
    assert blocker.read_text() == "not a directory\n"
