"""Group settings under which terminating a named instance would not do what it says (issue 8)."""

from __future__ import annotations

from dataclasses import replace

from reconciler.apply.sync import _scale_down_blocked
from reconciler.config.settings import ApplyConfig, Config
from reconciler.domain.model import NodeGroup

CONFIG = Config(cluster="prod")
GROUP = NodeGroup("g", 0, 5, 3, (), ("us-east-1a",), {})


def test_a_single_zone_group_with_weights_of_one_may_scale_down() -> None:
    assert _scale_down_blocked(CONFIG, GROUP) == ""
    assert _scale_down_blocked(CONFIG, replace(GROUP, instance_weights={"m5.large": 1})) == ""


def test_az_rebalance_on_a_multi_zone_group_refuses_unless_suspended_or_allowed() -> None:
    multi = replace(GROUP, zones=("us-east-1a", "us-east-1b"))
    why = _scale_down_blocked(CONFIG, multi)
    assert "AZRebalance is not suspended" in why and "suspend-processes" in why
    assert "apply.allowAZRebalance" in why
    assert _scale_down_blocked(CONFIG, replace(multi, suspended_processes=("AZRebalance",))) == ""
    allowed = replace(CONFIG, apply=ApplyConfig(allow_az_rebalance=True))
    assert _scale_down_blocked(allowed, multi) == ""


def test_mixed_instances_weights_other_than_one_refuse_and_name_the_types() -> None:
    weighted = replace(GROUP, instance_weights={"m5.large": 1, "m5.2xlarge": 4})
    why = _scale_down_blocked(CONFIG, weighted)
    assert "m5.2xlarge weight 4" in why and "WeightedCapacity to 1" in why
    assert "m5.large" not in why


def test_a_grace_period_cap_above_the_drain_timeout_is_warned() -> None:
    from datetime import timedelta

    from reconciler.apply.sync import _settings_warnings

    assert _settings_warnings(CONFIG) == []  # the defaults: 10m and 10m
    longer = replace(CONFIG, apply=ApplyConfig(max_grace_period=timedelta(minutes=20)))
    (warning,) = _settings_warnings(longer)
    assert "apply.maxGracePeriod 20m is above apply.drainTimeout 10m" in warning
