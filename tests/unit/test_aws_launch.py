"""Which instance types an ASG launches: launch configuration, template version, mixed overrides."""

from __future__ import annotations

from typing import Any

from reconciler.aws.launch import (
    ATTRIBUTE_BASED,
    LaunchSpec,
    TemplateRef,
    TemplateVersionType,
    launch_spec,
    pick_version,
    resolve_types,
    version_type,
)


def asg(**fields: Any) -> Any:
    return {"AutoScalingGroupName": "g", "MinSize": 0, "MaxSize": 3, "DesiredCapacity": 0, **fields}


def test_launch_configuration_comes_first() -> None:
    spec = launch_spec(asg(LaunchConfigurationName="lc", LaunchTemplate={"LaunchTemplateId": "lt-1"}))
    assert spec == LaunchSpec(launch_configuration="lc")


def test_launch_template_defaults_to_the_default_version() -> None:
    spec = launch_spec(asg(LaunchTemplate={"LaunchTemplateId": "lt-1", "LaunchTemplateName": "n"}))
    assert spec.template == TemplateRef("lt-1", True, "$Default")
    by_name = launch_spec(asg(LaunchTemplate={"LaunchTemplateName": "n", "Version": "$Latest"}))
    assert by_name.template == TemplateRef("n", False, "$Latest")


def test_mixed_instances_overrides_in_order_with_weights() -> None:
    policy = {
        "LaunchTemplate": {
            "LaunchTemplateSpecification": {"LaunchTemplateId": "lt-1"},
            "Overrides": [
                {"InstanceType": "m5.large", "WeightedCapacity": "2"},
                {"InstanceType": "m5.xlarge", "WeightedCapacity": "4"},
                {"InstanceType": "m5a.large"},
            ],
        }
    }
    spec = launch_spec(asg(MixedInstancesPolicy=policy))
    assert spec.override_types == ("m5.large", "m5.xlarge", "m5a.large")
    assert spec.weights == {"m5.large": 2, "m5.xlarge": 4}
    assert spec.template is None  # the overrides decide; no need to read the template
    resolved = resolve_types("g", spec, {}, {})
    assert resolved.instance_types == ("m5.large", "m5.xlarge", "m5a.large")
    assert resolved.error == ""


def test_a_bad_weight_is_a_warning() -> None:
    policy = {"LaunchTemplate": {"Overrides": [{"InstanceType": "m5.large", "WeightedCapacity": "two"}]}}
    spec = launch_spec(asg(MixedInstancesPolicy=policy))
    assert spec.weights == {}
    assert "WeightedCapacity 'two'" in spec.warnings[0]
    assert spec.warnings[0].startswith("asg g:")


def test_mixed_instances_without_overrides_use_the_template() -> None:
    policy = {"LaunchTemplate": {"LaunchTemplateSpecification": {"LaunchTemplateId": "lt-1", "Version": "3"}}}
    spec = launch_spec(asg(MixedInstancesPolicy=policy))
    ref = TemplateRef("lt-1", True, "3")
    assert spec.template == ref
    assert resolve_types("g", spec, {ref: TemplateVersionType("c5.large")}, {}).instance_types == (
        "c5.large",
    )


def test_attribute_based_selection_is_not_supported() -> None:
    policy = {
        "LaunchTemplate": {
            "LaunchTemplateSpecification": {"LaunchTemplateId": "lt-1"},
            "Overrides": [{"InstanceRequirements": {"VCpuCount": {"Min": 2}}}],
        }
    }
    resolved = resolve_types("g", launch_spec(asg(MixedInstancesPolicy=policy)), {}, {})
    assert resolved.instance_types == ()
    assert ATTRIBUTE_BASED in resolved.error


def test_missing_sources_explain_themselves() -> None:
    assert "launch configuration 'lc' not found" in resolve_types("g", LaunchSpec("lc"), {}, {}).error
    ref = TemplateRef("lt-1", True, "$Default")
    missing = resolve_types("g", LaunchSpec(template=ref), {ref: TemplateVersionType(error="gone")}, {})
    assert missing.error == "asg g: launch template lt-1 version $Default: gone"
    assert "no launch template" in resolve_types("g", LaunchSpec(), {}, {}).error


def test_pick_version() -> None:
    versions: Any = [
        {"VersionNumber": 1, "DefaultVersion": True, "LaunchTemplateData": {"InstanceType": "t3.small"}},
        {"VersionNumber": 3, "DefaultVersion": False, "LaunchTemplateData": {"InstanceType": "m5.large"}},
        {"VersionNumber": 2, "DefaultVersion": False, "LaunchTemplateData": {}},
    ]
    assert version_type(pick_version(versions, "$Default")).instance_type == "t3.small"
    assert version_type(pick_version(versions, "$Latest")).instance_type == "m5.large"
    assert version_type(pick_version(versions, "2")).error == "the version sets no InstanceType"
    assert version_type(pick_version(versions, "9")).error == "version not found"
