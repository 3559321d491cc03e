"""A manifest built to hang or crash every stage, committed by anyone who can push: a billion laughs
under a group's `x-` key (the schema allows `x-` keys), 5,000 levels of nesting, a latin-1 comment.
`validate`, `plan --dry-run`, `check --ref` and `apply` each end at once with exit 2 and one line
naming the file and the line; nothing changes in Git or AWS (moto, the fake Kubernetes API and a
bare repository, as for apply's own tests)."""

from __future__ import annotations

import pytest

from tests.support.apply_world import MAIN_PATH, PROPOSAL, World, manifest_on_main
from tests.support.cli import Result, run
from tests.support.deadline import deadline
from tests.support.git import BOB, git, needs_ssh_keygen

pytestmark = needs_ssh_keygen

LIMIT_S = 60.0  # a hang guard per command (the bomb ran until killed), far above what one needs


def cli(world: World, capsys: pytest.CaptureFixture[str], *args: str) -> Result:
    with deadline(LIMIT_S):
        if args[0] == "validate":  # validate takes files only, no --config
            return run(capsys, *args)
        result: Result = world.cli(capsys, *args)
        return result


def laughs() -> str:
    """~1 KB that expands to 10^9 strings: 9 levels of 10 aliases, under the group's `x-lol` key."""
    lines = ["    x-lol:", "      a: &a [" + ", ".join(['"lol"'] * 10) + "]"]
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"      {name}: &{name} [" + ", ".join([f"*{previous}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def deep() -> str:
    return "    x-deep: " + "[" * 5000 + "]" * 5000 + "\n"


def with_payload(manifest: str, payload: str) -> tuple[str, int]:
    """`manifest` with `payload` as the first keys of group general, and the payload's first line."""
    lines = manifest.splitlines(keepends=True)
    at = lines.index("  general:\n") + 1
    return "".join([*lines[:at], payload, *lines[at:]]), at + 1


def remote_refs(world: World) -> str:
    return git("for-each-ref", "--format=%(refname) %(objectname)", cwd=world.remote)


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


@pytest.mark.parametrize(
    ("payload", "line_offset", "says"),
    [(laughs, 1, "anchor &a: YAML anchors and aliases are refused"), (deep, 0, "nested more than 100")],
    ids=["billion-laughs", "5000-deep"],
)
def test_a_bomb_on_main_ends_every_stage_at_once_with_one_line_and_changes_nothing(
    world: World, capsys: pytest.CaptureFixture[str], payload: object, line_offset: int, says: str
) -> None:
    assert world.cli(capsys, "plan").code == 0
    text, first = with_payload(manifest_on_main(world), payload())  # type: ignore[operator]
    line = first + line_offset
    sha = BOB.commit(world.remote, "main", {MAIN_PATH: text}, "capacity: notes for general")
    refs, desired, in_service = remote_refs(world), world.desired(), world.in_service()
    local = world.tmp / "prod.yaml"
    local.write_text(text)

    validated = cli(world, capsys, "validate", str(local))
    assert validated.code == 2, validated.out + validated.err
    assert f"{local}:{line}: {says}" in validated.out + validated.err

    for args in (["plan", "--dry-run"], ["apply"], ["apply", "--dry-run"]):
        result = cli(world, capsys, *args)
        assert result.code == 2, f"{args}: {result.out}{result.err}"
        message = one_line(result.err)
        assert f":{MAIN_PATH}:{line}: {says}" in message, (args, message)

    checked = cli(world, capsys, "check", "--ref", "main")  # its report is Markdown, HTML-escaped
    assert checked.code == 2, checked.out + checked.err
    assert f"- error: {sha[:12]}:{MAIN_PATH}:{line}: " in checked.out
    assert says.split(": ")[-1] in checked.out and "Traceback" not in checked.out + checked.err

    assert remote_refs(world) == refs  # no record, no state, no proposal pushed
    assert world.desired() == desired and world.in_service() == in_service


def test_a_bomb_in_a_pull_request_is_refused_by_check(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.cli(capsys, "plan").code == 0
    text, first = with_payload(manifest_on_main(world), laughs())
    main = git("rev-parse", "main", cwd=world.remote).strip()
    sha = BOB.commit(world.remote, "bob/notes", {MAIN_PATH: text}, "notes", parents=[main])
    refs = remote_refs(world)
    checked = cli(world, capsys, "check", "--ref", "bob/notes")
    assert checked.code == 2, checked.out + checked.err
    assert f"- error: {sha[:12]}:{MAIN_PATH}:{first + 1}: anchor " in checked.out
    assert "YAML anchors and aliases are refused" in checked.out
    assert remote_refs(world) == refs


def test_a_latin1_manifest_on_main_is_exit_2_naming_the_line_and_the_fix(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.cli(capsys, "plan").code == 0
    data = manifest_on_main(world).encode() + b"# caf\xe9 au lait\n"
    line = data.count(b"\n")
    BOB.commit(world.remote, "main", {MAIN_PATH: data}, "capacity: a note in latin-1")
    refs, desired = remote_refs(world), world.desired()
    local = world.tmp / "prod.yaml"
    local.write_bytes(data)
    fix = "save it as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)"

    validated = cli(world, capsys, "validate", str(local))
    assert validated.code == 2, validated.out + validated.err
    assert f"{local}:{line}: not UTF-8 text (byte 0xe9 in column 6); {fix}" in validated.out + validated.err

    for args in (["plan", "--dry-run"], ["plan"], ["apply"], ["check", "--ref", "main"]):
        result = cli(world, capsys, *args)
        assert result.code == 2, f"{args}: {result.out}{result.err}"
        message = one_line(result.err)
        said = f":{MAIN_PATH}:{line}: not UTF-8 text (byte 0xe9 in column 6); {fix} and commit it"
        assert said in message, (args, message)
        assert "Traceback" not in result.out + result.err
    assert remote_refs(world) == refs and world.desired() == desired


def test_approve_refuses_a_latin1_proposal_in_one_line(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """`approve` reads the manifests it would merge with git show: not UTF-8 is unreadable, never a
    UnicodeDecodeError traceback, and nothing is merged."""
    assert world.cli(capsys, "plan").code == 0
    proposed = git("show", f"{PROPOSAL}:{MAIN_PATH}", cwd=world.remote).encode() + b"# caf\xe9\n"
    BOB.commit(world.remote, PROPOSAL, {MAIN_PATH: proposed}, "a note in latin-1")
    refs = remote_refs(world)
    result = cli(world, capsys, "approve", "scale-down")
    assert result.code == 3, result.out + result.err
    message = one_line(result.err)
    line = proposed.count(b"\n")
    assert f":{MAIN_PATH}:{line}: not UTF-8 text (byte 0xe9 in column 6)" in message
    assert "nothing was merged" in message and remote_refs(world) == refs
