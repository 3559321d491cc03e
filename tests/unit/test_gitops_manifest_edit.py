"""Editing a manifest changes only the edited values: everything else stays byte-for-byte."""

from __future__ import annotations

import difflib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.domain.errors import UserError
from reconciler.gitops.manifest import Removal, parse_manifest
from reconciler.gitops.manifest_edit import (
    AddGroup,
    ManifestEditor,
    RemoveGroup,
    SetDesired,
    SetMirror,
    SetRemovals,
    SettleRemovals,
    ShrinkRemovals,
    apply_edits,
    new_manifest_text,
)
from reconciler.gitops.textmerge import carry_over

# Deliberately untidy: odd spacing, quoting, a flow map, 4-space indents in one group, comments and
# blank lines everywhere. ruamel alone would normalise several of these lines.
HAND = """\
---
# Capacity for prod-eks.   Edited by people AND the bot.
version:   1
cluster: "prod-eks"    # quoted on purpose

nodeGroups:

  # --- general purpose ---
  asg-a:
    removeInstances: []     # approved, not applied
    hold:  false
    desired: 5        # raised by hand for the sale
    minSize: 0        # mirror
    maxSize: 10
  'asg-b':
    removeInstances:
    - i-0123456789abcdef0   # ip-10-0-1-2.ec2.internal
    - i-0123456789abcdef1 # ip-10-0-1-3

    hold: true
    desired: 3
    minSize: 1
    maxSize: 6
    x-note: 'keep   spacing'


  spot-c:   {removeInstances: [], hold: false, desired: 0, minSize: 0, maxSize: 20}
# trailing comment
"""


def diff(before: str, after: str) -> list[str]:
    """Only the changed lines, as -/+ lines."""
    return [
        line.rstrip("\n")
        for line in difflib.unified_diff(before.splitlines(True), after.splitlines(True), n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def test_no_edit_is_identity() -> None:
    assert apply_edits(HAND, "m", []) == HAND
    assert apply_edits(HAND, "m", [SetDesired("asg-a", 5), SetMirror("asg-b", 1, 6)]) == HAND
    editor = ManifestEditor(HAND, "m")
    assert not editor.changed and editor.render() == HAND


def test_set_desired_changes_one_number_and_keeps_the_comment() -> None:
    out = apply_edits(HAND, "m", [SetDesired("asg-a", 7)])
    assert diff(HAND, out) == [
        "-    desired: 5        # raised by hand for the sale",
        "+    desired: 7        # raised by hand for the sale",
    ]


def test_two_numbers_in_two_groups() -> None:
    out = apply_edits(HAND, "m", [SetDesired("asg-a", 10), SetDesired("asg-b", 4)])
    assert diff(HAND, out) == [
        "-    desired: 5        # raised by hand for the sale",
        "+    desired: 10       # raised by hand for the sale",
        "-    desired: 3",
        "+    desired: 4",
    ]
    assert parse_manifest(out, "m").group("asg-b") is not None


def test_set_removals_on_an_empty_list_writes_a_block_with_node_names() -> None:
    removals = (Removal("i-00000000000000001", "ip-10-0-9-1"), Removal("i-00000000000000002"))
    out = apply_edits(HAND, "m", [SetRemovals("asg-a", removals)])
    assert diff(HAND, out) == [
        "-    removeInstances: []     # approved, not applied",
        "+    removeInstances:        # approved, not applied",
        "+    - i-00000000000000001  # ip-10-0-9-1",
        "+    - i-00000000000000002",
    ]
    group = parse_manifest(out, "m").group("asg-a")
    assert group is not None and group.remove_instances == removals and group.desired == 5


def test_shrink_keeps_the_remaining_line_untouched() -> None:
    out = apply_edits(HAND, "m", [ShrinkRemovals("asg-b", frozenset({"i-0123456789abcdef1"}))])
    assert diff(HAND, out) == ["-    - i-0123456789abcdef0   # ip-10-0-1-2.ec2.internal"]


def test_shrink_to_nothing_and_never_grow() -> None:
    out = apply_edits(HAND, "m", [ShrinkRemovals("asg-b", frozenset())])
    assert diff(HAND, out) == [
        "-    removeInstances:",
        "-    - i-0123456789abcdef0   # ip-10-0-1-2.ec2.internal",
        "-    - i-0123456789abcdef1 # ip-10-0-1-3",
        "+    removeInstances: []",
    ]
    # keeping ids that are not there adds nothing
    assert apply_edits(HAND, "m", [ShrinkRemovals("asg-a", frozenset({"i-00000000000000009"}))]) == HAND


def test_settle_drops_applied_removals_and_lowers_desired() -> None:
    out = apply_edits(
        HAND, "m", [SettleRemovals("asg-b", frozenset({"i-0123456789abcdef0", "i-0000000000000000f"}))]
    )
    assert diff(HAND, out) == [
        "-    - i-0123456789abcdef0   # ip-10-0-1-2.ec2.internal",
        "-    desired: 3",
        "+    desired: 2",
    ]


def test_mirror_and_flow_group() -> None:
    out = apply_edits(HAND, "m", [SetMirror("spot-c", 1, 30)])
    assert diff(HAND, out) == [
        "-  spot-c:   {removeInstances: [], hold: false, desired: 0, minSize: 0, maxSize: 20}",
        "+  spot-c: {removeInstances: [], hold: false, desired: 0, minSize: 1, maxSize: 30}",
    ]


def test_add_group_appends_in_the_tools_key_order() -> None:
    out = apply_edits(HAND, "m", [AddGroup("asg-new", 2, 0, 8)])
    added = [line for line in diff(HAND, out) if line.startswith("+")]
    assert [line for line in diff(HAND, out) if line.startswith("-")] == []
    assert added == [
        "+  asg-new:",
        "+    removeInstances: []",
        "+    hold: false",
        "+    desired: 2",
        "+    minSize: 0",
        "+    maxSize: 8",
    ]
    assert parse_manifest(out, "m").names == ("asg-a", "asg-b", "spot-c", "asg-new")


def test_remove_group_keeps_the_comment_of_the_next_one() -> None:
    out = apply_edits(HAND, "m", [RemoveGroup("asg-b")])
    assert all(line.startswith("-") for line in diff(HAND, out))
    assert "\n\n\n  spot-c:" in out
    assert parse_manifest(out, "m").names == ("asg-a", "spot-c")


def test_missing_keys_are_inserted_in_order() -> None:
    text = "cluster: c\nnodeGroups:\n  g:\n    desired: 1\n    x-team: a\n"
    out = apply_edits(text, "m", [SetMirror("g", 0, 3), SetRemovals("g", (Removal("i-00000000000000001"),))])
    assert out == (
        "cluster: c\nnodeGroups:\n  g:\n    removeInstances:\n      - i-00000000000000001\n"
        "    desired: 1\n    minSize: 0\n    maxSize: 3\n    x-team: a\n"
    )


def test_new_manifest_then_groups() -> None:
    editor = ManifestEditor.new("c1", "capacity/c1.yaml")
    assert editor.manifest().groups == ()
    editor.add_group("a", 1, 0, 3)
    editor.add_group("b", 2, hold=True)
    text = editor.render()
    assert text.startswith(new_manifest_text("c1").split("nodeGroups")[0])
    manifest = parse_manifest(text, "m")
    assert [(g.name, g.desired, g.hold, g.min_size) for g in manifest.groups] == [
        ("a", 1, False, 0),
        ("b", 2, True, None),
    ]
    assert editor.is_held("b") and not editor.is_held("a") and editor.has_group("a")


def test_errors() -> None:
    with pytest.raises(ValueError, match="not in the manifest"):
        apply_edits(HAND, "m", [SetDesired("ghost", 1)])
    with pytest.raises(ValueError, match="already"):
        apply_edits(HAND, "m", [AddGroup("asg-a", 1)])
    with pytest.raises(UserError, match=r"^m:4: not valid YAML"):
        ManifestEditor("cluster: x\nnodeGroups:\n  - [\n", "m")
    with pytest.raises(UserError, match="mapping"):
        ManifestEditor("- 1\n", "m")
    broken = ManifestEditor(HAND.replace("desired: 3", "desired: 30"), "m")
    assert broken.problems() and "above maxSize" in broken.problems()[0].message
    with pytest.raises(UserError):
        broken.manifest()


def test_four_space_indent_is_kept_for_new_blocks() -> None:
    text = "cluster: c\nnodeGroups:\n    g:\n        removeInstances: []\n        desired: 2\n"
    out = apply_edits(text, "m", [SetRemovals("g", (Removal("i-00000000000000001"),))])
    assert out == (
        "cluster: c\nnodeGroups:\n    g:\n        removeInstances:\n            - i-00000000000000001\n"
        "        desired: 2\n"
    )


GROUPS = ("asg-a", "asg-b", "spot-c")
edits = st.lists(
    st.one_of(
        st.builds(SetDesired, st.sampled_from(GROUPS), st.integers(3, 6)),
        st.builds(SetMirror, st.sampled_from(GROUPS), st.integers(0, 1), st.integers(10, 40)),
        st.builds(
            ShrinkRemovals, st.sampled_from(GROUPS), st.frozensets(st.sampled_from(["i-0123456789abcdef1"]))
        ),
        st.builds(
            SetRemovals,
            st.sampled_from(GROUPS),
            st.lists(
                st.sampled_from(["i-00000000000000001", "i-00000000000000002"]), unique=True, max_size=2
            ).map(lambda ids: tuple(Removal(i, "n") for i in ids)),
        ),
    ),
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(edits)
def test_any_edits_render_to_the_edited_data(
    chosen: list[SetDesired | SetMirror | ShrinkRemovals | SetRemovals],
) -> None:
    editor = ManifestEditor(HAND, "m")
    for edit in chosen:
        editor.apply(edit)
    text = editor.render()
    reread = ManifestEditor(text, "m")
    assert reread.manifest(check=False) == editor.manifest(check=False)
    # lines no edit touched survive byte-for-byte
    for line in (
        "# Capacity for prod-eks.   Edited by people AND the bot.",
        "version:   1",
        "    x-note: 'keep   spacing'",
    ):
        assert line in text.splitlines()


def test_carry_over_edge_cases() -> None:
    assert carry_over("a\n", "a\n", "b\n") == "b\n"
    assert carry_over("A\nb\n", "a\nb\n", "a\nb\n") == "A\nb\n"
    assert carry_over("A\nb\nc\n", "a\nb\nc\n", "a\nb\nC\n") == "A\nb\nC\n"
    # a normalisation and an edit on the same line: the edit wins
    assert carry_over("A\n", "a\n", "x\n") == "x\n"
    # insertions on both sides at the same place keep both, original first
    assert carry_over("a\nO\nb\n", "a\nb\n", "a\nE\nb\n") == "a\nO\nE\nb\n"
