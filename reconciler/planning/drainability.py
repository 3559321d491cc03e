"""Which pods of a node would have to move if it went, and which pods forbid that: cluster-autoscaler's
drainability rules, one function per rule, each switchable by the config flag CA has for it.

A rule looks at one pod and answers "stays" (it does not move: expendable, mirror, DaemonSet, finished
and long-terminating pods), "moves" (decided: it may be evicted), "blocks" (with the reason a person
reads in the plan) or None (no opinion: the next rule decides). The first answer wins, in CA's order,
so `safe-to-evict: "true"` overrides every blocking rule after it. A pod no rule decides about moves.

PodDisruptionBudgets are not a per-pod rule here: their allowed disruptions are shared by every node
removed in one plan, so `PdbBudget` counts them per plan (as CA's remaining-PDB tracker does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from reconciler.config.settings import ScaleDownConfig
from reconciler.domain.model import SAFE_TO_EVICT, SAFE_TO_EVICT_LOCAL_VOLUMES, Pod, PodDisruptionBudget
from reconciler.planning.selectors import label_selector_matches
from reconciler.planning.simnode import TERMINAL_PHASES

SYSTEM_NAMESPACE = "kube-system"
# Controllers that recreate an evicted pod elsewhere (DaemonSet pods never move, see `daemonset`).
REPLICATED_KINDS = frozenset({"ReplicaSet", "StatefulSet", "Job", "ReplicationController"})

STAYS = "stays"
MOVES = "moves"
BLOCKS = "blocks"


@dataclass(frozen=True, slots=True)
class Drain:
    """One rule's verdict on one pod."""

    outcome: str  # STAYS | MOVES | BLOCKS
    reason: str = ""


STAYS_PUT = Drain(STAYS)
MOVES_OK = Drain(MOVES)


@dataclass(frozen=True, slots=True)
class DrainContext:
    """What the rules need besides the pod: the flags, the time, whether a PDB covers a pod, and
    scaleUp.expendablePriorityCutoff (CA has one cutoff for scale-up and scale-down)."""

    config: ScaleDownConfig
    now: datetime
    has_pdb: Callable[[Pod], bool]
    expendable_cutoff: int


Rule = Callable[[Pod, DrainContext], Drain | None]


# ---------------------------------------------------------------------------------- the rules


def expendable(pod: Pod, ctx: DrainContext) -> Drain | None:
    """A pod below the expendable cutoff is not in CA's simulation at all: it needs no new home and
    keeps no node, whatever the rules below would say (preemption or the node's end takes it)."""
    return STAYS_PUT if pod.is_expendable(ctx.expendable_cutoff) else None


def mirror(pod: Pod, ctx: DrainContext) -> Drain | None:
    """Static pods belong to the kubelet of their node: they go with it and never block."""
    return STAYS_PUT if pod.is_mirror else None


def long_terminating(pod: Pod, ctx: DrainContext) -> Drain | None:
    """A pod deleted longer ago than its grace period (plus 30 s) is stuck on a dead or wedged
    kubelet: it will not be rescheduled and must not pin its node (CA's LongTerminating rule)."""
    return STAYS_PUT if pod.is_long_terminating(ctx.now) else None


def terminal(pod: Pod, ctx: DrainContext) -> Drain | None:
    """A pod that finished holds nothing and needs no new home."""
    return STAYS_PUT if pod.phase in TERMINAL_PHASES else None


def daemonset(pod: Pod, ctx: DrainContext) -> Drain | None:
    """DaemonSet pods are not evicted by a drain; every node runs its own."""
    return STAYS_PUT if pod.is_daemonset else None


def safe_to_evict(pod: Pod, ctx: DrainContext) -> Drain | None:
    """`safe-to-evict: "true"`: the owner says it may go, whatever the rules below would say."""
    return MOVES_OK if pod.annotations.get(SAFE_TO_EVICT) == "true" else None


def not_replicated(pod: Pod, ctx: DrainContext) -> Drain | None:
    """A pod nothing would recreate is lost by a drain. With skipNodesWithCustomControllerPods, a
    controller of another kind than the built-in replicating ones is not trusted to recreate it."""
    owner = pod.owner
    if owner is None or not owner.controller:
        return Drain(BLOCKS, f"pod {pod.key} is not replicated (no controller)")
    if ctx.config.skip_nodes_with_custom_controller_pods and owner.kind not in REPLICATED_KINDS:
        return Drain(BLOCKS, f"pod {pod.key} is owned by custom controller {owner.kind}/{owner.name}")
    return None


def system_pod(pod: Pod, ctx: DrainContext) -> Drain | None:
    """skipNodesWithSystemPods: a kube-system pod without a PDB keeps its node, as current CA does only
    while it is younger than blockingSystemPodDisruptionTimeout (0 means always; an unknown age counts
    as young)."""
    if not ctx.config.skip_nodes_with_system_pods or pod.namespace != SYSTEM_NAMESPACE:
        return None
    if ctx.has_pdb(pod):
        return None
    timeout = ctx.config.blocking_system_pod_disruption_timeout
    if timeout > timedelta(0) and pod.created is not None and ctx.now - pod.created >= timeout:
        return None
    return Drain(BLOCKS, f"kube-system pod {pod.key} has no PDB")


def not_safe_to_evict(pod: Pod, ctx: DrainContext) -> Drain | None:
    """`safe-to-evict: "false"` pins the node."""
    if pod.annotations.get(SAFE_TO_EVICT) == "false":
        return Drain(BLOCKS, f"pod {pod.key} is annotated safe-to-evict: false")
    return None


def local_storage(pod: Pod, ctx: DrainContext) -> Drain | None:
    """skipNodesWithLocalStorage: emptyDir and hostPath data is lost with the node, unless
    `safe-to-evict-local-volumes` names every such volume."""
    if not ctx.config.skip_nodes_with_local_storage or not pod.volumes.local_storage:
        return None
    allowed = {v.strip() for v in pod.annotations.get(SAFE_TO_EVICT_LOCAL_VOLUMES, "").split(",")}
    kept = [v for v in pod.volumes.local_storage if v not in allowed]
    if kept:
        return Drain(BLOCKS, f"pod {pod.key} has local storage ({', '.join(kept)})")
    return None


# CA's order (simulator/drainability/rules): mirror and long-terminating pods, finished pods, DaemonSet
# pods, the safe-to-evict override, then the blocking checks. Expendable pods come first: CA never
# shows them to the rules (they are not in its snapshot).
RULES: tuple[Rule, ...] = (
    expendable,
    mirror,
    long_terminating,
    terminal,
    daemonset,
    safe_to_evict,
    not_replicated,
    system_pod,
    not_safe_to_evict,
    local_storage,
)


def drain_verdict(pod: Pod, ctx: DrainContext) -> Drain:
    """The first rule's answer; a pod no rule decides about moves."""
    for rule in RULES:
        verdict = rule(pod, ctx)
        if verdict is not None:
            return verdict
    return MOVES_OK


def stays_on_node(pod: Pod, now: datetime) -> bool:
    """Pods that never need a new home when their node goes, whatever the flags."""
    return pod.is_mirror or pod.is_daemonset or pod.phase in TERMINAL_PHASES or pod.is_long_terminating(now)


# ---------------------------------------------------------------------------------- PDBs


class PdbBudget:
    """Disruptions each PDB still allows in this plan. Every node the plan removes takes one per
    matching pod it evicts, so two nodes cannot both spend a budget of one (CA's remaining-PDB tracker).

    As CA: a node is refused when a PDB matching one of its pods has less than one disruption left;
    several matching pods on one node are allowed with one left (the drain evicts them one at a time,
    each waiting for its replacement), and the budget may then go negative, refusing later nodes.
    """

    __slots__ = ("_by_namespace", "_memo", "initial", "remaining")

    def __init__(self, pdbs: Iterable[PodDisruptionBudget]) -> None:
        by_namespace: dict[str, list[PodDisruptionBudget]] = {}
        for pdb in sorted(pdbs, key=lambda p: p.key):
            by_namespace.setdefault(pdb.namespace, []).append(pdb)
        self._by_namespace = {ns: tuple(items) for ns, items in by_namespace.items()}
        self.initial: dict[str, int] = {
            p.key: p.disruptions_allowed for items in self._by_namespace.values() for p in items
        }
        self.remaining: dict[str, int] = dict(self.initial)
        # (namespace, id(labels)) -> (labels, matching PDB keys): readers share label maps per
        # controller; the memo holds the map so its id stays unique.
        self._memo: dict[tuple[str, int], tuple[Mapping[str, str], tuple[str, ...]]] = {}

    def matching(self, pod: Pod) -> tuple[str, ...]:
        """Keys of the PDBs selecting `pod` (same namespace, selector matches its labels)."""
        candidates = self._by_namespace.get(pod.namespace)
        if not candidates:
            return ()
        labels = pod.labels
        marker = (pod.namespace, id(labels))
        hit = self._memo.get(marker)
        if hit is not None and hit[0] is labels:
            return hit[1]
        keys = tuple(p.key for p in candidates if label_selector_matches(p.selector, labels))
        self._memo[marker] = (labels, keys)
        return keys

    def has_pdb(self, pod: Pod) -> bool:
        return bool(self.matching(pod))

    def blocking(self, pods: Sequence[Pod]) -> str | None:
        """Why evicting `pods` is refused now, or None."""
        for pod in pods:
            for key in self.matching(pod):
                if self.remaining[key] < 1:
                    if self.initial[key] < 1:
                        return f"pdb {key} allows no disruption (pod {pod.key})"
                    return f"pdb {key} has no disruption left after other removals (pod {pod.key})"
        return None

    def take(self, pods: Iterable[Pod]) -> None:
        """Spend one disruption per matching pod: the node is being removed."""
        for pod in pods:
            for key in self.matching(pod):
                self.remaining[key] -= 1
