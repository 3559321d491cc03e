"""A launch that fails is said where a person looks in `run`: a FailedToScaleUpGroup Event on the status
ConfigMap (as CA records it), CA's backoffInfo in that ConfigMap, and metrics counting each failed
attempt once."""

from __future__ import annotations

import shutil
import subprocess
from datetime import timedelta

import pytest
from prometheus_client import generate_latest

from reconciler.domain.event import CONFIGMAP, WARNING
from reconciler.telemetry.events import FAILED_TO_SCALE_UP_GROUP, plan_events
from reconciler.telemetry.metrics import Metrics
from reconciler.telemetry.status import status_document
from tests.support.plan_world import NOW
from tests.unit.test_launch_failures import ICE, failed, two_groups
from tests.unit.test_telemetry_metrics import scrape, value

WHERE = ("kube-system", "asg-reconciler-status")


def test_the_failing_group_gets_a_failed_to_scale_up_group_event_on_the_status_configmap() -> None:
    plan = two_groups(failed(1)).plan()
    (event,) = [e for e in plan_events(plan, status_configmap=WHERE) if e.reason == FAILED_TO_SCALE_UP_GROUP]
    assert (event.kind, event.namespace, event.name, event.type) == (CONFIGMAP, *WHERE, WARNING)
    assert event.message.startswith(
        "Scale-up failed for group spot: AWS could not launch 2 instance(s): "
        "InsufficientInstanceCapacity (OutOfResources): We currently do not have sufficient"
    )
    # the same failure a minute later (AWS retried): the same message, so one Event, counted
    later = two_groups(failed(1), failed(0.5)).plan()
    assert [e.message for e in plan_events(later, status_configmap=WHERE) if e.kind == CONFIGMAP] == [
        event.message
    ]
    # once the backoff has ended, nothing more is said
    ended = two_groups(failed(10)).plan()
    assert not [e for e in plan_events(ended, status_configmap=WHERE) if e.kind == CONFIGMAP]


def test_the_status_configmap_carries_cas_backoff_info() -> None:
    plan = two_groups(failed(1)).plan()
    document = status_document("prod", plan, {}, None, None)
    spot = next(g for g in document["nodeGroups"] if g["name"] == "spot")
    assert spot["scaleUp"]["status"] == "Backoff"
    assert spot["scaleUp"]["backoffInfo"] == {
        "errorCode": "InsufficientInstanceCapacity",
        "errorClass": "OutOfResources",
        "errorMessage": ICE,
        "unfilled": 2,
        "failingSince": "2026-06-01T11:59:00Z",
    }


def test_metrics_show_the_capacity_aws_could_not_launch_and_count_each_failure_once() -> None:
    metrics = Metrics()
    metrics.plan(two_groups(failed(3), failed(1)).plan(), NOW)
    samples = scrape(metrics)
    assert value(samples, "asg_reconciler_node_group_launch_failed_nodes", node_group="spot") == 2
    assert value(samples, "asg_reconciler_node_group_launch_failed_nodes", node_group="ondemand") == 0
    counted = "asg_reconciler_failed_launches_total"
    assert value(samples, counted, node_group="spot", error_class="OutOfResources") == 2
    assert value(samples, counted, node_group="spot", error_class="Other") == 0
    assert value(samples, "asg_reconciler_node_group_backoff", node_group="spot") == 1
    metrics.plan(two_groups(failed(3), failed(1)).plan(), NOW)  # seen already: not counted again
    metrics.plan(two_groups(failed(3), failed(1), failed(0)).plan(), NOW)  # AWS tried once more
    assert value(scrape(metrics), counted, node_group="spot", error_class="OutOfResources") == 3
    later = NOW + timedelta(minutes=20)
    metrics.plan(two_groups(failed(3), failed(1), failed(0)).plan(now=later), later)  # backoff over
    assert value(scrape(metrics), "asg_reconciler_node_group_launch_failed_nodes", node_group="spot") == 0


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian's prometheus) not installed")
def test_promtool_accepts_the_new_series() -> None:
    metrics = Metrics()
    metrics.plan(two_groups(failed(3), failed(1)).plan(), NOW)
    text = generate_latest(metrics.registry)
    checked = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert b'asg_reconciler_failed_launches_total{error_class="OutOfResources",node_group="spot"} 2.0' in text
