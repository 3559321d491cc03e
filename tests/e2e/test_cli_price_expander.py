"""Issue 29 item 4 through the CLI: `expander: price` places the pending pods where they cost least,
spot groups priced by their distribution, and the plan says what its scale-up costs a month."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import k8s_objects as k
from tests.support.aws import MotoAws
from tests.support.cli import run

DISCOVERY = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/prod": "owned"}
MONTH = 730


def plan(tmp_path: Path, capsys: pytest.CaptureFixture[str], expander: str, *extra: str) -> Any:
    config = tmp_path / "asg-reconciler.yaml"
    config.write_text(
        f"cluster: prod\nregion: us-east-1\nexpander: {expander}\n" + "".join(extra) + "nodeGroups:\n"
        "  autoDiscovery:\n    - asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod\n"
    )
    pods = [
        k.pod(
            f"api-{i}",
            "shop",
            requests={"cpu": "600m", "memory": "1Gi"},
            owner_kind="ReplicaSet",
            owner_name="api",
        )
        for i in range(4)
    ]
    snapshot = tmp_path / "dump.json"
    snapshot.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": pods}))
    args = ("plan", "--dry-run", "--config", str(config), "--snapshot", str(snapshot))
    as_json = run(capsys, *args, "--output", "json")
    assert as_json.code == 0, as_json.err
    as_text = run(capsys, *args)
    assert as_text.code == 0, as_text.err
    return {g["name"]: g for g in json.loads(as_json.out)["nodeGroups"]}, as_text.out


def spot_group(aws: MotoAws, name: str, instance_type: str, base: int = 0) -> None:
    template = aws.launch_template(f"lt-{name}", instance_type)
    aws.autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=name,
        MinSize=0,
        MaxSize=10,
        DesiredCapacity=0,
        AvailabilityZones=["us-east-1a"],
        MixedInstancesPolicy={
            "LaunchTemplate": {
                "LaunchTemplateSpecification": {"LaunchTemplateId": template},
                "Overrides": [{"InstanceType": instance_type}],
            },
            "InstancesDistribution": {
                "OnDemandPercentageAboveBaseCapacity": 0,
                "OnDemandBaseCapacity": base,
            },
        },
        Tags=[{"Key": k_, "Value": v, "PropagateAtLaunch": True} for k_, v in DISCOVERY.items()],
    )


def groups(aws: MotoAws) -> None:
    aws.launch_template("m5", "m5.large")
    aws.launch_template("c5", "c5.large")
    aws.asg("general-m5", desired=0, tags=DISCOVERY, launch_template="m5")
    aws.asg("compute-c5", desired=0, tags=DISCOVERY, launch_template="c5")


def test_price_picks_the_cheaper_group_and_the_plan_says_the_monthly_cost(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    groups(aws)
    planned, text = plan(tmp_path, capsys, "price")
    # 4 x 600m fit 2 nodes of either (2 vCPU each); c5.large is $0.085/h, m5.large $0.096/h
    assert (planned["compute-c5"]["desired"], planned["general-m5"]["desired"]) == (2, 0)
    cost = planned["compute-c5"]["monthlyCost"]
    assert cost == {
        "usd": round(2 * 0.085 * MONTH, 2),
        "nodes": 2,
        "basis": "2 x c5.large at $0.0850/h on-demand",
    }
    assert planned["general-m5"]["monthlyCost"] is None
    assert "adds about $124.10 a month (2 x c5.large at $0.0850/h on-demand)" in text


def test_a_spot_group_is_cheaper_than_on_demand_and_wins(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    groups(aws)
    spot_group(aws, "spot-m5", "m5.large")
    planned, _ = plan(tmp_path, capsys, "price")
    assert planned["spot-m5"]["desired"] == 2, planned
    assert planned["spot-m5"]["monthlyCost"]["usd"] == round(2 * 0.096 * 0.4 * MONTH, 2)
    # a configured price changes the choice: on-demand c5 at a negotiated $0.03/h beats spot m5
    planned, _ = plan(tmp_path, capsys, "price", "expanderOptions:\n  prices: {c5.large: 0.03}\n")
    assert planned["compute-c5"]["desired"] == 2 and planned["spot-m5"]["desired"] == 0, planned


def test_price_chains_with_another_expander(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    groups(aws)
    planned, _ = plan(tmp_path, capsys, "price,least-waste")
    assert planned["compute-c5"]["desired"] == 2


def test_a_spot_group_below_its_on_demand_base_buys_on_demand_and_is_priced_so(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # OnDemandBaseCapacity 10: AWS buys the group's first 10 instances on-demand whatever the spot
    # percentage above it, so the next nodes cost m5.large's $0.096/h, more than c5.large's $0.085
    groups(aws)
    spot_group(aws, "spot-m5", "m5.large", base=10)
    planned, _ = plan(tmp_path, capsys, "price")
    assert planned["compute-c5"]["desired"] == 2 and planned["spot-m5"]["desired"] == 0, planned
    # chosen for another reason, its cost is told as AWS will bill it
    favour_spot = 'expanderOptions: {priorities: {"50": ["spot-.*"], "10": [".*"]}}\n'
    planned, _ = plan(tmp_path, capsys, "priority", favour_spot)
    assert planned["spot-m5"]["desired"] == 2, planned
    assert planned["spot-m5"]["monthlyCost"]["usd"] == round(2 * 0.096 * MONTH, 2), planned
    assert "OnDemandBaseCapacity" in planned["spot-m5"]["monthlyCost"]["basis"], planned
