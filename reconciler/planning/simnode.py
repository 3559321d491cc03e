"""A mutable node for simulation: what is free on it and which pods it holds, updated in place.

The planner asks "does this pod fit here?" millions of times at 5,000 nodes, so a SimNode keeps the
answers' inputs ready: CPU, memory and pod slots as plain ints, other resources in a small dict, used
host ports, and the hostname-scoped anti-affinity terms of the pods on it. Built either from a real
node and its running pods, or from a node template plus the DaemonSet pods a new node would start.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from reconciler.domain.model import (
    CPU,
    HOSTNAME_LABEL,
    LEGACY_ZONE_LABEL,
    MEMORY,
    PODS,
    ZONE_LABEL,
    DaemonSet,
    Node,
    NodeTemplate,
    OwnerRef,
    Pod,
    PodAffinityTerm,
    Resources,
    Taint,
    Toleration,
)
from reconciler.planning.selectors import (
    EXISTS,
    NO_EXECUTE,
    NO_SCHEDULE,
    node_affinity_matches,
    node_selector_matches,
    untolerated_taint,
)

DEFAULT_MAX_PODS = 110  # kubelet's --max-pods default, for a node that reports no pod capacity
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
ANY_IP = "0.0.0.0"

# Tolerations the DaemonSet controller adds to every DaemonSet pod (hostNetwork's
# network-unavailable excepted: we cannot tell hostNetwork from the model).
DAEMONSET_TOLERATIONS: tuple[Toleration, ...] = (
    Toleration("node.kubernetes.io/not-ready", EXISTS, "", NO_EXECUTE),
    Toleration("node.kubernetes.io/unreachable", EXISTS, "", NO_EXECUTE),
    Toleration("node.kubernetes.io/disk-pressure", EXISTS, "", NO_SCHEDULE),
    Toleration("node.kubernetes.io/memory-pressure", EXISTS, "", NO_SCHEDULE),
    Toleration("node.kubernetes.io/pid-pressure", EXISTS, "", NO_SCHEDULE),
    Toleration("node.kubernetes.io/unschedulable", EXISTS, "", NO_SCHEDULE),
)

PortKey = tuple[str, int]  # (protocol, port)


class SimNode:
    """One node in a simulation. Mutable on purpose (add/remove pods); `copy()` before trying things
    that must not stick.

    `label_variants` holds one label map per zone a new node could land in (a multi-AZ group's
    template): a selector passes only when it passes in every variant, because AWS, not us, picks the
    zone. For a real node it is just `(labels,)`.
    """

    __slots__ = (
        "allocatable",
        "anti_terms",
        "cpu_free",
        "free",
        "group",
        "held",
        "is_new",
        "label_variants",
        "labels",
        "mem_free",
        "name",
        "pods",
        "pods_free",
        "ports",
        "shadow",
        "taints",
        "unschedulable",
        "zones",
    )

    name: str
    group: str
    labels: Mapping[str, str]
    label_variants: tuple[Mapping[str, str], ...]
    taints: tuple[Taint, ...]
    unschedulable: bool
    zones: tuple[str, ...]
    is_new: bool
    allocatable: Resources
    cpu_free: int
    mem_free: int
    pods_free: int
    free: dict[str, int]
    pods: list[Pod]
    held: list[Pod]  # pods not promised this node that the scheduler may still bind here: room only
    shadow: tuple[Pod, ...]  # pods that take no room here but count for spread and affinity
    ports: dict[PortKey, list[str]]
    anti_terms: list[tuple[Pod, PodAffinityTerm]]

    def __init__(
        self,
        name: str,
        labels: Mapping[str, str],
        taints: tuple[Taint, ...],
        allocatable: Resources,
        *,
        unschedulable: bool = False,
        zones: tuple[str, ...] = (),
        label_variants: tuple[Mapping[str, str], ...] | None = None,
        group: str = "",
        is_new: bool = False,
    ) -> None:
        self.name = name
        self.group = group
        self.labels = labels
        self.label_variants = label_variants if label_variants is not None else (labels,)
        self.taints = taints
        self.unschedulable = unschedulable
        self.zones = zones
        self.is_new = is_new
        self.allocatable = allocatable
        values = allocatable.values
        self.cpu_free = values.get(CPU, 0)
        self.mem_free = values.get(MEMORY, 0)
        self.pods_free = values.get(PODS, DEFAULT_MAX_PODS)
        self.free = {k: v for k, v in values.items() if k not in (CPU, MEMORY, PODS)}
        self.pods = []
        self.held = []
        self.shadow = ()
        self.ports = {}
        self.anti_terms = []

    # ------------------------------------------------------------------------------ construction

    @classmethod
    def from_node(cls, node: Node, pods: Iterable[Pod], group: str = "") -> SimNode:
        """A real node with the pods bound to it (terminal pods hold nothing and are skipped)."""
        zone = node.zone
        sim = cls(
            node.name,
            node.labels,
            node.taints,
            node.allocatable,
            unschedulable=node.unschedulable,
            zones=(zone,) if zone else (),
            group=group,
        )
        for pod in pods:
            if pod.phase not in TERMINAL_PHASES:
                sim.add(pod)
        return sim

    @classmethod
    def from_template(
        cls,
        template: NodeTemplate,
        daemonsets: Iterable[DaemonSet],
        *,
        name: str,
        zones: tuple[str, ...] = (),
        group: str = "",
        unfit: list[DaemonSet] | None = None,
    ) -> SimNode:
        """A node that does not exist yet: the template's labels under a fresh hostname, in whichever
        of `zones` AWS picks, already running what a fresh node runs before any of our pods (CA's
        podsExpectedOnFreshNode): the mirror and DaemonSet pods of the live node the template was
        copied from, then one pod of every other DaemonSet that would schedule onto it and fits in
        what is left. A DaemonSet's pod goes through kube-scheduler like any other: one that asks for
        more than the fresh node has left stays Pending there and takes nothing. cluster-autoscaler
        counts it anyway; then one tenant's DaemonSet asking `memory: 1e33` would leave no room on
        any new node and stop every scale-up (issue 28). Those left out are appended to `unfit`.

        Build it once per group and `copy(name)` it for every further new node: DaemonSet matching is
        the expensive part and is the same for all of them.
        """
        if not zones:
            zone = template.labels.get(ZONE_LABEL) or template.labels.get(LEGACY_ZONE_LABEL, "")
            zones = (zone,) if zone else ()
        labels, variants = _template_labels(template.labels, name, zones)
        sim = cls(
            name,
            labels,
            template.taints,
            template.allocatable,
            zones=zones,
            label_variants=variants,
            group=group,
            is_new=True,
        )
        running: set[tuple[str, str]] = set()  # DaemonSets the sample node already runs
        for pod in template.pods:
            sim.add(sample_pod_copy(pod, name))
            owner = pod.owner
            if owner is not None and owner.controller and owner.kind == "DaemonSet":
                running.add((pod.namespace, owner.name))
        for ds in daemonsets:
            if (ds.namespace, ds.name) not in running and daemonset_runs_on(ds, sim):
                if _has_room(sim, ds.requests):
                    sim.add(daemonset_pod(ds, name))
                elif unfit is not None:
                    unfit.append(ds)
        return sim

    def copy(self, name: str | None = None) -> SimNode:
        """An independent copy, optionally under a new `name` (for stamping out template nodes).

        Labels are shared, not renamed: every new node of a group keeps the base's placeholder
        hostname, which no pod can name (the node does not exist yet), so selectors answer the same;
        `name` (what matchFields and reports use) is unique. Copying stays cheap for hundreds of
        new nodes per estimate.
        """
        new = SimNode.__new__(SimNode)
        new.name = self.name if name is None else name
        new.group = self.group
        new.labels = self.labels
        new.label_variants = self.label_variants
        new.taints = self.taints
        new.unschedulable = self.unschedulable
        new.zones = self.zones
        new.is_new = self.is_new
        new.allocatable = self.allocatable
        new.cpu_free = self.cpu_free
        new.mem_free = self.mem_free
        new.pods_free = self.pods_free
        new.free = dict(self.free)
        new.pods = list(self.pods)
        new.held = list(self.held)
        new.shadow = self.shadow
        new.ports = {k: list(v) for k, v in self.ports.items()}
        new.anti_terms = list(self.anti_terms)
        return new

    # ------------------------------------------------------------------------------ mutation

    def add(self, pod: Pod) -> None:
        """Bind `pod` here without checking anything: predicates decide, this only books."""
        self.pods.append(pod)
        self._take_room(pod)
        scheduling = pod.scheduling
        for hp in scheduling.host_ports:
            if hp.port > 0:
                self.ports.setdefault((hp.protocol or "TCP", hp.port), []).append(hp.host_ip or ANY_IP)
        for term in scheduling.pod_anti_affinity:
            if term.topology_key == HOSTNAME_LABEL:
                self.anti_terms.append((pod, term))

    def hold(self, pod: Pod) -> None:
        """Keep `pod`'s room (resources and a pod slot) without binding it: a pod the plan cannot
        promise this node (AWS picks its zone) but that the scheduler binds here when the zone
        suits, taking room the plan would otherwise count for the pods it placed."""
        self.held.append(pod)
        self._take_room(pod)

    def _take_room(self, pod: Pod) -> None:
        """A pod slot and the pod's requests, off what the node has free."""
        self.pods_free -= 1
        free = self.free
        for name, amount in pod.requests.values.items():
            if name == CPU:
                self.cpu_free -= amount
            elif name == MEMORY:
                self.mem_free -= amount
            elif name != PODS:
                free[name] = free.get(name, 0) - amount

    def add_same(self, pods: Sequence[Pod]) -> None:
        """Bind several pods with equal requests and no host ports or anti-affinity (one equivalence
        class) in one step: the estimator packs runs of identical pods this way."""
        if len(pods) < 2:
            for pod in pods:
                self.add(pod)
            return
        first = pods[0]
        s = first.scheduling
        r = first.requests
        if s.host_ports or s.pod_anti_affinity or any(p.requests is not r and p.requests != r for p in pods):
            for pod in pods:
                self.add(pod)
            return
        count = len(pods)
        self.pods.extend(pods)
        self.pods_free -= count
        free = self.free
        for name, amount in first.requests.values.items():
            if name == CPU:
                self.cpu_free -= amount * count
            elif name == MEMORY:
                self.mem_free -= amount * count
            elif name != PODS:
                free[name] = free.get(name, 0) - amount * count

    def remove(self, pod: Pod) -> None:
        """Undo `add(pod)`; the pod must be on this node (matched by identity first, then equality)."""
        index = next((i for i, p in enumerate(self.pods) if p is pod), None)
        if index is None:
            index = self.pods.index(pod)  # raises ValueError when absent: a caller bug
        del self.pods[index]
        self.pods_free += 1
        free = self.free
        for name, amount in pod.requests.values.items():
            if name == CPU:
                self.cpu_free += amount
            elif name == MEMORY:
                self.mem_free += amount
            elif name != PODS:
                free[name] = free.get(name, 0) + amount
        scheduling = pod.scheduling
        for hp in scheduling.host_ports:
            if hp.port > 0:
                key = (hp.protocol or "TCP", hp.port)
                ips = self.ports.get(key)
                if ips is not None:
                    ips.remove(hp.host_ip or ANY_IP)
                    if not ips:
                        del self.ports[key]
        if scheduling.pod_anti_affinity:
            self.anti_terms = [(p, t) for p, t in self.anti_terms if p is not pod]

    # ------------------------------------------------------------------------------ views

    def free_amount(self, name: str) -> int:
        """Free amount of one resource (negative when the node is overcommitted)."""
        if name == CPU:
            return self.cpu_free
        if name == MEMORY:
            return self.mem_free
        if name == PODS:
            return self.pods_free
        return self.free.get(name, 0)

    def free_resources(self) -> Resources:
        values = dict(self.free)
        values[CPU] = self.cpu_free
        values[MEMORY] = self.mem_free
        values[PODS] = self.pods_free
        return Resources({k: v for k, v in values.items() if v})

    @property
    def requested_cpu(self) -> int:
        return self.allocatable.cpu - self.cpu_free

    @property
    def requested_memory(self) -> int:
        return self.allocatable.memory - self.mem_free

    def __repr__(self) -> str:
        return f"SimNode({self.name!r}, group={self.group!r}, pods={len(self.pods)})"


def _template_labels(
    template_labels: Mapping[str, str], name: str, zones: tuple[str, ...]
) -> tuple[Mapping[str, str], tuple[Mapping[str, str], ...]]:
    """The template's labels with a fresh hostname and the zone labels set per possible zone.

    With several zones the plain `labels` carry no zone at all (we do not know it); selectors are
    evaluated against every zone's variant instead.
    """
    base = dict(template_labels)
    base[HOSTNAME_LABEL] = name
    # Every label that carries the sampled node's zone (topology.ebs.csi.aws.com/zone, custom ones)
    # follows the zone AWS picks, not only the two standard keys.
    sampled = base.get(ZONE_LABEL) or base.get(LEGACY_ZONE_LABEL)
    zonal = (k for k, v in base.items() if k != ZONE_LABEL and (k == LEGACY_ZONE_LABEL or v == sampled))
    zone_keys = [ZONE_LABEL, *sorted(zonal if sampled else ())]
    if len(zones) == 1:
        for key in zone_keys:
            base[key] = zones[0]
        return base, (base,)
    if len(zones) > 1:
        variants = []
        for zone in zones:
            variant = dict(base)
            for key in zone_keys:
                variant[key] = zone
            variants.append(variant)
        for key in zone_keys:
            base.pop(key, None)
        return base, tuple(variants)
    return base, (base,)


def _has_room(node: SimNode, requests: Resources) -> bool:
    """Whether a pod of `requests` fits what `node` has left (NodeResourcesFit, a pod slot included)."""
    if node.pods_free < 1:
        return False
    return all(amount <= node.free_amount(name) for name, amount in requests.values.items() if name != PODS)


def daemonset_runs_on(ds: DaemonSet, node: SimNode) -> bool:
    """Whether the DaemonSet controller would start a pod on `node`: node selector, required node
    affinity and taints (with the tolerations the controller adds). Resources are the scheduler's
    question, asked by `from_template`."""
    sched = ds.scheduling
    for labels in node.label_variants:
        if not node_selector_matches(sched.node_selector, labels):
            return False
        if not node_affinity_matches(sched.required_node_affinity, labels, node.name):
            return False
    tolerations = sched.tolerations + DAEMONSET_TOLERATIONS
    return untolerated_taint(tolerations, node.taints) is None


def daemonset_pod(ds: DaemonSet, node_name: str) -> Pod:
    """The pod `ds` would run on a new node, as far as simulation cares."""
    return Pod(
        namespace=ds.namespace,
        name=f"{ds.name}-{node_name}",
        uid=f"daemonset:{ds.namespace}/{ds.name}@{node_name}",
        requests=ds.requests,
        node_name=node_name,
        phase="Running",
        created=None,
        owner=OwnerRef("DaemonSet", ds.name),
        scheduling=ds.scheduling,
    )


def sample_pod_copy(pod: Pod, node_name: str) -> Pod:
    """A mirror or DaemonSet pod of a template's sample node as new node `node_name` would run it: the
    same requests and scheduling under its own name and uid (CA's createSanitizedPod). It keeps its
    mirror annotation: scale-up tells a new node's own pods (DaemonSet and mirror) from the pending
    pods placed on it."""
    return pod._replace(name=f"{pod.name}-{node_name}", uid=f"{pod.uid}@{node_name}", node_name=node_name)
