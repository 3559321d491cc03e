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
    listed at the target maps to the newest commit whose first parent did not list it, or, when an
    unreadable manifest comes first, to an entry naming that commit in `unreadable`. `manifest_at`
    gives None for a commit without a manifest (it lists nothing) and Unreadable for a broken one."""
    chain = iter(first_parents)
    current = next(chain, None)
    if current is None:
        return {}
    target = manifest_at(current)
    wanted = removals(None if isinstance(target, Unreadable) else target)
    found: dict[tuple[str, str], Introduced] = {}
    for parent in chain:
        if not wanted:
            break
        older = manifest_at(parent)
        if isinstance(older, Unreadable):
            for key in sorted(wanted):
                found[key] = Introduced(key[0], key[1], current, unreadable=parent, why=older.why)
            return found
        before = removals(older)
        for key in sorted(wanted - before):
            found[key] = Introduced(key[0], key[1], current)
        wanted &= before
        current = parent
    for key in sorted(wanted):  # listed since the root commit
        found[key] = Introduced(key[0], key[1], current)
    return found
