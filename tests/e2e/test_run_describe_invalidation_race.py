"""Review of issue 12: apply's invalidate() while the plan stage's describe is in flight must not be
lost (both stages are threads of one `run` process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reconciler.aws import reader as reader_module
from reconciler.aws.discovery import ClusterView
from reconciler.aws.reader import AwsReader
from reconciler.config.settings import load_config
from tests.support.aws import MotoAws

TAG = "k8s.io/cluster-autoscaler/race"


def test_an_invalidate_during_a_describe_is_not_lost(
    aws: MotoAws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    aws.asg("g0", max_size=5, desired=1, tags={TAG: ""})
    path = tmp_path / "asg-reconciler.yaml"
    path.write_text(f"cluster: race\nregion: {aws.region}\nnodeGroups:\n  autoDiscovery: ['asg:tag={TAG}']\n")
    config = load_config(path)
    reader = AwsReader(config, reuse=True, clock=lambda: 0.0)
    original = reader_module.describe
    raced = [False]

    def describe(config: Any, autoscaling: Any) -> Any:
        described = original(config, autoscaling)  # AWS answered: desired 1
        if not raced[0]:
            raced[0] = True
            # meanwhile, in the apply thread: SetDesiredCapacity 1 -> 3, then the run loop forgets
            aws.autoscaling.set_desired_capacity(AutoScalingGroupName="g0", DesiredCapacity=3)
            reader.invalidate()
        return described

    monkeypatch.setattr(reader_module, "describe", describe)
    reader.node_groups(config, ClusterView())
    (group,) = reader.node_groups(config, ClusterView())  # the plan stage's next cycle
    assert group.desired == 3, "the plan stage still plans from the description apply invalidated"
