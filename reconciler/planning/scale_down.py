"""Scale-down: which instances may go, each one named (DESIGN §3.2), and why every other
below-threshold node stays.

As cluster-autoscaler: a node is *unneeded* when it is Ready and eligible, its utilisation is at or
below the group's threshold (exactly at it counts, as in CA 1.35+), no pod on it forbids a drain, and
every pod that would have to move fits on a node that stays. It is proposed once it has been unneeded
for `unneededTime` (the first sighting is stored on the state branch; without one it became unneeded
now), no scale-up of its group was applied within `delayAfterScaleUp`, the group stays at or above its
min size, and `maxNodesPerPlan` is not reached. Nodes NotReady for longer than `unreadyTime` and
instances that never registered within `maxNodeProvisionTime` serve nothing and are proposed regardless
of utilisation. A desired capacity a person lowered by hand names that many instances (`forced`),
skipping the threshold and the timers but not drainability or the min size.

Candidates are tried in one order (unregistered, NotReady, empty, then least utilised; ties by name),
and each removal books its pods on the nodes that stay and retires the node in the pool, so the next
candidate sees the room that is left and a PDB budget is shared by all of them. Pure; same input,
same output. The rules are written down in docs/planning.md ("Scale-down").

Which nodes are candidates, and their utilisation, is scale_down_eligibility.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from reconciler.domain.model import GPU, Pod, Scheduling
from reconciler.planning.drainability import (
    DrainContext,
    PdbBudget,
)
from reconciler.planning.equivalence import ClassKey
from reconciler.planning.headroom import OWN, Keeper, Need
from reconciler.planning.placement import NodePool, Placement
from reconciler.planning.predicates import (
    PredicateContext,
    check,
    fits,
)
from reconciler.planning.scale_down_eligibility import (
    EMPTY,
    EXPLAIN_BUDGET,
    GPU_LABEL,
    NOT_READY,
    UNREGISTERED,
    UTILISED,
    Eligibility,
    GroupRules,
    RemovalCandidate,
    format_ago,
    group_rules,
)
from reconciler.planning.simnode import SimNode
from reconciler.planning.types import PlanInputs, Removal, UnremovableNode


@dataclass(frozen=True)
class ScaleDownResult:
    removals: Mapping[str, tuple[Removal, ...]]  # group -> instances newly proposed, best first
    unremovable: tuple[UnremovableNode, ...]  # every below-threshold (or otherwise considered) node kept
    unneeded_since: Mapping[str, datetime]  # node -> since when unneeded (new PlannerMemory.unneeded_since)
    # node -> where each of its pods goes, in booking order: what makes the removal safe, and what a
    # test replays against the predicates
    moves: Mapping[str, tuple[tuple[Pod, str], ...]] = field(default_factory=dict)
    headroom_kept: Mapping[str, int] = field(default_factory=dict)  # group -> its nodes kept for headroom


# ---------------------------------------------------------------------------------- utilisation


class _Planner(Eligibility):
    """One scale-down computation; holds the shared state (pool, PDB budget, counts) of one plan."""

    def __init__(
        self,
        inputs: PlanInputs,
        pool: NodePool,
        excluded_groups: frozenset[str],
        forced: Mapping[str, int],
        baseline: Mapping[str, int],
        approved: frozenset[str],
        exclusion_reasons: Mapping[str, str],
        onto_upcoming: bool,
        preferred: frozenset[str] = frozenset(),
        booked: Sequence[tuple[Pod, str]] = (),
        headroom: Sequence[Need] = (),
    ) -> None:
        self.inputs = inputs
        self.preferred = preferred
        self.cfg = inputs.config.scale_down
        self.now = inputs.now
        self.pool = pool
        self.forced = forced
        self.approved = approved
        self.exclusion_reasons = exclusion_reasons
        inventory = inputs.inventory
        self.rules = {
            inv.name: group_rules(inv, self.cfg, inputs, baseline, excluded_groups)
            for inv in inventory.groups
        }
        self.budget = PdbBudget(inventory.state.pdbs)
        self.drain_ctx = DrainContext(
            self.cfg, self.now, self.budget.has_pdb, inputs.config.scale_up.expendable_priority_cutoff
        )
        self._unmodelled: dict[tuple[int, str], tuple[Scheduling, str | None]] = {}
        # Moved pods whose verdict a later move can change (spread, affinity), with where they went:
        # each removal must leave every one of them where the scheduler would still let it be.
        self.fragile: list[tuple[Pod, str]] = [(p, n) for p, n in booked if not pool.sticky(p)]
        # Destinations are the nodes that stay: never nodes that do not exist yet, unless asked.
        self.exclude: set[str] = set() if onto_upcoming else {n.name for n in pool.nodes if n.is_new}
        not_ready = {n.name for n in inventory.state.nodes if not n.ready}
        self.exclude.update(not_ready)  # no home for a pod
        # Headroom counts room on nodes that are coming too: they will exist when a burst comes.
        self.headroom = Keeper(headroom, pool, not_ready)
        # Nodes kept only for their group's headroom: what the plan reports as the part of desired
        # that is there for it (`_only_for_headroom`).
        self.for_headroom: dict[str, list[str]] = {}
        self.removed: dict[str, list[Removal]] = {name: [] for name in self.rules}
        self.total = 0
        self.moves: dict[str, tuple[tuple[Pod, str], ...]] = {}
        self.unremovable: dict[str, UnremovableNode] = {}
        self.unneeded: dict[str, datetime] = {}
        self.done: set[str] = set()
        self._explained: dict[ClassKey, str] = {}
        self._refused: dict[ClassKey, str | None] = {}  # see _learn_refusal
        self._explain_budget = EXPLAIN_BUDGET

    # ------------------------------------------------------------------------------ decisions

    def run(self) -> ScaleDownResult:
        regular, forced = self.collect()
        for group in sorted(forced):
            want = self.forced[group]
            if self.rules[group].excluded:
                continue
            for candidate in forced[group]:
                if len(self.removed[group]) >= want:
                    break
                if candidate.name not in self.done:
                    self.evaluate(candidate, forced=True)
        for candidate in regular:
            if candidate.name not in self.done:
                self.evaluate(candidate, forced=False)
        return ScaleDownResult(
            removals={g: tuple(r) for g, r in sorted(self.removed.items()) if r},
            unremovable=tuple(self.unremovable[k] for k in sorted(self.unremovable)),
            unneeded_since=dict(sorted(self.unneeded.items())),
            moves=self.moves,
            headroom_kept={g: len(nodes) for g, nodes in sorted(self.for_headroom.items())},
        )

    def evaluate(self, c: RemovalCandidate, *, forced: bool) -> None:
        """Try one candidate: drain rules, PDB budget, rescheduling; then the gates. A candidate that
        passes the first three is unneeded (tracked) even when a gate keeps it for now."""
        self.done.add(c.name)
        rules = self.rules[c.group]
        if c.kind == UNREGISTERED:
            gate = self._gate(c, rules, forced=forced, since=None)
            if gate is not None:
                self._keep(c.name, c.group, gate)
            else:
                self._remove(c, None, forced=forced)
            return
        if c.sim is not None and len(c.sim.pods) != c.analysed:
            self._analyse(c)  # pods only ever join a node that stays, so the length tells
        if c.blocker is not None:
            self._keep(c.name, c.group, c.blocker)
            return
        if not c.below:
            # Nothing to track: the cheap gates first, no simulation for a node that stays anyway.
            gate = self._gate(c, rules, forced=forced, since=None)
            if gate is not None:
                self._keep(c.name, c.group, gate)
                return
        pdb = self.budget.blocking(c.evicted)
        if pdb is not None:
            self._keep(c.name, c.group, pdb)
            return
        placement = self._reschedule(c)
        if isinstance(placement, str):
            self._keep(c.name, c.group, placement)
            return
        # Headroom next: a node it needs is needed (not unneeded), whatever the gates say.
        short, room_changes = self.headroom.judge(c.name, c.group, placement.placed)
        if short is not None:
            self.pool.undo(placement)
            self._keep(c.name, c.group, short)
            if short.startswith(OWN) and self._only_for_headroom(c, rules):
                self.for_headroom.setdefault(c.group, []).append(c.name)
            return
        since = None
        if c.below:
            since = self.inputs.memory.unneeded_since.get(c.name, self.now)
            self.unneeded[c.name] = since
        gate = self._gate(c, rules, forced=forced, since=since)
        if gate is not None:
            self.pool.undo(placement)
            self._keep(c.name, c.group, gate)
            return
        fragile = self.fragile + [(p, n) for p, n in placement.placed if not self.pool.sticky(p)]
        fragile = [(p, n) for p, n in fragile if not self.pool.is_retired(n) and n != c.name]
        broken = self._broken(fragile)
        if broken is not None:
            self.pool.undo(placement)
            self._keep(c.name, c.group, broken)
            return
        self.fragile = fragile
        if c.in_pool:
            self.pool.retire(c.name)
        self.budget.take(c.evicted)
        self.moves[c.name] = placement.placed
        self.headroom.commit(room_changes)
        self._remove(c, since, forced=forced)

    def _only_for_headroom(self, c: RemovalCandidate, rules: GroupRules) -> bool:
        """Whether a node its group's headroom keeps would go without it, so that it counts as part
        of desired that is there for the headroom. Judged as a plan without headroom would go on:
        the nodes counted so far are gone too (their pods not moved: an estimate), the min size
        holds; the timers and the per-plan cap are left out (they delay a removal, not prevent it)."""
        counted = self.for_headroom.get(c.group, [])
        if rules.baseline - len(self.removed[c.group]) - len(counted) <= rules.min_size:
            return False
        if not c.movers:
            return True
        trial = self.pool.place(
            c.movers,
            exclude={*self.exclude, c.name, *counted},
            atomic=True,
            vacating=c.name if c.in_pool else None,
        )
        if not trial.complete:
            return False
        self.pool.undo(trial)
        return True

    def _broken(self, moved: list[tuple[Pod, str]]) -> str | None:
        """A pod this plan booked (a pending pod placed, a pod moved) that the scheduler would no
        longer let stay where the plan put it, now that this node's pods have moved too (they may
        have emptied the zone that kept a spread in bounds, or taken an affinity match away)."""
        broken = self.pool.first_broken(moved)
        return None if broken is None else f"moving its pods would leave {broken}"

    def _reschedule(self, c: RemovalCandidate) -> Placement | str:
        """Book every mover on a node that stays (never on this one, on nodes already removed, or on
        nodes that do not exist yet), all or nothing; the reason when one fits nowhere."""
        doomed = self._known_to_fail(c)
        exclude = self.exclude
        added = c.name not in exclude
        exclude.add(c.name)
        try:
            if doomed is not None:
                return self._explain(doomed, exclude)
            placement = self.pool.place(
                c.movers, exclude=exclude, atomic=True, vacating=c.name if c.in_pool else None
            )
            if placement.complete:
                return placement
            failed = placement.unplaced[0]
            if c.movers and failed is c.movers[0] and self.pool.sticky(failed):
                self._learn_refusal(failed, c.name)
            return self._explain(failed, exclude)
        finally:
            if added:
                exclude.discard(c.name)

    # Why this memo is sound: within one plan, room on a node that stays only shrinks (trials are
    # taken back, removals book pods and retire nodes) and predicates are monotone, so a pod class
    # that fit nowhere outside {candidate} (plus the always-excluded upcoming nodes) never fits
    # anywhere else later. Only a refusal of a call's *first* pod is learnt: later pods were refused
    # with the call's own earlier pods booked, which the roll-back undid. Without it, a cluster where
    # nothing can move costs a walk over every candidate per candidate (the excluded candidate stops
    # the pool's cursors from advancing).

    def _learn_refusal(self, pod: Pod, candidate: str) -> None:
        key = self.pool.classifier.key(pod)
        if key not in self._refused:
            self._refused[key] = candidate  # it may still fit there, once that node is not excluded
        elif self._refused[key] != candidate:
            self._refused[key] = None  # refused outside two disjoint sets: nowhere

    def _known_to_fail(self, c: RemovalCandidate) -> Pod | None:
        """The first mover whose class is known to fit on no node this trial may use, or None."""
        if not self._refused:
            return None
        classifier = self.pool.classifier
        for pod in c.movers:
            key = classifier.key(pod)
            if key not in self._refused:
                continue
            only = self._refused[key]
            if only is not None and only != c.name:
                node = self.pool.get(only)
                if node is not None and not self.pool.is_retired(only) and fits(pod, node, self.pool.ctx):
                    continue
                self._refused[key] = None
            return pod
        return None

    def _gate(
        self, c: RemovalCandidate, rules: GroupRules, *, forced: bool, since: datetime | None
    ) -> str | None:
        """The first rule that keeps an otherwise removable candidate for now."""
        if rules.excluded:
            return self._excluded_reason(rules)
        if rules.baseline - len(self.removed[rules.name]) <= rules.min_size:
            return f"group {rules.name} at min size {rules.min_size}"
        if not forced and c.kind in (EMPTY, UTILISED):
            if since is not None and self.now - since < rules.unneeded_time:
                waited, needed = format_ago(self.now - since), format_ago(rules.unneeded_time)
                return f"not unneeded long enough ({waited} of {needed})"
            if rules.since_scale_up is not None:
                return f"a scale-up of {rules.name} was applied {format_ago(rules.since_scale_up)} ago"
        if self.total >= self.cfg.max_nodes_per_plan:
            return f"max {self.cfg.max_nodes_per_plan} removals per plan reached"
        return None

    def _excluded_reason(self, rules: GroupRules) -> str:
        return (
            self.exclusion_reasons.get(rules.name) or f"group {rules.name} does not scale down in this plan"
        )

    def _remove(self, c: RemovalCandidate, since: datetime | None, *, forced: bool) -> None:
        reason = self._removal_reason(c, since)
        if forced:
            reason = f"desired lowered by hand ({reason})"
        self.removed[c.group].append(
            Removal(
                instance_id=c.instance_id,
                node=None if c.kind == UNREGISTERED else c.name,
                utilization=c.utilization,
                reason=reason,
                since=since if c.kind in (EMPTY, UTILISED) else c.since,
            )
        )
        self.total += 1
        self.unremovable.pop(c.name, None)

    def _removal_reason(self, c: RemovalCandidate, since: datetime | None) -> str:
        if c.kind == UNREGISTERED:
            assert c.since is not None
            return f"unregistered for {format_ago(self.now - c.since)}"
        if c.kind == NOT_READY:
            return "NotReady" if c.since is None else f"NotReady for {format_ago(self.now - c.since)}"
        for_how_long = "" if since is None else f" for {format_ago(self.now - since)}"
        if c.kind == EMPTY:
            return f"empty{for_how_long}"
        util = _percent(c.utilization or 0.0)
        if not c.below:
            return f"utilisation {util}; pods fit elsewhere"
        rules = self.rules[c.group]
        sim = c.sim
        threshold = rules.gpu_threshold if sim is not None and _is_gpu(sim) else rules.threshold
        sign = "<" if (c.utilization or 0.0) < threshold else "="
        return f"utilisation {util} {sign} {_percent(threshold)}{for_how_long}; pods fit elsewhere"

    def _keep(self, name: str, group: str, reason: str) -> None:
        """Record why a node stays; a later, more specific finding replaces an earlier one."""
        self.unremovable[name] = UnremovableNode(node=name, node_group=group, reason=reason)

    # ------------------------------------------------------------------------------ explanations

    def _explain(self, pod: Pod, exclude: set[str]) -> str:
        """Why `pod` fits on no node that stays: the most common refusals across them, counted the
        first time its class fails (later failures of the class reuse them), within a node-visit
        budget, so a cluster where nothing moves stays fast."""
        key = self.pool.classifier.key(pod)
        known = self._explained.get(key)
        if known is not None:
            return f"pod {pod.key} fits on no other node{known}"
        detail = ""
        if self._explain_budget > 0:
            detail = _tally(pod, self.pool, exclude, self.pool.ctx)
            self._explain_budget -= len(self.pool)
        self._explained[key] = detail
        return f"pod {pod.key} fits on no other node{detail}"


def _tally(pod: Pod, pool: NodePool, exclude: set[str], ctx: PredicateContext) -> str:
    """`: insufficient cpu on 12 nodes, taint ... not tolerated on 3 nodes` (top three refusals)."""
    values = pod.requests.values
    cpu, mem = values.get("cpu", 0), values.get("memory", 0)
    counts: dict[str, int] = {}
    for node in pool.nodes:
        if node.name in exclude or pool.is_retired(node.name):
            continue
        if cpu > 0 and cpu > node.cpu_free:
            reason = "insufficient cpu"
        elif mem > 0 and mem > node.mem_free:
            reason = "insufficient memory"
        else:
            found = check(pod, node, ctx)
            reason = "room taken by the node's other pods" if found is None else _refusal_kind(found)
        counts[reason] = counts.get(reason, 0) + 1
    if not counts:
        return ": no other node"
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    return ": " + ", ".join(f"{reason} on {n} node{'s' if n != 1 else ''}" for reason, n in top)


def _refusal_kind(reason: str) -> str:
    """A predicate's reason without what varies from node to node (amounts, the pod in the way), so
    refusals can be counted and a class's explanation holds for each of its pods."""
    if reason.startswith(("insufficient ", "too many pods", "topology spread on ")):
        return reason.split(":")[0]
    if reason.startswith(("anti-affinity with pod ", "anti-affinity of pod ")):
        return "pod anti-affinity on " + reason.rsplit(" on ", 1)[-1]
    return reason


def _is_gpu(sim: SimNode) -> bool:
    return sim.allocatable.get(GPU) > 0 or GPU_LABEL in sim.labels


def _percent(value: float) -> str:
    """Truncated, so a node at 49.9% never reads as "50% < 50%"."""
    return f"{int(value * 100 + 1e-9)}%"


# ---------------------------------------------------------------------------------- entry point


def plan_scale_down(
    inputs: PlanInputs,
    pool: NodePool,
    *,
    excluded_groups: frozenset[str] = frozenset(),
    forced: Mapping[str, int] | None = None,
    baseline: Mapping[str, int] | None = None,
    approved: frozenset[str] = frozenset(),
    exclusion_reasons: Mapping[str, str] | None = None,
    onto_upcoming: bool = False,
    preferred: frozenset[str] = frozenset(),
    booked: Sequence[tuple[Pod, str]] = (),
    headroom: Sequence[Need] = (),
) -> ScaleDownResult:
    """Named removals per group, the reasons the other candidates stay, and the new unneeded times.

    `pool` holds the existing nodes (and upcoming template nodes) with pending pods already placed and
    approved removals retired; it is updated in place: each removed node is retired and its pods stay
    booked where they were moved. `forced[g]` instances are named in group g whatever the threshold and
    timers (a desired lowered by hand); `baseline[g]` is the capacity counted against min size (default:
    the ASG's desired); `approved` instance ids are never candidates again; `exclusion_reasons[g]` words
    why an excluded group keeps its nodes; `onto_upcoming` lets pods move onto nodes not yet running;
    `preferred` instances (named by an open proposal) are tried first; `booked` are the pods the plan
    placed before (pending pods, approved removals' moves), which no removal may strand; `headroom`
    are the groups' headroom needs, whose room no removal may take (planning/headroom.py).
    With `scaleDown.enabled: false` nothing is proposed and nothing tracked.
    """
    if not inputs.config.scale_down.enabled:
        return ScaleDownResult(removals={}, unremovable=(), unneeded_since={})
    planner = _Planner(
        inputs,
        pool,
        excluded_groups,
        forced or {},
        baseline or {},
        approved,
        exclusion_reasons or {},
        onto_upcoming,
        preferred,
        booked,
        headroom,
    )
    return planner.run()
