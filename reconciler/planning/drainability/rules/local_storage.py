"""Drainability rule: a pod with emptyDir or hostPath data blocks its node.

cluster-autoscaler: simulator/drainability/rules/localstorage.
"""

from __future__ import annotations

from reconciler.domain.model import SAFE_TO_EVICT_LOCAL_VOLUMES, Pod
from reconciler.planning.drainability.base import BLOCKS, Drain, DrainContext


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
