"""The domain: what the cluster holds and which ASGs serve it, as frozen dataclasses.

Everything here is plain data, built by the edges (`kube/`, `aws/`) and consumed by the pure core
(`planning/`). Label and annotation maps are plain dicts treated as read-only; readers intern identical
ones, so 150k pods from a few hundred controllers share a few hundred maps.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import NamedTuple

# A node group name the manifest can carry: the manifest schema's groupName (schemas/manifest.schema.json;
# a unit test keeps the two equal). AWS allows more (spaces, most of Unicode); such a group is left out
# with a warning rather than breaking the manifest, its trailers and every other group's plan.
GROUP_NAME = re.compile(r"^[A-Za-z0-9_.:/@+=-]{1,255}$")

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
GPU = "nvidia.com/gpu"

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
HOSTNAME_LABEL = "kubernetes.io/hostname"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ARCH_LABEL = "kubernetes.io/arch"
OS_LABEL = "kubernetes.io/os"
LEGACY_ZONE_LABEL = "failure-domain.beta.kubernetes.io/zone"

SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
# a pod that is a DaemonSet pod whatever its owner (CA's IsDaemonSetPod), e.g. one a custom node
# agent controller runs on every node
DAEMONSET_POD = "cluster-autoscaler.kubernetes.io/daemonset-pod"
SAFE_TO_EVICT_LOCAL_VOLUMES = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
POD_SCALE_UP_DELAY = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay"
MIRROR_POD = "kubernetes.io/config.mirror"
# Apply's cordon: a NoSchedule taint whose value is the commit being applied, so a crashed apply
# resumes its own drains and never touches a cordon a person made (DESIGN §3.6).
OWN_DRAIN_TAINT = "asg-reconciler.dev/draining"
# Apply's Lease (one apply at a time, DESIGN §3.6) also keeps the digest of the last record apply
# wrote, where the plan bot's Git credentials cannot reach (the records' anchor, docs/gitops.md).
APPLY_LEASE_NAMESPACE = "kube-system"
APPLY_LEASE_PREFIX = "asg-reconciler-apply-"  # + the cluster's name
RECORD_ANCHOR_ANNOTATION = "asg-reconciler.dev/last-record"
DEFAULT_GRACE_PERIOD_SECONDS = 30
# CA's PodLongTerminatingExtraThreshold: how far past its grace period a deleted pod counts as stuck.
LONG_TERMINATING_MARGIN = timedelta(seconds=30)

EMPTY_MAPPING: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Resources:
    """An amount of each resource: CPU in millicores, memory and storage in bytes, the rest in units.

    Absent resources are zero. `values` holds only non-zero entries so equality is by content.
    """

    values: Mapping[str, int] = field(default_factory=dict)

    @staticmethod
    def of(**amounts: int) -> Resources:
        """Build from keyword amounts; `ephemeral_storage` and `nvidia_gpu` map to their API names."""
        names = {"ephemeral_storage": EPHEMERAL_STORAGE, "nvidia_gpu": GPU}
        return Resources({names.get(k, k): v for k, v in amounts.items() if v})

    def get(self, name: str) -> int:
        return self.values.get(name, 0)

    @property
    def cpu(self) -> int:
        return self.values.get(CPU, 0)

    @property
    def memory(self) -> int:
        return self.values.get(MEMORY, 0)

    @property
    def pods(self) -> int:
        return self.values.get(PODS, 0)

    def __add__(self, other: Resources) -> Resources:
        merged = dict(self.values)
        for name, amount in other.values.items():
            merged[name] = merged.get(name, 0) + amount
        return Resources({k: v for k, v in merged.items() if v})

    def __sub__(self, other: Resources) -> Resources:
        merged = dict(self.values)
        for name, amount in other.values.items():
            merged[name] = merged.get(name, 0) - amount
        return Resources({k: v for k, v in merged.items() if v})

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(self.values.items())

    def __hash__(self) -> int:
        return hash(frozenset(self.values.items()))

    def fits_in(self, capacity: Resources) -> bool:
        """Every requested amount is within `capacity` (absent in capacity means zero)."""
        return all(amount <= capacity.values.get(name, 0) for name, amount in self.values.items())


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty matches every effect


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    """One expression of a node selector term or a label selector (In, NotIn, Exists, DoesNotExist,
    Gt, Lt)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Expressions ANDed; a pod's required node affinity ORs its terms."""

    match_expressions: tuple[SelectorRequirement, ...] = ()
    match_fields: tuple[SelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A Kubernetes label selector. An empty selector matches everything; `None` where a field may be
    absent means it matches nothing."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[SelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    label_selector: LabelSelector | None
    topology_key: str
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()  # the selector also requires the pod's own values of these
    mismatch_label_keys: tuple[str, ...] = ()  # ... and other values than the pod's of these


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    label_selector: LabelSelector | None
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"  # Honor | Ignore: count only nodes the pod's node affinity allows
    node_taints_policy: str = "Ignore"  # Honor | Ignore: count only nodes whose taints the pod tolerates
    match_label_keys: tuple[str, ...] = ()  # the selector also requires the pod's own values of these


@dataclass(frozen=True, slots=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    host_ip: str = ""


@dataclass(frozen=True, slots=True)
class Scheduling:
    """The scheduling-relevant part of a pod spec. Pods of one controller share one instance, which is
    also what the planner's equivalence classes key on."""

    node_selector: tuple[tuple[str, str], ...] = ()
    required_node_affinity: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    pod_affinity: tuple[PodAffinityTerm, ...] = ()
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    topology_spread: tuple[TopologySpreadConstraint, ...] = ()


NO_SCHEDULING = Scheduling()


@dataclass(frozen=True, slots=True)
class Volumes:
    """What the pod mounts, as far as scale-down cares."""

    local_storage: tuple[str, ...] = ()  # emptyDir (not Memory medium) and hostPath volume names
    pvc_claims: tuple[str, ...] = ()


NO_VOLUMES = Volumes()


@dataclass(frozen=True, slots=True)
class OwnerRef:
    kind: str
    name: str
    controller: bool = True


class Pod(NamedTuple):
    """A pod. An immutable NamedTuple rather than a frozen dataclass: listing builds 150k of them and
    a NamedTuple is built ~5x faster; use `pod._replace(...)` where a dataclass would use replace()."""

    namespace: str
    name: str
    uid: str
    requests: Resources
    node_name: str
    phase: str
    created: datetime | None
    labels: Mapping[str, str] = EMPTY_MAPPING
    annotations: Mapping[str, str] = EMPTY_MAPPING
    owner: OwnerRef | None = None
    priority: int = 0
    scheduling: Scheduling = NO_SCHEDULING
    volumes: Volumes = NO_VOLUMES
    # PodScheduled condition: status ("True", "False", "") and reason ("Unschedulable", ...)
    scheduled_status: str = ""
    scheduled_reason: str = ""
    scheduled_since: datetime | None = None
    # metadata.deletionTimestamp, and spec.terminationGracePeriodSeconds (the API's default is 30)
    deleting_since: datetime | None = None
    grace_period_seconds: int = DEFAULT_GRACE_PERIOD_SECONDS
    # status.nominatedNodeName of an unbound pod: the scheduler reserved room for it there (it waits
    # for lower-priority pods to be preempted, or for its binding); "" for bound pods
    nominated_node: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def is_long_terminating(self, now: datetime) -> bool:
        """Deleted longer ago than its grace period plus CA's 30 s margin: its kubelet is gone or
        stuck, so it will not be rescheduled and its requests are not real load (CA skips such pods in
        drains and in utilisation)."""
        since = self.deleting_since
        if since is None:
            return False
        return since + timedelta(seconds=self.grace_period_seconds) + LONG_TERMINATING_MARGIN < now

    def is_expendable(self, cutoff: int) -> bool:
        """Priority below `cutoff` (scaleUp.expendablePriorityCutoff, CA's IsExpendablePod): it never
        causes a scale-up and, running, is left out of the simulation as CA leaves it out of its
        snapshot (no room taken, no utilisation, never moves or blocks a drain). A pod without
        spec.priority reads as 0 here, where CA never counts it expendable: they differ only for a
        cutoff above 0."""
        return self.priority < cutoff

    @property
    def is_daemonset(self) -> bool:
        if self.annotations.get(DAEMONSET_POD) == "true":
            return True
        return self.owner is not None and self.owner.kind == "DaemonSet"

    @property
    def is_mirror(self) -> bool:
        return MIRROR_POD in self.annotations

    @property
    def is_unschedulable(self) -> bool:
        """Pending and reported unschedulable by the scheduler: the pods scale-up is for."""
        return (
            self.phase == "Pending"
            and not self.node_name
            and self.scheduled_status == "False"
            and self.scheduled_reason == "Unschedulable"
        )


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    allocatable: Resources
    capacity: Resources
    ready: bool
    ready_since: datetime | None  # last transition of the Ready condition
    unschedulable: bool
    provider_id: str
    created: datetime | None
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def zone(self) -> str:
        """From providerID `aws:///<az>/<instance-id>`, else the zone labels."""
        parts = _provider_parts(self.provider_id)
        if parts is not None and parts[0]:
            return parts[0]
        return self.labels.get(ZONE_LABEL) or self.labels.get(LEGACY_ZONE_LABEL, "")

    @property
    def instance_id(self) -> str:
        parts = _provider_parts(self.provider_id)
        return parts[1] if parts is not None else ""


def _provider_parts(provider_id: str) -> tuple[str, str] | None:
    """Split `aws:///us-east-1a/i-0abc` (or `aws://us-east-1a/i-0abc`) into zone and instance id."""
    if not provider_id.startswith("aws://"):
        return None
    rest = provider_id[len("aws://") :].strip("/")
    zone, _, instance = rest.rpartition("/")
    if not instance.startswith("i-"):
        return None
    return zone, instance


def instance_id_from_provider_id(provider_id: str) -> str:
    parts = _provider_parts(provider_id)
    return parts[1] if parts is not None else ""


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    namespace: str
    name: str
    selector: LabelSelector | None
    disruptions_allowed: int
    min_available: str | None = None
    max_unavailable: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class DaemonSet:
    """Its pod template: what a new node of a group would run before any of our pods."""

    namespace: str
    name: str
    requests: Resources
    scheduling: Scheduling = NO_SCHEDULING


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    zones: tuple[str, ...]  # from node affinity (topology.kubernetes.io/zone); empty = any zone
    claim: str = ""  # namespace/name of the bound claim


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    volume_name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class AutoscalerPresence:
    """Evidence that cluster-autoscaler is live on the cluster (its status ConfigMap or Lease)."""

    source: str  # e.g. "configmap kube-system/cluster-autoscaler-status"
    last_seen: datetime


@dataclass(frozen=True, slots=True)
class ClusterState:
    nodes: tuple[Node, ...]
    pods: tuple[Pod, ...]
    pdbs: tuple[PodDisruptionBudget, ...] = ()
    daemonsets: tuple[DaemonSet, ...] = ()
    pvs: tuple[PersistentVolume, ...] = ()
    pvcs: tuple[PersistentVolumeClaim, ...] = ()
    autoscaler: AutoscalerPresence | None = None
    # Where cluster-autoscaler could not be looked for (a cluster-wide list by name was forbidden,
    # so only kube-system was read): not "absent", and apply, a writer, refuses (apply/sync.py).
    autoscaler_unchecked: tuple[str, ...] = ()
    read_at: datetime | None = None
    # Namespace name -> its labels, for affinity terms' namespaceSelector; None when not read (a
    # snapshot without Namespace objects): terms with a namespace selector are then unmodelled.
    namespaces: Mapping[str, Mapping[str, str]] | None = None
    # What the read could not see and why (a list it may not read): plan, status and apply show them.
    warnings: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------- AWS side


@dataclass(frozen=True, slots=True)
class Instance:
    instance_id: str
    lifecycle_state: str  # InService, Pending, Terminating, Standby, ...
    zone: str
    instance_type: str
    launch_time: datetime | None
    health_status: str = "Healthy"
    protected_from_scale_in: bool = False


# Error classes of a failed launch, as cluster-autoscaler's cloudprovider.InstanceErrorClass names them:
# out of resources (capacity, spot price, quotas) or anything else (a broken template, a missing AMI).
OUT_OF_RESOURCES = "OutOfResources"
OTHER_ERROR = "Other"
FAILED_LAUNCH_STATUSES = frozenset({"Failed", "Cancelled"})


@dataclass(frozen=True, slots=True)
class LaunchActivity:
    """One attempt of the ASG to launch an instance, as its scaling activities record it (read only for
    groups whose desired is above their instances). `code` is the EC2 error the status message names
    (InsufficientInstanceCapacity, VcpuLimitExceeded, ...), "" for a launch that did not fail."""

    activity_id: str
    start: datetime
    status: str  # Successful | Failed | Cancelled | InProgress | WaitingForSpotInstanceId | ...
    message: str = ""  # AWS's status message, as it says it
    code: str = ""
    error_class: str = ""  # OUT_OF_RESOURCES | OTHER_ERROR for a failed launch, else ""

    @property
    def failed(self) -> bool:
        return self.status in FAILED_LAUNCH_STATUSES

    @property
    def succeeded(self) -> bool:
        return self.status == "Successful"


@dataclass(frozen=True, slots=True)
class AutoscalingOptions:
    """Per-group overrides from `k8s.io/cluster-autoscaler/node-template/autoscaling-options/*` tags."""

    scale_down_utilization_threshold: float | None = None
    scale_down_gpu_utilization_threshold: float | None = None
    scale_down_unneeded_time_seconds: float | None = None
    scale_down_unready_time_seconds: float | None = None
    ignore_daemonsets_utilization: bool | None = None


@dataclass(frozen=True, slots=True)
class NodeTemplate:
    """What one new node of a group would look like, for scale-from-zero and estimates."""

    instance_type: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    capacity: Resources
    allocatable: Resources
    source: str  # "node <name>" or "asg <name> (<instance type>)"
    # From a live node: its mirror (static) and DaemonSet pods, which every new node of the group runs
    # too (CA's podsExpectedOnFreshNode); empty for a template from the ASG
    pods: tuple[Pod, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeGroup:
    name: str
    min_size: int
    max_size: int
    desired: int
    instances: tuple[Instance, ...]
    zones: tuple[str, ...]
    tags: Mapping[str, str]
    suspended_processes: tuple[str, ...] = ()
    has_scaling_policies: bool = False
    has_instance_refresh: bool | None = None  # None: not asked (plan and apply ask when it matters)
    instance_weights: Mapping[str, int] = field(default_factory=dict)  # mixed instances
    # share of new capacity AWS buys as spot (a mixed-instances distribution's
    # OnDemandPercentageAboveBaseCapacity below 100): what the price expander and the plan's cost use
    spot_share: float = 0.0
    # OnDemandBaseCapacity: AWS buys the group's first this-many (units of desired) on-demand,
    # whatever spot_share says above it
    on_demand_base: int = 0
    # allocatable of one node of each override type, for a group whose overrides carry
    # WeightedCapacity other than 1: how many capacity units a new node costs (planning/capacity_units.py)
    type_allocatable: Mapping[str, Resources] = field(default_factory=dict)
    # capacity of one node of each override type EC2 describes, for a group that launches more than
    # one type: apply counts a new machine as the largest it may be against `limits` (apply/caps.py)
    type_capacity: Mapping[str, Resources] = field(default_factory=dict)
    instance_types: tuple[str, ...] = ()  # launch template / configuration / overrides, in order
    asg_min_size: int = 0  # the ASG's own bounds (min/max above may come from an explicit spec)
    asg_max_size: int = 0
    explicit: bool = False
    options: AutoscalingOptions = AutoscalingOptions()
    template: NodeTemplate | None = None  # from the ASG; the inventory may prefer a live node
    # what the ASG's node-template tags declare: kept on a template copied from a live node too
    declared_labels: Mapping[str, str] = field(default_factory=dict)
    declared_taints: tuple[Taint, ...] = ()
    template_error: str = ""
    warnings: tuple[str, ...] = ()
    # its launch attempts, newest first; read (DescribeScalingActivities) only while desired is above
    # the instances AWS has, else empty
    launches: tuple[LaunchActivity, ...] = ()

    @property
    def unfilled(self) -> int:
        """Desired capacity AWS has no instance for yet: desired minus the instances it counts (not
        leaving, not in Standby; a mixed-instances group's by their WeightedCapacity, as AWS counts
        desired). It is on its way, or AWS cannot launch it (`launches` says which)."""
        live = sum(
            self.instance_weights.get(i.instance_type, 1)
            for i in self.instances
            if i.lifecycle_state not in NOT_COUNTED_IN_DESIRED
        )
        return max(0, self.desired - live)

    @property
    def launch_suspended(self) -> bool:
        """The ASG's Launch process is suspended: AWS launches nothing, whatever desired says."""
        return "Launch" in self.suspended_processes


# Instances an ASG lists that are not part of its DesiredCapacity: leaving (terminated with or without
# a decrement: either way no longer what desired counts) or in Standby (outside desired by AWS's rule).
NOT_COUNTED_IN_DESIRED = frozenset(
    {
        "Terminating",
        "Terminating:Wait",
        "Terminating:Proceed",
        "Terminated",
        "Detaching",
        "Detached",
        "Standby",
        "EnteringStandby",
    }
)
