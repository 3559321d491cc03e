"""The status document of the `run` loop: what `kubectl get configmap asg-reconciler-status -o yaml`
shows, in the spirit of cluster-autoscaler's `cluster-autoscaler-status` (clusterstate/api/types.go:
per node group the cloud provider target, min/max, node counts and scale-up backoff).

Pure. The document is written only when its text changes (reconciler/kube/status_configmap.py), so
it holds nothing that moves while nothing happens:

- no "checked at" time: the ConfigMap's annotation `asg-reconciler.dev/last-updated` says when the
  document last changed, which is when something in it changed;
- a stage's result is its outcome (ok, summary, commit), with a time only when the loop keeps one
  per outcome (`StageResult.since`, kept by `settle()`): a time taken every cycle would rewrite the
  ConfigMap every cycle;
- the open proposal's age in whole hours (an hourly write at most), plus when it was opened when the
  caller says what time it is (`now`);
- from the plan, numbers and instance ids only: its reasons carry durations ("unneeded for 14m").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

from reconciler.domain.inventory import Inventory
from reconciler.planning.types import SCALE_UP, GroupPlan, Plan
from reconciler.telemetry.events import cannot_help, triggered_scale_up


@dataclass(frozen=True)
class StageResult:
    """How a stage's last cycle ended."""

    stage: str
    finished_at: datetime
    ok: bool
    summary: str
    commit: str = ""
    since: datetime | None = None  # first cycle that ended this way (settle()); shown when set

    def same_outcome(self, other: StageResult | None) -> bool:
        return other is not None and (self.stage, self.ok, self.summary, self.commit) == (
            other.stage,
            other.ok,
            other.summary,
            other.commit,
        )


def settle(previous: StageResult | None, current: StageResult) -> StageResult:
    """`current`, with `since` kept from `previous` while the outcome is the same (else its own
    finish time): the document may then say since when a stage ends this way without changing
    every cycle."""
    if current.same_outcome(previous):
        assert previous is not None
        return replace(current, since=previous.since or previous.finished_at)
    return replace(current, since=current.finished_at)


def timestamp(when: datetime) -> str:
    """RFC 3339 in UTC to the second, as kubectl prints times."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def coarse_age(seconds: float) -> str:
    """An age that changes at most once an hour: "under 1h", "5h", "3d 2h"."""
    hours = int(max(0.0, seconds) // 3600)
    if hours == 0:
        return "under 1h"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h" if days else f"{hours}h"


def status_document(
    cluster: str,
    plan: Plan | None,
    last: Mapping[str, StageResult],
    proposal: Mapping[str, tuple[str, ...]] | None,
    proposal_age_seconds: float | None,
    suspended: str = "",
    *,
    inventory: Inventory | None = None,
    proposal_branch: str = "",
    now: datetime | None = None,
) -> dict[str, Any]:
    """The document for `render_status`. `plan`: the last plan (None before the first); `last`:
    each stage's last result; `proposal`: the open scale-down proposal, group -> instance ids;
    `suspended`: what the kill switch says, "" when off; `inventory`: the plan's observation, for
    node counts per group (Ready, NotReady, instances not registered yet)."""
    status = "Suspended" if suspended else "Initializing" if plan is None else "Running"
    document: dict[str, Any] = {"cluster": cluster, "autoscalerStatus": status}
    if suspended:
        document["message"] = suspended
    if plan is not None:
        document["clusterWide"] = _cluster_wide(plan)
        document["nodeGroups"] = [_group(g, inventory) for g in plan.groups]
        if plan.warnings:
            document["warnings"] = list(plan.warnings)
    document["last"] = {name: _stage(result) for name, result in sorted(last.items())}
    if proposal:
        document["proposal"] = _proposal(proposal, proposal_age_seconds, proposal_branch, now)
    return document


def _cluster_wide(plan: Plan) -> dict[str, Any]:
    groups = {g.name: g for g in plan.groups}
    triggered = sum(1 for o in plan.pending if triggered_scale_up(o, groups) is not None)
    unhelped = sum(1 for o in plan.pending if cannot_help(o))
    candidates = sum(len(g.removals) for g in plan.groups)
    return {
        "scaleUp": {
            "status": "Needed" if any(g.new_nodes for g in plan.groups) else "NotNeeded",
            "podsTriggeredScaleUp": triggered,
            "podsNoScaleUp": unhelped,
        },
        "scaleDown": {
            "status": "CandidatesPresent" if candidates else "NoCandidates",
            "candidates": candidates,
        },
    }


def _group(g: GroupPlan, inventory: Inventory | None) -> dict[str, Any]:
    if g.backoff_until is not None:
        scale_up: dict[str, Any] = {"status": "Backoff", "backoffUntil": timestamp(g.backoff_until)}
        failure = g.launch_failure
        if failure is not None and g.launch_backoff:
            # CA's backoffInfo (clusterstate/api/types.go): what AWS said, no time that moves per retry
            scale_up["backoffInfo"] = {
                "errorCode": failure.last.code,
                "errorClass": failure.last.error_class,
                "errorMessage": failure.last.message,
                "unfilled": failure.unfilled,
                "failingSince": timestamp(failure.since),
            }
    elif g.new_nodes or (g.action == SCALE_UP and g.cancelled_removals):
        scale_up = {"status": "Needed"}
    elif g.upcoming:
        scale_up = {"status": "InProgress", "upcoming": g.upcoming}
    else:
        scale_up = {"status": "NotNeeded"}
    entry: dict[str, Any] = {
        "name": g.name,
        "minSize": g.min_size,
        "maxSize": g.max_size,
        "current": g.current,  # the ASG's DesiredCapacity (CA: cloudProviderTarget)
        "target": g.desired,  # what the plan wants
        "action": g.action,
        "scaleUp": scale_up,
        "scaleDown": {
            "status": "CandidatesPresent" if g.removals else "NoCandidates",
            "removeInstances": list(g.remove_instances),
        },
    }
    if g.held:
        entry["held"] = True
    if g.cancelled_removals:
        entry["cancelledRemovals"] = list(g.cancelled_removals)
    if g.warnings:
        entry["warnings"] = list(g.warnings)
    found = next((gi for gi in inventory.groups if gi.name == g.name), None) if inventory else None
    if found is not None:
        ready = len(found.ready_nodes)
        entry["health"] = {
            "registered": {"total": len(found.nodes), "ready": ready, "unready": len(found.nodes) - ready},
            "unregistered": len(found.unregistered),
        }
    return entry


def _stage(result: StageResult) -> dict[str, Any]:
    entry: dict[str, Any] = {"ok": result.ok, "outcome": result.summary}
    if result.commit:
        entry["commit"] = result.commit
    if result.since is not None:
        entry["since"] = timestamp(result.since)
    return entry


def _proposal(
    proposal: Mapping[str, tuple[str, ...]], age: float | None, branch: str, now: datetime | None
) -> dict[str, Any]:
    entry: dict[str, Any] = {"instances": {g: list(ids) for g, ids in sorted(proposal.items())}}
    if branch:
        entry["branch"] = branch
    if age is not None:
        entry["age"] = coarse_age(age)
        if now is not None:
            # rounded to the second: `now - age` jitters by microseconds around the commit's time
            opened = now - timedelta(seconds=age)
            entry["openedAt"] = timestamp(opened + timedelta(microseconds=500_000))
    return entry


def _plain(value: Any) -> Any:
    """Mappings, sequences and times as the YAML dumper's plain types."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return timestamp(value)
    return value


def render_status(document: Mapping[str, Any], max_bytes: int | None = None) -> str:
    """The document as YAML, keys sorted: the same document is always the same text. Over
    `max_bytes` (a ConfigMap holds 1 MiB), node groups are left out as cluster-autoscaler leaves
    them out of its status: the quiet ones first (nothing to do, nothing wrong), in their order, and
    `truncated` says how many are shown."""
    text = _dump(document)
    groups = list(document.get("nodeGroups") or [])
    if max_bytes is None or len(text.encode()) <= max_bytes or not groups:
        return text
    ranked = sorted(range(len(groups)), key=lambda i: (_quiet(groups[i]), i))

    def cut(count: int) -> dict[str, Any]:
        kept = sorted(ranked[:count])
        return {
            **document,
            "nodeGroups": [groups[i] for i in kept],
            "truncated": f"{count} of {len(groups)} node groups shown (those with something to do or "
            "something wrong first): a ConfigMap holds 1 MiB at most; asg-reconciler status shows all",
        }

    # Each group's share of the text, from its JSON size (one YAML dump per group would cost as much
    # as the whole document again), scaled to what the groups take in the full text.
    weights = [len(json.dumps(_plain(g), ensure_ascii=False)) for g in groups]
    base = len(_dump(cut(0)).encode())
    scale = (len(text.encode()) - base) / max(1, sum(weights))
    room = max_bytes - base - 64  # the count's digits may grow
    for _ in range(3):  # an estimate: check, and try again with what it overshot by
        count, left = 0, float(room)
        for i in ranked:
            if weights[i] * scale > left:
                break
            left -= weights[i] * scale
            count += 1
        text = _dump(cut(count))
        over = len(text.encode()) - max_bytes
        if over <= 0:
            break
        room -= over
    return text  # still over after three tries: the ConfigMap writer cuts it at a line


def _quiet(group: Mapping[str, Any]) -> bool:
    """Nothing to do and nothing wrong: what a truncated status leaves out first."""
    scale_up = (group.get("scaleUp") or {}).get("status")
    scale_down = (group.get("scaleDown") or {}).get("status")
    unready = ((group.get("health") or {}).get("registered") or {}).get("unready", 0)
    return (
        group.get("action") in (None, "none")
        and scale_up in (None, "NotNeeded")
        and scale_down in (None, "NoCandidates")
        and not unready
        and not group.get("held")
    )


_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's: the same text, 4x faster


def _dump(value: Any) -> str:
    text: str = yaml.dump(
        _plain(value),
        Dumper=_DUMPER,
        sort_keys=True,
        default_flow_style=False,
        allow_unicode=True,
        width=10_000,
    )
    return text
