"""A commit on main says what it does (issue 28: a commit titled "mirror ASG min/max sizes" settled
five applied removals, desired 6 -> 1)."""

from __future__ import annotations

from reconciler.gitops.manifest import parse_manifest
from reconciler.gitops.plan_edits import main_edits
from reconciler.gitops.trailers import parse_message
from reconciler.planning.types import GroupPlan, Plan

IDS = [f"i-0{n}aaaaaaaaaaaaaa" for n in range(5)]
MANIFEST = (
    "version: 1\ncluster: prod\nnodeGroups:\n  general:\n    removeInstances:\n"
    + "".join(f"      - {i}\n" for i in IDS)
    + "    desired: 6\n    minSize: 1\n    maxSize: 10\n"
)


def plan(*groups: GroupPlan) -> Plan:
    return Plan("prod", groups, (), ())


def test_settling_applied_removals_is_named_in_the_subject() -> None:
    # apply terminated all five: AWS is at 1, the plan keeps it there
    edited = main_edits(plan(GroupPlan("general", 1, 10, 1, 1, "none")), MANIFEST, "main:m.yaml")
    assert edited is not None
    subject = edited.message.splitlines()[0]
    assert "mirror" not in subject
    assert subject == "capacity(prod): settle applied removals: general 6 -> 1"
    message = parse_message(edited.message)
    assert message is not None
    assert "5 approved removal(s) applied, settled" in message.reason_for("general")
    after = parse_manifest(edited.text, "m.yaml").group("general")
    assert after is not None and after.desired == 1 and after.removal_ids == ()


def test_a_commit_that_does_several_things_names_each() -> None:
    # the ASG's max moved to 12 and the five removals were applied: both are said
    edited = main_edits(plan(GroupPlan("general", 1, 12, 1, 1, "none")), MANIFEST, "main:m.yaml")
    assert edited is not None
    subject = edited.message.splitlines()[0]
    assert subject == "capacity(prod): settle applied removals: general 6 -> 1; mirror min/max of general"
    message = parse_message(edited.message)
    assert message is not None
    assert "1..10 -> 1..12" in message.reason_for("general")


def test_a_mirror_update_alone_is_still_titled_as_one() -> None:
    text = "version: 1\ncluster: prod\nnodeGroups:\n  general: {desired: 2, minSize: 1, maxSize: 10}\n"
    edited = main_edits(plan(GroupPlan("general", 1, 12, 2, 2, "none")), text, "main:m.yaml")
    assert edited is not None
    assert edited.message.splitlines()[0] == "capacity(prod): mirror min/max of general"


def test_many_groups_shorten_to_counts() -> None:
    names = [f"group-with-a-long-name-{n}" for n in range(6)]
    text = "version: 1\ncluster: prod\nnodeGroups:\n" + "".join(
        f"  {n}: {{desired: 2, minSize: 1, maxSize: 10}}\n" for n in names
    )
    edited = main_edits(plan(*(GroupPlan(n, 1, 12, 2, 2, "none") for n in names)), text, "main:m.yaml")
    assert edited is not None
    assert edited.message.splitlines()[0] == "capacity(prod): mirror min/max of 6 group(s)"


def test_a_settle_beside_a_scale_up_says_the_settle_numbers_not_the_net_move() -> None:
    """Found by a new user's trial (the demo's own history): apply took the one approved removal
    (2 -> 1), then pods went pending and the plan raised the group to 3 in the same commit. The
    subject said 'settle applied removals: general 2 -> 3': a settle never raises anything."""
    text = (
        "version: 1\ncluster: prod\nnodeGroups:\n  general:\n    removeInstances:\n"
        f"      - {IDS[0]}\n    desired: 2\n    minSize: 1\n    maxSize: 10\n"
    )
    up = GroupPlan("general", 1, 10, 1, 3, "scale-up", ("2 pending pod(s) need 2 × m5.large",), new_nodes=2)
    edited = main_edits(plan(up), text, "main:m.yaml")
    assert edited is not None
    subject = edited.message.splitlines()[0]
    assert subject == "capacity(prod): scale up general 1 -> 3; settle applied removals: general 2 -> 1", (
        subject
    )
    message = parse_message(edited.message)
    assert message is not None
    assert "1 approved removal(s) applied, settled" in " ".join(r.text for r in message.reasons), (
        edited.message
    )
    after = parse_manifest(edited.text, "m.yaml").group("general")
    assert after is not None and after.desired == 3 and after.removal_ids == ()
