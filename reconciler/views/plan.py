"""A plan for people, read like `terraform plan`: one line per group, then what cannot be helped."""

from __future__ import annotations

from reconciler.planning.types import NONE, SCALE_DOWN, GroupPlan, Plan, PodOutcome
from reconciler.views.output import to_csv

CSV_COLUMNS = ("name", "minSize", "maxSize", "current", "desired", "action", "reasons", "removeInstances")


def render_plan_csv(plan: Plan) -> str:
    """One row per node group, with the JSON output's field names (pending pods are in JSON/YAML)."""
    rows = [{**g, "reasons": "; ".join(g["reasons"])} for g in plan.to_dict()["nodeGroups"]]
    return to_csv(rows, CSV_COLUMNS)


def _waiting(current: int, desired: int) -> str:
    """A group the plan leaves alone whose size still differs from AWS: main's change awaits apply."""
    if desired < current:
        return f"no change: {current - desired} approved removal(s) on main waiting for apply"
    if desired > current:
        return f"no change: +{desired - current} on main waiting for apply"
    return "no change"


def _headroom(g: GroupPlan) -> str:
    """`2 × (cpu 1, memory 2Gi): all have room; 1 node of desired 3 is for it (1 added, 0 kept)`."""
    room = g.headroom
    assert room is not None
    placed = "all have room" if not room.reason else room.reason
    if room.nodes:
        verb = "is" if room.nodes == 1 else "are"
        share = (
            f"{room.nodes} node{'s' if room.nodes != 1 else ''} of desired {g.desired} {verb} for it"
            f" ({room.added} added, {room.kept} kept)"
        )
    else:
        share = "no node of desired is there only for it (free room on nodes needed anyway)"
    return f"{room.headroom.describe()}: {placed}; {share}"


def _place(outcome: PodOutcome) -> str:
    return outcome.node_group or f"node {outcome.node} (no node group)"


def render_plan_table(plan: Plan) -> str:
    lines = [f"Plan for cluster {plan.cluster}:", ""]
    width = max((len(g.name) for g in plan.groups), default=0)
    added = removed = cancelled = 0
    for g in plan.groups:
        delta = g.desired - g.current
        sign = "~" if g.action != NONE else " "
        change = f"{g.current} -> {g.desired}" if g.desired != g.current else f"{g.current}"
        delta_text = f"({delta:+d})" if delta else ""
        reason = "; ".join(g.reasons) if g.reasons else _waiting(g.current, g.desired)
        lines.append(f"  {sign} {g.name.ljust(width)}  {change:<9} {delta_text:<6} {reason}".rstrip())
        added += g.new_nodes
        cancelled += len(g.cancelled_removals)
        removed += len(g.removals) if g.action == SCALE_DOWN else 0
    if not plan.groups:
        lines.append("  (no node groups)")
    not_helped = [o for o in plan.pending if not o.placed]
    helped = [o for o in plan.pending if o.placed]
    if helped:
        lines += ["", f"Pending pods with a place ({len(helped)}):"]
        lines += [f"  {o.pod} -> {_place(o)}{f' ({o.reason})' if o.reason else ''}" for o in helped[:50]]
        if len(helped) > 50:
            lines.append(f"  ... and {len(helped) - 50} more")
    if not_helped:
        lines += ["", f"Pending pods no group can help ({len(not_helped)}):"]
        lines += [f"  {o.pod}: {o.reason}" for o in not_helped]
    rooms = [g for g in plan.groups if g.headroom is not None]
    if rooms:
        lines += ["", "Headroom (room kept free per group, from the manifest):"]
        lines += [f"  {g.name.ljust(width)}  {_headroom(g)}" for g in rooms]
    if plan.unremovable:
        lines += ["", f"Nodes below the scale-down threshold that stay ({len(plan.unremovable)}):"]
        lines += [
            f"  {u.node}{f' ({u.node_group})' if u.node_group else ''}: {u.reason}" for u in plan.unremovable
        ]
    if plan.warnings:
        lines += ["", "Warnings:"] + [f"  ! {w}" for w in plan.warnings]
    kept = f", {cancelled} approved removal(s) cancelled" if cancelled else ""
    lines += ["", f"Plan: {added} node(s) to add, {removed} to remove{kept}."]
    return "\n".join(lines) + "\n"
