"""`apply.drift: adopt`, the plan's half: what is adopted, when, and the manifest edit. Pure."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from reconciler.domain.model import Instance, NodeGroup
from reconciler.gitops.adopt import (
    Adoption,
    adopted_groups,
    adoption,
    adoption_edit,
    intended,
    left_before,
    newest_record,
)
from reconciler.gitops.manifest import parse_manifest
from reconciler.gitops.plan_edits import committed_groups
from reconciler.gitops.record_reading import Records
from reconciler.gitops.records import ApplyRecord, GroupRecord
from reconciler.gitops.trailers import SOURCE_EXTERNAL, Change, parse_message
from reconciler.planning.baseline import baseline
from reconciler.planning.types import CommittedGroup

T = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
C1, C2, C3 = "1" * 40, "2" * 40, "3" * 40
IDS = tuple(f"i-{n:08x}" for n in range(1, 11))


def asg(desired: int, ids: Sequence[str] = (), *, max_size: int = 10, state: str = "InService") -> NodeGroup:
    present = tuple(ids) or IDS[:desired]
    return NodeGroup(
        name="general",
        min_size=0,
        max_size=max_size,
        desired=desired,
        instances=tuple(Instance(i, state, "us-east-1a", "t3.small", T) for i in present),
        zones=("us-east-1a",),
        tags={},
    )


def adopted(after: int, name: str = "general") -> GroupRecord:
    return GroupRecord(name, "none", after, after, adopted=True)


def listed(desired: int, *removals: str, hold: bool = False) -> CommittedGroup:
    """The group as a manifest with `desired` (counting `removals`) lists it."""
    return CommittedGroup(desired=desired - len(removals), remove_instances=removals, hold=hold)


def manifest(desired: int, *removals: str, max_size: int = 10) -> str:
    items = "".join(f"\n      - {i}" for i in removals) if removals else " []"
    return (
        "cluster: prod\nnodeGroups:\n  general:\n"
        f"    removeInstances:{items}\n    hold: false\n    desired: {desired}\n"
        f"    minSize: 0\n    maxSize: {max_size}\n"
    )


# ---------------------------------------------------------------------------------- when to adopt


def test_lowered_by_hand_is_adopted_as_the_new_target() -> None:
    found = adoption(asg(3), adopted(3), [listed(5), listed(5)], aws_before=5)
    assert found == Adoption("general", 5, 3, 5, 3)
    assert found.change == Change("general", 5, 3)
    assert found.reason.text == "desired changed outside the tool (5 -> 3), adopted (apply.drift adopt)"


def test_raised_by_hand_is_adopted_too() -> None:
    assert adoption(asg(5), adopted(5), [listed(3)], aws_before=3) == Adoption("general", 3, 5, 3, 5)


def test_without_an_earlier_record_the_change_is_told_from_main() -> None:
    assert adoption(asg(3), adopted(3), [listed(4)]) == Adoption("general", 4, 3, 4, 3)


def test_aws_changed_again_since_apply_adopted_is_left_to_the_next_apply() -> None:
    assert adoption(asg(2), adopted(3), [listed(5)]) is None


def test_main_already_matching_commits_nothing_so_each_adoption_is_written_once() -> None:
    # the adoption commit itself is on main now: the tip says 3, the commit apply adopted on said 5
    assert adoption(asg(3), adopted(3), [listed(3), listed(5)]) is None


def test_a_decision_committed_after_the_adoption_wins() -> None:
    assert adoption(asg(3), adopted(3), [listed(6), listed(5)]) is None  # a scale-up since
    # adopted, then scaled up back to the old value before apply ran: not adopted a second time
    assert adoption(asg(3), adopted(3), [listed(5), listed(3), listed(5)]) is None


def test_a_commit_that_cannot_be_read_or_lacks_the_group_stops_it() -> None:
    assert adoption(asg(3), adopted(3), [listed(5), None, listed(5)]) is None
    assert adoption(asg(3), adopted(3), []) is None


def test_a_held_group_is_left_alone() -> None:
    assert adoption(asg(3), adopted(3), [listed(5, hold=True)]) is None


def test_main_is_read_only_as_far_as_needed() -> None:
    def since() -> Iterator[CommittedGroup | None]:
        yield listed(6)
        yield listed(5)
        raise AssertionError("read past the first difference")

    assert adoption(asg(3), adopted(3), since()) is None


def test_a_merged_proposal_or_a_settled_removal_is_not_a_move() -> None:
    """Neither changes the desired apply aims for, so the adoption still answers the same question."""
    ids = IDS[:3]
    merged = listed(5, ids[0])  # desired 5, one approved removal still in the ASG: apply aims for 5
    assert adoption(asg(3, ids), adopted(3), [merged, listed(5)]) is not None
    settled = listed(4)  # desired 5 listing i-gone, then settled to 4: apply aims for 4 throughout
    assert adoption(asg(3, ids), adopted(3), [settled, listed(5, IDS[9])]) is not None


# ------------------------------------------------------------------- approved removals stay consistent


def test_an_approved_removal_still_in_the_asg_stays_and_is_not_counted_twice() -> None:
    """Main: desired 5 listing i-1 (target 4). A person lowers AWS to 3; i-1 is still there. The
    adopted target is 2 (apply terminates i-1 with a decrement, as approved): desired 3, i-1 listed."""
    ids = IDS[:3]
    group, tip = asg(3, ids), listed(5, ids[0])
    found = adoption(group, adopted(3), [tip])
    assert found == Adoption("general", 4, 2, 5, 3)
    edit = adoption_edit(manifest(5, ids[0]), "main", "prod", [found], {"general": group})
    after = parse_manifest(edit.text, "main").group("general")
    assert after is not None and after.desired == 3 and after.removal_ids == (ids[0],)
    base = baseline(group, committed_groups(parse_manifest(edit.text, "main"))["general"])
    assert (base.unapplied_increase, base.manual_decrease, base.approved_present) == (0, 0, (ids[0],))


def test_an_approved_removal_aws_already_took_is_left_for_the_planner_to_settle() -> None:
    """AWS lowered 5 -> 3 and terminated the approved i-a itself: the target is 3, i-a stays listed
    (so desired 4) and the next plan settles it as an applied removal."""
    gone = IDS[9]
    group = asg(3, IDS[:3])
    found = adoption(group, adopted(3), [listed(5, gone)])
    assert found == Adoption("general", 4, 3, 4, 3)  # apply aimed for 4: i-a's decrement was taken
    edit = adoption_edit(manifest(5, gone), "main", "prod", [found], {"general": group})
    after = parse_manifest(edit.text, "main").group("general")
    assert after is not None and after.desired == 4 and after.removal_ids == (gone,)
    assert intended(group, committed_groups(parse_manifest(edit.text, "main"))["general"]) == 3


@given(
    aws=st.integers(0, 8),
    main=st.integers(0, 10),
    present=st.integers(0, 3),
    gone=st.integers(0, 2),
)
def test_after_an_adoption_apply_has_nothing_to_raise_or_lower(
    aws: int, main: int, present: int, gone: int
) -> None:
    """Whatever main listed: the adopted manifest makes apply aim exactly at AWS's desired, keeps
    `removeInstances` as it was, and never adds to it."""
    instances = IDS[: max(aws, present)]
    listed_ids = (*instances[:present], *IDS[10 - gone :])
    desired = max(main, len(listed_ids))
    group = asg(aws, instances)
    found = adoption(group, adopted(aws), [listed(desired, *listed_ids)])
    if found is None:
        assert intended(group, listed(desired, *listed_ids)) == aws or aws < present
        return
    edit = adoption_edit(manifest(desired, *listed_ids), "main", "prod", [found], {"general": group})
    if not edit.adoptions:
        return  # the edit would not validate (reported as skipped)
    entry = parse_manifest(edit.text, "main").group("general")
    assert entry is not None and entry.removal_ids == listed_ids
    assert entry.target == found.after
    base = baseline(group, committed_groups(parse_manifest(edit.text, "main"))["general"])
    assert base.unapplied_increase == 0 and base.manual_decrease == 0


# --------------------------------------------------------------------------------- the commit


def test_the_commit_carries_the_external_source_and_only_the_desired_line_changes() -> None:
    group = asg(3)
    found = adoption(group, adopted(3), [listed(5)], aws_before=5)
    assert found is not None
    edit = adoption_edit(manifest(5), "main:capacity/prod.yaml", "prod", [found], {"general": group})
    assert edit.text == manifest(3)
    assert edit.adoptions == (found,) and edit.skipped == ()
    message = parse_message(edit.message)
    assert message is not None
    assert message.source == SOURCE_EXTERNAL
    assert message.cluster == "prod"
    assert message.changes == (Change("general", 5, 3),)
    assert message.reason_for("general") == (
        "desired changed outside the tool (5 -> 3), adopted (apply.drift adopt)"
    )
    assert edit.message.splitlines()[0] == "capacity(prod): adopt general 5 -> 3 (set outside the tool)"
    assert "Capacity-Source: external\n" in edit.message


def test_the_mirror_follows_the_asg_so_the_adopted_value_validates() -> None:
    group = NodeGroup("general", 0, 2, 1, (), ("us-east-1a",), {})  # min lowered to 0 by hand, then 1
    text = manifest(3, max_size=4).replace("minSize: 0", "minSize: 2")
    edit = adoption_edit(text, "main", "prod", [Adoption("general", 3, 1, 3, 1)], {"general": group})
    entry = parse_manifest(edit.text, "main").group("general")
    assert entry is not None and (entry.desired, entry.min_size, entry.max_size) == (1, 0, 2)


def test_an_adoption_that_would_not_validate_is_skipped_with_why() -> None:
    group = asg(5, IDS[:5], max_size=5)  # at max, and an applied removal still listed: desired 6
    edit = adoption_edit(
        manifest(4, IDS[9]), "main", "prod", [Adoption("general", 3, 5, 3, 5)], {"general": group}
    )
    assert edit.adoptions == () and edit.message == "" and edit.text == manifest(4, IDS[9])
    assert len(edit.skipped) == 1 and "above maxSize 5" in edit.skipped[0]


# ------------------------------------------------------------------------------------ the records


def test_only_the_newest_record_of_the_cluster_counts() -> None:
    first = ApplyRecord(C1, T, True, (GroupRecord("general", "scale-up", 2, 4),), cluster="prod")
    mine = ApplyRecord(C2, T + timedelta(minutes=5), True, (adopted(3),), cluster="prod")
    other = ApplyRecord(C3, T + timedelta(minutes=9), True, (adopted(7),), cluster="staging")
    records = Records({C3: [other], C2: [mine], C1: [first]})
    assert newest_record(records, "prod") == mine
    assert adopted_groups(newest_record(records, "prod")) == (adopted(3),)
    assert left_before(records, mine, "prod") == {"general": 4}
    later = ApplyRecord(
        C3, T + timedelta(minutes=7), True, (GroupRecord("general", "none", 3, 3),), cluster="prod"
    )
    assert adopted_groups(newest_record(Records({C3: [later], C2: [mine]}), "prod")) == ()
    assert newest_record(Records(), "prod") is None and adopted_groups(None) == ()
