"""One model.NodeGroup per ASG: its size, instances, and whatever else might be changing it.

Scaling policies and instance refreshes are other writers of the same ASG (invariant 7), so they are
described for apply's gates. The describe calls are batched across groups: DescribePolicies once
for the whole region rather than once per group; DescribeInstances by instance-id filter, 200 ids a
call, and only for instances without a node. DescribeInstanceRefreshes only takes one group at a
time, so it is asked only where the answer changes a decision (docs/aws-calls.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from botocore.parsers import ResponseParserError

from reconciler.aws.clients import is_aws_endpoint
from reconciler.aws.instance_types import InstanceTypeInfo
from reconciler.aws.launch import LaunchTypes
from reconciler.aws.managed_nodegroups import CLUSTER_TAG, ManagedNodegroup, merged_tags, nodegroup_ref
from reconciler.aws.templates import (
    build_template,
    override_allocatable,
    override_capacity,
    parse_template_tags,
)
from reconciler.config.settings import NodeTemplatesConfig
from reconciler.domain.model import Instance, NodeGroup

if TYPE_CHECKING:
    from mypy_boto3_autoscaling import AutoScalingClient
    from mypy_boto3_autoscaling.type_defs import AutoScalingGroupTypeDef
    from mypy_boto3_ec2 import EC2Client

    from reconciler.aws.discovery import ExplicitSpec

DELETING = "Delete in progress"  # an ASG's Status while AWS deletes it
INSTANCE_IDS_PER_CALL = 200  # the most values one EC2 filter takes
INSTANCES_PAGE_SIZE = 1000
# A refresh that is still replacing (or rolling back, or about to) instances.
ACTIVE_REFRESH_STATUSES = frozenset({"Pending", "InProgress", "Cancelling", "RollbackInProgress", "Baking"})


@dataclass(frozen=True)
class Ec2Facts:
    """What DescribeInstances adds to the ASG's own instance list."""

    launch_time: datetime | None
    instance_type: str


def asg_tags(asg: AutoScalingGroupTypeDef) -> dict[str, str]:
    return {tag["Key"]: tag.get("Value", "") for tag in asg.get("Tags", []) if "Key" in tag}


def fetch_instances(ec2: EC2Client, instance_ids: Iterable[str]) -> dict[str, Ec2Facts]:
    """Launch time and type per instance id; ids EC2 no longer knows are absent, not an error."""
    wanted = sorted(set(instance_ids))
    paginator = ec2.get_paginator("describe_instances")
    facts: dict[str, Ec2Facts] = {}
    for start in range(0, len(wanted), INSTANCE_IDS_PER_CALL):
        batch = wanted[start : start + INSTANCE_IDS_PER_CALL]
        pages = paginator.paginate(
            Filters=[{"Name": "instance-id", "Values": batch}],
            PaginationConfig={"PageSize": INSTANCES_PAGE_SIZE},
        )
        for page in pages:
            for reservation in page.get("Reservations", []):
                for instance in reservation.get("Instances", []):
                    facts[instance["InstanceId"]] = Ec2Facts(
                        instance.get("LaunchTime"), str(instance.get("InstanceType", ""))
                    )
    return facts


def groups_with_policies(autoscaling: AutoScalingClient) -> frozenset[str]:
    """Names of ASGs with an enabled scaling policy, from one paged region-wide DescribePolicies."""
    paginator = autoscaling.get_paginator("describe_policies")
    return frozenset(
        policy["AutoScalingGroupName"]
        for page in paginator.paginate(PaginationConfig={"PageSize": 100})
        for policy in page.get("ScalingPolicies", [])
        if policy.get("Enabled", True) and "AutoScalingGroupName" in policy
    )


class RefreshChecker:
    """Whether an ASG has an instance refresh under way.

    moto (and other emulators behind `AWS_ENDPOINT_URL`) do not implement DescribeInstanceRefreshes and
    answer with an HTML 500 that botocore cannot parse: there we remember "not supported" and report no
    refresh. Against AWS's own endpoints every failure still surfaces.
    """

    def __init__(self, autoscaling: AutoScalingClient) -> None:
        self._autoscaling = autoscaling
        self._supported = True

    @property
    def supported(self) -> bool:
        return self._supported

    def active(self, asg_name: str) -> bool:
        if not self._supported:
            return False
        try:
            # Only one refresh can be active and AWS lists the newest first, so one short page is enough.
            reply = self._autoscaling.describe_instance_refreshes(AutoScalingGroupName=asg_name, MaxRecords=5)
        except ResponseParserError:
            if is_aws_endpoint(self._autoscaling):
                raise
            self._supported = False
            return False
        return any(r.get("Status") in ACTIVE_REFRESH_STATUSES for r in reply.get("InstanceRefreshes", []))


def bounds_warnings(spec: ExplicitSpec, asg_min: int, asg_max: int) -> tuple[str, ...]:
    """An explicit spec outside the ASG's own bounds: AWS will refuse sizes the planner may choose."""
    warnings = []
    if spec.min_size < asg_min:
        warnings.append(
            f"asg {spec.name}: nodeGroups.explicit {spec.text!r} min {spec.min_size} is below the ASG's "
            f"MinSize {asg_min}; AWS keeps at least {asg_min}"
        )
    if spec.max_size > asg_max:
        warnings.append(
            f"asg {spec.name}: nodeGroups.explicit {spec.text!r} max {spec.max_size} is above the ASG's "
            f"MaxSize {asg_max}; AWS refuses more than {asg_max}"
        )
    return tuple(warnings)


CLUSTER_TAG_PREFIX = "k8s.io/cluster-autoscaler/"


def cluster_tag_warning(name: str, tags: Mapping[str, str], cluster: str) -> tuple[str, ...]:
    """An explicit group without the cluster's tag: the shipped apply IAM policy
    (examples/iam/apply-policy.json) lets apply write only to groups carrying it, so the plan
    would be committed and then denied at apply."""
    tag = f"{CLUSTER_TAG_PREFIX}{cluster}"
    if not cluster or tag in tags:
        return ()
    return (
        f"asg {name}: has no tag {tag}: the shipped apply IAM policy (examples/iam/apply-policy.json) "
        f"allows SetDesiredCapacity and TerminateInstanceInAutoScalingGroup only on groups carrying it "
        f"(tag the group, e.g. {tag}=owned, or widen the policy: docs/deploy-aws.md)",
    )


def instances_of(asg: AutoScalingGroupTypeDef, ec2_facts: Mapping[str, Ec2Facts]) -> tuple[Instance, ...]:
    instances = []
    for item in sorted(asg.get("Instances", []), key=lambda i: i["InstanceId"]):
        facts = ec2_facts.get(item["InstanceId"])
        instances.append(
            Instance(
                instance_id=item["InstanceId"],
                lifecycle_state=str(item.get("LifecycleState", "")),
                zone=item.get("AvailabilityZone", ""),
                instance_type=item.get("InstanceType") or (facts.instance_type if facts else ""),
                launch_time=facts.launch_time if facts else None,
                health_status=item.get("HealthStatus", "Healthy"),
                protected_from_scale_in=bool(item.get("ProtectedFromScaleIn", False)),
            )
        )
    return tuple(instances)


def spot_share(asg: AutoScalingGroupTypeDef) -> float:
    """The share of capacity above the on-demand base that a mixed-instances group buys as spot."""
    policy = asg.get("MixedInstancesPolicy")
    if not policy:
        return 0.0
    on_demand = policy.get("InstancesDistribution", {}).get("OnDemandPercentageAboveBaseCapacity", 100)
    return max(0.0, min(1.0, (100 - int(on_demand)) / 100))


def on_demand_base(asg: AutoScalingGroupTypeDef) -> int:
    """What a mixed-instances group buys on-demand before its spot share applies."""
    policy = asg.get("MixedInstancesPolicy")
    if not policy:
        return 0
    return max(0, int(policy.get("InstancesDistribution", {}).get("OnDemandBaseCapacity", 0) or 0))


def build_node_group(
    asg: AutoScalingGroupTypeDef,
    spec: ExplicitSpec | None,
    *,
    launch: LaunchTypes,
    ec2_facts: Mapping[str, Ec2Facts],
    has_policies: bool,
    has_refresh: bool | None,
    known_types: Mapping[str, InstanceTypeInfo],
    region: str,
    settings: NodeTemplatesConfig,
    templated: bool = True,
    cluster: str = "",
    managed: ManagedNodegroup | None = None,
) -> NodeGroup:
    """Pure: everything described about one ASG, folded into the domain's NodeGroup."""
    name = asg["AutoScalingGroupName"]
    tags = asg_tags(asg)
    zones = tuple(sorted(asg.get("AvailabilityZones", [])))
    declared = parse_template_tags(name, tags)
    warnings = [*launch.warnings, *declared.warnings]
    template_tags = declared
    ref = nodegroup_ref(tags)
    if ref is not None and cluster and ref.cluster != cluster:
        warnings.append(
            f"asg {name}: EKS made it for node group {ref.nodegroup} of cluster {ref.cluster!r} "
            f"(tag {CLUSTER_TAG}), but this config is cluster {cluster!r}: its nodes join "
            f"{ref.cluster}, so raising it helps no pod here (take it out of nodeGroups, or set "
            "`cluster:` to the EKS cluster's name)"
        )
    if managed is not None and managed.error:
        warnings.append(f"asg {name}: EKS managed node group labels and taints unknown: {managed.error}")
    elif managed is not None:
        template_tags = merged_tags(declared, managed)
        warnings += [f"asg {name}: EKS {w}" for w in managed.warnings]
    if spec is not None:
        warnings[:0] = bounds_warnings(spec, asg["MinSize"], asg["MaxSize"]) + cluster_tag_warning(
            name, tags, cluster
        )
    if asg.get("Status") == DELETING:
        warnings.insert(0, f"asg {name}: is being deleted")
    if not templated:  # a Ready node is the template (inventory.py); nothing was resolved for one
        template, template_error = None, ""
    elif launch.instance_types:
        result = build_template(
            name, launch.instance_types, known_types, zones, region, template_tags, settings
        )
        template, template_error = result.template, result.error
    else:
        template, template_error = None, launch.error
    return NodeGroup(
        name=name,
        min_size=spec.min_size if spec is not None else asg["MinSize"],
        max_size=spec.max_size if spec is not None else asg["MaxSize"],
        desired=asg["DesiredCapacity"],
        instances=instances_of(asg, ec2_facts),
        zones=zones,
        tags=tags,
        suspended_processes=tuple(
            sorted(p["ProcessName"] for p in asg.get("SuspendedProcesses", []) if "ProcessName" in p)
        ),
        has_scaling_policies=has_policies,
        has_instance_refresh=has_refresh,
        instance_weights=dict(launch.weights),
        spot_share=spot_share(asg),
        on_demand_base=on_demand_base(asg),
        type_allocatable=override_allocatable(launch, known_types, template_tags, settings),
        type_capacity=override_capacity(launch, known_types, template_tags, settings),
        instance_types=launch.instance_types,
        asg_min_size=asg["MinSize"],
        asg_max_size=asg["MaxSize"],
        explicit=spec is not None,
        options=template_tags.options,
        template=template,
        template_error=template_error,
        declared_labels=dict(declared.labels),
        declared_taints=declared.taints,
        warnings=tuple(warnings),
    )
