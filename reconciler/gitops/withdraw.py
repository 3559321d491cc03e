"""Removals on main that apply can never accept, withdrawn so the plan can propose them again (pure).

Under `approval.mode: signed` a removal counts only if the commit whose own diff added it carries an
SSH signature by a listed key (DESIGN §3 rule 4). A proposal merged with the forge's button (GitHub
signs such merges with its own PGP key, or not at all) lists its instances on main with no such
signature: apply refuses them on every run, `approve` finds the branch already merged, and nothing
moves. The plan then takes them off `removeInstances` in a commit of its own (`desired`, which counts
them, stays: they stay in service, and nothing in AWS moves) and proposes them again on a fresh
branch, for `asg-reconciler approve`. Withdrawing is the safe direction (rule 3: the planner may
cancel a removal, never add one), so the plan may do it on evidence it reads unverified.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.gitops.manifest_edit import ManifestEditor
from reconciler.gitops.records import ApplyRecord
from reconciler.gitops.trailers import CapacityMessage, Change, Reason, build_message

WHY = "merged without an approval apply accepts"


@dataclass(frozen=True)
class Withdrawal:
    text: str
    message: str
    notes: tuple[str, ...]


def refused_by_apply(record: ApplyRecord | None, group: str, instance: str) -> bool:
    """Whether apply's newest record (unverified: withdrawing is the safe direction) refused this
    removal as not approved: evidence that apply's own approval settings refuse it too."""
    if record is None:
        return False
    return any(
        g.name == group and g.action == "refused" and f"{instance}: not approved" in g.detail
        for g in record.groups
    )


def withdrawal(
    text: str, label: str, cluster: str, refused: Mapping[tuple[str, str], str]
) -> Withdrawal | None:
    """Main's manifest without the `refused` removals ((group, instance) -> the commit that added
    them without an approval), and the commit message; None when main lists none of them."""
    editor = ManifestEditor(text, label)
    manifest = editor.manifest()
    reasons: list[Reason] = []
    changes: list[Change] = []
    notes: list[str] = []
    by_group: dict[str, list[str]] = {}
    for group, instance in sorted(refused):
        entry = manifest.group(group)
        if entry is not None and instance in entry.removal_ids:
            by_group.setdefault(group, []).append(instance)
    for group, instances in by_group.items():
        entry = manifest.group(group)
        assert entry is not None
        # `desired` counts the listed instances and stays: they stay in service (the target rises back
        # to AWS's desired), so nothing in AWS moves
        editor.shrink_removals(group, [i for i in entry.removal_ids if i not in instances])
        changes.append(Change(group, entry.target, entry.target + len(instances)))
        commits = sorted({refused[(group, i)][:12] for i in instances})
        said = (
            f"{', '.join(instances)} withdrawn from removeInstances: added by {', '.join(commits)}, "
            f"{WHY} (no SSH signature; approval.mode signed), so apply refused it on every run; desired "
            "is unchanged (nothing moves in AWS) and the plan proposes it again"
        )
        reasons.append(Reason(group, said))
        notes.append(f"{group}: {said}")
    if not by_group:
        return None
    count = sum(map(len, by_group.values()))
    message = CapacityMessage(
        cluster=cluster,
        summary=f"withdraw {count} removal(s) {WHY} ({', '.join(by_group)})",
        changes=tuple(changes),
        reasons=tuple(reasons),
    )
    return Withdrawal(editor.render(), build_message(message), tuple(notes))
