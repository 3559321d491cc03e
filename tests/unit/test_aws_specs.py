"""cluster-autoscaler's `--nodes` and `asg:tag=` syntax, parsed as cluster-autoscaler parses it."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.aws.discovery import (
    ExplicitSpec,
    FoundAsg,
    TagSpec,
    merge_found,
    parse_auto_discovery,
    parse_explicit,
    tag_filters,
)
from reconciler.domain.errors import UserError


def test_explicit_spec() -> None:
    assert parse_explicit("0:6:my-asg") == ExplicitSpec(0, 6, "my-asg", "0:6:my-asg")


def test_explicit_name_keeps_its_colons() -> None:
    assert parse_explicit("1:3:eks:nodes:a").name == "eks:nodes:a"


@pytest.mark.parametrize(
    ("spec", "complaint"),
    [
        ("6:my-asg", "min:max:name"),
        ("a:6:my-asg", "integers"),
        ("-1:6:my-asg", ">= 0"),
        ("5:2:my-asg", "below min size"),
        ("0:6:", "name is empty"),
    ],
)
def test_bad_explicit_specs(spec: str, complaint: str) -> None:
    with pytest.raises(UserError, match=r"nodeGroups\.explicit") as caught:
        parse_explicit(spec)
    assert complaint in str(caught.value)
    assert caught.value.exit_code == 2


def test_auto_discovery_keys_and_values() -> None:
    spec = parse_auto_discovery("asg:tag=k8s.io/cluster-autoscaler/enabled,team=ml,env=")
    assert spec.tags == (("k8s.io/cluster-autoscaler/enabled", ""), ("team", "ml"), ("env", ""))


def test_auto_discovery_value_may_contain_equals_and_colons() -> None:
    assert parse_auto_discovery("asg:tag=a=b=c,x:y").tags == (("a", "b=c"), ("x:y", ""))


def test_a_repeated_key_keeps_its_last_value() -> None:
    assert parse_auto_discovery("asg:tag=team=a,team=b").tags == (("team", "b"),)


@pytest.mark.parametrize(
    ("spec", "complaint"),
    [
        ("asg", "asg:tag="),
        ("mig:tag=a", "unsupported discoverer"),
        ("asg:label=a", "unsupported parameter"),
        ("asg:tag", "expected tag="),
        ("asg:tag=", "no tag given"),
        ("asg:tag=a,,b", "empty tag key"),
    ],
)
def test_bad_auto_discovery_specs(spec: str, complaint: str) -> None:
    with pytest.raises(UserError, match=r"nodeGroups\.autoDiscovery") as caught:
        parse_auto_discovery(spec)
    assert complaint in str(caught.value)


def test_filters_are_one_per_tag() -> None:
    spec = parse_auto_discovery("asg:tag=enabled,cluster=prod")
    assert tag_filters(spec) == [
        {"Name": "tag-key", "Values": ["enabled"]},
        {"Name": "tag:cluster", "Values": ["prod"]},
    ]


def test_every_tag_must_match() -> None:
    spec = TagSpec((("enabled", ""), ("cluster", "prod")), "asg:tag=enabled,cluster=prod")
    assert spec.matches({"enabled": "whatever", "cluster": "prod", "other": "x"})
    assert not spec.matches({"enabled": "", "cluster": "dev"})
    assert not spec.matches({"cluster": "prod"})


def _asg(name: str) -> Any:
    return {"AutoScalingGroupName": name, "MinSize": 0, "MaxSize": 5, "DesiredCapacity": 0}


def test_merge_lists_each_group_once_sorted_and_explicit_wins() -> None:
    spec = ExplicitSpec(1, 3, "b", "1:3:b")
    merged = merge_found([(spec, _asg("b"))], [_asg("c"), _asg("b"), _asg("a"), _asg("c")])
    assert [f.name for f in merged] == ["a", "b", "c"]
    assert merged[1] == FoundAsg(_asg("b"), spec)
    assert merged[0].explicit is None
