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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from reconciler.config.settings import ScaleDownConfig
from reconciler.domain.inventory import GroupInventory
from reconciler.domain.model import GPU, OWN_DRAIN_TAINT, SCALE_DOWN_DISABLED, Instance, Node, Pod, Scheduling
from reconciler.planning.drainability import (
    BLOCKS,
    MOVES,
    DrainContext,
    PdbBudget,
    drain_verdict,
    stays_on_node,
)
from reconciler.planning.equivalence import ClassKey
from reconciler.planning.existing import existing_node
from reconciler.planning.headroom import OWN, Keeper, Need
from reconciler.planning.placement import NodePool, Placement
from reconciler.planning.predicates import (
    PredicateContext,
    check,
    fits,
    unmodelled,
)
from reconciler.planning.simnode import SimNode
from reconciler.planning.types import PlanInputs, Removal, UnremovableNode

GPU_LABEL = "k8s.amazonaws.com/accelerator"  # EKS GPU nodes; CA measures them by their GPUs
IN_SERVICE = "InService"
LAUNCHING = frozenset({"Pending", "Pending:Wait", "Pending:Proceed", IN_SERVICE})
EXPLAIN_BUDGET = 250_000  # node visits spent on "why does this pod fit nowhere" per plan

# Candidate kinds, in the order they are tried: what serves nothing goes first.
UNREGISTERED, NOT_READY, EMPTY, UTILISED = 0, 1, 2, 3


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


@dataclass(frozen=True, slots=True)
class Utilization:
    value: float  # max(cpu, memory) share, or the GPU share on a GPU node
    gpu: bool


def utilization(sim: SimNode, now: datetime, *, ignore_daemonsets: bool = False) -> Utilization:
    """Requested / allocatable as CA computes it: the larger of CPU and memory, or the GPU share on a
    node with GPUs (0 while its GPUs are not reported yet). With `ignore_daemonsets`, DaemonSet and
    mirror pods leave both sides of the fraction; long-terminating pods always leave the requested
    side. Read from the simulated node, so pending pods the planner already placed there count (as in
    CA's snapshot). An unknown share (nothing allocatable) counts as full: such a node is never a
    candidate."""
    alloc = sim.allocatable
    gpu_alloc = alloc.get(GPU)
    is_gpu = gpu_alloc > 0 or GPU_LABEL in sim.labels
    ds_cpu = ds_mem = ds_gpu = 0  # out of both sides
    gone_cpu = gone_mem = gone_gpu = 0  # out of the requested side only
    for pod in sim.pods:
        if ignore_daemonsets and (pod.is_daemonset or pod.is_mirror):
            values = pod.requests.values
            ds_cpu += values.get("cpu", 0)
            ds_mem += values.get("memory", 0)
            ds_gpu += values.get(GPU, 0)
        elif pod.deleting_since is not None and pod.is_long_terminating(now):
            values = pod.requests.values
            gone_cpu += values.get("cpu", 0)
            gone_mem += values.get("memory", 0)
            gone_gpu += values.get(GPU, 0)
    if is_gpu:
        if gpu_alloc <= 0:
            return Utilization(0.0, True)
        used_gpu = gpu_alloc - sim.free_amount(GPU) - ds_gpu - gone_gpu
        return Utilization(_share(used_gpu, gpu_alloc - ds_gpu), True)
    cpu = _share(alloc.cpu - sim.cpu_free - ds_cpu - gone_cpu, alloc.cpu - ds_cpu)
    mem = _share(alloc.memory - sim.mem_free - ds_mem - gone_mem, alloc.memory - ds_mem)
    return Utilization(max(cpu, mem), False)


def _share(used: int, total: int) -> float:
    return 1.0 if total <= 0 else max(used, 0) / total


# ---------------------------------------------------------------------------------- per group


@dataclass(frozen=True, slots=True)
class _GroupRules:
    """A group's effective settings: autoscaling-options tags over the config."""

    name: str
    threshold: float
    gpu_threshold: float
    unneeded_time: timedelta
    unready_time: timedelta
    ignore_daemonsets: bool
    min_size: int
    baseline: int
    excluded: bool
    since_scale_up: timedelta | None  # set while a scale-up is younger than delayAfterScaleUp


def _group_rules(
    inv: GroupInventory,
    cfg: ScaleDownConfig,
    inputs: PlanInputs,
    baseline: Mapping[str, int],
    excluded: frozenset[str],
) -> _GroupRules:
    group = inv.group
    o = group.options
    since_scale_up = None
    applied = inputs.memory.last_scale_up.get(group.name)
    if applied is not None and inputs.now - applied < cfg.delay_after_scale_up:
        since_scale_up = max(inputs.now - applied, timedelta(0))
    return _GroupRules(
        name=group.name,
        threshold=_pick(o.scale_down_utilization_threshold, cfg.utilization_threshold),
        gpu_threshold=_pick(o.scale_down_gpu_utilization_threshold, cfg.gpu_utilization_threshold),
        unneeded_time=_seconds(o.scale_down_unneeded_time_seconds, cfg.unneeded_time),
        unready_time=_seconds(o.scale_down_unready_time_seconds, cfg.unready_time),
        ignore_daemonsets=(
            cfg.ignore_daemonsets_utilization
            if o.ignore_daemonsets_utilization is None
            else o.ignore_daemonsets_utilization
        ),
        min_size=group.min_size,
        baseline=baseline.get(group.name, group.desired),
        excluded=group.name in excluded,
        since_scale_up=since_scale_up,
    )


def _pick(value: float | None, default: float) -> float:
    return default if value is None else value


def _seconds(value: float | None, default: timedelta) -> timedelta:
    return default if value is None else timedelta(seconds=value)


# ---------------------------------------------------------------------------------- candidates


@dataclass(slots=True)
class _Candidate:
    """A node or instance that may go, with what removing it involves."""

    kind: int
    group: str
    name: str  # node name, or the instance id of an unregistered instance
    instance_id: str
    utilization: float | None = None
    below: bool = False  # at or below threshold and Ready: its unneeded time is tracked
    since: datetime | None = None  # NotReady / launched since
    sim: SimNode | None = None
    in_pool: bool = False
    movers: tuple[Pod, ...] = ()  # pods that need a new home, largest first
    evicted: tuple[Pod, ...] = ()  # of those, the ones running here (they spend PDB budget)
    blocker: str | None = None  # a pod that forbids the drain
    analysed: int = -1  # len(sim.pods) when analysed: earlier removals may have moved pods here since

    @property
    def order(self) -> tuple[int, float, str]:
        return (self.kind, self.utilization or 0.0, self.name)


class _Planner:
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
            inv.name: _group_rules(inv, self.cfg, inputs, baseline, excluded_groups)
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

    # ------------------------------------------------------------------------------ collection

    def collect(self) -> tuple[list[_Candidate], dict[str, list[_Candidate]]]:
        """Regular candidates (in trial order) and, per forced group, every node or instance it could
        give up (in the same order)."""
        regular: list[_Candidate] = []
        forced: dict[str, list[_Candidate]] = {}
        for inv in self.inputs.inventory.groups:
            rules = self.rules[inv.name]
            is_forced = self.forced.get(inv.name, 0) > 0
            extra: list[_Candidate] = []
            for candidate in self._instances(inv, rules):
                regular.append(candidate)
                if is_forced:
                    extra.append(candidate)
            for candidate, regular_too in self._nodes(inv, rules, is_forced):
                if regular_too:
                    regular.append(candidate)
                if is_forced:
                    extra.append(candidate)
            if is_forced:
                forced[inv.name] = sorted(extra, key=self._trial_order)
        regular.sort(key=self._trial_order)
        return regular, forced

    def _trial_order(self, candidate: _Candidate) -> tuple[bool, tuple[int, float, str]]:
        """Instances an open proposal already names go first: a proposal under review stays stable
        instead of churning between equally good nodes."""
        return candidate.instance_id not in self.preferred, candidate.order

    def _instances(self, inv: GroupInventory, rules: _GroupRules) -> list[_Candidate]:
        """Instances with no node past maxNodeProvisionTime: they serve nothing. Younger ones are still
        launching (scale-up counts them as upcoming) and are left alone, even by a forced count."""
        limit = self.inputs.config.scale_up.max_node_provision_time
        found = []
        for inst in sorted(inv.unregistered, key=lambda i: i.instance_id):
            if inst.instance_id in self.approved or inst.lifecycle_state not in LAUNCHING:
                continue
            if inst.launch_time is None or self.now - inst.launch_time < limit:
                continue
            if inst.protected_from_scale_in:
                self._keep(
                    inst.instance_id, rules.name, f"instance {inst.instance_id} is protected from scale-in"
                )
                continue
            candidate = _Candidate(UNREGISTERED, rules.name, inst.instance_id, inst.instance_id)
            candidate.since = inst.launch_time
            found.append(candidate)
        return found

    def _nodes(
        self, inv: GroupInventory, rules: _GroupRules, is_forced: bool
    ) -> list[tuple[_Candidate, bool]]:
        """Registered nodes worth trying, each with whether it is a regular candidate."""
        instances = {i.instance_id: i for i in inv.group.instances}
        inventory = self.inputs.inventory
        cutoff = self.inputs.config.scale_up.expendable_priority_cutoff
        found = []
        for node in sorted(inv.nodes, key=lambda n: n.name):
            instance_id = node.instance_id
            if instance_id in self.approved:
                continue
            sim = self.pool.get(node.name)
            in_pool = sim is not None
            if sim is not None and self.pool.is_retired(node.name):
                continue
            if sim is None:
                sim = existing_node(node, inventory, cutoff)
            util = utilization(sim, self.now, ignore_daemonsets=rules.ignore_daemonsets)
            threshold = rules.gpu_threshold if util.gpu else rules.threshold
            # at the threshold counts, as CA since 1.35 (isNodeAtOrBelowUtilizationThreshold)
            below = node.ready and util.value <= threshold
            if node.ready and not below and not is_forced:
                continue  # busy enough: not listed
            blocker = self._node_blocker(node, instances.get(instance_id))
            if blocker is not None:
                self._keep(node.name, inv.name, blocker)
                continue
            candidate = _Candidate(
                NOT_READY if not node.ready else UTILISED,
                inv.name,
                node.name,
                instance_id,
                utilization=util.value,
                below=below,
                sim=sim,
                in_pool=in_pool,
            )
            regular = below
            if not node.ready:
                candidate.since = node.ready_since
                regular = self._unready_long_enough(candidate, rules)
            self._analyse(candidate)
            if candidate.kind == UTILISED and not candidate.movers and candidate.blocker is None:
                candidate.kind = EMPTY
            found.append((candidate, regular))
        return found

    def _node_blocker(self, node: Node, instance: Instance | None) -> str | None:
        """What keeps a node whatever its pods: a person's annotation or cordon, an instance that is
        not plainly in service."""
        if node.annotations.get(SCALE_DOWN_DISABLED) == "true":
            return "scale-down disabled by annotation"
        if any(t.key == OWN_DRAIN_TAINT for t in node.taints):
            return "being drained by asg-reconciler"
        if node.unschedulable:
            return "cordoned by someone else"
        if instance is None:
            return f"instance {node.instance_id or '?'} is not in the group"
        if instance.lifecycle_state != IN_SERVICE:
            return f"instance {instance.instance_id} is {instance.lifecycle_state}"
        if instance.protected_from_scale_in:
            return f"instance {instance.instance_id} is protected from scale-in"
        return None

    def _unready_long_enough(self, candidate: _Candidate, rules: _GroupRules) -> bool:
        since = candidate.since
        if since is None:
            self._keep(candidate.name, rules.name, "NotReady since an unknown time")
            return False
        age = self.now - since
        if age < rules.unready_time:
            self._keep(
                candidate.name,
                rules.name,
                f"NotReady for {_ago(age)} (proposed after {_ago(rules.unready_time)})",
            )
            return False
        return True

    def _analyse(self, candidate: _Candidate) -> None:
        """Split the node's pods into those that stay and those that must move; find the first pod
        that forbids the drain. Pods that are not running here (pending pods the planner placed here,
        pods moved here by an earlier removal) only need a new home."""
        assert candidate.sim is not None
        candidate.analysed = len(candidate.sim.pods)
        candidate.blocker = None
        movers: list[Pod] = []
        evicted: list[Pod] = []
        name = candidate.name
        for pod in candidate.sim.pods:
            if stays_on_node(pod, self.now):
                continue
            if pod.node_name == name:
                verdict = drain_verdict(pod, self.drain_ctx)
                if verdict.outcome == BLOCKS:
                    candidate.blocker = verdict.reason
                    return
                if verdict.outcome != MOVES:
                    continue
                evicted.append(pod)
            reason = self._unmodelled_reason(pod)
            if reason is not None:
                candidate.blocker = f"pod {pod.key}: {reason}"  # DESIGN §3.8: unmodelled means pinned
                return
            movers.append(pod)
        movers.sort(key=lambda p: (-p.requests.cpu, -p.requests.memory))  # a failing node fails fast
        candidate.movers = tuple(movers)
        candidate.evicted = tuple(evicted)

    def _unmodelled_reason(self, pod: Pod) -> str | None:
        s = pod.scheduling
        key = (id(s), pod.namespace)
        hit = self._unmodelled.get(key)
        if hit is None or hit[0] is not s:
            hit = (s, unmodelled(pod, self.pool.ctx.topology))
            self._unmodelled[key] = hit
        return hit[1]

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

    def evaluate(self, c: _Candidate, *, forced: bool) -> None:
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

    def _only_for_headroom(self, c: _Candidate, rules: _GroupRules) -> bool:
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

    def _reschedule(self, c: _Candidate) -> Placement | str:
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

    def _known_to_fail(self, c: _Candidate) -> Pod | None:
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

    def _gate(self, c: _Candidate, rules: _GroupRules, *, forced: bool, since: datetime | None) -> str | None:
        """The first rule that keeps an otherwise removable candidate for now."""
        if rules.excluded:
            return self._excluded_reason(rules)
        if rules.baseline - len(self.removed[rules.name]) <= rules.min_size:
            return f"group {rules.name} at min size {rules.min_size}"
        if not forced and c.kind in (EMPTY, UTILISED):
            if since is not None and self.now - since < rules.unneeded_time:
                return f"not unneeded long enough ({_ago(self.now - since)} of {_ago(rules.unneeded_time)})"
            if rules.since_scale_up is not None:
                return f"a scale-up of {rules.name} was applied {_ago(rules.since_scale_up)} ago"
        if self.total >= self.cfg.max_nodes_per_plan:
            return f"max {self.cfg.max_nodes_per_plan} removals per plan reached"
        return None

    def _excluded_reason(self, rules: _GroupRules) -> str:
        return (
            self.exclusion_reasons.get(rules.name) or f"group {rules.name} does not scale down in this plan"
        )

    def _remove(self, c: _Candidate, since: datetime | None, *, forced: bool) -> None:
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

    def _removal_reason(self, c: _Candidate, since: datetime | None) -> str:
        if c.kind == UNREGISTERED:
            assert c.since is not None
            return f"unregistered for {_ago(self.now - c.since)}"
        if c.kind == NOT_READY:
            return "NotReady" if c.since is None else f"NotReady for {_ago(self.now - c.since)}"
        for_how_long = "" if since is None else f" for {_ago(self.now - since)}"
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


def _ago(value: timedelta) -> str:
    """Minutes (and hours) once past a minute: reasons should not change with every second."""
    total = max(int(value.total_seconds()), 0)
    if total < 60:
        return f"{total}s"
    hours, minutes = divmod(total // 60, 60)
    return f"{hours}h{minutes}m" if hours and minutes else f"{hours}h" if hours else f"{minutes}m"


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
