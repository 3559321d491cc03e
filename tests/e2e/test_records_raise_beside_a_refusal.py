"""A run that raises a group while refusing one of its removals is recorded as "refused" (the run
was refused) and is still a raise (found by an attack on issue 20): it counts as the group's last
scale-up for scaleDown.delayAfterScaleUp, and it is written past the observation cap, so the next
run does not take our own raise for drift."""

from __future__ import annotations

import pytest

from reconciler.gitops.record_reading import OBSERVATIONS_PER_COMMIT, last_scale_up, worth_writing
from reconciler.gitops.records import ApplyRecord, GroupRecord, decode_note
from tests.support.apply_world import MAIN_PATH, World, manifest_on_main
from tests.support.git import git


def bot_commit(world: World, text: str, message: str) -> None:
    """Pushed with the plan bot's credentials: unsigned."""
    clone = world.tmp / f"bot-{message.split()[0]}"
    git("clone", "--quiet", str(world.remote), str(clone))
    (clone / MAIN_PATH).write_text(text)
    git("add", MAIN_PATH, cwd=clone)
    git("-c", "commit.gpgsign=false", "commit", "--quiet", "-m", message, cwd=clone)
    git("push", "--quiet", "origin", "main", cwd=clone)


def test_a_raise_next_to_a_refused_removal_counts_as_the_groups_last_scale_up(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.cli(capsys, "plan").code == 0
    assert world.cli(capsys, "apply").code == 0 and world.desired() == 2
    text = manifest_on_main(world)
    listed = text.replace("removeInstances: []", f"removeInstances: [{world.b_id}]").replace(
        "desired: 2", "desired: 3"
    )  # one more node wanted, and node-b's instance slipped in for removal
    bot_commit(world, listed, "scale up general 2 -> 3")
    result = world.cli(capsys, "apply")
    assert result.code == 3, result.out + result.err  # the unapproved removal is refused...
    assert world.desired() == 3, result.out  # ...and the group was raised: an AWS write
    (group,) = world.note()["records"][-1]["groups"]
    assert group["desiredAfter"] == 3
    sha = git("rev-parse", "main", cwd=world.remote).strip()
    text = git("notes", "--ref=refs/notes/asg-reconciler", "show", sha, cwd=world.remote)
    records = decode_note(text, sha).records
    assert "general" in last_scale_up(records), (
        f"recorded as {group['action']!r}: delayAfterScaleUp never sees this raise ({group['detail']})"
    )


def test_a_raise_next_to_a_refusal_is_recorded_past_the_observation_cap() -> None:
    from datetime import UTC, datetime

    at = datetime(2026, 3, 1, tzinfo=UTC)
    before = ApplyRecord(
        "1" * 40,
        at,
        False,
        (GroupRecord("general", "refused", 2, 2, detail="i-b: not approved"),),
        "a",
        "prod",
    )
    raised = ApplyRecord(
        "1" * 40,
        at,
        False,
        (GroupRecord("general", "refused", 2, 3, detail="raised desired 2 -> 3; i-b: not approved"),),
        "a",
        "prod",
    )
    assert worth_writing(raised, before, on_commit=OBSERVATIONS_PER_COMMIT), (
        "SetDesiredCapacity left unrecorded"
    )
