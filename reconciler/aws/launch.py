"""Which instance types an ASG launches, in the order cluster-autoscaler reads them.

A launch configuration names one type; a launch template version names one (`$Default`, `$Latest`
or a number, resolved through DescribeLaunchTemplateVersions); a mixed-instances policy lists its
overrides, and the first override is the type a template is built from. A template or configuration
that cannot be found, or attribute-based selection (InstanceRequirements), leaves the group without
a type and says why: whether that is fatal is the inventory's decision, not ours.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from botocore.exceptions import ClientError

from reconciler.aws.clients import error_code

if TYPE_CHECKING:
    from mypy_boto3_autoscaling import AutoScalingClient
    from mypy_boto3_autoscaling.type_defs import (
        AutoScalingGroupTypeDef,
        LaunchTemplateSpecificationTypeDef,
    )
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.type_defs import LaunchTemplateVersionTypeDef

LAUNCH_CONFIGURATIONS_PER_CALL = 50  # LaunchConfigurationNames accepts at most 50 names
DEFAULT_VERSION = "$Default"
LATEST_VERSION = "$Latest"
ATTRIBUTE_BASED = "attribute-based instance type selection (InstanceRequirements) is not supported"
_NOT_FOUND_PREFIXES = ("InvalidLaunchTemplateId.", "InvalidLaunchTemplateName.")


@dataclass(frozen=True)
class TemplateRef:
    """One launch template version as an ASG names it; `template` is the id when known, else the name."""

    template: str
    by_id: bool
    version: str


@dataclass(frozen=True)
class LaunchSpec:
    """Where an ASG's instance types come from, read from its description alone."""

    launch_configuration: str = ""
    template: TemplateRef | None = None
    override_types: tuple[str, ...] = ()
    weights: Mapping[str, int] = field(default_factory=dict)
    attribute_based: bool = False
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class LaunchTypes:
    instance_types: tuple[str, ...]
    weights: Mapping[str, int] = field(default_factory=dict)
    error: str = ""  # why there is no type, when instance_types is empty
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class TemplateVersionType:
    """A resolved template version: its instance type, or why there is none."""

    instance_type: str = ""
    error: str = ""


class KnownVersions(Protocol):
    """A longer-lived store of resolved versions (reconciler/aws/cache.py)."""

    def template_type(self, key: str, alias: bool, max_age: float) -> str | None: ...
    def add_template_type(self, key: str, alias: bool, instance_type: str) -> None: ...


def cache_key(ref: TemplateRef) -> str:
    return f"{'id' if ref.by_id else 'name'}:{ref.template}@{ref.version}"


def is_alias(version: str) -> bool:
    """`$Latest` and `$Default` move; a numbered version never changes once created."""
    return version in (DEFAULT_VERSION, LATEST_VERSION)


def template_ref(spec: LaunchTemplateSpecificationTypeDef) -> TemplateRef | None:
    version = spec.get("Version") or DEFAULT_VERSION
    if spec.get("LaunchTemplateId"):
        return TemplateRef(spec["LaunchTemplateId"], True, version)
    if spec.get("LaunchTemplateName"):
        return TemplateRef(spec["LaunchTemplateName"], False, version)
    return None


def launch_spec(asg: AutoScalingGroupTypeDef) -> LaunchSpec:
    """Launch configuration, then launch template, then mixed-instances policy (as cluster-autoscaler)."""
    name = asg["AutoScalingGroupName"]
    if asg.get("LaunchConfigurationName"):
        return LaunchSpec(launch_configuration=asg["LaunchConfigurationName"])
    if "LaunchTemplate" in asg:
        return LaunchSpec(template=template_ref(asg["LaunchTemplate"]))
    policy = asg.get("MixedInstancesPolicy", {}).get("LaunchTemplate", {})
    overrides = policy.get("Overrides", [])
    types: list[str] = []
    weights: dict[str, int] = {}
    warnings: list[str] = []
    for override in overrides:
        instance_type = override.get("InstanceType", "")
        if not instance_type:
            continue
        types.append(instance_type)
        weight = override.get("WeightedCapacity")
        if weight is None:
            continue
        if weight.isdigit() and int(weight) > 0:
            weights[instance_type] = int(weight)
        else:
            warnings.append(
                f"asg {name}: mixed instances override {instance_type} has WeightedCapacity {weight!r}, "
                "not a positive integer; ignored"
            )
    spec = policy.get("LaunchTemplateSpecification")
    return LaunchSpec(
        template=template_ref(spec) if spec is not None and not types else None,
        override_types=tuple(types),
        weights=weights,
        attribute_based=not types and any("InstanceRequirements" in o for o in overrides),
        warnings=tuple(warnings),
    )


def resolve_types(
    asg_name: str,
    spec: LaunchSpec,
    templates: Mapping[TemplateRef, TemplateVersionType],
    configurations: Mapping[str, str],
) -> LaunchTypes:
    """Combine an ASG's launch spec with what the launch template/configuration lookups found."""
    if spec.override_types:
        return LaunchTypes(spec.override_types, spec.weights, warnings=spec.warnings)
    if spec.attribute_based:
        return LaunchTypes((), error=f"asg {asg_name}: {ATTRIBUTE_BASED}", warnings=spec.warnings)
    if spec.launch_configuration:
        found = configurations.get(spec.launch_configuration, "")
        if found:
            return LaunchTypes((found,))
        return LaunchTypes(
            (), error=f"asg {asg_name}: launch configuration {spec.launch_configuration!r} not found"
        )
    if spec.template is not None:
        resolved = templates.get(spec.template, TemplateVersionType(error="not described"))
        if resolved.instance_type:
            return LaunchTypes((resolved.instance_type,), warnings=spec.warnings)
        ref = spec.template
        return LaunchTypes(
            (),
            error=f"asg {asg_name}: launch template {ref.template} version {ref.version}: {resolved.error}",
            warnings=spec.warnings,
        )
    return LaunchTypes(
        (), error=f"asg {asg_name}: has no launch template, launch configuration or mixed instances policy"
    )


def pick_version(
    versions: Iterable[LaunchTemplateVersionTypeDef], wanted: str
) -> LaunchTemplateVersionTypeDef | None:
    """`$Default` is the version flagged default, `$Latest` the highest number, else that number."""
    listed = list(versions)
    if wanted == DEFAULT_VERSION:
        return next((v for v in listed if v.get("DefaultVersion")), None)
    if wanted == LATEST_VERSION:
        return max(listed, key=lambda v: v.get("VersionNumber", 0), default=None)
    return next((v for v in listed if str(v.get("VersionNumber")) == wanted), None)


def version_type(version: LaunchTemplateVersionTypeDef | None) -> TemplateVersionType:
    if version is None:
        return TemplateVersionType(error="version not found")
    data = version.get("LaunchTemplateData", {})
    if data.get("InstanceType"):
        return TemplateVersionType(instance_type=data["InstanceType"])
    if "InstanceRequirements" in data:
        return TemplateVersionType(error=ATTRIBUTE_BASED)
    return TemplateVersionType(error="the version sets no InstanceType")


def fetch_template_types(
    ec2: EC2Client, refs: Iterable[TemplateRef], known: KnownVersions | None = None, max_age: float = 0.0
) -> dict[TemplateRef, TemplateVersionType]:
    """One paged DescribeLaunchTemplateVersions per template, asking for every version in use that
    `known` cannot answer (aliases only while younger than `max_age` seconds)."""
    by_template: dict[tuple[str, bool], set[str]] = defaultdict(set)
    resolved: dict[TemplateRef, TemplateVersionType] = {}
    for ref in refs:
        # by id only: a template deleted and created again under its name starts over at version 1
        stored = (
            known.template_type(cache_key(ref), is_alias(ref.version), max_age)
            if known and ref.by_id
            else None
        )
        if stored:
            resolved[ref] = TemplateVersionType(instance_type=stored)
        else:
            by_template[(ref.template, ref.by_id)].add(ref.version)
    paginator = ec2.get_paginator("describe_launch_template_versions")
    for (template, by_id), wanted in sorted(by_template.items()):
        key = {"LaunchTemplateId": template} if by_id else {"LaunchTemplateName": template}
        try:
            pages = paginator.paginate(**key, Versions=sorted(wanted))  # type: ignore[arg-type]
            versions = [v for page in pages for v in page.get("LaunchTemplateVersions", [])]
        except ClientError as exc:
            if not error_code(exc).startswith(_NOT_FOUND_PREFIXES):
                raise
            message = exc.response.get("Error", {}).get("Message", "") or error_code(exc)
            for version in wanted:
                resolved[TemplateRef(template, by_id, version)] = TemplateVersionType(error=message)
            continue
        for version in wanted:
            ref = TemplateRef(template, by_id, version)
            resolved[ref] = version_type(pick_version(versions, version))
            if known is not None and by_id and resolved[ref].instance_type:
                known.add_template_type(cache_key(ref), is_alias(version), resolved[ref].instance_type)
    return resolved


def fetch_configuration_types(autoscaling: AutoScalingClient, names: Iterable[str]) -> dict[str, str]:
    """Instance type per launch configuration name; names that do not exist are simply absent."""
    wanted = sorted(set(names))
    paginator = autoscaling.get_paginator("describe_launch_configurations")
    types: dict[str, str] = {}
    for start in range(0, len(wanted), LAUNCH_CONFIGURATIONS_PER_CALL):
        batch = wanted[start : start + LAUNCH_CONFIGURATIONS_PER_CALL]
        pages = paginator.paginate(LaunchConfigurationNames=batch, PaginationConfig={"PageSize": 50})
        for page in pages:
            for configuration in page["LaunchConfigurations"]:
                types[configuration["LaunchConfigurationName"]] = configuration["InstanceType"]
    return types


def described_types(asg: AutoScalingGroupTypeDef) -> LaunchTypes:
    """What the ASG's own description says, with no lookup: a group with a Ready node takes its
    template from the node, so only a mixed-instances policy's overrides (and weights) are kept."""
    spec = launch_spec(asg)
    return LaunchTypes(spec.override_types, spec.weights, warnings=spec.warnings)


def launch_types(
    autoscaling: AutoScalingClient,
    ec2: EC2Client,
    asgs: Iterable[AutoScalingGroupTypeDef],
    known: KnownVersions | None = None,
    max_age: float = 0.0,
) -> dict[str, LaunchTypes]:
    """Instance types per ASG name, with the lookups batched across all groups."""
    specs = {asg["AutoScalingGroupName"]: launch_spec(asg) for asg in asgs}
    refs = [spec.template for spec in specs.values() if spec.template is not None]
    configuration_names = [spec.launch_configuration for spec in specs.values() if spec.launch_configuration]
    templates = fetch_template_types(ec2, refs, known, max_age) if refs else {}
    configurations = (
        fetch_configuration_types(autoscaling, configuration_names) if configuration_names else {}
    )
    return {name: resolve_types(name, spec, templates, configurations) for name, spec in specs.items()}
