"""Prometheus metrics of the `run` loop (docs/metrics.md lists every one).

Names follow cluster-autoscaler's where the meaning is the same (`errors_total`, a per-stage duration
histogram like its `function_duration_seconds`, a last-activity timestamp, per node group min/max/
target), with Prometheus conventions where CA breaks them (base units, no `_count` suffix on gauges).
Every label is bounded: stages, a fixed set of error and refusal kinds, and node group names — and
the series of a node group that left the plan are removed, so a deleted ASG does not linger as a
stale value that alerts keep firing on.

Nothing here reads the cluster, AWS or Git: the loop hands over what it already has (a Plan, an
ApplyReport, its own timings), so a failing edge can still be reported.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from reconciler.domain.errors import RefusalKind
from reconciler.domain.model import OTHER_ERROR, OUT_OF_RESOURCES

if TYPE_CHECKING:
    from reconciler.apply.outcome import ApplyReport
    from reconciler.kube.cache import KindHealth
    from reconciler.planning.types import GroupPlan, Plan

# Why the plan stage's cluster cache listed a kind again (reconciler/kube/cache.py).
RELIST_REASONS = ("expired", "resync", "error")

PREFIX = "asg_reconciler_"

# Why a cycle failed; the loop decides which. Anything else is counted as "other".
ERROR_KINDS = ("kubernetes", "aws", "git", "forge", "config", "refused", "suspended", "other")

# What apply did, counted per action (not per group: the group is in the logs and the records).
ACTIONS = ("raise", "drain", "terminate", "give_back")

# Why a safety gate said no: every RefusalKind (reconciler/domain/errors.py), which the gate gives
# its refusal where it is made. A fixed set, so the label's cardinality stays bounded whatever the
# message says; the message itself goes to the logs and apply's records.
REFUSAL_KINDS: tuple[RefusalKind, ...] = (
    "suspended",  # the kill switch (ConfigMap or apply.suspend)
    "not-approved",  # no approving commit for an instance, or the gate said no
    "expired",  # approved longer ago than scaleDown.proposalTTL
    "rewritten",  # main's history does not hold the last applied commit (force-push), or goes back
    "busy",  # the re-check: the node is needed again, pods landed on it, a drain rule stopped it
    "limits",  # apply's own bounds: min/max size (ASG, nodeGroups.explicit), `limits`; not an increase
    "another-writer",  # cluster-autoscaler live, scaling policies, instance refresh, desired set by hand
    "lease",  # another apply holds the Lease
    "instance-changed",  # the instance or its node is no longer what was approved (Standby, gone, other)
    "group-settings",  # AZRebalance unsuspended, mixed-instances weights, not a node group of the cluster
    "untrusted-records",  # apply's own records cannot be trusted
    "other",
)
# An approved removal scaleDown.windows holds back (no window open, a blackout, or the run's maxNodes
# reached) is no refusal: it waits, still approved, and the gauge apply_removals_waiting_for_window
# counts it.

_DRIFT = re.compile(r"^drift: desired (?:lowered|raised) outside the tool from (\d+) to (\d+)")
_GIVEN_BACK_AFTER_REFUSAL = re.compile(r"; node \S+ given back$")
_RECOVERED = "an earlier apply recorded the intent"

# Cycle durations: a plan takes seconds, an apply with drains up to apply.drainTimeout per batch.
_CYCLE_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600)

CLUSTER = "cluster"


def error_kind_label(kind: str | None) -> str | None:
    """`kind` if it is one of ERROR_KINDS, else "other" (a label never takes free text)."""
    if kind is None:
        return None
    return kind if kind in ERROR_KINDS else "other"


def _utc_timestamp(when: datetime) -> float:
    """Seconds since the epoch; a naive datetime is taken as UTC (the project's clock is UTC)."""
    return (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).timestamp()


class Metrics:
    """The loop's metrics, on a registry of their own (tests make many; the server serves this one)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._lock = threading.Lock()
        self._plan_groups: set[str] = set()
        self._launches_seen: dict[str, tuple[datetime, int]] = {}  # group -> (failing since, failures)
        self._drift_groups: set[str] = set()
        self._suspended_groups: set[str] = set()
        self._stages: set[str] = set()
        r = self.registry

        # the loop
        self.cycle_duration = Histogram(
            PREFIX + "cycle_duration_seconds",
            "Time one cycle of a stage took, errors included.",
            ["stage"],
            buckets=_CYCLE_BUCKETS,
            registry=r,
        )
        self.cycles = Counter(
            PREFIX + "cycles", "Cycles a stage finished, errors included.", ["stage"], registry=r
        )
        self.errors = Counter(
            PREFIX + "errors",
            "Cycles of a stage that ended in an error, by kind (" + ", ".join(ERROR_KINDS) + ").",
            ["stage", "kind"],
            registry=r,
        )
        self.last_success = Gauge(
            PREFIX + "last_success_timestamp_seconds",
            "When a stage last finished a cycle without error (Unix time).",
            ["stage"],
            registry=r,
        )
        self.leader_gauge = Gauge(
            PREFIX + "leader",
            "1 while this process leads a stage (holds its Lease), 0 while it follows.",
            ["stage"],
            registry=r,
        )
        self.cluster_suspended = Gauge(
            PREFIX + "suspended",
            "1 while the kill switch stops apply for the whole cluster.",
            registry=r,
        )
        self.group_suspended = Gauge(
            PREFIX + "node_group_suspended",
            "1 while the kill switch stops apply for the node group (only suspended groups have a series).",
            ["node_group"],
            registry=r,
        )

        # the plan
        self.node_groups = Gauge(
            PREFIX + "node_groups",
            "Node groups discovery found at the last cycle (0: none matched; the log says where it looked).",
            registry=r,
        )
        self.pending_pods = Gauge(
            PREFIX + "pending_pods",
            "Unschedulable pods in the last plan; helpable=false: no node group can help them.",
            ["helpable"],
            registry=r,
        )
        self.unremovable_nodes = Gauge(
            PREFIX + "unremovable_nodes",
            "Nodes the last plan found unneeded but could not remove (reasons in the plan).",
            registry=r,
        )
        self.current_nodes = Gauge(
            PREFIX + "node_group_current_nodes",
            "The ASG's DesiredCapacity when the plan was made.",
            ["node_group"],
            registry=r,
        )
        self.desired_nodes = Gauge(
            PREFIX + "node_group_desired_nodes",
            "The capacity the last plan wants for the group (its target).",
            ["node_group"],
            registry=r,
        )
        self.min_nodes = Gauge(
            PREFIX + "node_group_min_nodes", "The ASG's MinSize.", ["node_group"], registry=r
        )
        self.max_nodes = Gauge(
            PREFIX + "node_group_max_nodes", "The ASG's MaxSize.", ["node_group"], registry=r
        )
        self.held = Gauge(
            PREFIX + "node_group_held",
            "1 when the manifest holds the group (hold: true): the planner leaves it alone.",
            ["node_group"],
            registry=r,
        )
        self.backoff = Gauge(
            PREFIX + "node_group_backoff",
            "1 while scale-up of the group is backed off (its new instances did not register in time, or "
            "AWS could not launch them).",
            ["node_group"],
            registry=r,
        )
        self.backoff_remaining = Gauge(
            PREFIX + "node_group_backoff_remaining_seconds",
            "Seconds until the group's scale-up backoff ends; 0 when not backed off.",
            ["node_group"],
            registry=r,
        )
        self.launch_failed_nodes = Gauge(
            PREFIX + "node_group_launch_failed_nodes",
            "Desired capacity AWS could not launch (a failed scaling activity), not counted as upcoming "
            "while the group is backed off for it; 0 otherwise.",
            ["node_group"],
            registry=r,
        )
        self.failed_launches = Counter(
            PREFIX + "failed_launches",
            "Launch attempts AWS reported failed or cancelled for a group (its scaling activities), "
            "each counted once when a plan first sees it, by error class (OutOfResources, Other).",
            ["node_group", "error_class"],
            registry=r,
        )
        self.open_proposals = Gauge(
            PREFIX + "open_proposals", "Scale-down proposals waiting for approval.", registry=r
        )
        self.oldest_proposal_age = Gauge(
            PREFIX + "oldest_open_proposal_age_seconds",
            "Age of the oldest open scale-down proposal; 0 when none is open.",
            registry=r,
        )

        self.aws_requests = Counter(
            PREFIX + "aws_requests",
            "AWS requests the plan stage made, per Service.Operation (pages and retries each count).",
            ["operation"],
            registry=r,
        )

        # apply
        self.actions = Counter(
            PREFIX + "apply_actions",
            "What apply did: raise (a SetDesiredCapacity), drain (a node drained), terminate (an instance "
            "terminated with decrement), give_back (our drain taint taken off a node).",
            ["action"],
            registry=r,
        )
        self.refusals = Counter(
            PREFIX + "apply_refusals",
            "Refusals by a safety gate, by kind (" + ", ".join(REFUSAL_KINDS) + ").",
            ["reason"],
            registry=r,
        )
        self.waiting_for_window = Gauge(
            PREFIX + "apply_removals_waiting_for_window",
            "Approved removals the last apply run left for scaleDown.windows (no window open, a "
            "blackout, or the run's maxNodes reached): still approved, not refused.",
            registry=r,
        )
        self.drift = Gauge(
            PREFIX + "node_group_drift_nodes",
            "DesiredCapacity changed outside the tool since the last apply, as apply last saw it "
            "(AWS now minus what apply left; 0 when none).",
            ["node_group"],
            registry=r,
        )
        for action in ACTIONS:
            self.actions.labels(action)
        for kind in REFUSAL_KINDS:
            self.refusals.labels(kind)
        for helpable in ("true", "false"):
            self.pending_pods.labels(helpable)

    # ------------------------------------------------------------------------------------ the loop

    def _stage(self, stage: str) -> None:
        """Create a stage's series at zero on first sight, so rate() and absent() work from the start."""
        with self._lock:
            if stage in self._stages:
                return
            self._stages.add(stage)
        self.cycles.labels(stage)
        for kind in ERROR_KINDS:
            self.errors.labels(stage, kind)

    def cycle(self, stage: str, seconds: float, error_kind: str | None) -> None:
        """One cycle of `stage` finished after `seconds`; `error_kind` says why it failed, if it did."""
        self._stage(stage)
        self.cycle_duration.labels(stage).observe(max(0.0, seconds))
        self.cycles.labels(stage).inc()
        kind = error_kind_label(error_kind)
        if kind is not None:
            self.errors.labels(stage, kind).inc()

    def error(self, stage: str, kind: str) -> None:
        """A failure that is not a cycle of its own (the config file no longer loads: the cycle
        goes on with the last good one)."""
        self._stage(stage)
        self.errors.labels(stage, error_kind_label(kind) or "other").inc()

    def success(self, stage: str, when: datetime) -> None:
        """The last successful plan / apply, like cluster-autoscaler's last_activity."""
        self._stage(stage)
        self.last_success.labels(stage).set(_utc_timestamp(when))

    def leader(self, stage: str, is_leader: bool) -> None:
        self.leader_gauge.labels(stage).set(1 if is_leader else 0)

    def suspended(self, scope: str, on: bool) -> None:
        """`scope` is "cluster" or a node group name. A group's series exists only while it is
        suspended (so resumed or deleted groups leave nothing behind)."""
        if scope == CLUSTER:
            self.cluster_suspended.set(1 if on else 0)
            return
        with self._lock:
            if on:
                self._suspended_groups.add(scope)
                self.group_suspended.labels(scope).set(1)
            elif scope in self._suspended_groups:
                self._suspended_groups.discard(scope)
                self.group_suspended.remove(scope)

    def suspensions(self, cluster: bool, groups: Iterable[str]) -> None:
        """The whole switch at once (what the ConfigMap says now): groups not named are resumed."""
        self.suspended(CLUSTER, cluster)
        wanted = set(groups)
        with self._lock:
            gone = self._suspended_groups - wanted
        for name in gone:
            self.suspended(name, False)
        for name in wanted:
            self.suspended(name, True)

    # ------------------------------------------------------------------------------------ the plan

    def plan(self, plan: Plan, now: datetime) -> None:
        """The gauges of one plan; groups that left it lose their series."""
        helpable = sum(1 for p in plan.pending if p.placed)  # a node of no group counts: it has room
        self.pending_pods.labels("true").set(helpable)
        self.pending_pods.labels("false").set(len(plan.pending) - helpable)
        self.unremovable_nodes.set(len(plan.unremovable))
        self.node_groups.set(len(plan.groups))
        names = {g.name for g in plan.groups}
        with self._lock:
            for name in self._plan_groups - names:
                for gauge in self._group_gauges():
                    gauge.remove(name)
                for error_class in (OUT_OF_RESOURCES, OTHER_ERROR):
                    with contextlib.suppress(KeyError):
                        self.failed_launches.remove(name, error_class)
                self._launches_seen.pop(name, None)
            self._plan_groups = names
            for g in plan.groups:
                self.current_nodes.labels(g.name).set(g.current)
                self.desired_nodes.labels(g.name).set(g.desired)
                self.min_nodes.labels(g.name).set(g.min_size)
                self.max_nodes.labels(g.name).set(g.max_size)
                self.held.labels(g.name).set(1 if g.held else 0)
                remaining = 0.0
                if g.backoff_until is not None:
                    remaining = max(0.0, _utc_timestamp(g.backoff_until) - _utc_timestamp(now))
                self.backoff.labels(g.name).set(1 if remaining > 0 else 0)
                self.backoff_remaining.labels(g.name).set(remaining)
                self._launch_failures(g)

    def _launch_failures(self, g: GroupPlan) -> None:
        """The gauge of capacity AWS could not launch, and the failed attempts not counted yet: the
        plan knows how many there were since the run of failures began, so each is counted once."""
        failure = g.launch_failure
        self.launch_failed_nodes.labels(g.name).set(failure.unfilled if failure and g.launch_backoff else 0)
        for error_class in (OUT_OF_RESOURCES, OTHER_ERROR):
            self.failed_launches.labels(g.name, error_class)  # every series exists at 0
        if failure is None:
            return
        since, counted = self._launches_seen.get(g.name, (failure.since, 0))
        new = failure.failures - counted if since == failure.since else failure.failures
        if new > 0:
            self.failed_launches.labels(g.name, failure.last.error_class or OTHER_ERROR).inc(new)
        self._launches_seen[g.name] = (
            failure.since,
            max(counted if since == failure.since else 0, failure.failures),
        )

    def _group_gauges(self) -> tuple[Gauge, ...]:
        return (
            self.current_nodes,
            self.desired_nodes,
            self.min_nodes,
            self.max_nodes,
            self.held,
            self.backoff,
            self.backoff_remaining,
            self.launch_failed_nodes,
        )

    def cluster_cache(self, health: Callable[[], Iterable[KindHealth]]) -> None:
        """The plan stage's watch-fed cache, read at each scrape (kube/cache.py's KindHealth per
        kind): synced, objects, the last event, relists by reason."""
        self.registry.register(_CacheCollector(health))

    def discovered(self, count: int) -> None:
        """Node groups an apply cycle found (a plan sets it through `plan`)."""
        self.node_groups.set(count)

    def aws_calls(self, calls: Mapping[str, int]) -> None:
        for operation, count in calls.items():
            self.aws_requests.labels(operation).inc(count)

    def proposals(self, count: int, oldest_age_seconds: float | None) -> None:
        self.open_proposals.set(count)
        self.oldest_proposal_age.set(max(0.0, oldest_age_seconds or 0.0) if count else 0.0)

    # ---------------------------------------------------------------------------------------- apply

    def apply(self, report: ApplyReport) -> None:
        """Count what one apply run did and refused, and set drift per group.

        What was done is read from the report's notes (reconciler/apply/ writes them): "raised
        desired", "drained ... and terminated ...", "; node ... given back", "drift: desired
        lowered/raised outside the tool from A to B"; a dry run's "would ..." notes count nothing.
        Refusals are counted by the kind apply gave each (`GroupOutcome.refusals`), never by their
        words; a failure is none (cycle() counts it), nor is a removal waiting for a scale-down
        window (the gauge counts each group's `waiting`).
        """
        counts = dict.fromkeys(ACTIONS, 0)
        counts["give_back"] = sum(1 for entry in report.given_back if ": given back (" in entry)
        drift: dict[str, int] = {}
        for g in report.groups:
            drift[g.name] = 0
            counts["terminate"] += len(g.terminated) - sum(1 for n in g.notes if _RECOVERED in n)
            for note in g.notes:
                if note.startswith("raised desired "):
                    counts["raise"] += 1
                elif note.startswith("drained "):
                    counts["drain"] += 1
                if _GIVEN_BACK_AFTER_REFUSAL.search(note):
                    counts["give_back"] += 1
                moved = _DRIFT.match(note)
                if moved:
                    drift[g.name] = int(moved[2]) - int(moved[1])
            for kind in g.refusals:
                self.refusals.labels(kind).inc()
        for action, n in counts.items():
            if n:
                self.actions.labels(action).inc(n)
        if not report.dry_run:
            self.waiting_for_window.set(sum(len(g.waiting) for g in report.groups))
        with self._lock:
            for name in self._drift_groups - drift.keys():
                self.drift.remove(name)
            self._drift_groups = set(drift)
            for name, value in drift.items():
                self.drift.labels(name).set(value)

    def refused(self, kind: RefusalKind) -> None:
        """A refusal outside a report (the whole run refused: Lease held, kill switch, history
        rewritten, cluster-autoscaler live), by the kind its RefusedError carries."""
        self.refusals.labels(kind).inc()


class _CacheCollector(Collector):
    """The cache's health as metrics, computed when scraped (nothing to keep in step)."""

    def __init__(self, health: Callable[[], Iterable[KindHealth]]) -> None:
        self._health = health

    def collect(self) -> Iterator[Metric]:
        synced = GaugeMetricFamily(
            PREFIX + "cache_synced",
            "1 once the plan stage's cluster cache has listed the kind (while this replica leads it).",
            labels=["kind"],
        )
        objects = GaugeMetricFamily(
            PREFIX + "cache_objects",
            "Objects of the kind in the plan stage's cluster cache.",
            labels=["kind"],
        )
        last = GaugeMetricFamily(
            PREFIX + "cache_last_event_timestamp_seconds",
            "When the cache last heard of the kind: a list, an event or a bookmark (Unix time; 0: never).",
            labels=["kind"],
        )
        relists = CounterMetricFamily(
            PREFIX + "cache_relists",
            "Lists of a kind after its first, by reason: expired (410 Gone), resync (run.resyncInterval), "
            "error (the watch was refused).",
            labels=["kind", "reason"],
        )
        for kind in self._health():
            synced.add_metric([kind.kind], 1 if kind.synced else 0)
            objects.add_metric([kind.kind], kind.objects)
            last.add_metric([kind.kind], kind.last_event or 0.0)
            for reason in RELIST_REASONS:
                relists.add_metric([kind.kind, reason], kind.relists.get(reason, 0))
        yield from (synced, objects, last, relists)
