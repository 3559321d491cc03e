"""`apply.drift: adopt`, the plan's half (DESIGN §3 rule 7, §5.5): the DesiredCapacity someone set
outside the tool, which apply adopted (left as it was and recorded with `adopted`), is committed to
main in a commit of its own with `Capacity-Source: external`, so history says who changed what.
Pure: records, groups and manifest texts in, an edit out; `runtime.plan_stage` does the Git.

What is adopted is AWS's desired as apply should leave it, never a number of removals:
- the new target is AWS desired minus the approved removals still in the ASG (apply terminates those,
  each with a decrement, as before). `desired` counts every listed removal, so it becomes that target
  plus `removeInstances`, which is left exactly as it is: nothing is added to it, an approved removal
  stays approved, one already gone is settled by the planner as usual. Apply then finds AWS's desired
  exactly where main wants it: it raises nothing and, as ever, lowers nothing by a number.
- only while AWS still has the value apply adopted (changed again since: apply reports it again), and
  only while main has not moved for the group since the commit apply was on when it adopted it (a
  scale-up or a hand edit committed since is newer than the adoption and wins; the adoption commit
  itself counts as moving, so each adoption is committed once).
- never for a group on `hold`, which the tool leaves alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from reconciler.domain.errors import UserError
from reconciler.domain.model import NodeGroup
from reconciler.gitops.manifest import parse_manifest
from reconciler.gitops.manifest_edit import ManifestEditor
from reconciler.gitops.record_reading import last_desired
from reconciler.gitops.records import ApplyRecord, GroupRecord
from reconciler.gitops.trailers import SOURCE_EXTERNAL, CapacityMessage, Change, Reason, build_message
from reconciler.planning.baseline import baseline
from reconciler.planning.types import CommittedGroup

REASON = "desired changed outside the tool ({before} -> {after}), adopted (apply.drift adopt)"


@dataclass(frozen=True)
class Adoption:
    """One group's adopted capacity: its target on main `before` -> `after`, and the change made
    outside the tool to AWS's desired (`aws_before` -> `aws_desired`)."""

    group: str
    before: int
    after: int
    aws_before: int
    aws_desired: int

    @property
    def change(self) -> Change:
        return Change(self.group, self.before, self.after)

    @property
    def reason(self) -> Reason:
        return Reason(self.group, REASON.format(before=self.aws_before, after=self.aws_desired))


@dataclass(frozen=True)
class AdoptionEdit:
    """The manifest with the adoptions written in and the commit message (both unchanged and empty
    when none could be written); `skipped` says which could not (the manifest would not be valid)."""

    text: str
    message: str
    adoptions: tuple[Adoption, ...]
    skipped: tuple[str, ...] = ()


def newest_record(records: Mapping[str, Sequence[ApplyRecord]], cluster: str) -> ApplyRecord | None:
    """The newest apply record of `cluster` (by apply's clock), on any commit `records` holds; on a
    tie, the one appended last to the newest commit."""
    newest: ApplyRecord | None = None
    for found in records.values():
        for record in reversed(found):
            if record.cluster == cluster and (newest is None or record.applied_at > newest.applied_at):
                newest = record
    return newest


def adopted_groups(record: ApplyRecord | None) -> tuple[GroupRecord, ...]:
    return () if record is None else tuple(g for g in record.groups if g.adopted)


def left_before(
    records: Mapping[str, Sequence[ApplyRecord]], record: ApplyRecord, cluster: str
) -> dict[str, int]:
    """Each group's desired as the applies before `record` left it: where AWS was before someone
    changed it."""
    return last_desired(records, cluster, before=record.applied_at)


def intended(group: NodeGroup, committed: CommittedGroup) -> int:
    """The DesiredCapacity apply aims for under `committed`: its target plus the approved removals
    still in the ASG (each terminated with a decrement afterwards)."""
    base = baseline(group, committed)
    return base.aws_desired + base.unapplied_increase - base.manual_decrease


def adoption(
    group: NodeGroup,
    adopted: GroupRecord,
    since: Iterable[CommittedGroup | None],
    aws_before: int | None = None,
) -> Adoption | None:
    """What to commit for a group apply adopted, or None.

    `since`: the group as main lists it at each first-parent commit from main's tip back to, and
    including, the commit the record is on (None where the group is missing or the manifest cannot
    be read); read lazily, newest first, and only as far as needed. `aws_before`: AWS's desired
    before the change outside the tool (the apply before the adopting one left it), for the reason.
    """
    if group.desired != adopted.desired_after:
        return None  # changed again since apply adopted it: apply reports that first
    history = iter(since)
    tip = next(history, None)
    if tip is None or tip.hold:
        return None
    wanted = intended(group, tip)
    if wanted == group.desired:
        return None  # main already says so (adopted before, or the same value by coincidence)
    for older in history:
        if older is None or intended(group, older) != wanted:
            return None  # main moved for this group after apply adopted: the newer decision wins
    after = group.desired - len(baseline(group, tip).approved_present)
    if after < 0:
        return None
    return Adoption(
        group.name,
        tip.desired,
        after,
        wanted if aws_before is None else aws_before,
        group.desired,
    )


def adoption_edit(
    text: str,
    label: str,
    cluster: str,
    adoptions: Sequence[Adoption],
    groups: Mapping[str, NodeGroup],
) -> AdoptionEdit:
    """Main's manifest with each adoption written in: `desired` = the adopted target + the listed
    removals (which stay as they are), and the min/max mirror refreshed from the ASG. An adoption
    that would leave the manifest invalid is skipped, with why."""
    written: list[Adoption] = []
    skipped: list[str] = []
    for found in adoptions:
        editor = ManifestEditor(text, label)
        entry = editor.manifest().group(found.group)
        if entry is None:
            continue
        editor.set_desired(found.group, found.after + len(entry.remove_instances))
        group = groups.get(found.group)
        if group is not None:
            editor.set_mirror(found.group, group.min_size, group.max_size)
        edited = editor.render()
        try:
            parse_manifest(edited, label)
        except UserError as exc:
            skipped.append(f"{found.group}: not adopted ({found.change}): {exc}")
            continue
        text = edited
        written.append(found)
    if not written:
        return AdoptionEdit(text, "", (), tuple(skipped))
    changes = tuple(a.change for a in written)
    message = CapacityMessage(
        cluster=cluster,
        summary=_summary(changes),
        changes=changes,
        reasons=tuple(a.reason for a in written),
        source=SOURCE_EXTERNAL,
    )
    return AdoptionEdit(text, build_message(message), tuple(written), tuple(skipped))


def _summary(changes: Sequence[Change], limit: int = 72) -> str:
    text = f"adopt {', '.join(str(c) for c in changes)} (set outside the tool)"
    if len(text) <= limit:
        return text
    return f"adopt {len(changes)} groups' desired set outside the tool"
