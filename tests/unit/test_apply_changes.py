"""Tracing each approved removal to the first-parent commit of main that added it (rule 4)."""

from __future__ import annotations

from reconciler.apply.changes import Introduced, Unreadable, trace_removals
from reconciler.gitops.manifest import GroupEntry, Manifest, Removal


def manifest(**groups: tuple[str, ...]) -> Manifest:
    return Manifest(
        "prod",
        tuple(GroupEntry(n, 5, remove_instances=tuple(Removal(i) for i in ids)) for n, ids in groups.items()),
    )


def test_each_removal_maps_to_the_commit_that_added_it() -> None:
    history = {  # newest first, as the first-parent walk goes
        "c4": manifest(a=("i-1", "i-2"), b=("i-9",)),  # a scale-up commit: adds nothing to remove
        "c3": manifest(a=("i-1", "i-2"), b=("i-9",)),  # merge of a proposal adding i-2 and i-9
        "c2": manifest(a=("i-1",), b=()),
        "c1": manifest(a=(), b=()),
    }
    seen: list[str] = []

    def at(sha: str) -> Manifest | None:
        seen.append(sha)
        return history.get(sha)

    found = trace_removals(["c4", "c3", "c2", "c1", "c0"], at)
    assert found == {
        ("a", "i-1"): Introduced("a", "i-1", "c2"),
        ("a", "i-2"): Introduced("a", "i-2", "c3"),
        ("b", "i-9"): Introduced("b", "i-9", "c3"),
    }
    assert seen == ["c4", "c3", "c2", "c1"]  # stops once everything is traced


def test_a_removal_withdrawn_and_added_again_is_gated_by_its_newest_addition() -> None:
    history = {"c3": manifest(a=("i-1",)), "c2": manifest(a=()), "c1": manifest(a=("i-1",))}
    assert trace_removals(["c3", "c2", "c1"], history.get)[("a", "i-1")].commit == "c3"


def test_listed_since_the_first_commit_and_empty_targets() -> None:
    history = {"c2": manifest(a=("i-1",)), "c1": manifest(a=("i-1",))}
    assert trace_removals(["c2", "c1"], history.get)[("a", "i-1")].commit == "c1"
    assert trace_removals(["c9"], lambda _sha: None) == {}
    assert trace_removals([], history.get) == {}


def test_an_unreadable_manifest_hides_where_a_removal_came_from() -> None:
    """Hole 1: the bot's P adds i-1 and breaks the manifest; a person's F fixes the broken line. F's
    own diff cannot be shown to add i-1, so nothing is credited to F."""
    broken = Unreadable("duplicate key 'desired'")
    history: dict[str, Manifest | Unreadable | None] = {
        "f": manifest(a=("i-1", "i-2")),
        "e": manifest(a=("i-1",)),  # i-2 was added by f, readably
        "p": broken,
        "o": manifest(a=()),
    }
    found = trace_removals(["f", "e", "p", "o"], history.get)
    assert found[("a", "i-2")] == Introduced("a", "i-2", "f")
    assert found[("a", "i-1")] == Introduced("a", "i-1", "e", unreadable="p", why="duplicate key 'desired'")


def test_a_broken_commit_older_than_the_addition_does_not_matter() -> None:
    history: dict[str, Manifest | Unreadable | None] = {
        "c": manifest(a=("i-1",)),
        "b": manifest(a=()),
        "a": Unreadable("bad"),
    }
    assert trace_removals(["c", "b", "a"], history.get)[("a", "i-1")] == Introduced("a", "i-1", "c")


def test_a_commit_without_a_manifest_lists_nothing() -> None:
    history: dict[str, Manifest | Unreadable | None] = {"c": manifest(a=("i-1",)), "b": None}
    assert trace_removals(["c", "b"], history.get)[("a", "i-1")] == Introduced("a", "i-1", "c")


def test_a_group_renamed_and_named_back_does_not_make_the_instance_new() -> None:
    """The bot lists i-1 under a misspelt group; a person's fix of the name must not approve i-1."""
    history: dict[str, Manifest | Unreadable | None] = {
        "f": manifest(a=("i-1",)),
        "p": manifest(x=("i-1",)),
        "o": manifest(a=()),
    }
    assert trace_removals(["f", "p", "o"], history.get)[("a", "i-1")] == Introduced("a", "i-1", "p")


def test_a_manifest_deleted_then_restored_hides_where_a_removal_came_from() -> None:
    """The bot's b adds i-1 (refused), d deletes the file, a person's revert of d restores it."""
    history: dict[str, Manifest | Unreadable | None] = {
        "r": manifest(a=("i-1",)),
        "d": None,
        "b": manifest(a=("i-1",)),
        "o": manifest(a=()),
    }
    found = trace_removals(["r", "d", "b", "o"], history.get)[("a", "i-1")]
    assert found.unreadable == "d" and "deleted" in found.why


def test_a_manifest_created_lists_what_it_lists_from_its_creation() -> None:
    history: dict[str, Manifest | Unreadable | None] = {"c": manifest(a=("i-1",)), "b": None, "a": None}
    assert trace_removals(["c", "b", "a"], history.get)[("a", "i-1")] == Introduced("a", "i-1", "c")


def test_a_group_deleted_then_restored_hides_where_its_removals_came_from() -> None:
    """With a second group the manifest still parses when one is deleted: the same laundering as a
    deleted file (the bot's b adds i-1, d deletes the group, a person's revert restores it)."""
    history: dict[str, Manifest | Unreadable | None] = {
        "r": manifest(a=("i-1",), z=()),
        "d": manifest(z=()),
        "b": manifest(a=("i-1",), z=()),
        "o": manifest(a=(), z=()),
    }
    found = trace_removals(["r", "d", "b", "o"], history.get)[("a", "i-1")]
    assert found.unreadable == "d" and "group a was deleted" in found.why
    new_group = {"c": manifest(a=("i-1",), z=()), "b": manifest(z=())}
    assert trace_removals(["c", "b"], new_group.get)[("a", "i-1")] == Introduced("a", "i-1", "c")
