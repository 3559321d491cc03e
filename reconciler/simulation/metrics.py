"""The figures a simulated run gives, and the recorder that collects them as the run goes.

Definitions (docs/simulate.md repeats them):
- pending pod-seconds: for every time a pod is pending (on arrival, and again after an eviction),
  the seconds until it is bound, it leaves, or the simulation ends;
- time to schedule: arrival to first binding, over the pods that were bound (a pod evicted by a
  scale-down and bound again counts in pending pod-seconds, not here);
- node-hours: each instance from its launch (or the start) to its termination (or the end), the
  time AWS bills, so instances still joining count;
- cost: node-hours times the on-demand price of the group's instance type (0 for a group without
  node-hours, whether its type has a price or not).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

_NAMED = 3  # never-scheduled pods named in the warning; the rest are counted


@dataclass(frozen=True)
class GroupFigures:
    name: str
    instance_type: str
    node_hours: float
    cost: float | None  # USD; None when the price of its instance type is not known (and it ran)
    scale_ups: int  # steps that raised the group
    nodes_added: int
    scale_downs: int  # steps that removed instances of the group
    nodes_removed: int


@dataclass(frozen=True)
class ProposalFigures:
    """Scale-down proposals (ours only): each opens when the plan first names instances to remove
    and ends approved, or cancelled when the plan stopped naming any before anyone approved."""

    opened: int = 0
    approved: int = 0
    cancelled: int = 0
    instances_proposed: int = 0  # instances each proposal named, once per proposal
    instances_approved: int = 0
    instances_cancelled: int = 0  # named, then dropped by the plan before approval, or after it
    instances_expired: int = 0  # approved, but not applied within scaleDown.proposalTTL (windows)
    # approved, and held back at least once by apply's re-check (busy again or no longer drainable
    # when a removal could go): each waited, still approved, as apply leaves it
    instances_refused: int = 0
    open_at_end: int = 0  # a proposal still waiting for approval when the simulation ended


@dataclass(frozen=True)
class Timeline:
    """One sample per planning step, taken after the step acted."""

    times: tuple[float, ...]  # seconds since the start
    nodes: Mapping[str, tuple[int, ...]]  # instances per group (launching ones included)
    pending: tuple[int, ...]  # pending pods


@dataclass(frozen=True)
class PolicyResult:
    policy: str  # ours | ca
    description: str
    plans: int
    pending_pod_seconds: float
    time_to_schedule_p50: float | None
    time_to_schedule_p99: float | None
    time_to_schedule_max: float | None
    pods_arrived: int
    pods_scheduled: int  # arrivals bound at least once
    pods_never_scheduled: int  # arrivals that left, or were still waiting at the end, never bound
    evictions: int  # pods moved off nodes that were drained
    groups: tuple[GroupFigures, ...]
    proposals: ProposalFigures
    timeline: Timeline = field(repr=False)
    warnings: tuple[str, ...] = ()
    # wall-clock seconds, for the benchmark: not part of the result's identity
    plan_seconds: float = field(default=0.0, compare=False)
    engine_seconds: float = field(default=0.0, compare=False)

    @property
    def node_hours(self) -> float:
        return sum(g.node_hours for g in self.groups)

    @property
    def cost(self) -> float | None:
        """Total USD, or None when a group with node-hours has no price."""
        if any(g.cost is None and g.node_hours > 0 for g in self.groups):
            return None
        return sum(g.cost or 0.0 for g in self.groups)

    @property
    def scale_ups(self) -> int:
        return sum(g.scale_ups for g in self.groups)

    @property
    def nodes_added(self) -> int:
        return sum(g.nodes_added for g in self.groups)

    @property
    def scale_downs(self) -> int:
        return sum(g.scale_downs for g in self.groups)

    @property
    def nodes_removed(self) -> int:
        return sum(g.nodes_removed for g in self.groups)


def percentile(ordered: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile of sorted samples (one of the samples, never an interpolation)."""
    if not ordered:
        return None
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass
class _GroupCounts:
    instance_type: str
    seconds: float = 0.0
    scale_ups: int = 0
    nodes_added: int = 0
    scale_downs: int = 0
    nodes_removed: int = 0


class Recorder:
    """Collects the figures while the engine runs; `result` freezes them."""

    def __init__(self, groups: Mapping[str, str]) -> None:
        self.groups = {name: _GroupCounts(kind) for name, kind in groups.items()}
        self.pending_seconds = 0.0
        self.waits: list[float] = []
        self.arrived = 0
        self.never = 0
        self.never_named: list[str] = []  # "ns/name (why the last plan could not help)", in order
        self.evictions = 0
        self.proposals = ProposalFigures()
        self.times: list[float] = []
        self.nodes: dict[str, list[int]] = {name: [] for name in groups}
        self.pending: list[int] = []

    def arrival(self) -> None:
        self.arrived += 1

    def bound(self, since: float, at: float, arrival: bool) -> None:
        self.pending_seconds += at - since
        if arrival:
            self.waits.append(at - since)

    def left_pending(self, since: float, at: float, arrival: bool, why: str = "") -> None:
        """A pending pod that leaves (deleted, or still waiting at the end) unbound; `why`: the pod
        and what the last plan said of it."""
        self.pending_seconds += at - since
        if arrival:
            self.never += 1
            if why:
                self.never_named.append(why)

    def instance_gone(self, group: str, launched: float, at: float) -> None:
        self.groups[group].seconds += at - max(launched, 0.0)

    def scale_up(self, group: str, nodes: int) -> None:
        counts = self.groups[group]
        counts.scale_ups += 1
        counts.nodes_added += nodes

    def scale_down(self, group: str, nodes: int) -> None:
        counts = self.groups[group]
        counts.scale_downs += 1
        counts.nodes_removed += nodes

    def sample(self, at: float, nodes: Mapping[str, int], pending: int) -> None:
        self.times.append(at)
        for name, series in self.nodes.items():
            series.append(nodes.get(name, 0))
        self.pending.append(pending)

    def result(
        self,
        policy: str,
        description: str,
        prices: Mapping[str, float],
        *,
        plans: int,
        plan_seconds: float,
        engine_seconds: float,
    ) -> PolicyResult:
        waits = sorted(self.waits)
        groups = []
        missing: set[str] = set()
        for name, counts in self.groups.items():
            hours = counts.seconds / 3600
            price = prices.get(counts.instance_type)
            if price is None and hours == 0:
                price = 0.0  # a group that never ran costs nothing, priced or not: no warning
            if price is None:
                missing.add(counts.instance_type)
            groups.append(
                GroupFigures(
                    name,
                    counts.instance_type,
                    hours,
                    None if price is None else hours * price,
                    counts.scale_ups,
                    counts.nodes_added,
                    counts.scale_downs,
                    counts.nodes_removed,
                )
            )
        warnings = []
        if missing:
            warnings.append(
                f"no price for {', '.join(sorted(missing))}: cost not shown (pass --prices FILE with them)"
            )
        if self.never:
            shown = "; ".join(self.never_named[:_NAMED])
            more = f"; and {self.never - _NAMED} more" if self.never > _NAMED else ""
            warnings.append(
                f"{self.never} pod(s) were never scheduled (no group could help, or left waiting)"
                + (f": {shown}{more}" if shown else "")
            )
        return PolicyResult(
            policy=policy,
            description=description,
            plans=plans,
            pending_pod_seconds=self.pending_seconds,
            time_to_schedule_p50=percentile(waits, 50),
            time_to_schedule_p99=percentile(waits, 99),
            time_to_schedule_max=waits[-1] if waits else None,
            pods_arrived=self.arrived,
            pods_scheduled=len(waits),
            pods_never_scheduled=self.never,
            evictions=self.evictions,
            groups=tuple(groups),
            proposals=self.proposals,
            timeline=Timeline(
                tuple(self.times), {k: tuple(v) for k, v in self.nodes.items()}, tuple(self.pending)
            ),
            warnings=tuple(warnings),
            plan_seconds=plan_seconds,
            engine_seconds=engine_seconds,
        )
