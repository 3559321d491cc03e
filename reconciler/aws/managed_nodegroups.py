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
from reconciler.aws.templates import TemplateTags, valid_label_key, valid_label_value
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
    warnings: tuple[str, ...] = ()  # what was left out or read conservatively, naming it


def nodegroup_ref(tags: Mapping[str, str]) -> NodegroupRef | None:
    cluster, nodegroup = tags.get(CLUSTER_TAG, ""), tags.get(NODEGROUP_TAG, "")
    return NodegroupRef(cluster, nodegroup) if cluster and nodegroup else None


def from_description(nodegroup: Mapping[str, Any]) -> ManagedNodegroup:
    """Labels and taints as the nodes carry them. A taint whose effect is not one EKS (or Kubernetes)
    spells is kept as NoSchedule, with a warning: dropping it would plan pods that do not tolerate
    it onto nodes that refuse them. A label no node could carry is left out, with a warning."""
    name = str(nodegroup.get("nodegroupName", ""))
    warnings: list[str] = []
    labels: dict[str, str] = {}
    for key, value in (nodegroup.get("labels") or {}).items():
        key, value = str(key), str(value)
        if valid_label_key(key) and valid_label_value(value):
            labels[key] = value
        else:
            warnings.append(
                f"node group {name}: label {key!r}={value!r} ignored: not a valid Kubernetes label"
            )
    labels[NODEGROUP_LABEL] = name
    if nodegroup.get("capacityType"):
        labels[CAPACITY_TYPE_LABEL] = str(nodegroup["capacityType"])
    taints: list[Taint] = []
    for taint in nodegroup.get("taints") or []:
        key, effect = str(taint.get("key") or ""), str(taint.get("effect"))
        if not key:
            warnings.append(f"node group {name}: a taint without a key ignored")
            continue
        known = EFFECTS.get(effect) or (effect if effect in EFFECTS.values() else "")
        if not known:
            warnings.append(
                f"node group {name}: taint {key} has effect {effect!r}, not one of "
                f"{', '.join(EFFECTS)}: counted as NoSchedule, so pods that do not tolerate it stay off"
            )
        taints.append(Taint(key, str(taint.get("value") or ""), known or "NoSchedule"))
    return ManagedNodegroup(labels, tuple(taints), warnings=tuple(warnings))


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
