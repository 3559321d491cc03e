"""Review of issue 12: what the on-disk facts cache may and may not make a plan believe.

Attacks that must not change what the planner sees: a `$Latest` or `$Default` answer older than
aws.refreshInterval, a damaged or foreign-shaped file, a read-only cache directory, a template deleted
and created again under the same name (versions are cached by template id only), a name-referenced
template. Each run is a fresh process as far as the in-process caches go."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from reconciler.aws import instance_types
from reconciler.aws.cache import cache_root
from reconciler.aws.discovery import ClusterView
from reconciler.aws.reader import AwsReader
from reconciler.config.settings import AwsConfig, Config
from tests.support.aws import MotoAws

TAG = "k8s.io/cluster-autoscaler/cache"


def config_of(aws: MotoAws, refresh: timedelta = timedelta(minutes=1)) -> Config:
    base = aws.config([f"asg:tag={TAG}"])
    return replace(base, aws=AwsConfig(refresh_interval=refresh))


def template_type(config: Config) -> str:
    """A fresh one-shot command's view of the single group (no node: its template is resolved)."""
    instance_types.clear_cache()
    (group,) = AwsReader(config).node_groups(config, ClusterView())
    assert group.template is not None, group.template_error
    return group.template.instance_type


def cache_files() -> list[Path]:
    return sorted(cache_root().glob("*.json"))


def poison(change: dict[str, object]) -> None:
    (path,) = cache_files()
    document = json.loads(path.read_text())
    for key, value in change.items():
        document[key] = value
    path.write_text(json.dumps(document))


def test_an_alias_older_than_the_refresh_interval_is_read_again(aws: MotoAws) -> None:
    template_id = aws.launch_template("tmpl", "t3.small")
    aws.asg("zero", max_size=3, tags={TAG: ""}, launch_template="tmpl", version="$Latest")
    config = config_of(aws)
    assert template_type(config) == "t3.small"
    (path,) = cache_files()
    aliases = json.loads(path.read_text())["templateAliases"]
    assert list(aliases) == [f"id:{template_id}@$Latest"]
    # an hour-old answer that says something else (stale, or planted): not trusted
    poison(
        {
            "templateAliases": {
                f"id:{template_id}@$Latest": ["m5.24xlarge", aliases[f"id:{template_id}@$Latest"][1] - 3600]
            }
        }
    )
    assert template_type(config) == "t3.small"
    # refreshInterval 0s: never trusted, even when just read
    poison(
        {
            "templateAliases": {
                f"id:{template_id}@$Latest": ["m5.24xlarge", aliases[f"id:{template_id}@$Latest"][1]]
            }
        }
    )
    assert template_type(config_of(aws, timedelta(0))) == "t3.small"


@pytest.mark.parametrize(
    "damage",
    [
        "{not json",
        '{"version": 99, "templateVersions": {}}',
        '["a list"]',
        '{"version": 1, "instanceTypes": {"t3.small": {"name": "t3.small", "vcpus": "64"}}}',
        '{"version": 1, "instanceTypes": {"t3.small": {"name": "m5.24xlarge", "vcpus": 96, '
        '"memory_mib": 393216, "architecture": "x86_64", "max_enis": 15, "ipv4_per_eni": 50, '
        '"gpu_count": 0, "gpu_manufacturer": ""}}}',
        '{"version": 1, "templateVersions": {"id:X@1": 5}, "templateAliases": {"k": ["t", "yesterday"]}}',
    ],
)
def test_a_damaged_cache_file_is_ignored(aws: MotoAws, damage: str) -> None:
    aws.launch_template("tmpl", "t3.small")
    aws.asg("zero", max_size=3, tags={TAG: ""}, launch_template="tmpl")
    config = config_of(aws)
    assert template_type(config) == "t3.small"
    (path,) = cache_files()
    path.write_text(damage)
    instance_types.clear_cache()
    (group,) = AwsReader(config).node_groups(config, ClusterView())
    assert group.template is not None
    assert group.template.instance_type == "t3.small"
    assert group.template.allocatable.get("cpu") < 2000  # a t3.small's two vCPUs, not a planted shape


def test_an_unwritable_cache_location_only_means_asking_aws(aws: MotoAws) -> None:
    """A read-only root filesystem in a pod: here a file where the cache directory would be (tests
    run as root, to whom a read-only mode means nothing)."""
    aws.launch_template("tmpl", "t3.small")
    aws.asg("zero", max_size=3, tags={TAG: ""}, launch_template="tmpl")
    root = cache_root()
    root.parent.mkdir(parents=True)
    root.write_text("not a directory")
    assert template_type(config_of(aws)) == "t3.small"
    assert template_type(config_of(aws)) == "t3.small"
    assert root.read_text() == "not a directory"


def test_a_template_created_again_under_its_name_is_read_afresh(aws: MotoAws) -> None:
    aws.launch_template("tmpl", "t3.small")
    aws.asg("zero", max_size=3, tags={TAG: ""}, launch_template="tmpl", version="1")
    config = config_of(aws)
    assert template_type(config) == "t3.small"
    aws.ec2.delete_launch_template(LaunchTemplateName="tmpl")
    aws.ec2.create_launch_template(
        LaunchTemplateName="tmpl", LaunchTemplateData={"InstanceType": "m5.large", "ImageId": "ami-12345678"}
    )
    aws.autoscaling.update_auto_scaling_group(
        AutoScalingGroupName="zero", LaunchTemplate={"LaunchTemplateName": "tmpl", "Version": "1"}
    )
    assert template_type(config) == "m5.large"
