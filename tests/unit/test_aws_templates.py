"""Node templates from an instance type plus cluster-autoscaler's node-template tags."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.aws.allocatable import MI
from reconciler.aws.instance_types import InstanceTypeInfo, info_from_api
from reconciler.aws.templates import (
    LABEL_PREFIX,
    OPTIONS_PREFIX,
    RESOURCES_PREFIX,
    TAINT_PREFIX,
    TemplateResult,
    build_template,
    parse_template_tags,
)
from reconciler.config.settings import NodeTemplatesConfig
from reconciler.domain.model import AutoscalingOptions, Taint

T3_SMALL = InstanceTypeInfo(
    "t3.small", vcpus=2, memory_mib=2048, architecture="amd64", max_enis=3, ipv4_per_eni=4
)
G4DN = InstanceTypeInfo("g4dn.xlarge", 4, 16384, "amd64", 3, 10, gpu_count=1, gpu_manufacturer="NVIDIA")
M6G = InstanceTypeInfo("m6g.large", 2, 8192, "arm64", 3, 10)
KNOWN = {info.name: info for info in (T3_SMALL, G4DN, M6G)}


def test_labels_taints_resources_and_options() -> None:
    tags = {
        LABEL_PREFIX + "team": "ml",
        LABEL_PREFIX + "example.com/pool": "gpu-a",
        TAINT_PREFIX + "dedicated": "ml:NoSchedule",
        TAINT_PREFIX + "spot": ":PreferNoSchedule",
        RESOURCES_PREFIX + "ephemeral-storage": "100Gi",
        RESOURCES_PREFIX + "cpu": "1500m",
        RESOURCES_PREFIX + "example.com/dongle": "2",
        OPTIONS_PREFIX + "scaledownutilizationthreshold": "0.3",
        OPTIONS_PREFIX + "scaledowngpuutilizationthreshold": "0.7",
        OPTIONS_PREFIX + "scaledownunneededtime": "1h30m",
        OPTIONS_PREFIX + "scaledownunreadytime": "20m",
        OPTIONS_PREFIX + "ignoredaemonsetsutilization": "true",
        "Name": "not ours",
    }
    parsed = parse_template_tags("g", tags)
    assert parsed.warnings == ()
    assert parsed.labels == {"team": "ml", "example.com/pool": "gpu-a"}
    assert parsed.taints == (Taint("dedicated", "ml", "NoSchedule"), Taint("spot", "", "PreferNoSchedule"))
    assert parsed.resources == {"ephemeral-storage": 100 * 2**30, "cpu": 1500, "example.com/dongle": 2}
    assert parsed.options == AutoscalingOptions(0.3, 0.7, 5400.0, 1200.0, True)


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        (TAINT_PREFIX + "dedicated", "ml", "value:Effect"),
        (TAINT_PREFIX + "dedicated", "ml:NoRun", "value:Effect"),
        (TAINT_PREFIX + "bad key!", "x:NoSchedule", "not a valid taint key"),
        (LABEL_PREFIX + "team", "x" * 64, "not a valid label value"),
        (LABEL_PREFIX + "-team", "ml", "not a valid label key"),
        (RESOURCES_PREFIX + "ephemeral-storage", "lots", "not a Kubernetes quantity"),
        (RESOURCES_PREFIX + "pods", "-3", "cannot be negative"),
        (OPTIONS_PREFIX + "scaledownutilizationthreshold", "1.5", "between 0 and 1"),
        (OPTIONS_PREFIX + "scaledownunneededtime", "ten minutes", "duration"),
        (OPTIONS_PREFIX + "ignoredaemonsetsutilization", "yes", "true or false"),
        (OPTIONS_PREFIX + "scaledownsomething", "1", "unknown autoscaling option"),
        ("k8s.io/cluster-autoscaler/node-template/lable/team", "ml", "unknown node-template tag"),
    ],
)
def test_a_bad_tag_is_a_warning_naming_the_asg_and_the_tag(key: str, value: str, why: str) -> None:
    parsed = parse_template_tags("my-asg", {key: value, LABEL_PREFIX + "ok": "yes"})
    assert len(parsed.warnings) == 1
    warning = parsed.warnings[0]
    assert warning.startswith(f"asg my-asg: tag {key}=")
    assert why in warning
    assert parsed.labels == {"ok": "yes"}


def build(
    instance_types: tuple[str, ...], tags: dict[str, str] | None = None, zones: tuple[str, ...] = ()
) -> TemplateResult:
    return build_template(
        "my-asg",
        instance_types,
        KNOWN,
        zones or ("us-east-1b", "us-east-1a"),
        "us-east-1",
        parse_template_tags("my-asg", tags or {}),
        NodeTemplatesConfig(),
    )


def test_template_for_t3small() -> None:
    result = build(("t3.small",))
    template = result.template
    assert template is not None and result.error == ""
    assert template.instance_type == "t3.small"
    assert template.source == "asg my-asg (t3.small)"
    assert template.allocatable.cpu == 1930
    assert template.allocatable.pods == 11
    assert template.capacity.cpu == 2000
    assert template.labels["kubernetes.io/arch"] == "amd64"
    assert template.labels["kubernetes.io/os"] == "linux"
    assert template.labels["node.kubernetes.io/instance-type"] == "t3.small"
    assert template.labels["topology.kubernetes.io/region"] == "us-east-1"
    assert template.labels["topology.kubernetes.io/zone"] == "us-east-1a"  # the first, sorted
    assert template.labels["kubernetes.io/hostname"] == "template-node-for-my-asg"
    assert template.labels["failure-domain.beta.kubernetes.io/zone"] == "us-east-1a"
    assert template.taints == ()


def test_tags_override_labels_and_resources() -> None:
    result = build(
        ("t3.small",),
        {
            LABEL_PREFIX + "node.kubernetes.io/instance-type": "custom",
            TAINT_PREFIX + "dedicated": "ml:NoExecute",
            RESOURCES_PREFIX + "pods": "8",
            RESOURCES_PREFIX + "ephemeral-storage": "20Gi",
        },
    )
    template = result.template
    assert template is not None
    assert template.labels["node.kubernetes.io/instance-type"] == "custom"
    assert template.taints == (Taint("dedicated", "ml", "NoExecute"),)
    assert template.capacity.pods == template.allocatable.pods == 8
    assert template.allocatable.get("ephemeral-storage") == 20 * 2**30
    plain = build(("t3.small",)).template
    assert plain is not None
    assert template.allocatable.memory == plain.allocatable.memory + 33 * MI  # 3 fewer pods x 11Mi


def test_gpus_come_from_the_instance_type_and_a_zero_tag_removes_them() -> None:
    gpu = build(("g4dn.xlarge",)).template
    assert (
        gpu is not None and gpu.capacity.get("nvidia.com/gpu") == gpu.allocatable.get("nvidia.com/gpu") == 1
    )
    none = build(("g4dn.xlarge",), {RESOURCES_PREFIX + "nvidia.com/gpu": "0"}).template
    assert none is not None and none.allocatable.get("nvidia.com/gpu") == 0


def test_unknown_types_are_skipped_and_one_known_type_is_the_template() -> None:
    template = build(("x9.unknown", "m6g.large")).template
    assert template is not None
    assert template.instance_type == "m6g.large"
    assert template.labels["kubernetes.io/arch"] == "arm64"


def test_several_types_offer_the_least_of_each_resource_so_any_launch_holds_the_count() -> None:
    """Issue 29 item 3: cluster-autoscaler sizes a mixed group by its first override (its #9568);
    a later, smaller override then launches nodes that hold less than the plan counted on."""
    big, small = build(("m6g.large",)).template, build(("t3.small",)).template
    mixed = build(("x9.unknown", "m6g.large", "t3.small")).template
    assert big is not None and small is not None and mixed is not None
    for resource in ("cpu", "memory", "pods"):
        assert mixed.allocatable.get(resource) == min(
            big.allocatable.get(resource), small.allocatable.get(resource)
        )
    assert mixed.allocatable == small.allocatable  # t3.small is below m6g.large in everything
    # priced as t3.small, but not labelled as one: AWS may launch the m6g.large
    assert mixed.instance_type == "t3.small" and "node.kubernetes.io/instance-type" not in mixed.labels
    assert "m6g.large, t3.small" in mixed.source


def test_no_known_type_is_an_error_not_a_crash() -> None:
    result = build(("x9.unknown",))
    assert result.template is None
    assert result.error == "asg my-asg: no known EC2 instance type (launches: x9.unknown)"


def test_info_from_the_api_shape() -> None:
    api: Any = {
        "InstanceType": "p3.8xlarge",
        "VCpuInfo": {"DefaultVCpus": 32},
        "MemoryInfo": {"SizeInMiB": 249856},
        "ProcessorInfo": {"SupportedArchitectures": ["i386", "x86_64"]},
        "GpuInfo": {"Gpus": [{"Count": 4, "Manufacturer": "NVIDIA", "Name": "V100"}]},
        "NetworkInfo": {"MaximumNetworkInterfaces": 8, "Ipv4AddressesPerInterface": 30},
    }
    info = info_from_api(api)
    assert info == InstanceTypeInfo("p3.8xlarge", 32, 249856, "amd64", 8, 30, 4, "NVIDIA")


def test_a_label_the_overrides_disagree_on_is_not_promised() -> None:
    """AWS may launch any override: a template labelled amd64 for a group that also launches arm64
    (m6g) would plan an amd64-only pod onto a node that cannot run it. A label whose value differs
    between the overrides is left out (no pod that requires it is planned there); tags still set it."""
    mixed = build(("m6g.large", "t3.small")).template
    assert mixed is not None
    for label in ("kubernetes.io/arch", "beta.kubernetes.io/arch", "node.kubernetes.io/instance-type"):
        assert label not in mixed.labels, label
    assert mixed.labels["kubernetes.io/os"] == "linux"  # the same for both: kept
    assert "kubernetes.io/arch" in mixed.source  # and the source says what was left out
    tagged = build(
        ("m6g.large", "t3.small"),
        {"k8s.io/cluster-autoscaler/node-template/label/kubernetes.io/arch": "arm64"},
    ).template
    assert tagged is not None and tagged.labels["kubernetes.io/arch"] == "arm64"
    same_arch = build(("t3.small", "g4dn.xlarge")).template
    assert same_arch is not None and same_arch.labels["kubernetes.io/arch"] == "amd64"
