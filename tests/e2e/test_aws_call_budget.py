"""The AWS-call budget of a plan at scale (issue 12; docs/aws-calls.md), counted where botocore sends.

A moto world of 210 groups: 200 with 25 instances each (5,000) and 10 at zero, whose templates
use `$Default`, `$Latest` and a numbered version. Each `plan --dry-run --snapshot` runs in-process
as a fresh command would; a `before-send` hook on every botocore session counts the requests
independently of the tool's own `awsCalls` (which must agree). DescribeInstanceRefreshes, which
moto lacks, is answered as AWS answers it.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from reconciler.aws import instance_types
from reconciler.aws.discovery import ClusterView
from reconciler.aws.reader import AwsReader
from reconciler.config.settings import load_config
from tests.support import k8s_objects as k
from tests.support.aws import MotoAws, on_every_session
from tests.support.cli import run
from tests.support.failing_launches import FailingLaunches

GROUPS, ZERO_GROUPS, PER_GROUP = 200, 10, 25
TAG = "k8s.io/cluster-autoscaler/budget"
REFRESHING = "g007"  # the one group AWS says is under an instance refresh
UNREGISTERED = 20  # instances launched but without a node yet
REFRESHES = re.compile(rb"AutoScalingGroupName=([^&]+)")


class Requests:
    """Requests per `Service.Operation`, as `awsCalls` names them."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()

    def before_send(self, request: Any, event_name: str = "", **_: Any) -> Any:
        _, service, operation = event_name.split(".")
        name = "AutoScaling" if service == "auto-scaling" else service.upper()
        self.seen[f"{name}.{operation}"] += 1
        if operation == "DescribeInstanceRefreshes":
            body = request.body if isinstance(request.body, bytes) else str(request.body).encode()
            found = REFRESHES.search(body)
            group = found.group(1).decode() if found else ""
            return AWSResponse(request.url, 200, {"Content-Type": "text/xml"}, _Body(refreshes_of(group)))
        return None

    def take(self) -> dict[str, int]:
        taken = dict(self.seen)
        self.seen.clear()
        return taken


class _Body:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


def refreshes_of(group: str) -> bytes:
    member = (
        f"<member><InstanceRefreshId>r-1</InstanceRefreshId><AutoScalingGroupName>{group}"
        "</AutoScalingGroupName><Status>InProgress</Status></member>"
        if group == REFRESHING
        else ""
    )
    return (
        '<DescribeInstanceRefreshesResponse xmlns="https://autoscaling.amazonaws.com/doc/2011-01-01/">'
        f"<DescribeInstanceRefreshesResult><InstanceRefreshes>{member}</InstanceRefreshes>"
        "</DescribeInstanceRefreshesResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata>"
        "</DescribeInstanceRefreshesResponse>"
    ).encode()


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> Requests:
    seen = Requests()
    on_every_session(monkeypatch, "before-send", seen.before_send)
    return seen


def build_world(aws: MotoAws) -> dict[str, list[tuple[str, str]]]:
    """The 210 groups; returns each group's (instance id, zone)."""
    aws.launch_template("numbered", "m5.large", "m5.xlarge")
    aws.launch_template("moving", "m5.large", "c5.large")
    for n in range(GROUPS):
        template = ("numbered", "moving")[n % 2]
        aws.asg(f"g{n:03d}", max_size=50, desired=PER_GROUP, tags={TAG: ""}, launch_template=template)
    versions = ("$Default", "$Latest", "2")
    for n in range(ZERO_GROUPS):
        template = ("numbered", "moving")[n % 2]
        version = versions[n % 3]
        aws.asg(f"zero-{n:02d}", max_size=50, tags={TAG: ""}, launch_template=template, version=version)
    found: dict[str, list[tuple[str, str]]] = {}
    pages = aws.autoscaling.get_paginator("describe_auto_scaling_groups").paginate()
    for page in pages:
        for asg in page["AutoScalingGroups"]:
            found[asg["AutoScalingGroupName"]] = [
                (i["InstanceId"], i["AvailabilityZone"]) for i in asg.get("Instances", [])
            ]
    assert sum(len(v) for v in found.values()) == GROUPS * PER_GROUP
    return found


def write_snapshot(path: Path, instances: dict[str, list[tuple[str, str]]], *, skip: int, idle: int) -> None:
    """Every instance a Ready m5.large node but the first `skip` (no node yet); each node runs a pod
    using most of it but the first `idle` (empty: scale-down candidates, one per group)."""
    items: list[Any] = []
    listed = [(group, iid, zone) for group, ids in sorted(instances.items()) for iid, zone in ids]
    idle_groups = sorted(instances)[1 : 1 + idle]  # g001..: one idle node each, and g007 among them
    idle_nodes = {instances[g][0][0] for g in idle_groups}
    for index, (_, iid, zone) in enumerate(listed):
        if index < skip:
            continue
        name = f"ip-{iid}"
        items.append(k.node(name, instance_id=iid, zone=zone, ready_since="2026-01-01T00:00:00Z"))
        if iid not in idle_nodes:
            items.append(
                k.pod(
                    f"work-{iid}",
                    requests={"cpu": "1500m", "memory": "6Gi"},
                    node_name=name,
                    phase="Running",
                    owner_kind="ReplicaSet",
                    owner_name="work",
                )
            )
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))


def plan(capsys: pytest.CaptureFixture[str], config: Path, snapshot: Path) -> dict[str, Any]:
    instance_types.clear_cache()  # a fresh process: only the disk cache carries over
    result = run(
        capsys, "plan", "--dry-run", "--snapshot", str(snapshot), "--config", str(config), "-o", "json"
    )
    assert result.code == 0, result.err
    document: dict[str, Any] = json.loads(result.out)
    return document


def within(calls: dict[str, int], budget: dict[str, int]) -> list[str]:
    problems = [
        f"{op}: {n} requests, budget {budget.get(op, 0)}" for op, n in calls.items() if n > budget.get(op, 0)
    ]
    return problems


def test_a_plan_at_5000_nodes_and_210_groups_stays_within_its_aws_call_budget(
    aws: MotoAws,
    requests: Requests,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    failing_launches: FailingLaunches,
) -> None:
    instances = build_world(aws)
    config = tmp_path / "asg-reconciler.yaml"
    config.write_text(
        f"cluster: budget\nregion: {aws.region}\nnodeGroups:\n  autoDiscovery: ['asg:tag={TAG}']\n"
        "scaleDown:\n  unneededTime: 0s\n"
    )
    pages = math.ceil((GROUPS + ZERO_GROUPS) / 100)
    steady = {"AutoScaling.DescribeAutoScalingGroups": pages, "AutoScaling.DescribePolicies": 1}
    snapshot = tmp_path / "cluster.json"
    requests.take()

    # Cold: nothing on disk. The 20 instances without a node are described (one batch), the 10
    # groups at zero read their 2 templates and 1 page of instance types; no refresh is asked.
    write_snapshot(snapshot, instances, skip=UNREGISTERED, idle=0)
    document = plan(capsys, config, snapshot)
    cold = requests.take()
    assert document["awsCalls"] == cold
    assert len(document["nodeGroups"]) == GROUPS + ZERO_GROUPS
    assert not within(
        cold,
        {
            **steady,
            "EC2.DescribeInstances": 1,
            "EC2.DescribeLaunchTemplateVersions": 2,
            "EC2.DescribeInstanceTypes": 1,
        },
    ), cold
    assert cold["EC2.DescribeInstances"] == 1 and cold["EC2.DescribeLaunchTemplateVersions"] == 2

    # Warm: a second one-shot run reads instance types and template versions from the disk cache
    # ($Latest/$Default too: younger than aws.refreshInterval).
    warm = plan(capsys, config, snapshot)["awsCalls"]
    assert warm == requests.take()
    assert not within(warm, {**steady, "EC2.DescribeInstances": 1}), warm

    # Steady state: every instance has a node. ceil(210 / 100) pages of groups, 1 of policies.
    write_snapshot(snapshot, instances, skip=0, idle=0)
    calls = plan(capsys, config, snapshot)["awsCalls"]
    assert calls == requests.take() == steady

    # Idle nodes in 8 groups: the plan proposes their removal, so it asks about instance refreshes
    # for those 8 groups only; g007's refresh keeps its node.
    write_snapshot(snapshot, instances, skip=0, idle=8)
    document = plan(capsys, config, snapshot)
    calls = requests.take()
    assert document["awsCalls"] == calls
    assert calls == {**steady, "AutoScaling.DescribeInstanceRefreshes": 8}
    removing = {g["name"] for g in document["nodeGroups"] if g["removeInstances"]}
    assert removing == {f"g{n:03d}" for n in range(1, 9)} - {REFRESHING}
    kept = next(g for g in document["nodeGroups"] if g["name"] == REFRESHING)
    assert kept["removeInstances"] == [] and kept["desired"] == PER_GROUP

    # AWS cannot launch a raise of 3 groups: their scaling activities are read, one request each,
    # and nothing is asked about the 207 groups whose instances fill their desired.
    failing = ("g010", "g011", "g012")
    for name in failing:
        failing_launches.fail(name)
        aws.autoscaling.set_desired_capacity(AutoScalingGroupName=name, DesiredCapacity=PER_GROUP + 1)
    requests.take()
    write_snapshot(snapshot, instances, skip=0, idle=0)
    document = plan(capsys, config, snapshot)
    calls = requests.take()
    assert document["awsCalls"] == calls == {**steady, "AutoScaling.DescribeScalingActivities": 3}
    assert sorted(failing_launches.asked) == list(failing)
    failed = {g["name"]: g["launchFailure"] for g in document["nodeGroups"] if g["launchFailure"]}
    assert sorted(failed) == list(failing) and all(f["unfilled"] == 1 for f in failed.values())


def test_run_reuses_descriptions_for_the_refresh_interval_and_forgets_them_on_errors(
    aws: MotoAws, requests: Requests, tmp_path: Path
) -> None:
    for n in range(3):
        aws.asg(f"g{n}", max_size=5, desired=1, tags={TAG: ""})
    config_file = tmp_path / "asg-reconciler.yaml"
    config_file.write_text(
        f"cluster: budget\nregion: {aws.region}\nnodeGroups:\n  autoDiscovery: ['asg:tag={TAG}']\n"
        "aws:\n  refreshInterval: 1m\n"
    )
    config = load_config(config_file)
    now = [0.0]
    reader = AwsReader(config, reuse=True, clock=lambda: now[0])
    view = ClusterView()
    first = reader.node_groups(config, view)
    requests.take()
    now[0] = 59.0
    # A cycle of the run loop in steady state: no request at all (launch times of the instances
    # without a node never change, so they are remembered too).
    assert reader.node_groups(config, view) == first
    assert requests.take() == {}
    launched = {i.instance_id for g in first for i in g.instances}
    registered = ClusterView(registered=frozenset(launched), ready=frozenset(launched))

    now[0] = 61.0  # older than aws.refreshInterval
    reader.node_groups(config, registered)
    assert requests.take() == {"AutoScaling.DescribeAutoScalingGroups": 1, "AutoScaling.DescribePolicies": 1}

    reader.invalidate()  # what the run loop does after apply changed a group
    reader.node_groups(config, registered)
    assert requests.take()["AutoScaling.DescribeAutoScalingGroups"] == 1

    # An answer about instance refreshes is reused too (an open proposal is planned every cycle).
    assert reader.refreshing(["g0", "g1"]) == frozenset()
    assert reader.refreshing(["g1"]) == frozenset()
    assert requests.take()["AutoScaling.DescribeInstanceRefreshes"] == 2

    # A group deleted behind our back: the call that names it fails, and the next read describes
    # the groups again instead of trusting memory.
    aws.autoscaling.delete_auto_scaling_group(AutoScalingGroupName="g2", ForceDelete=True)
    reader.node_groups(config, registered)
    requests.take()

    def fail(request: Any, **_: Any) -> Any:
        return AWSResponse(request.url, 400, {"Content-Type": "text/xml"}, _Body(_validation_error()))

    reader.clients.autoscaling.meta.events.register(
        "before-send.auto-scaling.DescribeInstanceRefreshes", fail
    )
    with pytest.raises(Exception, match="not found"):
        reader.refreshing(["g2"])
    groups = reader.node_groups(config, registered)
    assert requests.take()["AutoScaling.DescribeAutoScalingGroups"] == 1
    assert [g.name for g in groups] == ["g0", "g1"]


def _validation_error() -> bytes:
    return (
        b'<ErrorResponse xmlns="https://autoscaling.amazonaws.com/doc/2011-01-01/"><Error><Type>Sender</Type>'
        b"<Code>ValidationError</Code><Message>AutoScalingGroup name not found - g2</Message></Error>"
        b"<RequestId>r</RequestId></ErrorResponse>"
    )


def test_an_incomplete_snapshot_is_refused_from_the_group_descriptions_alone(
    aws: MotoAws, requests: Requests, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A pods-only dump makes every instance look unregistered: refused before their launch times,
    templates or types are asked (at 5,000 instances that was 25 DescribeInstances calls first)."""
    for n in range(3):
        aws.asg(f"g{n}", max_size=5, desired=2, tags={TAG: ""})
    config = tmp_path / "asg-reconciler.yaml"
    config.write_text(
        f"cluster: budget\nregion: {aws.region}\nnodeGroups:\n  autoDiscovery: ['asg:tag={TAG}']\n"
    )
    snapshot = tmp_path / "pods.json"
    pods = [
        k.pod(f"web-{n}", requests={"cpu": "100m"}, node_name=f"ip-{n}", phase="Running") for n in range(3)
    ]
    snapshot.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": pods}))
    requests.take()
    result = run(capsys, "plan", "--dry-run", "--snapshot", str(snapshot), "--config", str(config))
    assert result.code == 2 and "no Node objects, but AWS has 6 InService instance(s)" in result.err
    assert requests.take() == {"AutoScaling.DescribeAutoScalingGroups": 1, "AutoScaling.DescribePolicies": 1}
