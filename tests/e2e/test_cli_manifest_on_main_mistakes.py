"""Two mistakes a person makes in the manifest on main, and what every command says about them
(issue 28): a merge whose conflict was committed unresolved, and the manifest of another cluster.
Each is one line naming the file, the line or both values, and the fix; exit 2; nothing moves."""

from __future__ import annotations

import pytest

from tests.support.apply_world import World, manifest_on_main, signed_commit
from tests.support.cli import run
from tests.support.git import git, needs_ssh_keygen

pytestmark = needs_ssh_keygen

MAIN = "main:capacity/prod.yaml"


def conflicted(text: str) -> tuple[str, int]:
    """`text` as a merge leaves it when both sides changed `desired` of the same group."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("desired:"))
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    return "\n".join(
        [
            *lines[:at],
            "<<<<<<< HEAD",
            f"{indent}desired: 3",
            "=======",
            f"{indent}desired: 4",
            ">>>>>>> scale-up",
            *lines[at + 1 :],
        ]
    ) + "\n", at + 1


def test_conflict_markers_on_main_are_named_as_an_unresolved_merge(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.cli(capsys, "plan").code == 0
    text, line = conflicted(manifest_on_main(world))
    head = signed_commit(world, text, "merge with the conflict left in")
    for command, file in (("plan", MAIN), ("apply", f"{head[:12]}:capacity/prod.yaml")):
        result = world.cli(capsys, command)
        assert result.code == 2, result.out + result.err
        expected = f"unresolved merge conflict in {file} line {line}"
        assert expected in result.err and "not valid YAML" not in result.err, result.err
        assert "<<<<<<<" in result.err and "keep one side" in result.err
    status = world.cli(capsys, "status")
    assert f"unresolved merge conflict in {MAIN} line {line}" in status.out + status.err
    assert git("rev-parse", "main", cwd=world.remote).strip() == head  # plan wrote nothing
    assert world.desired() == 2


def test_validate_names_the_conflict_too(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    assert world.cli(capsys, "plan").code == 0
    text, line = conflicted(manifest_on_main(world))
    file = world.tmp / "prod.yaml"
    file.write_text(text)
    result = run(capsys, "validate", str(file))
    assert result.code == 2
    assert f"unresolved merge conflict in {file} line {line}" in result.out + result.err


def test_a_manifest_of_another_cluster_is_refused(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    assert world.cli(capsys, "plan").code == 0
    text = manifest_on_main(world)
    assert "cluster: prod\n" in text
    head = signed_commit(world, text.replace("cluster: prod\n", "cluster: staging\n"), "copied from staging")
    for command, file in (("plan", MAIN), ("apply", f"{head[:12]}:capacity/prod.yaml")):
        result = world.cli(capsys, command)
        assert result.code == 2, result.out + result.err
        line = result.err.strip()
        assert len(line.splitlines()) == 1, result.err
        assert f"{file}: cluster: 'staging'" in line and "config" in line and "'prod'" in line
        assert "git.path" in line
    status = world.cli(capsys, "status")
    assert "cluster: 'staging'" in status.out + status.err
    assert git("rev-parse", "main", cwd=world.remote).strip() == head
    assert world.desired() == 2
