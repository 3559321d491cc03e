"""Which ASGs are ours, and the AWS edge's one entry point, `discover_node_groups`.

Specs are cluster-autoscaler's `--nodes` and `--node-group-auto-discovery`, parsed exactly as its AWS
provider parses them so users copy their flags into `nodeGroups:` unchanged: `min:max:name` (split at
the first two colons), and `asg:tag=k1,k2=v` where every tag must match (AND), a key without a value
only needs to exist, and a repeated key keeps its last value. Auto-discovery is one paged
DescribeAutoScalingGroups with tag filters per spec; explicit names are described 100 at a time (the
API's limit). A group found by several specs appears once, and an explicit spec wins because its
min/max are the user's own.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reconciler.aws.cache import FactCache
from reconciler.aws.clients import aws_errors
from reconciler.aws.groups import (
    DELETING,
    Ec2Facts,
    RefreshChecker,
    asg_tags,
    build_node_group,
    fetch_instances,
    groups_with_policies,
)
from reconciler.aws.instance_types import describe_instance_types
from reconciler.aws.launch import described_types, launch_types
from reconciler.aws.managed_nodegroups import ManagedNodegroup, NodegroupRef, nodegroup_ref
from reconciler.config.settings import Config, NodeGroupsConfig
from reconciler.domain.errors import UserError
from reconciler.domain.model import GROUP_NAME, NodeGroup

if TYPE_CHECKING:
    from mypy_boto3_autoscaling import AutoScalingClient
    from mypy_boto3_autoscaling.type_defs import AutoScalingGroupTypeDef, FilterTypeDef
    from mypy_boto3_ec2 import EC2Client

PAGE_SIZE = 100  # DescribeAutoScalingGroups' MaxRecords ceiling
NAMES_PER_CALL = 100  # AutoScalingGroupNames accepts at most 100 names
_INT = re.compile(r"^[+-]?[0-9]+$")


_log = logging.getLogger(__name__)

# DescribeNodegroup for the managed node groups asked (the reader's, which remembers the answers)
ManagedLookup = Callable[[Sequence[NodegroupRef]], Mapping[NodegroupRef, ManagedNodegroup]]


@dataclass(frozen=True)
class ExplicitSpec:
    """`min:max:name`; min/max are the bounds the planner keeps within (cluster-autoscaler's --nodes)."""

    min_size: int
    max_size: int
    name: str
    text: str


@dataclass(frozen=True)
class TagSpec:
    """`asg:tag=...` as (key, value) pairs; an empty value means "the key exists"."""

    tags: tuple[tuple[str, str], ...]
    text: str

    def matches(self, asg_tags: Mapping[str, str]) -> bool:
        return all(key in asg_tags and (not value or asg_tags[key] == value) for key, value in self.tags)


@dataclass(frozen=True)
class FoundAsg:
    """A described ASG and the explicit spec that named it (None when found by tags only)."""

    asg: AutoScalingGroupTypeDef
    explicit: ExplicitSpec | None = None

    @property
    def name(self) -> str:
        return self.asg["AutoScalingGroupName"]


def parse_explicit(spec: str) -> ExplicitSpec:
    """Parse `min:max:name` like cluster-autoscaler's SpecFromString (name may contain colons)."""
    parts = spec.split(":", 2)
    where = f"nodeGroups.explicit: {spec!r}"
    if len(parts) != 3:
        raise UserError(f"{where} is not min:max:name (e.g. 0:6:my-asg)")
    low, high, name = parts
    if not _INT.match(low) or not _INT.match(high):
        raise UserError(f"{where}: min and max must be integers (use min:max:name, e.g. 0:6:my-asg)")
    min_size, max_size = int(low), int(high)
    if min_size < 0:
        raise UserError(f"{where}: min size must be >= 0")
    if max_size < min_size:
        raise UserError(f"{where}: max size {max_size} is below min size {min_size}")
    if not name:
        raise UserError(f"{where}: the ASG name is empty (use min:max:name)")
    return ExplicitSpec(min_size, max_size, name, spec)


def parse_auto_discovery(spec: str) -> TagSpec:
    """Parse `asg:tag=k1,k2=v` like cluster-autoscaler's parseASGAutoDiscoverySpec."""
    where = f"nodeGroups.autoDiscovery: {spec!r}"
    discoverer, sep, param = spec.partition(":")
    if not sep:
        raise UserError(f"{where} is not asg:tag=key1,key2=value")
    if discoverer != "asg":
        raise UserError(f"{where}: unsupported discoverer {discoverer!r} (only asg:tag=... is supported)")
    key, sep, value = param.partition("=")
    if not sep:
        raise UserError(f"{where}: expected tag=key1,key2=value after asg:")
    if key != "tag":
        raise UserError(f"{where}: unsupported parameter {key!r} (the only supported one is tag)")
    if not value:
        raise UserError(f"{where}: no tag given (use asg:tag=key1,key2=value)")
    tags: dict[str, str] = {}
    for item in value.split(","):
        tag_key, _, tag_value = item.partition("=")
        if not tag_key:
            raise UserError(f"{where}: empty tag key (use asg:tag=key1,key2=value)")
        tags[tag_key] = tag_value
    return TagSpec(tuple(tags.items()), spec)


def tag_filters(spec: TagSpec) -> list[FilterTypeDef]:
    """One filter per tag, as cluster-autoscaler builds them; AWS ANDs separate filters."""
    return [
        {"Name": f"tag:{key}", "Values": [value]} if value else {"Name": "tag-key", "Values": [key]}
        for key, value in spec.tags
    ]


def merge_found(
    explicit: Sequence[tuple[ExplicitSpec, AutoScalingGroupTypeDef]],
    discovered: Iterable[AutoScalingGroupTypeDef],
) -> tuple[FoundAsg, ...]:
    """Each ASG once, explicit first-class; sorted by name so every run lists groups the same way."""
    found: dict[str, FoundAsg] = {}
    for asg in discovered:
        found.setdefault(asg["AutoScalingGroupName"], FoundAsg(asg))
    for spec, asg in explicit:
        found[spec.name] = FoundAsg(asg, spec)
    return tuple(found[name] for name in sorted(found))


def discover_asgs(
    node_groups: NodeGroupsConfig, autoscaling: AutoScalingClient, source: str = ""
) -> tuple[FoundAsg, ...]:
    """Describe every ASG the config names or its tag specs match."""
    tag_specs = [parse_auto_discovery(spec) for spec in node_groups.auto_discovery]
    explicit_specs: dict[str, ExplicitSpec] = {}
    for text in node_groups.explicit:
        spec = parse_explicit(text)
        explicit_specs[spec.name] = spec  # a repeated name keeps its last spec, as --nodes does
    discovered: list[AutoScalingGroupTypeDef] = []
    for tag_spec in tag_specs:
        discovered.extend(
            asg
            for asg in describe_by_tags(autoscaling, tag_spec)
            if asg.get("Status") != DELETING and tag_spec.matches(asg_tags(asg))
        )
    by_name = {asg["AutoScalingGroupName"]: asg for asg in describe_by_names(autoscaling, explicit_specs)}
    missing = [name for name in explicit_specs if name not in by_name]
    if missing:
        prefix = f"{source}: " if source else ""
        listed = ", ".join(repr(name) for name in missing)
        region = str(autoscaling.meta.region_name or "")
        raise UserError(
            f"{prefix}nodeGroups.explicit: no Auto Scaling group named {listed} in this account and region"
            f"{f' {region}' if region else ''} (check the name and `region`, or remove the entry)"
        )
    explicit = [(spec, by_name[name]) for name, spec in explicit_specs.items()]
    return merge_found(explicit, discovered)


_said_unnameable: set[str] = set()


def _nameable(found: tuple[FoundAsg, ...], source: str) -> tuple[FoundAsg, ...]:
    """The groups whose names the manifest can carry. AWS allows a space (and more) in an ASG name;
    the manifest, its commit trailers and `--node-group` do not. Such a group is left out, said
    once per process, so one odd name never stops the plan of every other group. An explicit entry
    is the user's own words: refused as a config error instead."""
    kept: list[FoundAsg] = []
    for item in found:
        name = item.asg["AutoScalingGroupName"]
        if GROUP_NAME.match(name):
            kept.append(item)
            continue
        if item.explicit is not None:
            prefix = f"{source}: " if source else ""
            raise UserError(
                f"{prefix}nodeGroups.explicit: the Auto Scaling group {name!r} has a name the manifest "
                "cannot carry (letters, digits and _.:/@+=- only, at most 255); remove the entry "
                "(an ASG cannot be renamed: create one with such a name and move the nodes)"
            )
        if name not in _said_unnameable:
            _said_unnameable.add(name)
            _log.warning(
                "node group %r left out: its name has characters the manifest cannot carry (letters, "
                "digits and _.:/@+=- only); other groups are planned as usual. Remove the discovery tags "
                "from it to silence this, or create an ASG with such a name and move the nodes",
                name,
            )
    return tuple(kept)


def nothing_found(config: Config, region: str) -> str:
    """One line for a discovery that found no group: where it looked (the region as resolved and
    where it came from, each autoDiscovery spec's tags, all of which must match, the explicit names)
    and what to check first. A wrong region is the common cause: nothing else is wrong, and every
    describe call succeeds with an empty answer. An empty nodeGroups looked nowhere: that is said
    instead (no region can be the cause)."""
    if not config.node_groups.auto_discovery and not config.node_groups.explicit:
        return (
            "no node group found: nodeGroups is empty (neither autoDiscovery nor explicit is set), so "
            "nothing was looked for; add nodeGroups.autoDiscovery (cluster-autoscaler's syntax, e.g. "
            f"asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/{config.cluster}) or "
            "nodeGroups.explicit (min:max:name)"
        )
    origin = "region: in the config"
    if not config.region:
        origin = (
            "from the AWS environment: AWS_REGION, AWS_DEFAULT_REGION or the profile; "
            "the config sets no region:"
        )
    where: list[str] = []
    for text in config.node_groups.auto_discovery:
        spec = parse_auto_discovery(text)
        tags = " and ".join(f"{key}={value}" if value else f"{key} (any value)" for key, value in spec.tags)
        where.append(f"ASGs carrying all of the tags {tags} (nodeGroups.autoDiscovery)")
    names = list(dict.fromkeys(parse_explicit(text).name for text in config.node_groups.explicit))
    if names:
        where.append(f"the ASGs named {', '.join(names)} (nodeGroups.explicit)")
    looked = "; and for ".join(where)
    return (
        f"no node group found: looked in region {region} ({origin}) for {looked}; a wrong region is the "
        f"common cause: check region, then the ASGs' tags and names (aws autoscaling "
        f"describe-auto-scaling-groups --region {region})"
    )


def describe_by_tags(autoscaling: AutoScalingClient, spec: TagSpec) -> list[AutoScalingGroupTypeDef]:
    paginator = autoscaling.get_paginator("describe_auto_scaling_groups")
    pages = paginator.paginate(Filters=tag_filters(spec), PaginationConfig={"PageSize": PAGE_SIZE})
    return [asg for page in pages for asg in page["AutoScalingGroups"]]


def describe_by_names(autoscaling: AutoScalingClient, names: Iterable[str]) -> list[AutoScalingGroupTypeDef]:
    wanted = list(names)
    paginator = autoscaling.get_paginator("describe_auto_scaling_groups")
    groups: list[AutoScalingGroupTypeDef] = []
    for start in range(0, len(wanted), NAMES_PER_CALL):
        batch = wanted[start : start + NAMES_PER_CALL]
        pages = paginator.paginate(AutoScalingGroupNames=batch, PaginationConfig={"PageSize": PAGE_SIZE})
        groups.extend(asg for page in pages for asg in page["AutoScalingGroups"])
    return groups


@dataclass(frozen=True)
class ClusterView:
    """What the cluster already says about instances, so AWS is not asked it again: which have a node
    (no DescribeInstances: launch time only matters before a node registers), and which have a
    Ready, schedulable one (the inventory builds that group's template from the node, so its launch
    template is not resolved). Empty: nothing known, ask everything."""

    registered: frozenset[str] = frozenset()
    ready: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Described:
    """One reading of the ASGs and the region's scaling policies: what `run` reuses for
    `aws.refreshInterval`."""

    found: tuple[FoundAsg, ...]
    with_policies: frozenset[str]


def describe(config: Config, autoscaling: AutoScalingClient) -> Described:
    """ceil(groups / 100) DescribeAutoScalingGroups pages per spec and the region's DescribePolicies."""
    with aws_errors("describing node groups"):
        found = _nameable(discover_asgs(config.node_groups, autoscaling, config.source), config.source)
        return Described(found, groups_with_policies(autoscaling) if found else frozenset())


def needs_template(asg: AutoScalingGroupTypeDef, view: ClusterView) -> bool:
    return not any(i["InstanceId"] in view.ready for i in asg.get("Instances", []))


def unregistered_ids(described: Described, view: ClusterView) -> list[str]:
    return [
        i["InstanceId"]
        for f in described.found
        for i in f.asg.get("Instances", [])
        if i["InstanceId"] not in view.registered
    ]


def discover_node_groups(
    config: Config,
    autoscaling: AutoScalingClient,
    ec2: EC2Client,
    view: ClusterView = ClusterView(),
    *,
    refreshes: bool = True,
    described: Described | None = None,
    facts: FactCache | None = None,
    launched: Mapping[str, Ec2Facts] | None = None,
    managed: ManagedLookup | None = None,
) -> tuple[NodeGroup, ...]:
    """Every node group the config names, fully described, sorted by name.

    Asks AWS only what the ASG descriptions (`described`, else read now) and the cluster (`view`) do
    not already say: launch templates and instance types for groups without a Ready node,
    DescribeInstances for instances without a node that `launched` does not know, and instance
    refreshes only with `refreshes` (`status`; plan and apply ask per group when it matters), and
    `managed` for the EKS managed node groups among the groups without a Ready node.
    Raises UserError for config problems (bad spec, unknown explicit ASG, no credentials) and
    OperationError when AWS still fails after botocore's retries.
    """
    described = described or describe(config, autoscaling)
    if not described.found:
        return ()
    with aws_errors("describing node groups"):
        asgs = [f.asg for f in described.found]
        templated = [asg for asg in asgs if needs_template(asg, view)]
        max_age = config.aws.refresh_interval.total_seconds()
        launches = launch_types(autoscaling, ec2, templated, facts, max_age)
        for asg in asgs:
            if asg["AutoScalingGroupName"] not in launches:
                launches[asg["AutoScalingGroupName"]] = described_types(asg)
        # a group whose overrides carry weights other than 1: every override's size, to count its
        # new nodes in capacity units as AWS counts desired (planning/capacity_units.py); a group
        # launching several types: every one, for apply to count the largest against `limits`
        weighted = [
            launches[f.name]
            for f in described.found
            if any(w != 1 for w in launches[f.name].weights.values())
            or len(set(launches[f.name].instance_types)) > 1
        ]
        wanted_types = {t for asg in templated for t in launches[asg["AutoScalingGroupName"]].instance_types}
        wanted_types.update(t for launch in weighted for t in launch.instance_types)
        known_types = describe_instance_types(ec2, wanted_types, facts)
        known = launched or {}
        ec2_facts = dict(known)
        ec2_facts.update(
            fetch_instances(ec2, (i for i in unregistered_ids(described, view) if i not in known))
        )
        refs = {
            f.name: nodegroup_ref(asg_tags(f.asg)) for f in described.found if needs_template(f.asg, view)
        }
        wanted = [ref for ref in refs.values() if ref is not None]
        nodegroups = managed(wanted) if managed is not None and wanted else {}
        refreshing = RefreshChecker(autoscaling)
        region = str(ec2.meta.region_name or "")
        return tuple(
            build_node_group(
                f.asg,
                f.explicit,
                launch=launches[f.name],
                ec2_facts=ec2_facts,
                has_policies=f.name in described.with_policies,
                has_refresh=refreshing.active(f.name) if refreshes else None,
                known_types=known_types,
                region=region,
                settings=config.node_templates,
                templated=needs_template(f.asg, view),
                cluster=config.cluster,
                managed=nodegroups.get(ref) if (ref := refs.get(f.name)) is not None else None,
            )
            for f in described.found
        )
