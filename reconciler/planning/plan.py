"""The planner: cluster state and node groups in, one Plan out. Pure and deterministic.

Order of work, each step on one shared simulation (a NodePool of real and upcoming nodes):
1. baselines (DESIGN §3.1), backoffs for groups whose instances never registered or whose launches
   AWS reports failed (§3.12: their unfilled desired is not on its way);
2. upcoming capacity: young unregistered instances, desired AWS is still launching, and
   committed-but-unapplied increases;
3. pending pods that fit existing or upcoming capacity are taken out;
4. approved removals: kept if their pods still fit elsewhere, cancelled where pending pods need
   the room (cheaper and safer than new nodes; approved sets only shrink, §3.3);
5. scale-up for the pods still waiting, then for each group's headroom (virtual pods judged after
   every real pod, docs/headroom.md);
6. scale-down on what remains (named instances only, §3.2), never taking a headroom's room.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from reconciler.config.settings import Config
from reconciler.domain.backoff import Backoff as Schedule
from reconciler.domain.durations import format_duration, parse_duration
from reconciler.domain.inventory import GroupInventory
from reconciler.domain.model import CPU, MEMORY, POD_SCALE_UP_DELAY, DaemonSet, Instance, Node, Pod
from reconciler.domain.windows import closed_notice, longest_wait
from reconciler.planning import headroom
from reconciler.planning.baseline import Baseline, baseline
from reconciler.planning.capacity_units import nodes_within, units, units_per_node
from reconciler.planning.drainability import stays_on_node
from reconciler.planning.existing import existing_node
from reconciler.planning.launch_failures import launch_failure
from reconciler.planning.limit_costs import node_cost
from reconciler.planning.placement import NodePool
from reconciler.planning.predicates import PredicateContext, pvc_zones, unmodelled
from reconciler.planning.pricing import HOURS_PER_MONTH, NodePrice, node_price, raise_price
from reconciler.planning.scale_down import ScaleDownResult, plan_scale_down
from reconciler.planning.scale_up import Candidate, Limits, ScaleUpResult, counted, plan_scale_up
from reconciler.planning.simnode import SimNode
from reconciler.planning.topology import Topology
from reconciler.planning.types import (
    NONE,
    SCALE_DOWN,
    SCALE_UP,
    Backoff,
    GroupPlan,
    HeadroomPlan,
    LaunchFailure,
    Plan,
    PlanInputs,
    PlannerMemory,
    PodOutcome,
    Removal,
)
from reconciler.planning.unknown_groups import not_node_groups

_LAUNCHING = frozenset({"Pending", "Pending:Wait", "Pending:Proceed", "InService"})


@dataclass
class _Group:
    """Working notes on one group during planning."""

    inventory: GroupInventory
    base: Baseline
    upcoming: int = 0
    stale: tuple[Instance, ...] = ()
    backoff: Backoff | None = None
    launch: LaunchFailure | None = None  # AWS reports its launches failed (its backoff may have ended)
    failed: int = 0  # unfilled desired AWS could not launch: not upcoming while backed off for it
    cancelled: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()  # approved removals still going ahead

    @property
    def name(self) -> str:
        return self.inventory.name

    @property
    def backed_off(self) -> bool:
        """Skipped by scale-up in this plan: instances never registered, or a launch failed."""
        return self.backoff is not None or self.failed > 0

    @property
    def backoff_until(self) -> datetime | None:
        ends = [b for b in (self.backoff.until if self.backoff else None, self.launch_until) if b is not None]
        return max(ends) if ends else None

    @property
    def launch_until(self) -> datetime | None:
        return self.launch.until if self.launch is not None and self.failed else None


@dataclass
class _Work:
    """What the steps of one plan share: the simulated pool and its topology counts, the groups'
    working notes, each pending pod's outcome so far, the placements later steps may not strand."""

    inputs: PlanInputs
    topology: Topology
    pool: NodePool
    not_ready: set[str]
    groups: list[_Group]
    bases: dict[str, SimNode | None] = field(default_factory=dict)
    backoffs: dict[str, Backoff] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    outcomes: dict[str, PodOutcome] = field(default_factory=dict)
    booked: list[tuple[Pod, str]] = field(default_factory=list)
    waiting: list[Pod] = field(default_factory=list)
    approved_nodes: dict[str, str] = field(default_factory=dict)
    candidates: list[Candidate] = field(default_factory=list)  # scale-up's, reused for headroom
    limits: Limits | None = None  # cluster-wide resource limits, as scale-up found them
    prices: dict[str, NodePrice] = field(default_factory=dict)  # group -> one new node's price

    def group_of(self, node: str) -> str | None:
        return _group_of(node, self.inputs.inventory.group_of_node, self.pool)


def make_plan(inputs: PlanInputs) -> Plan:
    """The plan, step by step, each on the pool as the steps before it left it (docs/planning.md)."""
    work = _start(inputs)
    _upcoming_capacity(work)
    _place_pending(work)
    _settle_approved_removals(work)
    up = _scale_up(work)
    wanted, kept_room, grown = _headroom(work, up)
    down = _scale_down(work, wanted, grown)
    return _assemble(work, up, wanted, kept_room, down)


def _start(inputs: PlanInputs) -> _Work:
    """The pool of existing nodes (what runs on each, as the scheduler would count it) and each
    group's baseline: the manifest's desired against what AWS has (DESIGN §3.1)."""
    inventory, config = inputs.inventory, inputs.config
    topology = Topology(inventory.state.namespaces)
    ctx = PredicateContext(pvc_zones(inventory.state), topology)
    cutoff = config.scale_up.expendable_priority_cutoff
    pool = NodePool([existing_node(n, inventory, cutoff) for n in inventory.state.nodes], ctx)
    not_ready = {n.name for n in inventory.state.nodes if not n.ready}
    groups = [_Group(g, baseline(g.group, inputs.committed.get(g.name))) for g in inventory.groups]
    options = config.expander_options
    prices = {
        g.name: price
        for g in inventory.groups
        if (price := node_price(g.group, g.template, inputs.prices, options)) is not None
    }
    return _Work(inputs, topology, pool, not_ready, groups, prices=prices)


def _upcoming_capacity(work: _Work) -> None:
    """Steps 1-2: each group's backoff (instances that never came up, launches AWS reports failed),
    and the capacity already on its way (launching instances, desired AWS is still launching, increases
    not yet applied) added to the pool as template nodes, so pending pods that will fit there do not
    ask for more. Desired AWS could not launch is not on its way while the group is backed off for it
    (DESIGN §3.12); once that backoff ends it counts again, as AWS keeps trying (CA tries again)."""
    inputs, now, config = work.inputs, work.inputs.now, work.inputs.config
    daemonsets = inputs.inventory.state.daemonsets
    unfit: dict[tuple[str, str], list[str]] = {}  # DaemonSet -> groups whose new nodes cannot hold it
    for g in work.groups:
        template = g.inventory.template
        left_out: list[DaemonSet] = []
        work.bases[g.name] = (
            None
            if template is None
            else SimNode.from_template(
                template,
                daemonsets,
                name=f"{g.name}-template",
                zones=g.inventory.group.zones,
                group=g.name,
                unfit=left_out,
            )
        )
        for ds in left_out:
            unfit.setdefault((ds.namespace, ds.name), []).append(g.name)
        young = [i for i in g.inventory.unregistered if i.lifecycle_state in _LAUNCHING]
        g.stale = tuple(i for i in young if _age(i, now) > config.scale_up.max_node_provision_time)
        unfilled = g.inventory.group.unfilled
        g.launch = launch_failure(g.inventory.group, config.scale_up, now)
        g.failed = unfilled if g.launch is not None and g.launch.until > now else 0
        # with Launch suspended AWS launches nothing: the desired it lacks is not on its way
        coming = 0 if g.inventory.group.launch_suspended else unfilled - g.failed
        # desired not yet launched and an increase not yet applied are capacity units
        # (WeightedCapacity): in nodes of the template they may be fewer
        per_node = units_per_node(g.inventory.group, template)
        g.upcoming = len(young) - len(g.stale) + nodes_within(g.base.unapplied_increase + coming, per_node)
        g.backoff = _backoff(g, inputs.memory.backoffs.get(g.name), now, config)
        if g.backoff is not None:
            work.backoffs[g.name] = g.backoff
        base = work.bases[g.name]
        if base is not None:
            for index in range(g.upcoming):
                work.pool.add_node(base.copy(f"{g.name}-upcoming-{index + 1}"))
    for (namespace, name), names in sorted(unfit.items()):
        work.warnings.append(
            f"daemonset {namespace}/{name} asks for more than a new node of {', '.join(names)} has "
            "left: its pod would stay Pending there, so it is not counted on those nodes"
        )


def _place_pending(work: _Work) -> None:
    """Step 3: pending pods onto existing and upcoming capacity (approved removals' nodes left
    aside); the zones of groups that may grow count as spread domains from here to scale-up."""
    work.topology.set_extras(
        base
        for g in work.groups
        if (base := work.bases[g.name]) is not None
        and not g.base.held
        and not g.backed_off
        and g.base.capacity < g.inventory.group.max_size
    )
    pending = _pending_pods(work.inputs, work.outcomes, work.topology, work.warnings)
    work.approved_nodes = _approved_nodes(work.groups)
    placement = work.pool.place(pending, exclude=set(work.approved_nodes) | work.not_ready)
    work.booked = list(placement.placed)  # what later steps may not strand (spread, affinity)
    for pod, node in placement.placed:
        sim = work.pool.get(node)
        where = "upcoming capacity" if sim is not None and sim.is_new else "existing capacity"
        work.outcomes[pod.key] = _fits(pod.key, work.group_of(node), node, f"fits {where}")
    work.waiting = list(placement.unplaced)


def _settle_approved_removals(work: _Work) -> None:
    """Step 4: approved removals are cancelled where waiting pods need their node, and kept where
    every pod on the node can move (and nothing booked is stranded by it)."""
    pool, approved_nodes, now = work.pool, work.approved_nodes, work.inputs.now
    cancelled: set[str] = set()
    if work.waiting and approved_nodes:
        rescue = pool.place(work.waiting, exclude=work.not_ready)
        work.booked.extend(rescue.placed)
        for pod, node in rescue.placed:
            if node in approved_nodes:
                cancelled.add(node)
            work.outcomes[pod.key] = _fits(
                pod.key, work.group_of(node), node, "fits capacity kept by cancelling a removal"
            )
        work.waiting = list(rescue.unplaced)
    for node_name in sorted(set(approved_nodes) - cancelled):
        sim = pool.get(node_name)
        movable = [p for p in sim.pods if not stays_on_node(p, now)] if sim else []
        moved = pool.place(movable, exclude=set(approved_nodes) - cancelled, atomic=True, vacating=node_name)
        if moved.complete and pool.first_broken([*work.booked, *moved.placed]) is None:
            pool.retire(node_name)
            work.booked.extend(moved.placed)
        else:
            pool.undo(moved)
            cancelled.add(node_name)
    for g in work.groups:
        g.cancelled = tuple(
            i for n, i in approved_nodes.items() if n in cancelled and i in g.base.approved_present
        )
        g.kept = tuple(i for i in g.base.approved_present if i not in g.cancelled)


def _scale_up(work: _Work) -> ScaleUpResult:
    """Step 5: new nodes for the pods still waiting (bin-packing per group, the expanders choose)."""
    config = work.inputs.config
    candidates = [_candidate(g, work.bases[g.name], config.scale_up.max_step) for g in work.groups]
    for candidate, g in zip(candidates, work.groups, strict=True):
        price = work.prices.get(g.name)
        candidate.hourly_price = price.hourly if price is not None else None
        if price is None and "price" in config.expander and not candidate.blocked and candidate.template:
            work.warnings.append(
                f"{g.name}: no price for {candidate.template.instance_type} (the price expander ranks "
                "it last): give it in expanderOptions.prices"
            )
    work.limits = Limits.headroom(config, *_totals(work.inputs.inventory.state.nodes, work.groups))
    work.candidates = candidates
    up = plan_scale_up(
        work.waiting,
        candidates,
        work.pool,
        work.limits,
        config,
        exclude=set(work.approved_nodes) | work.not_ready,
    )
    work.booked.extend(up.placements)
    for pod in work.waiting:
        if pod.key in up.helped:
            work.outcomes[pod.key] = PodOutcome(pod.key, up.helped[pod.key])
        elif pod.key in up.fits_after:
            node = up.fits_after[pod.key]
            work.outcomes[pod.key] = _fits(
                pod.key, work.group_of(node), node, "fits existing capacity once the other scale-ups land"
            )
        else:
            work.outcomes[pod.key] = PodOutcome(pod.key, None, up.not_helped[pod.key])
    return up


def _headroom(
    work: _Work, up: ScaleUpResult
) -> tuple[Sequence[headroom.Need], dict[str, headroom.Outcome], dict[str, int]]:
    """Step 5b: each group's headroom, judged after every real pod, on what the group has and then
    on nodes added for it (docs/headroom.md); returns the needs, what became of each, and how many
    nodes each group grows by in all."""
    assert work.limits is not None  # set by _scale_up
    wanted = headroom.needs(work.inputs.inventory.groups, work.inputs.committed)
    kept_room = headroom.scale_up(
        wanted, {c.name: c for c in work.candidates}, work.pool, work.limits, work.not_ready
    )
    grown = {g.name: up.new_nodes.get(g.name, 0) + _added(kept_room.get(g.name)) for g in work.groups}
    return wanted, kept_room, grown


def _scale_down(
    work: _Work, wanted: Sequence[headroom.Need], grown: Mapping[str, int]
) -> ScaleDownResult | None:
    """Step 6: named removals on what remains (DESIGN §3.2); the nodes that stay are all the
    domains there are, and a group that grows, is held or is being refreshed keeps its nodes."""
    inputs = work.inputs
    work.topology.set_extras(())
    if not inputs.config.scale_down.enabled:
        return None
    exclusions = {g.name: why for g in work.groups if (why := _no_scale_down(g, grown[g.name]))}
    # desired AWS could not launch holds no node: min size is judged on what exists (the safe side)
    capacity = {g.name: g.base.capacity + len(g.cancelled) + grown[g.name] - g.failed for g in work.groups}
    return plan_scale_down(
        inputs,
        work.pool,
        excluded_groups=frozenset(exclusions),
        forced={g.name: g.base.manual_decrease for g in work.groups if g.base.manual_decrease},
        baseline=capacity,
        approved=frozenset(i for g in work.groups for i in g.kept),
        exclusion_reasons=exclusions,
        preferred=inputs.proposed,
        booked=work.booked,
        headroom=wanted,
    )


def _assemble(
    work: _Work,
    up: ScaleUpResult,
    wanted: Sequence[headroom.Need],
    kept_room: Mapping[str, headroom.Outcome],
    down: ScaleDownResult | None,
) -> Plan:
    """Step 7: each group's plan and the plan's warnings and memory, from what the steps decided."""
    inputs, config, now = work.inputs, work.inputs.config, work.inputs.now
    removals: Mapping[str, tuple[Removal, ...]] = down.removals if down else {}
    kept_for_headroom: Mapping[str, int] = down.headroom_kept if down else {}
    rooms = {
        need.group: HeadroomPlan(
            need.headroom,
            kept_room[need.group].placed,
            kept_room[need.group].added,
            kept_for_headroom.get(need.group, 0),
            kept_room[need.group].reason,
        )
        for need in wanted
    }
    failing = tuple(g for g in work.groups if g.failed)
    group_plans = tuple(
        _priced(
            _group_plan(
                g,
                up.new_nodes.get(g.name, 0),
                up.pods_by_group.get(g.name, 0),
                removals.get(g.name, ()),
                rooms.get(g.name),
                failing,
            ),
            g,
            work,
        )
        for g in work.groups
    )
    memory = PlannerMemory(
        unneeded_since=dict(down.unneeded_since if down else {}),
        backoffs=work.backoffs,
        last_scale_up=dict(inputs.memory.last_scale_up),
    )
    warnings = work.warnings
    if not inputs.inventory.groups:
        warnings.append(
            inputs.searched
            or "no node groups found: check nodeGroups in the config (discovery tags, explicit names)"
        )
    warnings += not_node_groups(
        inputs.committed,
        [g.name for g in inputs.inventory.groups],
        config.cluster,
        f"{config.git.branch}:{config.manifest_path}",
    )
    if inputs.inventory.state.autoscaler is not None:
        warnings.append(
            f"cluster-autoscaler is live ({inputs.inventory.state.autoscaler.source}): apply will refuse"
        )
    if any(g.removals for g in group_plans):  # scaleDown.windows: say how long approved ones wait
        closed = closed_notice(config.scale_down.windows, now)
        if closed:
            warnings.append(closed)
        gap, ttl = longest_wait(config.scale_down.windows, now), config.scale_down.proposal_ttl
        if gap > ttl:
            warnings.append(
                f"scaleDown.windows: approved removals may wait {format_duration(gap)} for a window, longer "
                f"than scaleDown.proposalTTL {format_duration(ttl)}: approvals made earlier than that "
                "expire before apply may act on them (raise proposalTTL, or open windows more often)"
            )
    return Plan(
        cluster=config.cluster,
        groups=group_plans,
        pending=tuple(work.outcomes[k] for k in sorted(work.outcomes)),
        unremovable=tuple(sorted(down.unremovable if down else (), key=lambda u: u.node)),
        warnings=tuple(warnings),
        memory=memory,
    )


def _priced(plan: GroupPlan, g: _Group, work: _Work) -> GroupPlan:
    """The monthly cost of the nodes the plan adds, said in the scale-up's reasons and the JSON; a
    raise whose instance type has no price says so, never a silent nothing."""
    if not plan.new_nodes:
        return plan
    inputs, options = work.inputs, work.inputs.config.expander_options
    template = g.inventory.template
    added = units(plan.new_nodes, units_per_node(g.inventory.group, template))
    price = raise_price(g.inventory.group, template, plan.new_nodes, added, inputs.prices, options)
    if price is None and not (inputs.prices or options.prices):
        return plan  # no price table at all (a planner run without one): nothing to say
    if price is None:
        kind = template.instance_type if template is not None else "?"
        said = f"cost unknown: no price for {kind} (give it in expanderOptions.prices)"
        return replace(plan, reasons=(*plan.reasons, said))
    cost = round(price.hourly * HOURS_PER_MONTH, 2)
    basis = price.basis
    region, priced_in = inputs.config.region, inputs.prices_region
    if (
        region
        and priced_in
        and region != priced_in
        and template
        and template.instance_type not in options.prices
    ):
        basis += f"; {priced_in} list prices, set expanderOptions.prices for {region}"
    said = f"adds about ${cost:,.2f} a month ({basis})"
    return replace(plan, monthly_cost=cost, cost_basis=basis, reasons=(*plan.reasons, said))


def _added(outcome: headroom.Outcome | None) -> int:
    return outcome.added if outcome is not None else 0


def _no_scale_down(g: _Group, new_nodes: int) -> str:
    """Why a group keeps its nodes in this plan, or "" when it may shrink."""
    if g.base.held:
        return "group is held in the manifest"
    if g.inventory.group.has_instance_refresh:
        return "an instance refresh is in progress: instances are being replaced"
    if new_nodes:
        return "group scales up in this plan"
    if g.upcoming:
        return "group has capacity on the way (instances launching or an increase not yet applied)"
    return ""


def _age(instance: Instance, now: datetime) -> timedelta:
    return now - instance.launch_time if instance.launch_time else timedelta(0)


def _backoff(g: _Group, previous: Backoff | None, now: datetime, config: Config) -> Backoff | None:
    """Exponential backoff as cluster-autoscaler's: initialBackoff doubling per failure up to
    maxBackoff; a running backoff is kept until it ends, a long-expired one starts over."""
    running = previous is not None and previous.until > now
    if not g.stale:
        return previous if running else None
    if running:
        return previous
    initial, longest = config.scale_up.initial_backoff, config.scale_up.max_backoff
    count = 1
    if previous is not None and now - previous.until < longest:
        count = previous.count + 1
    first, cap = initial.total_seconds(), longest.total_seconds()
    wait = Schedule(first, max(first, cap)).base(count - 1)
    return Backoff(now + timedelta(seconds=wait), count)


def _pending_pods(
    inputs: PlanInputs, outcomes: dict[str, PodOutcome], topology: Topology, warnings: list[str]
) -> list[Pod]:
    """The pods scale-up is for, highest priority and oldest first; the rest get their outcome now."""
    config, now = inputs.config, inputs.now
    pending: list[Pod] = []
    nodes: set[str] | None = None  # every node's name, once a nominated pod needs them
    for pod in inputs.inventory.pending:
        if pod.is_daemonset:
            continue
        if pod.deleting_since is not None:
            outcomes[pod.key] = PodOutcome(pod.key, None, "being deleted: it will not need a node")
            continue
        if pod.is_expendable(config.scale_up.expendable_priority_cutoff):
            outcomes[pod.key] = PodOutcome(
                pod.key,
                None,
                f"expendable: priority {pod.priority} is below scaleUp.expendablePriorityCutoff "
                f"{config.scale_up.expendable_priority_cutoff}",
            )
            continue
        if pod.nominated_node:
            if nodes is None:
                nodes = {n.name for n in inputs.inventory.state.nodes}
            outcomes[pod.key] = _waiting_for_preemption(pod, inputs.inventory.group_of_node, nodes)
            continue
        delay, why_young = _scale_up_delay(pod, config.scale_up.new_pod_delay, warnings)
        if pod.created is not None and now - pod.created < delay:
            outcomes[pod.key] = PodOutcome(pod.key, None, why_young)
            continue
        reason = unmodelled(pod, topology)
        if reason is not None:
            outcomes[pod.key] = PodOutcome(pod.key, None, reason)
            continue
        pending.append(pod)
    pending.sort(key=lambda p: (-p.priority, p.created or now, p.namespace, p.name))
    return pending


def _fits(pod: str, group: str | None, node: str, reason: str) -> PodOutcome:
    """A pod with a place on `node`: its group's, or the node itself when it is in no group."""
    return PodOutcome(pod, group, reason, node=None if group is not None else node)


def _waiting_for_preemption(pod: Pod, group_of_node: Mapping[str, str], nodes: Set[str]) -> PodOutcome:
    """A pod the scheduler nominated to a node waits there for lower-priority pods to be preempted:
    it is booked on that node (`existing.py`) and, as in CA, scale-up is not for it. CA 1.36+ leaves it
    alone even when that node is gone (it is then in no list CA acts on) until the scheduler tries it
    again and clears or moves the nomination; CA 1.35 and earlier scaled up for it instead."""
    node = pod.nominated_node
    if node in nodes:
        return _fits(pod.key, group_of_node.get(node), node, f"waiting for preemption on node {node}")
    return PodOutcome(
        pod.key,
        None,
        f"waiting for preemption on node {node}, which no longer exists: no scale-up until the "
        "scheduler tries the pod again (as cluster-autoscaler)",
    )


def _scale_up_delay(pod: Pod, default: timedelta, warnings: list[str]) -> tuple[timedelta, str]:
    """How long a new pod waits before it counts, and the reason to give while it does. As CA, the
    pod's `pod-scale-up-delay` annotation may lengthen scaleUp.newPodDelay, never shorten it; an
    unreadable one is ignored (with a warning: CA only logs it)."""
    text = pod.annotations.get(POD_SCALE_UP_DELAY)
    if text is not None:
        try:
            own = parse_duration(text)
        except ValueError:
            warnings.append(
                f"pod {pod.key}: {POD_SCALE_UP_DELAY}: {text!r} is not a duration (ignored; use e.g. 5m)"
            )
        else:
            if own >= default:
                return own, f"younger than its {POD_SCALE_UP_DELAY} annotation ({format_duration(own)})"
    return default, "younger than scaleUp.newPodDelay"


def _approved_nodes(groups: Iterable[_Group]) -> dict[str, str]:
    """Node name -> instance id for approved removals whose instance still has a node."""
    found: dict[str, str] = {}
    for g in groups:
        by_instance = {n.instance_id: n.name for n in g.inventory.nodes}
        for instance_id in g.base.approved_present:
            if instance_id in by_instance:
                found[by_instance[instance_id]] = instance_id
    return found


def _group_of(node_name: str, group_of_node: Mapping[str, str], pool: NodePool) -> str | None:
    if node_name in group_of_node:
        return group_of_node[node_name]
    node = pool.get(node_name)
    return node.group or None if node is not None else None


def _candidate(g: _Group, base: SimNode | None, max_step: int) -> Candidate:
    group = g.inventory.group
    capacity = g.base.capacity + len(g.cancelled)
    blocked = ""
    if g.base.held:
        blocked = f"{g.name} is held in the manifest"
    elif group.launch_suspended:
        blocked = f"{g.name}: its Launch process is suspended (AWS launches nothing for a raise)"
    elif g.failed and g.launch is not None:
        blocked = (
            f"{g.name} backed off until {g.launch.until:%H:%M}: AWS could not launch "
            f"{g.failed} instance(s), {g.launch.describe()}"
        )
    elif g.backoff is not None:
        blocked = (
            f"{g.name} backed off until {g.backoff.until:%H:%M} ({len(g.stale)} instance(s) did not register)"
        )
    elif g.base.unapplied_increase:
        blocked = f"{g.name} has an unapplied increase to {g.base.aws_desired + g.base.unapplied_increase}"
    elif capacity >= group.max_size:
        blocked = f"{g.name} is at max size {group.max_size}"
    elif base is None:
        blocked = (
            f"{g.name}: no node template ({group.template_error or 'no Ready node and no instance type'})"
        )
    per_node = units_per_node(group, g.inventory.template)
    room = max(0, min(nodes_within(group.max_size - capacity, per_node), max_step))
    return Candidate(
        g.name,
        g.inventory.template,
        base,
        room,
        size=capacity,
        blocked=blocked,
        limit_cost=node_cost(g.inventory, per_node),
    )


def _totals(nodes: Iterable[Node], groups: Iterable[_Group]) -> tuple[int, int, int]:
    """Nodes, CPU and memory the cluster has or has coming, for the cluster-wide limits."""
    count = cpu = memory = 0
    for node in nodes:
        count += 1
        cpu += node.capacity.get(CPU) or node.allocatable.get(CPU)
        memory += node.capacity.get(MEMORY) or node.allocatable.get(MEMORY)
    for g in groups:
        template = g.inventory.template
        if template is not None and g.upcoming:
            # as apply counts them (apply/caps.py): the largest machine AWS may launch for each
            cost = node_cost(g.inventory, units_per_node(g.inventory.group, template))
            count += (cost.machines if cost else 1) * g.upcoming
            cpu += (cost.cpu if cost else counted(template, CPU)) * g.upcoming
            memory += (cost.memory if cost else counted(template, MEMORY)) * g.upcoming
    return count, cpu, memory


def _group_plan(
    g: _Group,
    new_nodes: int,
    pods_helped: int,
    removals: tuple[Removal, ...],
    room: HeadroomPlan | None,
    failing: Sequence[_Group] = (),
) -> GroupPlan:
    """`new_nodes`: those the real pending pods need; the headroom's come on top (`room.added`).
    `failing`: the groups backed off in this plan because AWS could not launch for them, named in a
    scale-up's reason (the pods come here instead)."""
    group = g.inventory.group
    approved = tuple(Removal(i, _node_of(g, i), None, "approved, not yet applied", None) for i in g.kept)
    for_headroom = room.added if room is not None else 0
    per_node = units_per_node(group, g.inventory.template)
    added_units = units(new_nodes + for_headroom, per_node)
    desired = g.base.capacity + len(g.cancelled) + added_units - len(removals)
    reasons: list[str] = []
    action = NONE
    instance_type = g.inventory.template.instance_type if g.inventory.template else "?"
    if new_nodes:
        action = SCALE_UP
        text = f"{pods_helped} pending pod(s) need {new_nodes} × {instance_type}"
        others = [f for f in failing if f.name != g.name and f.launch is not None]
        if others:
            text += " (backed off, AWS could not launch: " + ", ".join(
                f"{f.name} {f.launch.describe()}" for f in others if f.launch is not None
            )
            text += ")"
        reasons.append(text)
    if added_units != new_nodes + for_headroom:
        reasons.append(
            f"{added_units} capacity units for {new_nodes + for_headroom} node(s): WeightedCapacity, "
            f"{per_node} units a node whichever override AWS launches"
        )
    if room is not None and (for_headroom or room.reason):
        text = f"headroom {room.headroom.describe()}"
        if for_headroom:
            action = SCALE_UP
            text += f" needs {for_headroom} × {instance_type}"
            text += f" ({room.reason})" if room.reason else ""
        else:
            text += f": {room.reason}"
        reasons.append(text)
    if g.cancelled:
        action = SCALE_UP
        reasons.append(f"cancel approved removal of {', '.join(g.cancelled)}: pending pods need the capacity")
    if removals and not new_nodes + for_headroom:
        action = SCALE_DOWN
        reasons.extend(f"remove {r.instance_id} ({r.node or 'no node'}): {r.reason}" for r in removals)
    if g.base.held:
        reasons.append("held in the manifest: the planner leaves this group alone")
    if g.base.unapplied_increase:
        reasons.append(
            f"waiting for apply: {g.base.aws_desired} -> "
            f"{g.base.aws_desired + g.base.unapplied_increase} is committed"
        )
    if g.stale:
        reasons.append(f"{len(g.stale)} instance(s) unregistered longer than scaleUp.maxNodeProvisionTime")
    if g.launch is not None:
        reasons.append(_launch_reason(g))
    return GroupPlan(
        name=g.name,
        min_size=group.min_size,
        max_size=group.max_size,
        current=group.desired,
        desired=desired,
        action=action,
        reasons=tuple(reasons),
        removals=approved + removals,
        cancelled_removals=g.cancelled,
        held=g.base.held,
        upcoming=g.upcoming,
        new_nodes=new_nodes + for_headroom,
        backoff_until=g.backoff_until,
        warnings=group.warnings,
        headroom=room,
        launch_failure=g.launch,
        launch_backoff=g.failed > 0,
    )


def _launch_reason(g: _Group) -> str:
    """What it means for this plan, that desired is left as it is (DESIGN §3.12: lowering it could let
    AWS pick a running instance to terminate), and what AWS said, in its own words, last."""
    launch = g.launch
    assert launch is not None
    text = (
        f"AWS could not launch {launch.unfilled} of desired {g.inventory.group.desired}: {launch.describe()}"
    )
    text += f", {launch.failures} failed attempt(s) since {launch.since:%H:%M}"
    if g.failed:
        text += (
            f"; backed off until {launch.until:%H:%M}, not counted as upcoming (desired left as it is: AWS "
            "keeps trying, and an instance that launches late is proposed for removal by name if unneeded)"
        )
    else:
        text += f"; backoff ended at {launch.until:%H:%M}: counted as upcoming again while AWS keeps trying"
    return text + (f"; AWS says: {launch.last.message}" if launch.last.message else "")


def _node_of(g: _Group, instance_id: str) -> str | None:
    return next((n.name for n in g.inventory.nodes if n.instance_id == instance_id), None)
