"""scaleDown.windows through the CLI, against moto and the fake Kubernetes API: an approved removal
outside every window waits (exit 0, not a refusal) and its instance stays, still approved; inside one
it is applied. The windows are placed around the real clock, as the CLI reads it."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from reconciler.gitops.manifest import parse_manifest
from tests.support.apply_world import MAIN_PATH, PROPOSAL, World, approved, untouched
from tests.support.check_world import signed_branch
from tests.support.git import git, needs_ssh_keygen

pytestmark = needs_ssh_keygen


def with_window(world: World, schedule: str, duration: str, max_nodes: int) -> None:
    """The world's config, its scaleDown line (`{unneededTime: 0s}`) with this one window."""
    lines = world.config.read_text().splitlines(keepends=True)
    (index,) = [i for i, line in enumerate(lines) if line.startswith("scaleDown: {unneededTime: 0s")]
    body = f"{{schedule: '{schedule}', duration: {duration}, maxNodes: {max_nodes}}}"
    lines[index] = f"scaleDown: {{unneededTime: 0s, windows: [{body}]}}\n"
    world.config.write_text("".join(lines))


def closed_window(world: World) -> None:
    """Opens twelve hours from now, for an hour: closed while the test runs."""
    with_window(world, f"0 {(datetime.now(UTC).hour + 12) % 24} * * *", "1h", 1)


def open_window(world: World) -> None:
    """Opened at the start of this hour, for two: open while the test runs."""
    with_window(world, f"0 {datetime.now(UTC).hour} * * *", "2h", 1)


def test_outside_the_window_the_removal_waits_and_inside_it_is_applied(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    closed_window(world)
    planned = world.cli(capsys, "plan")
    assert planned.code == 0, planned.err
    assert "! scale-down window closed: approved removals wait until " in planned.out
    approved(world, capsys)

    waiting = world.cli(capsys, "apply")
    assert waiting.code == 0, waiting.out + waiting.err  # waiting is no refusal: the loop would page
    assert f"{world.b_id}: waits for the scale-down window: opens " in waiting.out
    assert "; stays approved" in waiting.out
    untouched(world)
    on_main = parse_manifest(git("show", f"main:{MAIN_PATH}", cwd=world.remote), "main")
    assert on_main.group("general").removal_ids == (world.b_id,)  # type: ignore[union-attr]
    record = world.note()["records"][-1]
    assert record["groups"][0]["action"] != "refused"
    assert f"{world.b_id}: waits for the scale-down window" in record["groups"][0]["detail"]

    dry = world.cli(capsys, "apply", "--dry-run", "--output", "json")
    assert dry.code == 0, dry.out + dry.err
    assert json.loads(dry.out)["nodeGroups"][0]["waitingForWindow"] == [world.b_id]

    kept = world.cli(capsys, "plan", "--dry-run", "--output", "json")
    assert kept.code == 0, kept.err
    warnings = json.loads(kept.out)["warnings"]
    assert any(w.startswith("scale-down window closed: approved removals wait until ") for w in warnings)

    open_window(world)
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert world.desired() == 1 and world.b_id not in world.in_service()
    assert world.kube.get_object("Pod", "shop", "web-b") is None
    assert world.note()["records"][-1]["groups"][0]["terminated"] == [world.b_id]


def test_inside_the_window_max_nodes_caps_one_run(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.add_node("node-c")  # an idle third node: the plan proposes it and node-b
    open_window(world)
    assert world.cli(capsys, "plan").code == 0
    proposal = parse_manifest(git("show", f"{PROPOSAL}:{MAIN_PATH}", cwd=world.remote), PROPOSAL)
    proposed = proposal.group("general").removal_ids  # type: ignore[union-attr]
    assert len(proposed) == 2, proposed
    assert world.cli(capsys, "approve", "scale-down").code == 0
    first = world.cli(capsys, "apply")
    assert first.code == 0, first.out + first.err  # one applied, one waiting for a later run
    assert "waits for a later run: the scale-down window allows 1 removal(s) per apply run" in first.out
    assert world.desired() == 2
    second = world.cli(capsys, "apply")
    assert second.code == 0, second.out + second.err
    assert world.desired() == 1 and not set(proposed) & world.in_service()


def test_check_agrees_with_apply_dry_run_a_signed_removal_waits(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """`check --ref` is apply --dry-run of the branch with REF landed: outside every window the
    approved removal waits there too, and the check passes (exit 0), as apply would."""
    closed_window(world)
    assert world.cli(capsys, "plan").code == 0
    proposed = git("show", f"{PROPOSAL}:{MAIN_PATH}", cwd=world.remote)
    sha = signed_branch(world, "alice/scale-down", proposed, "scale down general, signed")
    result = world.cli(capsys, "check", "--ref", "alice/scale-down")
    assert result.code == 0, result.out + result.err
    assert f"approved: {sha[:12]} is signed by" in result.out
    assert f"{world.b_id}: waits for the scale-down window: opens " in result.out
    assert "would drain" not in result.out
    untouched(world)
