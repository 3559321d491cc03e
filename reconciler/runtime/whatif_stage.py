"""`what-if FILE...`: the capacity a workload change needs, before it merges.

The workloads in FILE are read first (a missing or malformed file stops everything before the
cluster, AWS or Git is asked anything), then the plan stage runs exactly as `plan --dry-run` does
(`plan_once`, dry run: the manifest on main, the state branch, the cluster, the ASGs, the same
`make_plan`), with one difference: right after the cluster is observed, the workloads' pods are added
to it as pending (`change`, below). So the answer is what a plan would add if those pods were
pending now, priced with `simulate`'s on-demand prices. Nothing is written anywhere: no Git, no AWS,
no cluster; with `--comment PR`, one comment on that pull request, kept up to date as `check
--comment` keeps its own (the same forge call, its own marker).

DaemonSets, as the planner already models them on new nodes: a new DaemonSet is added to the
cluster's DaemonSets, so every node a scale-up adds to a group it selects starts with its pod
(`SimNode.from_template`, cluster-autoscaler's podsExpectedOnFreshNode); and on every existing node it
selects its pod is added pending, pinned to that node by node affinity on `metadata.name` as the
DaemonSet controller pins it. The planner leaves pending DaemonSet pods alone (as cluster-autoscaler
does: no new node helps them), so the pinned pods carry no DaemonSet owner and are planned as pods
that fit their own node or nowhere; they are ordered before the other pods (the controller creates
them at once).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from reconciler.config.settings import Config
from reconciler.domain.errors import ReconcilerError, UserError
from reconciler.domain.inventory import Inventory, build_inventory
from reconciler.domain.model import DaemonSet, Pod
from reconciler.gitops.forge.base import Forge
from reconciler.kube.parse import ObjectReader
from reconciler.kube.workloads import (
    DAEMON_SET,
    Change,
    Manifests,
    WorkBudget,
    Workload,
    added_pods,
    daemonset_object,
    describe_requests,
    pod_object,
    priority_of,
    read_workloads,
    running_pods,
)
from reconciler.planning.predicates import check
from reconciler.planning.simnode import DAEMONSET_TOLERATIONS, SimNode, daemonset_runs_on
from reconciler.planning.types import Plan
from reconciler.runtime.check_comment import comment_on, forge_for_comments
from reconciler.runtime.plan_stage import plan_once
from reconciler.runtime.price_table import load_prices, shipped_prices_region
from reconciler.views.whatif import render_what_if_failed
from reconciler.views.whatif_report import MARKER, NEW_NODE, GroupNeed, PodAnswer, WhatIfReport, WorkloadLine

# The DaemonSet controller's pods come at once: placed before the workload's (oldest first).
_DAEMONSET_CREATED = "1970-01-01T00:00:00+00:00"


@dataclass(frozen=True)
class WhatIfRequest:
    files: tuple[Path, ...]
    snapshot: Path | None = None
    prices: Path | None = None
    namespace: str = "default"


def read_request(request: WhatIfRequest) -> tuple[Manifests, dict[str, float]]:
    """The files and the prices, checked before anything else is asked: a mistake in them is one
    line and exit 2 with nothing read from the cluster, AWS or Git."""
    manifests = read_workloads(request.files, request.namespace)
    return manifests, load_prices(request.prices)


def what_if_once(
    config: Config,
    request: WhatIfRequest,
    now: datetime,
    read: tuple[Manifests, dict[str, float]] | None = None,
) -> WhatIfReport:
    """The plan `plan --dry-run` would make with the workloads' pods pending, as a capacity answer."""
    manifests, prices = read or read_request(request)
    adder = _Adder(manifests)
    run = plan_once(config, request.snapshot, now, dry_run=True, change=adder)
    inventory = run.inventory
    assert inventory is not None  # plan_once returns what it planned on
    shipped = f"shipped {shipped_prices_region()} on-demand"
    where = shipped if request.prices is None else f"{request.prices} over {shipped}"
    warnings = list(run.plan.warnings)
    region = shipped_prices_region()
    if config.region and config.region != region and request.prices is None:
        warnings.append(
            f"prices are {region} on-demand and the cluster is in {config.region}: "
            "pass --prices FILE for that region's (or your discounted) prices"
        )
    return _report(config, request, run.plan, inventory, adder.changes, manifests, prices, where, warnings)


class _Adder:
    """The `change` plan_once applies to the observed inventory: the workloads' pods, pending."""

    def __init__(self, manifests: Manifests) -> None:
        self.manifests = manifests
        self.changes: list[Change] = []

    def __call__(self, inventory: Inventory) -> Inventory:
        state = inventory.state
        reader = ObjectReader()
        budget = WorkBudget()
        added: list[Pod] = []
        daemonsets = list(state.daemonsets)
        self.changes = []
        for workload in self.manifests.workloads:
            if workload.kind == DAEMON_SET:
                change, daemonset = _daemonset_change(workload, inventory, reader, budget)
                if daemonset is not None:
                    same = (daemonset.namespace, daemonset.name)
                    daemonsets = [d for d in daemonsets if (d.namespace, d.name) != same] + [daemonset]
            else:
                change = added_pods(workload, state, reader, budget)
            added.extend(change.added)
            self.changes.append(change)
        gone = {p.key for c in self.changes for p in c.replaced}  # a rollout's old pods go
        kept = tuple(p for p in state.pods if p.key not in gone)
        changed = replace(state, pods=kept + tuple(added), daemonsets=tuple(daemonsets))
        return build_inventory(changed, tuple(g.group for g in inventory.groups))


def _daemonset_change(
    workload: Workload, inventory: Inventory, reader: ObjectReader, budget: WorkBudget
) -> tuple[Change, DaemonSet | None]:
    """A DaemonSet already in the cluster adds nothing; a new one runs on every node it selects:
    a pod pending on each existing one, and its pod on every new node (the returned DaemonSet)."""
    state = inventory.state
    daemonset = reader.daemonset(daemonset_object(workload))
    replaced: tuple[Pod, ...] = ()
    if any(d.namespace == workload.namespace and d.name == workload.name for d in state.daemonsets):
        running = running_pods(workload, state)
        stale = [p for p in running if p.requests != daemonset.requests and p.node_name]
        if not stale or not workload.rolls_out:
            why = "unchanged" if not stale else "updateStrategy OnDelete: its pods keep their requests"
            note = f"already runs ({len(running)} pod(s)), {why}: adds nothing"
            return Change(workload, len(running), (), note), None
        # a rollout, node by node: each node's pod is replaced by one at the new requests, and new
        # nodes start with the new one (the returned DaemonSet replaces the cluster's)
        by_node = {p.node_name for p in stale}
        nodes = [n for n in state.nodes if n.name in by_node]
        replaced = tuple(stale)
        note = (
            f"rollout: the template changes its pods' requests ({describe_requests(stale[0].requests)} -> "
            f"{describe_requests(daemonset.requests)}), so its pod on each of {len(nodes)} node(s) is "
            "replaced at the new requests, and new nodes start with the new one"
        )
    else:
        nodes = [n for n in state.nodes if daemonset_runs_on(daemonset, SimNode.from_node(n, ()))]
        note = ""
    budget.spend(workload, len(nodes), f"one pod on each of the {len(nodes)} node(s) it selects")
    priority, priority_note = priority_of(workload, replaced)
    note = "; ".join(n for n in (note, priority_note) if n)
    tolerations = [{"key": t.key, "operator": t.operator, "effect": t.effect} for t in DAEMONSET_TOLERATIONS]
    pods = tuple(
        reader.pod(
            pod_object(
                workload,
                f"{workload.name}-{node.name}",
                priority=priority,
                pinned_to=node.name,
                created=_DAEMONSET_CREATED,
                tolerations=tolerations,
            )
        )
        for node in nodes
    )
    return Change(workload, len(replaced), pods, note, tuple(n.name for n in nodes), replaced), daemonset


def _report(
    config: Config,
    request: WhatIfRequest,
    plan: Plan,
    inventory: Inventory,
    changes: Sequence[Change],
    manifests: Manifests,
    prices: Mapping[str, float],
    where: str,
    warnings: list[str],
) -> WhatIfReport:
    outcomes = {o.pod: o for o in plan.pending}
    ours: dict[str, tuple[Pod, str]] = {}  # key -> the pod, and the node a DaemonSet pod is pinned to
    for change in changes:
        pinned = dict(zip((p.key for p in change.added), change.nodes, strict=False))
        for pod in change.added:
            ours[pod.key] = (pod, pinned.get(pod.key, ""))
    answers: list[PodAnswer] = []
    for key, (pod, node) in ours.items():
        outcome = outcomes.get(key)
        if outcome is None:  # every pending pod gets an outcome; this is the safe answer if not
            answers.append(PodAnswer(key, None, "the plan gave it no place"))
        elif outcome.node is not None:  # room on a node of no group: hosted, by no group of ours
            answers.append(PodAnswer(key, None, outcome.reason, node=outcome.node))
        elif node and outcome.node_group is None:
            answers.append(PodAnswer(key, None, _pinned_reason(pod, node, inventory)))
        else:
            answers.append(PodAnswer(key, outcome.node_group, outcome.reason or NEW_NODE))
    groups = []
    for g in plan.groups:
        template = inventory.group(g.name).template
        instance_type = template.instance_type if template is not None and template.instance_type else None
        mine = [a for a in answers if a.node_group == g.name]
        today = sum(1 for o in plan.pending if o.pod not in ours and o.node_group == g.name and not o.reason)
        groups.append(
            GroupNeed(
                name=g.name,
                add=g.new_nodes,
                instance_type=instance_type,
                hourly_price=prices.get(instance_type) if instance_type else None,
                current=g.current,
                desired=g.desired,
                pods=sum(1 for a in mine if a.reason == NEW_NODE),
                on_existing=sum(1 for a in mine if a.reason != NEW_NODE),
                pending_today=today,
                kept_removals=g.cancelled_removals,
                reasons=g.reasons if g.new_nodes or g.cancelled_removals else (),
            )
        )
    for need in groups:
        if need.add and need.hourly_price is None:
            warnings.append(
                f"{need.name}: no price for {need.instance_type or 'its instance type'} "
                "(give it with --prices FILE)"
            )
    lines = tuple(
        WorkloadLine(
            str(c.workload.source),
            c.workload.kind,
            c.workload.namespace,
            c.workload.name,
            c.workload.pods,
            c.running,
            len(c.added),
            c.note,
        )
        for c in changes
    )
    return WhatIfReport(
        cluster=config.cluster,
        files=tuple(str(f) for f in request.files),
        workloads=lines,
        skipped=manifests.skipped,
        groups=tuple(groups),
        pods=tuple(answers),
        prices=where,
        warnings=tuple(warnings),
    )


def _pinned_reason(pod: Pod, node_name: str, inventory: Inventory) -> str:
    """Why a DaemonSet pod has no place: its node says no (the planner's own predicates, on the node
    as it runs today), or the change's other pods took what that node had left."""
    node = next((n for n in inventory.state.nodes if n.name == node_name), None)
    if node is None or not node.ready:
        why = "it is not Ready"
    else:
        sim = SimNode.from_node(node, inventory.pods_by_node.get(node_name, ()))
        found = check(pod, sim)
        why = found or "the change's other pods take the room it has left"
    return f"DaemonSet pod for node {node_name}, the only node it may run on: {why}; no new node helps it"


def what_if_and_comment(
    load: Callable[[], Config],
    request: WhatIfRequest,
    now: datetime,
    pull_request: int | None,
    render: Callable[[WhatIfReport], str],
) -> tuple[WhatIfReport, str, int]:
    """`what-if`, and with a pull request its comment (`render`: its Markdown, cut to what GitHub
    accepts): (the report, what was commented, the exit code). The files and prices are read first,
    then the config (`load`) and the forge: a bad one stops everything with nothing written
    anywhere but the comment, which says the files could not be read (when the config and the forge
    can be had). After that the comment is always replaced: by this head's answer, or by a short
    "failed" one when the answer could not be worked out or posted (exit 1), so an earlier answer
    never stands for a head that was not judged."""
    try:
        read = read_request(request)
    except UserError as bad:
        if pull_request is not None:
            _say_unreadable(load, pull_request, bad)
        raise
    config = load()
    forge = forge_for_comments(config) if pull_request is not None else None
    namespaces = frozenset(w.namespace for w in read[0].workloads)
    try:
        report = what_if_once(config, request, now, read)
    except (Exception, KeyboardInterrupt) as exc:  # any failure: an earlier answer must not stand
        if pull_request is not None:
            if isinstance(exc, ReconcilerError):
                why = str(exc)
            elif isinstance(exc, KeyboardInterrupt):
                why = "interrupted (SIGINT, SIGTERM or Ctrl-C)"
            else:  # a bug: its message may hold anything, so only its kind
                why = f"an unexpected error ({type(exc).__name__})"
            _replace(config, pull_request, forge, render_what_if_failed(why, namespaces), exc)
        raise
    if pull_request is None:
        return report, "", 0
    try:
        return report, comment_on(config, pull_request, render(report), forge, marker=MARKER), 0
    except ReconcilerError as refused:
        why = f"this head's answer could not be posted here ({refused}); the CI job's log has it"
        try:
            comment_on(config, pull_request, render_what_if_failed(why, namespaces), forge, marker=MARKER)
        except ReconcilerError as again:
            return (
                report,
                (
                    f"error: could not post the answer on pull request #{pull_request} ({refused}), nor "
                    f'replace the comment with "failed" ({again}): an earlier answer may still stand'
                ),
                1,
            )
        return (
            report,
            (
                f"error: could not post the answer on pull request #{pull_request} ({refused}); the "
                'comment there now says "failed"'
            ),
            1,
        )


def _say_unreadable(load: Callable[[], Config], number: int, bad: UserError) -> None:
    """This head's files are a mistake: the standing answer (an earlier head's) must not stay. The
    config or the forge failing too leaves it to the error being raised (the files come first)."""
    try:
        config = load()
        forge = forge_for_comments(config)
    except ReconcilerError:
        return
    why = f"the pull request's manifests could not be read: {bad}"
    _replace(config, number, forge, render_what_if_failed(why, frozenset()), bad)


def _replace(config: Config, number: int, forge: Forge | None, body: str, exc: BaseException) -> None:
    """Put the "failed" comment in place of the standing answer; when even that cannot be written,
    the error being raised says so."""
    try:
        comment_on(config, number, body, forge, marker=MARKER)
    except ReconcilerError as again:
        exc.add_note(
            f'the comment on pull request #{number} could not be replaced with "failed" either '
            f"({again}): its earlier answer still stands"
        )
