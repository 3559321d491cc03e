"""Scale-down eligibility (cluster-autoscaler's core/scaledown/eligibility): each group's rules, a
node's utilisation, and which instances and nodes are candidates at all, in the order they are
tried, with the reason every other one stays. `Eligibility` is the collecting half of the scale-down
planner (scale_down.py), which decides on the candidates.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from reconciler.config.settings import ScaleDownConfig
from reconciler.domain.inventory import GroupInventory
from reconciler.domain.model import GPU, OWN_DRAIN_TAINT, SCALE_DOWN_DISABLED, Instance, Node, Pod, Scheduling
from reconciler.planning.drainability import (
    BLOCKS,
    MOVES,
    DrainContext,
    drain_verdict,
    stays_on_node,
)
from reconciler.planning.existing import existing_node
from reconciler.planning.placement import NodePool
from reconciler.planning.predicates import (
    unmodelled,
)
from reconciler.planning.simnode import SimNode
from reconciler.planning.types import PlanInputs

GPU_LABEL = "k8s.amazonaws.com/accelerator"  # EKS GPU nodes; CA measures them by their GPUs
IN_SERVICE = "InService"
LAUNCHING = frozenset({"Pending", "Pending:Wait", "Pending:Proceed", IN_SERVICE})
EXPLAIN_BUDGET = 250_000  # node visits spent on "why does this pod fit nowhere" per plan

# Candidate kinds, in the order they are tried: what serves nothing goes first.
UNREGISTERED, NOT_READY, EMPTY, UTILISED = 0, 1, 2, 3


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
class GroupRules:
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


def group_rules(
    inv: GroupInventory,
    cfg: ScaleDownConfig,
    inputs: PlanInputs,
    baseline: Mapping[str, int],
    excluded: frozenset[str],
) -> GroupRules:
    group = inv.group
    o = group.options
    since_scale_up = None
    applied = inputs.memory.last_scale_up.get(group.name)
    if applied is not None and inputs.now - applied < cfg.delay_after_scale_up:
        since_scale_up = max(inputs.now - applied, timedelta(0))
    return GroupRules(
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
class RemovalCandidate:
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


class Eligibility(ABC):
    """The collecting half of the scale-down planner: which candidates there are, in trial order,
    each analysed (its pods that must move, or what forbids a drain). The planner (scale_down.py)
    sets the shared state below and decides."""

    inputs: PlanInputs
    preferred: frozenset[str]
    now: datetime
    pool: NodePool
    forced: Mapping[str, int]
    approved: frozenset[str]
    rules: dict[str, GroupRules]
    drain_ctx: DrainContext
    _unmodelled: dict[tuple[int, str], tuple[Scheduling, str | None]]

    @abstractmethod
    def _keep(self, name: str, group: str, reason: str) -> None:
        """Record why a node stays (the planner's report)."""

    # ------------------------------------------------------------------------------ collection

    def collect(self) -> tuple[list[RemovalCandidate], dict[str, list[RemovalCandidate]]]:
        """Regular candidates (in trial order) and, per forced group, every node or instance it could
        give up (in the same order)."""
        regular: list[RemovalCandidate] = []
        forced: dict[str, list[RemovalCandidate]] = {}
        for inv in self.inputs.inventory.groups:
            rules = self.rules[inv.name]
            is_forced = self.forced.get(inv.name, 0) > 0
            extra: list[RemovalCandidate] = []
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

    def _trial_order(self, candidate: RemovalCandidate) -> tuple[bool, tuple[int, float, str]]:
        """Instances an open proposal already names go first: a proposal under review stays stable
        instead of churning between equally good nodes."""
        return candidate.instance_id not in self.preferred, candidate.order

    def _instances(self, inv: GroupInventory, rules: GroupRules) -> list[RemovalCandidate]:
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
            candidate = RemovalCandidate(UNREGISTERED, rules.name, inst.instance_id, inst.instance_id)
            candidate.since = inst.launch_time
            found.append(candidate)
        return found

    def _nodes(
        self, inv: GroupInventory, rules: GroupRules, is_forced: bool
    ) -> list[tuple[RemovalCandidate, bool]]:
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
            candidate = RemovalCandidate(
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

    def _unready_long_enough(self, candidate: RemovalCandidate, rules: GroupRules) -> bool:
        since = candidate.since
        if since is None:
            self._keep(candidate.name, rules.name, "NotReady since an unknown time")
            return False
        age = self.now - since
        if age < rules.unready_time:
            self._keep(
                candidate.name,
                rules.name,
                f"NotReady for {format_ago(age)} (proposed after {format_ago(rules.unready_time)})",
            )
            return False
        return True

    def _analyse(self, candidate: RemovalCandidate) -> None:
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


def format_ago(value: timedelta) -> str:
    """Minutes (and hours) once past a minute: reasons should not change with every second."""
    total = max(int(value.total_seconds()), 0)
    if total < 60:
        return f"{total}s"
    hours, minutes = divmod(total // 60, 60)
    return f"{hours}h{minutes}m" if hours and minutes else f"{hours}h" if hours else f"{minutes}m"
