"""`simulate --trace` and `simulate trace generate --groups` on files that are not regular files: a
device never ends (/dev/zero was read into memory until the machine ran out) and a FIFO blocks its
open for ever. One line naming the file, exit 2, at once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.cli import run


def config(tmp_path: Path) -> Path:
    path = tmp_path / "asg-reconciler.yaml"
    path.write_text("cluster: prod\nregion: us-east-1\nnodeGroups: {explicit: ['0:3:a']}\n")
    return path


@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_a_trace_that_is_not_a_regular_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    if kind == "fifo":
        trace = tmp_path / "trace.fifo"
        os.mkfifo(trace)
    else:
        trace = Path("/dev/zero")
    result = run(capsys, "simulate", "--config", str(config(tmp_path)), "--trace", str(trace))
    assert result.code == 2, result.out + result.err
    [line] = result.err.strip().splitlines()
    assert f"{trace}: not a regular file" in line, line


@pytest.mark.parametrize("command", [("status",), ("plan", "--dry-run")])
@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_a_snapshot_that_is_not_a_regular_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, command: tuple[str, ...]
) -> None:
    if kind == "fifo":
        dump = tmp_path / "dump.fifo"
        os.mkfifo(dump)
    else:
        dump = Path("/dev/zero")
    result = run(capsys, *command, "--config", str(config(tmp_path)), "--snapshot", str(dump))
    assert result.code == 2, result.out + result.err
    [line] = result.err.strip().splitlines()
    assert f"{dump}: not a regular file" in line, line


def test_a_prices_file_that_is_a_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.jsonl"
    made = run(
        capsys, "simulate", "trace", "generate", "--kind", "steady", "--hours", "1", "--output", str(trace)
    )
    assert made.code == 0, made.err
    result = run(
        capsys, "simulate", "--config", str(config(tmp_path)), "--trace", str(trace), "--prices", "/dev/zero"
    )
    assert result.code == 2, result.out + result.err
    assert "/dev/zero: not a regular file" in result.err, result.err
