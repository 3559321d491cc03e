"""The nodes that exist, as cluster-autoscaler's cluster snapshot holds them.

CA fills its snapshot once per loop with every node, the pods bound to it and the pods nominated to it
(status.nominatedNodeName: waiting there for a preemption or their binding; booked without a check),
leaving out expendable pods (priority below --expendable-pods-priority-cutoff; static_autoscaler.go,
SetClusterState with FilterOutExpendablePods). Every later step reads that snapshot — the room pending
pods may take, utilisation, the pods a drain must move or that forbid it — so a pod left out here is not
there for any of them. Plan and scale-down build their simulated nodes here, so they agree.
"""

from __future__ import annotations

from reconciler.domain.inventory import Inventory
from reconciler.domain.model import Node
from reconciler.planning.simnode import TERMINAL_PHASES, SimNode


def existing_node(node: Node, inventory: Inventory, cutoff: int) -> SimNode:
    """`node` with the pods bound or nominated to it that are not expendable below `cutoff`."""
    bound = inventory.pods_by_node.get(node.name, ())
    pods = [p for p in bound if not p.is_expendable(cutoff)]
    pods += (p for p in inventory.nominated.get(node.name, ()) if not p.is_expendable(cutoff))
    sim = SimNode.from_node(node, pods, inventory.group_of_node.get(node.name, ""))
    # The scheduler still counts them for spread and affinity (preemption frees room, not domains).
    sim.shadow = tuple(p for p in bound if p.is_expendable(cutoff) and p.phase not in TERMINAL_PHASES)
    return sim
