"""A config or a manifest over 1 MiB is refused before it is parsed (issue 28: `validate` took 148 s
on a 7.7 MB manifest, `status` 142 s to refuse an 89 MB config): one line naming the file, its size,
the cap and the fix, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.config.documents import MAX_DOCUMENT_BYTES
from tests.support.apply_world import MAIN_PATH, World, manifest_on_main, signed_commit
from tests.support.cli import run
from tests.support.git import git, needs_ssh_keygen

CAP = f"more than the {MAX_DOCUMENT_BYTES:,} (1 MiB) a config or manifest may have"


def big_manifest(groups: int) -> str:
    lines = ["version: 1", "cluster: prod", "nodeGroups:"]
    for i in range(groups):
        lines += [
            f"  group-{i:06d}:",
            "    removeInstances:",
            f"      - i-{i:017x}  # ip-10-0-{i % 250}-{i % 200}.ec2.internal",
            "    desired: 3",
            "    minSize: 0",
            "    maxSize: 10",
        ]
    return "\n".join(lines) + "\n"


def test_validate_refuses_a_manifest_over_the_cap_before_parsing_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = big_manifest(10_000)
    assert len(text) > MAX_DOCUMENT_BYTES
    file = tmp_path / "prod.yaml"
    file.write_text(text)
    result = run(capsys, "validate", str(file))
    assert result.code == 2
    shown = (result.out + result.err).strip().splitlines()
    assert any(f"{file}: {len(text):,} bytes, {CAP}" in line for line in shown), shown


def test_a_config_over_the_cap_is_refused_by_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "asg-reconciler.yaml"
    padding = "# " + "x" * 98 + "\n"
    config.write_text("cluster: prod\nregion: us-east-1\n" + padding * (MAX_DOCUMENT_BYTES // 100 + 1))
    size = config.stat().st_size
    for command in (("status",), ("plan", "--dry-run"), ("apply",), ("history",)):
        result = run(capsys, *command, "--config", str(config))
        assert result.code == 2, result.err
        [line] = result.err.strip().splitlines()
        assert line.startswith(f"error: {config}: {size:,} bytes, {CAP}")
        assert line.endswith(
            "check that it is the file meant (--config, git.path), or restore it from its Git history"
        )


def test_a_config_that_is_a_fifo_is_refused_without_waiting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    fifo = tmp_path / "config-fifo"
    os.mkfifo(fifo)
    result = run(capsys, "status", "--config", str(fifo))
    assert result.code == 2
    assert "not a regular file" in result.err


@needs_ssh_keygen
def test_plan_and_apply_refuse_a_manifest_on_main_over_the_cap(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.cli(capsys, "plan").code == 0
    text = manifest_on_main(world)
    huge = text + "".join(f"# padding line {i:08d} {'x' * 80}\n" for i in range(MAX_DOCUMENT_BYTES // 100))
    head = signed_commit(world, huge, "a huge manifest")
    for command in ("plan", "apply"):
        result = world.cli(capsys, command)
        assert result.code == 2, result.out + result.err
        assert f"capacity/prod.yaml: {len(huge):,} bytes, {CAP}" in result.err
    assert git("rev-parse", "main", cwd=world.remote).strip() == head
    assert MAIN_PATH in result.err
    assert world.desired() == 2
