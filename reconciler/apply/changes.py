"""Which commit of main brought each approved removal (DESIGN §3 rule 4). Pure.

Apply gates the commit that put an instance into `removeInstances` on the first-parent history of
main (for a merged proposal, the merge commit), not the commit it is applying: approving a later
scale-up must never launder an unapproved removal that rode along. The walk goes back from the
target until every removal listed there has been traced, so a removal refused by an earlier apply
is gated again, every time, until it is applied or withdrawn.

A commit whose manifest cannot be read hides which commit added a removal listed after it: the
walk stops there and the removal is untraceable (refused until it is withdrawn and approved again
by a commit whose own diff adds it). Crediting it to the newer commit that first lists it readably
would let a person's fix of an unrelated line launder what the broken commit slipped in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from reconciler.gitops.manifest import Manifest


@dataclass(frozen=True)
class Unreadable:
    """A commit whose manifest exists but does not parse; `why` is the parser's one line."""

    why: str


@dataclass(frozen=True)
class Introduced:
    """An approved removal and the first-parent commit of main that added it."""

    group: str
    instance_id: str
    commit: str
    unreadable: str = ""  # set: the commit whose unreadable manifest hides where it came from
    why: str = ""  # and why that manifest cannot be read


def removals(manifest: Manifest | None) -> set[tuple[str, str]]:
    if manifest is None:
        return set()
    return {(g.name, i) for g in manifest.groups for i in g.removal_ids}


def trace_removals(
    first_parents: Iterable[str], manifest_at: Callable[[str], Manifest | Unreadable | None]
) -> dict[tuple[str, str], Introduced]:
    """`first_parents`: main's first-parent chain from the target backwards. Each (group, instance)
    listed at the target maps to the newest commit whose first parent did not list the instance
    (under any group: a group renamed by one commit and named back by the next does not make the
    instance new), or, when the walk meets a manifest it cannot read first, to an entry naming that
    commit in `unreadable`. `manifest_at` gives None for a commit without a manifest and Unreadable
    for a broken one. A manifest that is missing at a commit but exists further back was deleted:
    restoring it does not add what it lists, so that counts as unreadable too; only a manifest that
    never existed before lists nothing."""
    chain = list(first_parents)
    if not chain:
        return {}
    target = manifest_at(chain[0])
    wanted = {i: g for g, i in removals(None if isinstance(target, Unreadable) else target)}
    found: dict[tuple[str, str], Introduced] = {}
    current = chain[0]
    for index, parent in enumerate(chain[1:], start=1):
        if not wanted:
            break
        older = manifest_at(parent)
        if older is None and any(manifest_at(sha) is not None for sha in chain[index + 1 :]):
            older = Unreadable("the manifest was deleted here and restored later")
        if isinstance(older, Unreadable):
            for instance, group in sorted(wanted.items()):
                found[(group, instance)] = Introduced(group, instance, current, parent, older.why)
            return found
        before = {i for _, i in removals(older)}
        groups_before = {g.name for g in older.groups} if older is not None else set()
        for instance, group in sorted(wanted.items()):
            if instance in before:
                continue
            if group not in groups_before and _existed(group, chain[index + 1 :], manifest_at):
                why = f"group {group} was deleted here and restored later"
                found[(group, instance)] = Introduced(group, instance, current, parent, why)
            else:
                found[(group, instance)] = Introduced(group, instance, current)
        wanted = {i: g for i, g in wanted.items() if i in before}
        current = parent
    for instance, group in sorted(wanted.items()):  # listed since the root commit
        found[(group, instance)] = Introduced(group, instance, current)
    return found


def _existed(
    group: str, older: Iterable[str], manifest_at: Callable[[str], Manifest | Unreadable | None]
) -> bool:
    """Whether any older commit's manifest had `group` (an unreadable one might have: counts)."""
    for sha in older:
        found = manifest_at(sha)
        if isinstance(found, Unreadable) or (found is not None and found.group(group) is not None):
            return True
    return False
