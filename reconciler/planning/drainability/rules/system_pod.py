"""Drainability rule: a young kube-system pod without a PDB blocks its node.

cluster-autoscaler: simulator/drainability/rules/system.
"""

from __future__ import annotations

from datetime import timedelta

from reconciler.domain.model import Pod
from reconciler.planning.drainability.base import BLOCKS, Drain, DrainContext

SYSTEM_NAMESPACE = "kube-system"


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
