"""A plan as manifest edits and commit messages. Pure: texts in, texts out.

The manifest's `desired` counts the instances listed under `removeInstances` (docs/manifest.md), so:
- on main, a group's `desired` becomes the plan's target plus the approved removals still listed;
  applied removals are settled (dropped, `desired` lowered), cancelled ones dropped;
- a proposal only adds lines under `removeInstances`, never touches `desired`, which keeps it
  mergeable while main moves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from reconciler.domain.markdown import BODY_BUDGET, GITHUB_BODY_LIMIT, Part, code, fit, inline
from reconciler.gitops.manifest import GroupEntry, Manifest, Removal, parse_manifest
from reconciler.gitops.manifest_edit import ManifestEditor
from reconciler.gitops.trailers import (
    CapacityMessage,
    Change,
    InstanceRemoval,
    Reason,
    build_message,
    summarize,
)
from reconciler.planning.types import SCALE_DOWN, CommittedGroup, GroupPlan, Plan


def committed_groups(manifest: Manifest | None) -> dict[str, CommittedGroup]:
    """What the planner needs from the manifest on main (its baseline, DESIGN §3.1)."""
    if manifest is None:
        return {}
    return {
        g.name: CommittedGroup(
            desired=g.target, remove_instances=g.removal_ids, hold=g.hold, headroom=g.headroom
        )
        for g in manifest.groups
    }


def new_removals(group: GroupPlan, entry: GroupEntry | None) -> tuple[str, ...]:
    """The instances this plan proposes, as opposed to those already approved on main."""
    approved = set(entry.removal_ids) if entry else set()
    return tuple(r.instance_id for r in group.removals if r.instance_id not in approved)


@dataclass(frozen=True)
class Edited:
    text: str
    message: str
    changes: tuple[Change, ...]
    restores: tuple[Change, ...] = ()  # desired lowered by hand on main without names, put back


def main_edits(plan: Plan, text: str | None, label: str) -> Edited | None:
    """Scale-ups, new groups, mirror updates, cancellations and settled removals, as one commit on
    main; None when the manifest would not change. Its subject names everything it changes (a
    commit that settles removals is never titled as a mirror update)."""
    editor = ManifestEditor.new(plan.cluster, label) if text is None else ManifestEditor(text, label)
    before = editor.manifest() if text is not None else Manifest(plan.cluster)
    changes: list[Change] = []
    reasons: list[Reason] = []
    added: list[str] = []
    restores: list[Change] = []
    work = _Bookkeeping()
    for group in plan.groups:
        entry = before.group(group.name)
        proposed = new_removals(group, entry)
        target = group.desired + len(proposed)  # on main, proposals are not decided yet
        if entry is None:
            editor.add_group(group.name, target, group.min_size, group.max_size)
            if target != group.current:
                changes.append(Change(group.name, group.current, target))
                reasons.append(Reason(group.name, "new group; " + "; ".join(group.reasons)))
            else:
                added.append(group.name)
            continue
        if (entry.min_size, entry.max_size) != (group.min_size, group.max_size):
            editor.set_mirror(group.name, group.min_size, group.max_size)
            work.mirrored.append(group.name)
            work.notes.append(
                f"{group.name}: mirror of the ASG's min/max sizes, {entry.min_size}..{entry.max_size} -> "
                f"{group.min_size}..{group.max_size}"
            )
        if group.held:
            continue
        listed = set(entry.removal_ids)
        kept = {r.instance_id for r in group.removals if r.instance_id in listed}
        gone = listed - kept - set(group.cancelled_removals)
        cancelled = listed & set(group.cancelled_removals)
        if gone:
            editor.settle_removals(group.name, gone)
            work.settled[group.name] = (entry.desired, entry.desired - len(gone))
        if group.cancelled_removals:
            editor.shrink_removals(group.name, kept)
            if cancelled:
                work.cancelled[group.name] = len(cancelled)
        editor.set_desired(group.name, target + len(kept))
        if target != entry.target:
            changes.append(Change(group.name, entry.target, target))
            if group.action != SCALE_DOWN and group.reasons:
                reasons.append(Reason(group.name, "; ".join(group.reasons)))
            elif entry.target > target:
                reasons.append(Reason(group.name, f"{len(gone)} approved removal(s) applied"))
            else:  # rule 2: a decrease is named instances; the plan proposes them, if any may go
                restores.append(changes[-1])
                reasons.append(Reason(group.name, f"{RESTORED}: restored"))
        if gone:  # apply already took the instances; main drops them
            settle = (
                f"{len(gone)} approved removal(s) applied, settled: {', '.join(sorted(gone))} "
                f"dropped from removeInstances, desired {entry.desired} -> {entry.desired - len(gone)}"
            )
            if target == entry.target:
                work.notes.append(f"{group.name}: {settle}")
            elif group.action != SCALE_DOWN and group.reasons:  # beside a scale-up: its own reason too
                reasons.append(Reason(group.name, settle))
        if cancelled and target == entry.target:
            named = ", ".join(sorted(cancelled))
            work.notes.append(f"{group.name}: {len(cancelled)} approved removal(s) cancelled: {named}")
    if not editor.changed:
        return None
    if added:
        reasons.append(Reason("", f"new group(s) at their current size: {', '.join(added)}"))
    # the bookkeeping of groups whose target stays: trailers name a group only where it changes
    reasons += [Reason("", note) for note in work.notes]
    restored = tuple(c.group for c in restores)
    summary = work.summary(summarize(changes, restores=restored) if changes else "", added)
    message = CapacityMessage(
        cluster=plan.cluster,
        summary=summary,
        changes=tuple(changes),
        reasons=tuple(reasons),
        restores=restored,
    )
    return Edited(editor.render(), build_message(message), tuple(changes), tuple(restores))


@dataclass
class _Bookkeeping:
    """What a commit on main changes besides targets, so its subject can say so."""

    mirrored: list[str] = field(default_factory=list)
    # group -> its desired before and after the settle alone (a raise beside it is a Capacity-Change)
    settled: dict[str, tuple[int, int]] = field(default_factory=dict)
    cancelled: dict[str, int] = field(default_factory=dict)  # group -> approved removals cancelled
    notes: list[str] = field(default_factory=list)  # why, per group, for the commit's reasons

    def summary(self, changes: str, added: list[str], limit: int = 100) -> str:
        """Every kind of edit the commit makes, capacity changes first, each as short as it fits."""
        long, short = [changes] if changes else [], [changes] if changes else []
        if self.settled:
            long.append(
                "settle applied removals: "
                + ", ".join(f"{g} {before} -> {after}" for g, (before, after) in self.settled.items())
            )
            settled = sum(before - after for before, after in self.settled.values())
            short.append(f"settle {settled} applied removal(s) in {len(self.settled)} group(s)")
        if self.cancelled:
            long.append("cancel removals: " + ", ".join(f"{g} ({n})" for g, n in self.cancelled.items()))
            short.append(
                f"cancel {sum(self.cancelled.values())} removal(s) in {len(self.cancelled)} group(s)"
            )
        if added:
            long.append(f"track {', '.join(added)} at current size")
            short.append(f"track {len(added)} new group(s) at their current size")
        if self.mirrored:
            long.append(f"mirror min/max of {', '.join(self.mirrored)}")
            short.append(f"mirror min/max of {len(self.mirrored)} group(s)")
        text = "; ".join(long)
        if len(text) <= limit:
            return text or "update the manifest"
        return "; ".join(short)


RESTORED = "desired lowered by hand without naming instances"


def restore_note(change: Change, branch: str) -> str:
    """What `plan` says when it puts back a desired lowered by hand: nothing changes in AWS (its
    table says "no change"), main gets its number back, and why."""
    return (
        f"restored {change.group} {change.before} -> {change.after} on {branch}: {RESTORED} (a decrease "
        "is only ever named instances, and apply never lowers desired by a number; the plan proposes "
        "the instances to remove when some may go)"
    )


@dataclass(frozen=True)
class ProposalDraft:
    text: str
    message: str
    removals: Mapping[str, tuple[str, ...]]  # group -> every instance the proposal lists
    title: str
    body: str


def proposal_draft(plan: Plan, main_text: str, label: str, branch: str) -> ProposalDraft | None:
    """The proposal branch's manifest: main's, plus the instances this plan wants removed. None when
    the plan proposes nothing."""
    editor = ManifestEditor(main_text, label)
    manifest = editor.manifest()
    removals: dict[str, tuple[str, ...]] = {}
    changes: list[Change] = []
    reasons: list[Reason] = []
    named: list[InstanceRemoval] = []
    rows: list[ProposalRow] = []
    for group in plan.groups:
        entry = manifest.group(group.name)
        proposed = set(new_removals(group, entry))
        if not proposed or entry is None:
            continue
        details = [r for r in group.removals if r.instance_id in proposed]
        listed = list(entry.remove_instances) + [Removal(r.instance_id, r.node or "") for r in details]
        editor.set_removals(group.name, listed)
        removals[group.name] = tuple(r.instance_id for r in listed)
        changes.append(Change(group.name, entry.target, entry.target - len(details)))
        reasons.append(Reason(group.name, f"{len(details)} node(s) unneeded; their pods fit elsewhere"))
        named += [InstanceRemoval(group.name, r.instance_id) for r in details]
        for r in details:
            rows.append(
                ProposalRow(
                    group.name,
                    f"{entry.target} -> {entry.target - len(details)}",
                    r.instance_id,
                    r.node or "-",
                    "-" if r.utilization is None else f"{r.utilization:.0%}",
                    r.reason,
                    r.since.strftime("%Y-%m-%d %H:%M UTC") if r.since else "-",
                )
            )
    if not removals:
        return None
    message = CapacityMessage(
        cluster=plan.cluster,
        summary=summarize(changes),
        changes=tuple(changes),
        reasons=tuple(reasons),
        removals=tuple(named),
        proposal=branch,
    )
    title = f"capacity({plan.cluster}): {summarize(changes)}"
    body = proposal_body(plan.cluster, label, rows)
    return ProposalDraft(editor.render(), build_message(message), removals, title, body)


@dataclass(frozen=True)
class ProposalRow:
    """One instance of a scale-down proposal, as its pull request's table shows it."""

    group: str
    change: str  # "3 -> 2"
    instance: str
    node: str
    utilisation: str
    reason: str
    since: str


def proposal_body(cluster: str, label: str, rows: list[ProposalRow], budget: int = BODY_BUDGET) -> str:
    """The proposal's pull-request text: a row per instance, every cell escaped (node and group
    names, reasons: none can add a row, a link or HTML), cut to what GitHub accepts (about 400 rows
    would not fit) with a line saying where the whole list is."""
    head = [
        f"Scale-down proposed by asg-reconciler for cluster {code(cluster)}.",
        "",
        "Merging approves draining and terminating exactly these instances; apply re-checks each",
        "one on live state first and refuses proposals older than `scaleDown.proposalTTL`.",
        "",
    ]
    table = [
        f"| {inline(r.group)} | {inline(r.change)} | {code(r.instance, in_table=True)} | {inline(r.node)} "
        f"| {inline(r.utilisation)} | {inline(r.reason)} | {inline(r.since)} |"
        for r in rows
    ]
    header = [
        "| group | from -> to | instance | node | utilisation | why removable | since |",
        "|---|---|---|---|---|---|---|",
    ]
    tail = [
        "",
        "The bot rewrites this branch only while it holds nothing but its own commits and no",
        "approval; after that it may only shrink the set or close the proposal.",
    ]
    summary = (
        f"**This description is shortened** to fit GitHub's limit of {GITHUB_BODY_LIMIT:,} characters: "
        f"every instance is listed in `removeInstances` of {code(label)} and in the commit message."
    )
    return fit(head, [Part(table, "instances", header), Part([], "", tail)], budget, summary)


def listed_removals(text: str | None, label: str) -> dict[str, tuple[str, ...]]:
    """Every group's `removeInstances` in a manifest text (empty groups left out)."""
    if text is None:
        return {}
    manifest = parse_manifest(text, label)
    return {g.name: g.removal_ids for g in manifest.groups if g.removal_ids}
