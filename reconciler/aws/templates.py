"""A node template for an ASG, honouring cluster-autoscaler's node-template tags (DESIGN §5.3).

Tags users already have on their ASGs for cluster-autoscaler keep working unchanged:
`k8s.io/cluster-autoscaler/node-template/label/<key>` = value,
`.../taint/<key>` = `value:Effect`, `.../resources/<name>` = quantity (replaces what the instance type
implies, e.g. ephemeral-storage, pods, nvidia.com/gpu), and `.../autoscaling-options/<option>`.
A tag we cannot read is a warning naming the ASG and the tag; it never stops the other groups.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from reconciler.aws.allocatable import node_resources
from reconciler.aws.instance_types import InstanceTypeInfo
from reconciler.aws.launch import LaunchTypes
from reconciler.config.settings import NodeTemplatesConfig
from reconciler.domain.durations import parse_duration
from reconciler.domain.model import (
    ARCH_LABEL,
    CPU,
    GPU,
    HOSTNAME_LABEL,
    INSTANCE_TYPE_LABEL,
    LEGACY_ZONE_LABEL,
    MEMORY,
    OS_LABEL,
    PODS,
    REGION_LABEL,
    ZONE_LABEL,
    AutoscalingOptions,
    NodeTemplate,
    Resources,
    Taint,
)
from reconciler.domain.quantity import QuantityError, int_value, milli_value

NODE_TEMPLATE_PREFIX = "k8s.io/cluster-autoscaler/node-template/"
LABEL_PREFIX = NODE_TEMPLATE_PREFIX + "label/"
TAINT_PREFIX = NODE_TEMPLATE_PREFIX + "taint/"
RESOURCES_PREFIX = NODE_TEMPLATE_PREFIX + "resources/"
OPTIONS_PREFIX = NODE_TEMPLATE_PREFIX + "autoscaling-options/"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
GPU_RESOURCES = {"NVIDIA": GPU, "AMD": "amd.com/gpu"}
_LEGACY_LABELS = {
    ARCH_LABEL: "beta.kubernetes.io/arch",
    OS_LABEL: "beta.kubernetes.io/os",
    INSTANCE_TYPE_LABEL: "beta.kubernetes.io/instance-type",
    REGION_LABEL: "failure-domain.beta.kubernetes.io/region",
    ZONE_LABEL: LEGACY_ZONE_LABEL,
}
_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})  # Go's strconv.ParseBool, as CA reads it
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


@dataclass(frozen=True)
class TemplateTags:
    """What an ASG's node-template tags say, already validated."""

    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    resources: Mapping[str, int] = field(default_factory=dict)
    options: AutoscalingOptions = field(default_factory=AutoscalingOptions)
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class TemplateResult:
    template: NodeTemplate | None
    error: str = ""


def valid_label_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_NAME.match(name))


def valid_label_value(value: str) -> bool:
    return len(value) <= 63 and bool(_NAME.match(value))


def parse_template_tags(asg_name: str, tags: Mapping[str, str]) -> TemplateTags:
    """Read every node-template tag, in key order so labels and warnings come out the same each run."""
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    resources: dict[str, int] = {}
    options: dict[str, float | bool] = {}
    warnings: list[str] = []

    def warn(key: str, value: str, why: str) -> None:
        warnings.append(f"asg {asg_name}: tag {key}={value!r} ignored: {why}")

    for key in sorted(tags):
        if not key.startswith(NODE_TEMPLATE_PREFIX):
            continue
        value = tags[key]
        if key.startswith(LABEL_PREFIX):
            name = key[len(LABEL_PREFIX) :]
            if not valid_label_key(name):
                warn(key, value, f"{name!r} is not a valid label key")
            elif not valid_label_value(value):
                warn(key, value, "not a valid label value (63 characters of [A-Za-z0-9-_.] at most)")
            else:
                labels[name] = value
        elif key.startswith(TAINT_PREFIX):
            taint = _taint(key[len(TAINT_PREFIX) :], value)
            if isinstance(taint, str):
                warn(key, value, taint)
            else:
                taints.append(taint)
        elif key.startswith(RESOURCES_PREFIX):
            name = key[len(RESOURCES_PREFIX) :]
            amount = _quantity(name, value)
            if isinstance(amount, str):
                warn(key, value, amount)
            else:
                resources[name] = amount
        elif key.startswith(OPTIONS_PREFIX):
            option = key[len(OPTIONS_PREFIX) :]
            parsed = _option(option, value)
            if isinstance(parsed, str):
                warn(key, value, parsed)
            else:
                options[option] = parsed
        else:
            warn(
                key,
                value,
                "unknown node-template tag (expected label/, taint/, resources/ or autoscaling-options/)",
            )
    return TemplateTags(labels, tuple(taints), resources, _options(options), tuple(warnings))


def _taint(key: str, value: str) -> Taint | str:
    """`value:Effect`, value may be empty; returns why not when the tag is malformed."""
    if not valid_label_key(key):
        return f"{key!r} is not a valid taint key"
    taint_value, sep, effect = value.rpartition(":")
    if not sep or effect not in TAINT_EFFECTS:
        return f"expected value:Effect with Effect one of {', '.join(TAINT_EFFECTS)}"
    if not valid_label_value(taint_value):
        return f"{taint_value!r} is not a valid taint value"
    return Taint(key, taint_value, effect)


def _quantity(name: str, value: str) -> int | str:
    if not name or not valid_label_key(name):
        return f"{name!r} is not a valid resource name"
    try:
        amount = milli_value(value.strip()) if name == CPU else int_value(value.strip())
    except QuantityError:
        return "not a Kubernetes quantity (e.g. 100Gi, 110, 1)"
    if amount < 0:
        return "a resource amount cannot be negative"
    return amount


def _option(option: str, value: str) -> float | bool | str:
    text = value.strip()
    if option in ("scaledownutilizationthreshold", "scaledowngpuutilizationthreshold"):
        try:
            threshold = float(text)
        except ValueError:
            return "expected a number between 0 and 1"
        return threshold if 0 <= threshold <= 1 else "expected a number between 0 and 1"
    if option in ("scaledownunneededtime", "scaledownunreadytime"):
        try:
            return parse_duration(text).total_seconds()
        except ValueError:
            return "expected a duration such as 10m or 1h30m"
    if option == "ignoredaemonsetsutilization":
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        return "expected true or false"
    return "unknown autoscaling option"


def _options(values: Mapping[str, float | bool]) -> AutoscalingOptions:
    def number(name: str) -> float | None:
        value = values.get(name)
        return float(value) if value is not None else None

    ignore = values.get("ignoredaemonsetsutilization")
    return AutoscalingOptions(
        scale_down_utilization_threshold=number("scaledownutilizationthreshold"),
        scale_down_gpu_utilization_threshold=number("scaledowngpuutilizationthreshold"),
        scale_down_unneeded_time_seconds=number("scaledownunneededtime"),
        scale_down_unready_time_seconds=number("scaledownunreadytime"),
        ignore_daemonsets_utilization=bool(ignore) if ignore is not None else None,
    )


def template_zone(zones: tuple[str, ...]) -> str:
    """The alphabetically first AZ: stable across runs whatever order AWS lists them in."""
    return min(zones) if zones else ""


def standard_labels(asg_name: str, info: InstanceTypeInfo, region: str, zone: str) -> dict[str, str]:
    labels = {
        ARCH_LABEL: info.architecture,
        OS_LABEL: "linux",
        INSTANCE_TYPE_LABEL: info.name,
        REGION_LABEL: region,
        HOSTNAME_LABEL: f"template-node-for-{asg_name}",
    }
    if zone:
        labels[ZONE_LABEL] = zone
    labels.update({legacy: labels[label] for label, legacy in _LEGACY_LABELS.items() if label in labels})
    return labels


def build_template(
    asg_name: str,
    instance_types: tuple[str, ...],
    known_types: Mapping[str, InstanceTypeInfo],
    zones: tuple[str, ...],
    region: str,
    tags: TemplateTags,
    settings: NodeTemplatesConfig,
) -> TemplateResult:
    """The template for the instance types EC2 knows; tag labels, taints and resources on top.

    One type: that type. Several (a mixed-instances policy): AWS may launch any of them, so the
    template offers, resource by resource, the least any of them offers (CPU, memory, pods, GPUs):
    a count of such nodes holds the pods whichever types AWS launches. cluster-autoscaler takes the
    first override instead (its issue #9568), which over-promises when a later one is smaller. The
    labels are those the types share (a label they disagree on, such as the architecture of a group
    launching both m5 and m6g, is left out, so no pod requiring it is planned onto a node that may
    lack it); the source names every type.
    """
    infos = [known_types[name] for name in dict.fromkeys(instance_types) if name in known_types]
    if not infos:
        listed = ", ".join(instance_types) if instance_types else "none"
        return TemplateResult(None, f"asg {asg_name}: no known EC2 instance type (launches: {listed})")
    zone = template_zone(zones)
    offers = [_resources(info, tags, settings) for info in infos]
    smallest_index = min(range(len(infos)), key=lambda i: (offers[i][0].get(CPU), offers[i][0].get(MEMORY)))
    info = infos[smallest_index]
    capacity, allocatable = offers[smallest_index]
    if len(infos) > 1:
        capacity = _least(o[0] for o in offers)
        allocatable = _least(o[1] for o in offers)
    labels = standard_labels(asg_name, info, region or zone[:-1], zone)
    # a label the overrides disagree on (arch, instance type) is promised by none of them
    differ = sorted(
        {
            key
            for other in infos
            for key, value in standard_labels(asg_name, other, region or zone[:-1], zone).items()
            if labels.get(key) != value
        }
    )
    for key in differ:
        labels.pop(key, None)
    labels.update(tags.labels)
    source = (
        f"asg {asg_name} ({info.name})"
        if len(infos) == 1
        else f"asg {asg_name} (the least of {', '.join(i.name for i in infos)}: any of them may launch"
        + (
            f"; they differ in {', '.join(differ)}, so no pod requiring those is planned here"
            if differ
            else ""
        )
        + ")"
    )
    template = NodeTemplate(
        instance_type=info.name,
        labels=labels,
        taints=tags.taints,
        capacity=capacity,
        allocatable=allocatable,
        source=source,
    )
    return TemplateResult(template)


def _resources(
    info: InstanceTypeInfo, tags: TemplateTags, settings: NodeTemplatesConfig
) -> tuple[Resources, Resources]:
    """Capacity and allocatable of one node of `info`, with the tags' resources over them."""
    computed = node_resources(
        info.vcpus, info.memory_mib, info.max_enis, info.ipv4_per_eni, settings, pods=tags.resources.get(PODS)
    )
    extra: dict[str, int] = {}
    gpu_resource = GPU_RESOURCES.get(info.gpu_manufacturer.upper())
    if gpu_resource and info.gpu_count:
        extra[gpu_resource] = info.gpu_count
    extra.update(tags.resources)
    return _override(computed.capacity, extra), _override(computed.allocatable, extra)


def override_allocatable(
    launch: LaunchTypes,
    known_types: Mapping[str, InstanceTypeInfo],
    tags: TemplateTags,
    settings: NodeTemplatesConfig,
) -> dict[str, Resources]:
    """Allocatable of one node of each override type, for groups with a WeightedCapacity other than
    1 only (the planner turns nodes into capacity units with it); a type EC2 does not know is absent."""
    if all(w == 1 for w in launch.weights.values()):
        return {}
    return {
        name: _resources(known_types[name], tags, settings)[1]
        for name in launch.instance_types
        if name in known_types
    }


def override_capacity(
    launch: LaunchTypes,
    known_types: Mapping[str, InstanceTypeInfo],
    tags: TemplateTags,
    settings: NodeTemplatesConfig,
) -> dict[str, Resources]:
    """Capacity of one node of each type a group with more than one may launch (a type EC2 does not
    describe is absent): AWS picks among them, so a cap counts the largest (apply/caps.py)."""
    if len(set(launch.instance_types)) < 2:
        return {}
    return {
        name: _resources(known_types[name], tags, settings)[0]
        for name in launch.instance_types
        if name in known_types
    }


def _least(offers: Iterable[Resources]) -> Resources:
    """Resource by resource, the least any offer has (a resource one of them lacks is absent)."""
    listed = list(offers)
    names = set.intersection(*(set(r.values) for r in listed))
    return Resources({name: min(r.values[name] for r in listed) for name in sorted(names)})


def _override(base: Resources, values: Mapping[str, int]) -> Resources:
    merged = dict(base.values)
    merged.update(values)
    return Resources({name: amount for name, amount in merged.items() if amount})
