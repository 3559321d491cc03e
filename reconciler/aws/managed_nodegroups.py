"""EKS managed node groups: the labels and taints their nodes get from the node group, not from tags.

An ASG that EKS made for a managed node group carries `eks:cluster-name` and `eks:nodegroup-name`.
Its nodes are labelled and tainted by EKS from the node group's own settings (DescribeNodegroup),
which the ASG's tags do not repeat: without them a group at zero looks unable to hold the pods that
select its labels or tolerate its taints, and never scales up for them (cluster-autoscaler reads the
same API in aws_manager.go). EKS also labels every such node `eks.amazonaws.com/nodegroup` and
`eks.amazonaws.com/capacityType`, which pods select on, so the template carries those too.

One DescribeNodegroup per managed group that needs a template (no Ready node), remembered by the
reader for `aws.refreshInterval`. A node group that cannot be described (deleted, or the role lacks
eks:DescribeNodegroup) is a warning naming the group and the fix: its template is what the tags say.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from botocore.exceptions import ClientError

from reconciler.aws.clients import error_code
from reconciler.aws.templates import TemplateTags
from reconciler.domain.model import Taint

CLUSTER_TAG = "eks:cluster-name"
NODEGROUP_TAG = "eks:nodegroup-name"
NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"
CAPACITY_TYPE_LABEL = "eks.amazonaws.com/capacityType"
# DescribeNodegroup spells taint effects in upper snake case; nodes carry Kubernetes' spelling
EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
_DENIED = frozenset({"AccessDeniedException", "AccessDenied", "UnauthorizedOperation"})


@dataclass(frozen=True, slots=True)
class NodegroupRef:
    cluster: str
    nodegroup: str

    def __str__(self) -> str:
        return f"{self.cluster}/{self.nodegroup}"


@dataclass(frozen=True)
class ManagedNodegroup:
    """What EKS puts on every node of the group, or why it could not be read."""

    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    error: str = ""


def nodegroup_ref(tags: Mapping[str, str]) -> NodegroupRef | None:
    cluster, nodegroup = tags.get(CLUSTER_TAG, ""), tags.get(NODEGROUP_TAG, "")
    return NodegroupRef(cluster, nodegroup) if cluster and nodegroup else None


def from_description(nodegroup: Mapping[str, Any]) -> ManagedNodegroup:
    """Labels and taints as the nodes carry them; an unknown taint effect is skipped, not guessed."""
    labels = {str(k): str(v) for k, v in (nodegroup.get("labels") or {}).items()}
    labels[NODEGROUP_LABEL] = str(nodegroup.get("nodegroupName", ""))
    if nodegroup.get("capacityType"):
        labels[CAPACITY_TYPE_LABEL] = str(nodegroup["capacityType"])
    taints = tuple(
        Taint(str(t["key"]), str(t.get("value") or ""), EFFECTS[str(t.get("effect"))])
        for t in nodegroup.get("taints") or []
        if t.get("key") and str(t.get("effect")) in EFFECTS
    )
    return ManagedNodegroup(labels, taints)


def fetch_managed_nodegroups(eks: Any, refs: Iterable[NodegroupRef]) -> dict[NodegroupRef, ManagedNodegroup]:
    """One DescribeNodegroup per node group. Not found and access denied become the group's error
    (a warning later); anything else is an AWS failure like any other."""
    found: dict[NodegroupRef, ManagedNodegroup] = {}
    for ref in sorted(set(refs), key=str):
        try:
            reply = eks.describe_nodegroup(clusterName=ref.cluster, nodegroupName=ref.nodegroup)
        except ClientError as exc:
            code = error_code(exc)
            if code == "ResourceNotFoundException":
                found[ref] = ManagedNodegroup(error=f"EKS has no node group {ref}")
            elif code in _DENIED:
                found[ref] = ManagedNodegroup(
                    error=f"eks:DescribeNodegroup on {ref} was denied (grant it to the plan role: "
                    "examples/iam/plan-policy.json)"
                )
            else:
                raise
            continue
        found[ref] = from_description(reply.get("nodegroup", {}))
    return found


def merged_tags(tags: TemplateTags, managed: ManagedNodegroup) -> TemplateTags:
    """The node group's labels and taints under the ASG's node-template tags: where both say
    something about a label key or a taint key and effect, the tag wins (it is the operator's
    explicit word to the autoscaler; cluster-autoscaler lets the API win instead)."""
    labels = {**managed.labels, **tags.labels}
    declared = {(t.key, t.effect) for t in tags.taints}
    taints = tags.taints + tuple(t for t in managed.taints if (t.key, t.effect) not in declared)
    return replace(tags, labels=labels, taints=taints)
