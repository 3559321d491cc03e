"""Replay a workload trace through the planner `plan` uses, under one scale-down policy.

`simulate(trace, config, settings, policy) -> PolicyResult` is pure (no I/O; every draw seeded):
events (arrivals, departures, jobs finishing, instances joining, approvals) are applied in time
order, and after each moment's events the scheduler binds what fits. At every `run.interval` the
planner runs on a snapshot of the simulated cluster and ASGs, exactly as `plan` would on a live one:
`build_inventory` then `planning.plan.make_plan`, with the planner memory (unneeded_since,
backoffs, last scale-up) carried from step to step and the open proposal's instances as `proposed`.
Its scale-ups are applied at once (instances launch and join after the provisioning delay), under
ours at most `apply.maxStep` per group per step as apply raises them (the rest stays decided on
"main", an unapplied increase the next plans count as upcoming, and is raised at the next steps); its
scale-downs go through the policy (`policies.py`). Under ours an approved removal is drained only if
apply's re-check (`apply.recheck.approved_verdicts`, DESIGN §3 rule 5) passes it on the same
snapshot the plan read; one it refuses stays approved and waits, as in apply.

Ordering at one moment: departures and finished jobs, then joins, then approvals, then arrivals,
then the scheduler; a plan at that moment comes last, so it sees everything that happened by then.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from reconciler.apply.recheck import approved_verdicts
from reconciler.aws.instance_types import InstanceTypeInfo
from reconciler.config.settings import Config
from reconciler.domain.durations import format_duration
from reconciler.domain.errors import UserError
from reconciler.domain.inventory import Inventory, build_inventory
from reconciler.planning import plan as planner
from reconciler.planning.types import CommittedGroup, PlanInputs, PlannerMemory
from reconciler.simulation.cluster import INITIAL_AGE, BoundPod, PendingPod, World, group_template
from reconciler.simulation.metrics import PolicyResult, ProposalFigures, Recorder
from reconciler.simulation.policies import Autoscaler, Policy, ProvisioningModel, Reviewed
from reconciler.simulation.trace import Arrival, Departure, Trace

# event kinds, in the order they apply at one moment
_DEPART, _FINISH, _JOIN, _APPROVE, _ARRIVE = range(5)


@dataclass(frozen=True)
class Settings:
    """Everything a run needs besides the trace, the config and the policy."""

    instance_types: Mapping[str, InstanceTypeInfo]
    prices: Mapping[str, float] = field(default_factory=dict)
    seed: int = 1
    provisioning: ProvisioningModel = field(default_factory=ProvisioningModel)
    duration: float | None = None  # seconds simulated; None: up to the trace's last event
    label: str = "trace"  # how errors name the trace


def simulate(trace: Trace, config: Config, settings: Settings, policy: Policy) -> PolicyResult:
    """The run of `trace` under `policy`; the same inputs give the same result."""
    return _Run(trace, config, settings, policy).run()


MAX_PLANS = 300_000  # 31 days at a 10-second run.interval: minutes of work for a small cluster, not hours


def steps_of(trace: Trace, config: Config, duration: float | None) -> tuple[float, int]:
    """(the simulated span in seconds, how many plans run in it: one at 0 and every interval);
    a span whose plans would run for hours is refused before the first, naming the interval."""
    interval = config.run.interval.total_seconds()
    end = trace.end_at if duration is None else duration
    if interval <= 0:
        raise UserError("run.interval: 0s cannot be simulated (use a positive interval, e.g. 30s)")
    plans = math.floor(end / interval) + 1
    if plans > MAX_PLANS:
        longest = format_duration(timedelta(seconds=math.floor((MAX_PLANS - 1) * interval)))
        raise UserError(
            f"run.interval: {format_duration(config.run.interval)} over "
            f"{format_duration(timedelta(seconds=end))} is {plans:,} plans, "
            f"at most {MAX_PLANS:,} (simulate at most {longest} with --duration, or a longer run.interval)"
        )
    return end, plans


@dataclass
class _Proposal:
    index: int
    opened: float
    named: dict[str, str]  # instance -> group, what the latest plan proposes
    ever: set[str]  # every instance it named


class _Run:
    def __init__(self, trace: Trace, config: Config, settings: Settings, policy: Policy) -> None:
        if not trace.groups:
            raise UserError(f"{settings.label}: the cluster line has no groups (a trace needs at least one)")
        self.trace, self.config, self.settings, self.policy = trace, config, settings, policy
        self.start = trace.start
        self.interval = config.run.interval.total_seconds()
        self.end, self.plans = steps_of(trace, config, settings.duration)
        templates = [
            (g, group_template(g, settings.instance_types, config, settings.label)) for g in trace.groups
        ]
        namespaces = sorted({e.pod.namespace for e in trace.events if isinstance(e, Arrival)})
        self.world = World(trace.start, templates, namespaces)
        self.recorder = Recorder({g.name: g.instance_type for g in trace.groups})
        self.memory = PlannerMemory()
        self.last_scale_up: dict[str, datetime] = {}
        self.run_for: dict[str, float] = {}  # pod key -> seconds it runs once bound (jobs)
        # pod key -> the serial of its current binding (one counter for every binding of the run, never
        # reset): a finish event of an earlier binding (before an eviction, or of an earlier pod of
        # the same name) names another serial and is skipped
        self.generation: dict[str, int] = {}
        self.bindings = 0
        # ours: increases decided ("on main") but not yet raised in the ASG (apply.maxStep per step)
        self.unapplied: dict[str, int] = {}
        self.refused: set[str] = set()  # approved instances apply's re-check held back at least once
        self.approved: dict[str, tuple[str, float]] = {}  # instance -> (group, approved at)
        self.proposal: _Proposal | None = None
        self.proposals = ProposalFigures()
        self.proposal_count = 0
        self.pending_reasons: dict[str, str] = {}  # pod key -> why the last plan could not help it
        self.queue: list[tuple[float, int, int, Any]] = []
        self.serial = 0
        for event in trace.events:
            if event.at <= self.end:
                self._push(event.at, _ARRIVE if isinstance(event, Arrival) else _DEPART, event)
        for g in trace.groups:
            for _ in range(g.desired):
                instance = self.world.launch(g.name, -INITIAL_AGE.total_seconds())
                self.world.join(instance, -INITIAL_AGE.total_seconds())
        self.plan_seconds = 0.0

    def _push(self, at: float, kind: int, payload: Any) -> None:
        self.serial += 1
        heapq.heappush(self.queue, (at, kind, self.serial, payload))

    def _now(self, at: float) -> datetime:
        return self.start + timedelta(seconds=at)

    # ------------------------------------------------------------------------------ the loop

    def run(self) -> PolicyResult:
        began = time.perf_counter()
        for step in range(self.plans):
            at = step * self.interval
            self._advance(at)
            self._plan(at)
        self._advance(self.end)
        self._finish()
        if self.proposal is not None:
            self._count(open_at_end=1)
        total = time.perf_counter() - began
        self.recorder.proposals = self.proposals
        return self.recorder.result(
            self.policy.name,
            self.policy.describe(),
            self.settings.prices,
            plans=self.plans,
            plan_seconds=self.plan_seconds,
            engine_seconds=total - self.plan_seconds,
        )

    def _advance(self, until: float) -> None:
        """Apply every event up to `until`, one moment at a time, scheduling after each."""
        queue = self.queue
        while queue and queue[0][0] <= until:
            at = queue[0][0]
            freed = False
            fresh: list[str] = []
            while queue and queue[0][0] == at:
                _, kind, _, payload = heapq.heappop(queue)
                if kind == _ARRIVE:
                    fresh.append(self._arrive(payload, at))
                elif kind == _DEPART:
                    freed |= self._leave(payload.key if isinstance(payload, Departure) else payload, at)
                elif kind == _FINISH:
                    key, generation = payload
                    if self.generation.get(key) == generation:
                        freed |= self._leave(key, at)
                elif kind == _JOIN:
                    freed |= self._join(payload, at)
                else:
                    self._approve(payload, at)
            self._schedule(None if freed else fresh, at)

    def _arrive(self, event: Arrival, at: float) -> str:
        key = event.pod.key
        if event.run_for is not None:
            self.run_for[key] = event.run_for
        self.world.add_pending(event.pod, at, arrival=True)
        self.recorder.arrival()
        return key

    def _leave(self, key: str, at: float) -> bool:
        """A pod deleted or done; True when it held room on a node."""
        gone = self.world.remove_pod(key)
        self.generation.pop(key, None)
        self.run_for.pop(key, None)
        if isinstance(gone, PendingPod):
            self.recorder.left_pending(gone.since, at, gone.arrival, self._why_pending(key))
        return isinstance(gone, BoundPod)

    def _why_pending(self, key: str) -> str:
        reason = self.pending_reasons.get(key, "")
        return f"{key} ({reason})" if reason else key

    def _join(self, payload: tuple[str, str], at: float) -> bool:
        group, instance_id = payload
        instance = self.world.groups[group].instances.get(instance_id)
        if instance is None or instance.node:
            return False  # terminated while launching
        self.world.join(instance, at)
        return True

    def _schedule(self, keys: list[str] | None, at: float) -> None:
        if not self.world.pending or keys == []:
            return
        for was, now in self.world.schedule(keys, at):
            self.recorder.bound(was.since, at, was.arrival)
            key = now.pod.key
            self.bindings += 1
            generation = self.generation[key] = self.bindings
            run_for = self.run_for.get(key)
            if run_for is not None:
                self._push(at + run_for, _FINISH, (key, generation))

    def _finish(self) -> None:
        """Close the books at the end: pods still waiting, instances still running."""
        for key, entry in self.world.pending.items():
            self.recorder.left_pending(entry.since, self.end, entry.arrival, self._why_pending(key))
        for group in self.world.groups.values():
            for instance in group.instances.values():
                self.recorder.instance_gone(group.spec.name, instance.launched_at, self.end)

    # ------------------------------------------------------------------------------ planning

    def _plan(self, at: float) -> None:
        now = self._now(at)
        world = self.world
        inventory = build_inventory(world.cluster_state(at), world.node_groups())
        inputs = PlanInputs(
            inventory=inventory,
            config=self.config,
            now=now,
            committed=self._committed(),
            memory=self.memory,
            proposed=frozenset(self.proposal.named) if self.proposal is not None else frozenset(),
            prices=self.settings.prices,
        )
        began = time.perf_counter()
        plan = planner.make_plan(inputs)
        self.plan_seconds += time.perf_counter() - began
        self.pending_reasons = {p.pod: p.reason for p in plan.pending}
        evicted = False
        new: dict[str, str] = {}  # instance -> group: removals the plan proposes now
        kept: list[tuple[str, str]] = []  # approved removals the plan keeps
        reviewed = isinstance(self.policy, Reviewed)
        for g in plan.groups:
            if g.new_nodes:
                self.last_scale_up[g.name] = now
                if reviewed:
                    self.unapplied[g.name] = self.unapplied.get(g.name, 0) + g.new_nodes
                else:
                    self._scale_up(g.name, g.new_nodes, at)
            for instance_id in g.cancelled_removals:
                if self.approved.pop(instance_id, None) is not None:
                    self._count(instances_cancelled=1)
            for removal in g.removals:
                if removal.instance_id in self.approved:
                    kept.append((g.name, removal.instance_id))
                else:
                    new[removal.instance_id] = g.name
        self.memory = PlannerMemory(
            unneeded_since=plan.memory.unneeded_since,
            backoffs=plan.memory.backoffs,
            last_scale_up=dict(self.last_scale_up),
        )
        if isinstance(self.policy, Autoscaler):
            evicted |= self._remove(list(new.items()), at)
        else:
            committed = self._committed()  # the manifest this plan leaves on main, as apply reads it
            self._raise_unapplied(at)
            evicted |= self._apply_approved(kept, at, now, inventory, committed)
            self._propose(new, at, now)
        if evicted:
            self._schedule(None, at)
        self.recorder.sample(at, {n: len(g.instances) for n, g in world.groups.items()}, len(world.pending))

    def _committed(self) -> dict[str, CommittedGroup]:
        """What the manifest on main would hold for the groups it changes: approved removals not yet
        applied, and increases not yet raised (apply.maxStep)."""
        by_group: dict[str, list[str]] = {}
        for instance_id, (group, _) in self.approved.items():
            by_group.setdefault(group, []).append(instance_id)
        names = [n for n in self.world.groups if n in by_group or self.unapplied.get(n)]
        return {
            name: CommittedGroup(
                desired=self.world.groups[name].desired
                + self.unapplied.get(name, 0)
                - len(by_group.get(name, ())),
                remove_instances=tuple(by_group.get(name, ())),
            )
            for name in names
        }

    def _raise_unapplied(self, at: float) -> None:
        """Ours: apply raises each group by what main decided, at most apply.maxStep per run and never
        above the group's max size; the rest waits for the next step."""
        step = self.config.apply.max_step
        for name in list(self.unapplied):
            group = self.world.groups[name]
            wanted = group.desired + self.unapplied[name]
            target = min(wanted, group.desired + step, group.spec.max_size)
            if target > group.desired:
                self._scale_up(name, target - group.desired, at)
            self.unapplied[name] = wanted - group.desired
            if self.unapplied[name] <= 0 or group.desired >= group.spec.max_size:
                del self.unapplied[name]

    def _scale_up(self, name: str, nodes: int, at: float) -> None:
        group = self.world.groups[name]
        provisioning, seed = self.settings.provisioning, self.settings.seed
        for _ in range(nodes):
            instance = self.world.launch(name, at)
            delay = provisioning.delay(group.spec.instance_type, seed, name, group.launches)
            self._push(at + delay, _JOIN, (name, instance.instance_id))
        group.desired += nodes
        self.recorder.scale_up(name, nodes)

    def _remove(self, removals: list[tuple[str, str]], at: float) -> bool:
        """Drain and terminate (instance, group) pairs; True when pods were evicted."""
        evicted = False
        done: dict[str, int] = {}
        for instance_id, group in removals:
            instance = self.world.groups[group].instances[instance_id]
            self.recorder.instance_gone(group, instance.launched_at, at)
            for entry in self.world.terminate(instance_id, group, at):
                evicted = True
                self.recorder.evictions += 1
                # its job starts over where it lands: the next binding gets a new serial, so this
                # binding's finish event no longer matches
                self.generation.pop(entry.pod.key, None)
            done[group] = done.get(group, 0) + 1
        for group, count in done.items():
            self.recorder.scale_down(group, count)
        return evicted

    # ------------------------------------------------------------------------------ reviewed scale-downs

    def _apply_approved(
        self,
        kept: list[tuple[str, str]],
        at: float,
        now: datetime,
        inventory: Inventory,
        committed: Mapping[str, CommittedGroup],
    ) -> bool:
        """Approved removals the plan keeps pass apply's gates in apply's order, oldest approval
        first: one waiting past scaleDown.proposalTTL expires (apply refuses it; the planner proposes
        again if still unneeded); one apply's re-check refuses on the snapshot the plan read (busy
        again, or no longer drainable) stays approved and waits; the rest are drained and
        terminated, as many as the scale-down windows allow now (the window last, as in apply, so a
        refused removal takes no place in it)."""
        assert isinstance(self.policy, Reviewed)
        ttl = self.config.scale_down.proposal_ttl.total_seconds()
        waiting = sorted(kept, key=lambda p: (self.approved[p[1]][1], p[1]))
        ready: list[tuple[str, str]] = []
        for group, instance_id in waiting:
            if at - self.approved[instance_id][1] > ttl:
                del self.approved[instance_id]
                self._count(instances_expired=1)
            else:
                ready.append((instance_id, group))
        budget = None if self.policy.budget is None else self.policy.budget(now)
        if not ready or budget == 0:
            return False  # nothing to re-check: outside every window apply refuses them all anyway
        # apply re-checks every approved removal of the manifest together (reconciler/apply/sync.py)
        verdicts = approved_verdicts(self.config, now, inventory, committed)
        passed = []
        for instance_id, group in ready:
            if verdicts.get(instance_id) is None:
                passed.append((instance_id, group))
            elif instance_id not in self.refused:
                self.refused.add(instance_id)
                self._count(instances_refused=1)
        ready = passed
        if budget is not None:
            ready = ready[: max(budget, 0)]
        for instance_id, _ in ready:
            del self.approved[instance_id]
        return self._remove(ready, at)

    def _propose(self, new: dict[str, str], at: float, now: datetime) -> None:
        """Open, update or close the scale-down proposal to name what the plan proposes now."""
        assert isinstance(self.policy, Reviewed)
        proposal = self.proposal
        if proposal is None:
            if not new:
                return
            self.proposal_count += 1
            proposal = self.proposal = _Proposal(self.proposal_count, at, {}, set())
            approves = self.policy.approval.approves_at(now, self.settings.seed, proposal.index)
            self._push((approves - self.start).total_seconds(), _APPROVE, proposal.index)
            self._count(opened=1)
        elif not new:  # nothing left to approve: a proposal without removals is closed
            self._count(cancelled=1, instances_cancelled=len(proposal.ever))
            self.proposal = None
            return
        self._count(instances_proposed=len(set(new) - proposal.ever))
        proposal.ever.update(new)
        proposal.named = dict(new)

    def _approve(self, index: int, at: float) -> None:
        """A person approves the open proposal: what it names now is approved, what it named before
        and dropped counts as cancelled."""
        proposal = self.proposal
        if proposal is None or proposal.index != index:
            return  # closed before anyone approved it
        for instance_id, group in proposal.named.items():
            self.approved[instance_id] = (group, at)
        self._count(
            approved=1,
            instances_approved=len(proposal.named),
            instances_cancelled=len(proposal.ever - set(proposal.named)),
        )
        self.proposal = None

    def _count(self, **more: int) -> None:
        current = self.proposals
        self.proposals = ProposalFigures(
            **{
                name: getattr(current, name) + more.get(name, 0)
                for name in ProposalFigures.__dataclass_fields__
            }
        )
