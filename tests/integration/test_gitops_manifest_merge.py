"""An approved scale-down proposal stays mergeable while main keeps moving (the manifest's key order)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from reconciler.gitops.manifest import Removal, parse_manifest
from reconciler.gitops.manifest_edit import (
    AddGroup,
    Edit,
    SetDesired,
    SetMirror,
    SetRemovals,
    SettleRemovals,
    apply_edits,
)
from tests.support.git import ALICE, BOT, MANIFEST_PATH, git, show


def merge_tree(repo: Path, ours: str, theirs: str) -> tuple[bool, str]:
    """(clean, resulting manifest) of merging `theirs` into `ours`, without a working tree."""
    result = subprocess.run(
        ["git", "merge-tree", "--write-tree", ours, theirs],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    tree = result.stdout.split("\n", 1)[0].strip()
    return result.returncode == 0, show(repo, f"{tree}:{MANIFEST_PATH}") if result.returncode == 0 else ""


def edit_on(repo: Path, branch: str, parent: str, edits: list[Edit], message: str) -> str:
    text = show(repo, f"{parent}:{MANIFEST_PATH}")
    return BOT.commit(
        repo, branch, {MANIFEST_PATH: apply_edits(text, MANIFEST_PATH, edits)}, message, parents=[parent]
    )


def test_proposal_merges_cleanly_over_scale_ups_mirror_updates_and_new_groups(seeded_remote: Path) -> None:
    base = git("rev-parse", "main", cwd=seeded_remote).strip()
    removals = (Removal("i-0123456789abcdef0", "ip-10-0-1-2"), Removal("i-0123456789abcdef1", "ip-10-0-1-3"))
    edit_on(seeded_remote, "proposal", base, [SetRemovals("asg-a", removals)], "propose")
    # main moves on: every kind of change the planner writes there, in both groups
    tip = edit_on(seeded_remote, "main", base, [SetDesired("asg-a", 4), SetDesired("asg-b", 2)], "scale up")
    tip = edit_on(seeded_remote, "main", tip, [SetMirror("asg-a", 1, 12), SetMirror("asg-b", 0, 6)], "mirror")
    tip = edit_on(seeded_remote, "main", tip, [AddGroup("asg-c", 1, 0, 3)], "new group")
    clean, merged = merge_tree(seeded_remote, "main", "proposal")
    assert clean
    group = parse_manifest(merged, MANIFEST_PATH).group("asg-a")
    assert group is not None
    assert (group.desired, group.min_size, group.max_size, group.removal_ids) == (
        4,
        1,
        12,
        ("i-0123456789abcdef0", "i-0123456789abcdef1"),
    )
    assert group.target == 2
    # after apply, main settles the removals; that merges with nothing pending
    settled = apply_edits(merged, MANIFEST_PATH, [SettleRemovals("asg-a", frozenset(group.removal_ids))])
    after = parse_manifest(settled, MANIFEST_PATH).group("asg-a")
    assert after is not None and (after.desired, after.removal_ids, after.target) == (2, (), 2)


def test_a_person_changing_the_same_lines_is_a_real_conflict(seeded_remote: Path) -> None:
    base = git("rev-parse", "main", cwd=seeded_remote).strip()
    edit_on(seeded_remote, "proposal", base, [SetRemovals("asg-a", (Removal("i-0123456789abcdef0"),))], "p")
    text = show(seeded_remote, f"{base}:{MANIFEST_PATH}")
    ALICE.commit(
        seeded_remote,
        "main",
        {MANIFEST_PATH: text.replace("removeInstances: []", "removeInstances: [i-0123456789abcdef9]", 1)},
        "hand-written removal",
    )
    clean, _ = merge_tree(seeded_remote, "main", "proposal")
    assert not clean


HEADROOM = '    headroom:\n      replicas: 2\n      requests: {cpu: "1", memory: 2Gi}\n'


def test_a_headroom_change_and_a_proposal_both_merge_while_main_moves(seeded_remote: Path) -> None:
    """`headroom` kept as a group's last key: a reviewed headroom change (a person's PR) and the bot's
    proposal both merge cleanly while scale-ups, mirror updates and new groups land on main."""
    seed = show(seeded_remote, f"main:{MANIFEST_PATH}")
    with_headroom = seed.replace("    maxSize: 10\n", "    maxSize: 10\n" + HEADROOM, 1)
    base = ALICE.commit(seeded_remote, "main", {MANIFEST_PATH: with_headroom}, "keep room for a burst")
    edit_on(seeded_remote, "proposal", base, [SetRemovals("asg-a", (Removal("i-0123456789abcdef0"),))], "p")
    raised = with_headroom.replace("replicas: 2", "replicas: 4").replace('cpu: "1"', 'cpu: "2"')
    ALICE.commit(seeded_remote, "headroom", {MANIFEST_PATH: raised}, "more headroom", parents=[base])
    tip = edit_on(seeded_remote, "main", base, [SetDesired("asg-a", 4), SetDesired("asg-b", 2)], "scale up")
    tip = edit_on(seeded_remote, "main", tip, [SetMirror("asg-a", 1, 12), SetMirror("asg-b", 0, 6)], "mirror")
    edit_on(seeded_remote, "main", tip, [AddGroup("asg-c", 1, 0, 3)], "new group")
    clean, merged = merge_tree(seeded_remote, "main", "headroom")
    assert clean
    group = parse_manifest(merged, MANIFEST_PATH).group("asg-a")
    assert group is not None and group.headroom is not None
    assert (group.desired, group.max_size, group.headroom.describe()) == (4, 12, "4 × (cpu 2, memory 2Gi)")
    ALICE.commit(seeded_remote, "main", {MANIFEST_PATH: merged}, "merge the headroom change")
    clean, merged = merge_tree(seeded_remote, "main", "proposal")
    assert clean
    group = parse_manifest(merged, MANIFEST_PATH).group("asg-a")
    assert group is not None and group.headroom is not None
    assert (group.removal_ids, group.headroom.replicas) == (("i-0123456789abcdef0",), 4)
