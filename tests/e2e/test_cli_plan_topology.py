"""`plan --dry-run --snapshot` for pods with zone spread and pod affinity: one ASG per AZ (the
cluster-autoscaler pattern), the cluster from a kubectl dump, the ASGs in moto."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import k8s_objects as k
from tests.support.aws import MotoAws
from tests.support.plan_cli import TAGS, config, group, pending, plan_json, snapshot

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
ZONE_KEY = "topology.kubernetes.io/zone"


def one_group_per_zone(aws: MotoAws) -> None:
    aws.launch_template("lt", "m5.large")
    for zone in ZONES:
        aws.asg(f"asg-{zone[-1]}", max_size=10, tags=TAGS, launch_template="lt", zones=[zone])


def db_in_zone_b_and_a_pod_that_needs_it() -> list[dict[str, Any]]:
    """A full node in us-east-1b running the db, and a pending pod with zone affinity to it."""
    full_b = k.node("db-node", zone="us-east-1b", allocatable={"cpu": "500m", "memory": "2Gi", "pods": "10"})
    db = k.pod("db-0", "apps", owner_kind="StatefulSet", owner_name="db", labels={"app": "db"},
               node_name="db-node", phase="Running", requests={"cpu": "400m"})  # fmt: skip
    term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": ZONE_KEY}
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return [full_b, db, pending("cache-0", owner="cache", requests={"cpu": "1"}, affinity=affinity)]


def test_a_deployment_spread_by_zone_gets_a_node_in_each_zone(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one_group_per_zone(aws)
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE_KEY,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    objects = [
        pending(
            f"web-{i}", owner="web", labels={"app": "web"}, requests={"cpu": "500m"}, topology_spread=spread
        )
        for i in range(6)
    ]
    document = plan_json(capsys, config(tmp_path), snapshot(tmp_path, objects))
    for zone in ZONES:
        g = group(document, f"asg-{zone[-1]}")
        assert (g["current"], g["desired"], g["action"]) == (0, 1, "scale-up"), g
    by_group: dict[str, int] = {}
    for outcome in document["pendingPods"]:
        by_group[outcome["nodeGroup"]] = by_group.get(outcome["nodeGroup"], 0) + 1
    assert by_group == {"asg-a": 2, "asg-b": 2, "asg-c": 2}  # maxSkew 1 across the three zones


def test_required_affinity_to_a_pod_in_zone_b_scales_up_zone_b_only(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one_group_per_zone(aws)
    objects = db_in_zone_b_and_a_pod_that_needs_it()
    document = plan_json(capsys, config(tmp_path), snapshot(tmp_path, objects))
    assert group(document, "asg-b")["desired"] == 1
    assert group(document, "asg-a")["desired"] == 0
    assert group(document, "asg-c")["desired"] == 0
    (outcome,) = [p for p in document["pendingPods"] if p["pod"] == "apps/cache-0"]
    assert outcome["nodeGroup"] == "asg-b"


def test_a_multi_zone_group_cannot_serve_a_pod_that_needs_one_zone(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.launch_template("lt", "m5.large")
    aws.asg("multi", max_size=10, tags=TAGS, launch_template="lt", zones=list(ZONES))
    objects = db_in_zone_b_and_a_pod_that_needs_it()
    document = plan_json(capsys, config(tmp_path), snapshot(tmp_path, objects))
    assert group(document, "multi")["desired"] == 0
    (outcome,) = [p for p in document["pendingPods"] if p["pod"] == "apps/cache-0"]
    assert outcome["nodeGroup"] is None
    assert "multi: required pod affinity on topology.kubernetes.io/zone" in outcome["reason"]
    assert "only us-east-1b would do, and AWS picks the zone of a new node" in outcome["reason"]
    assert outcome["reason"].endswith(
        ". A multi-AZ group cannot promise a zone, and no single-AZ group serves us-east-1b: one would help"
    )
