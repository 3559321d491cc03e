"""Drainability rule: a pod nothing would recreate blocks its node.

cluster-autoscaler: simulator/drainability/rules/replicated.
"""

from __future__ import annotations

from reconciler.domain.model import Pod
from reconciler.planning.drainability.base import BLOCKS, Drain, DrainContext

# Controllers that recreate an evicted pod elsewhere (DaemonSet pods never move, see `daemonset`).
REPLICATED_KINDS = frozenset({"ReplicaSet", "StatefulSet", "Job", "ReplicationController"})


def not_replicated(pod: Pod, ctx: DrainContext) -> Drain | None:
    """A pod nothing would recreate is lost by a drain. With skipNodesWithCustomControllerPods, a
    controller of another kind than the built-in replicating ones is not trusted to recreate it."""
    owner = pod.owner
    if owner is None or not owner.controller:
        return Drain(BLOCKS, f"pod {pod.key} is not replicated (no controller)")
    if ctx.config.skip_nodes_with_custom_controller_pods and owner.kind not in REPLICATED_KINDS:
        return Drain(BLOCKS, f"pod {pod.key} is owned by custom controller {owner.kind}/{owner.name}")
    return None
