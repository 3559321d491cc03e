"""Join the cluster and the ASGs: which node belongs to which group, what is missing, what a new node
of each group would look like. Pure: state in, inventory out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from reconciler.domain.model import (
    HOSTNAME_LABEL,
    ClusterState,
    Instance,
    Node,
    NodeGroup,
    NodeTemplate,
    Pod,
    Resources,
)

# Taints that describe a node's moment, not its group: a template copied from a live node drops them.
TRANSIENT_TAINT_KEYS = frozenset(
    {
        "node.kubernetes.io/unschedulable",
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/network-unavailable",
        "node.cloudprovider.kubernetes.io/uninitialized",
        "node.cloudprovider.kubernetes.io/shutdown",
        "ToBeDeletedByClusterAutoscaler",
        "DeletionCandidateOfClusterAutoscaler",
        "asg-reconciler.dev/draining",
    }
)
# Labels unique to one machine; the template gets its own hostname instead.
NODE_SPECIFIC_LABELS = frozenset({HOSTNAME_LABEL, "topology.k8s.aws/zone-id", "k8s.io/cloud-provider-aws"})


@dataclass(frozen=True)
class GroupInventory:
    group: NodeGroup
    nodes: tuple[Node, ...]
    unregistered: tuple[Instance, ...]  # instances of the ASG with no Kubernetes node yet
    template: NodeTemplate | None

    @property
    def name(self) -> str:
        return self.group.name

    @property
    def ready_nodes(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.ready)


@dataclass(frozen=True)
class Inventory:
    state: ClusterState
    groups: tuple[GroupInventory, ...]
    unmanaged_nodes: tuple[Node, ...]
    group_of_node: Mapping[str, str]
    pods_by_node: Mapping[str, tuple[Pod, ...]] = field(repr=False)
    pending: tuple[Pod, ...]
    # node name -> unbound pods nominated to it (status.nominatedNodeName), not being deleted: CA books
    # them there whatever their PodScheduled condition (ArrangePodsBySchedulability, SetClusterState)
    nominated: Mapping[str, tuple[Pod, ...]] = field(default_factory=dict, repr=False)

    def group(self, name: str) -> GroupInventory:
        return next(g for g in self.groups if g.name == name)

    def requested_on(self, node_name: str) -> Resources:
        total: dict[str, int] = {}
        for pod in self.pods_by_node.get(node_name, ()):
            for resource, amount in pod.requests.values.items():
                total[resource] = total.get(resource, 0) + amount
        return Resources(total)


def template_from_node(node: Node, group: NodeGroup, pods: Iterable[Pod] = ()) -> NodeTemplate:
    """A live Ready node of the group, stripped of what belongs to that one machine, with the pods of
    `pods` (those bound to it) that a fresh node of the group would run as well."""
    labels = {k: v for k, v in node.labels.items() if k not in NODE_SPECIFIC_LABELS}
    labels[HOSTNAME_LABEL] = f"template-node-for-{group.name}"
    instance_type = node.labels.get("node.kubernetes.io/instance-type", "")
    return NodeTemplate(
        instance_type=instance_type,
        labels=labels,
        taints=tuple(t for t in node.taints if t.key not in TRANSIENT_TAINT_KEYS),
        capacity=node.capacity,
        allocatable=node.allocatable,
        source=f"node {node.name}",
        pods=tuple(p for p in pods if _expected_on_fresh_node(p)),
    )


def _expected_on_fresh_node(pod: Pod) -> bool:
    """Mirror (static) pods come from the kubelet's own manifests and DaemonSet pods from their
    controllers, so every node of the group runs them: CA's podsExpectedOnFreshNode keeps exactly these
    from its sample node, leaving out pods being deleted (and finished ones, which CA never lists)."""
    return (
        (pod.is_mirror or pod.is_daemonset)
        and pod.deleting_since is None
        and pod.phase not in ("Succeeded", "Failed")
    )


def build_inventory(state: ClusterState, groups: tuple[NodeGroup, ...]) -> Inventory:
    owner_of_instance = {i.instance_id: g.name for g in groups for i in g.instances}
    nodes_of: dict[str, list[Node]] = {g.name: [] for g in groups}
    group_of_node: dict[str, str] = {}
    unmanaged: list[Node] = []
    registered: set[str] = set()
    for node in state.nodes:
        instance_id = node.instance_id
        name = owner_of_instance.get(instance_id)
        if name is None:
            unmanaged.append(node)
            continue
        nodes_of[name].append(node)
        group_of_node[node.name] = name
        registered.add(instance_id)

    pods_by_node: dict[str, list[Pod]] = {}
    pending: list[Pod] = []
    nominated: dict[str, list[Pod]] = {}
    for pod in state.pods:
        if pod.node_name:
            pods_by_node.setdefault(pod.node_name, []).append(pod)
            continue
        if pod.nominated_node and pod.deleting_since is None and pod.phase == "Pending":
            nominated.setdefault(pod.nominated_node, []).append(pod)
        if pod.is_unschedulable:
            pending.append(pod)

    inventories = []
    for group in sorted(groups, key=lambda g: g.name):
        nodes = tuple(nodes_of[group.name])
        template = group.template
        ready = [n for n in nodes if n.ready and not n.unschedulable]
        if ready:
            # A live node knows its real allocatable and its DaemonSet and static pods; ASG tags still add
            # what they declare.
            template = _with_declared(
                template_from_node(ready[0], group, pods_by_node.get(ready[0].name, ())), group
            )
        inventories.append(
            GroupInventory(
                group=group,
                nodes=nodes,
                unregistered=tuple(i for i in group.instances if i.instance_id not in registered),
                template=template,
            )
        )
    return Inventory(
        state=state,
        groups=tuple(inventories),
        unmanaged_nodes=tuple(unmanaged),
        group_of_node=group_of_node,
        pods_by_node={k: tuple(v) for k, v in pods_by_node.items()},
        pending=tuple(pending),
        nominated={k: tuple(v) for k, v in nominated.items()},
    )


def _with_declared(from_node: NodeTemplate, group: NodeGroup) -> NodeTemplate:
    """Labels and taints the ASG's node-template tags declare are kept even if the sampled node lacks
    them (e.g. applied later by a controller); the node wins on everything it reports."""
    labels = dict(group.declared_labels)
    labels.update(from_node.labels)
    taints = list(from_node.taints)
    keys = {t.key for t in taints}
    taints.extend(t for t in group.declared_taints if t.key not in keys)
    return replace(from_node, labels=labels, taints=tuple(taints))
