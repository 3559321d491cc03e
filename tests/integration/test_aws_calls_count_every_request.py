"""Review of issue 12: `awsCalls` counts what AWS rate-limits, every HTTP request: each page and each
retry of a throttled call; its keys name only `Service.Operation`."""

from __future__ import annotations

import re
from typing import Any

from botocore.awsrequest import AWSResponse

from reconciler.aws.discovery import ClusterView
from reconciler.aws.reader import AwsReader
from tests.support.aws import MotoAws, _Body, query_error

TAG = "k8s.io/cluster-autoscaler/count"
SERVICES = {"auto-scaling": "AutoScaling", "ec2": "EC2"}


def test_every_page_and_every_retry_counts(aws: MotoAws) -> None:
    for n in range(120):  # two pages of 100
        aws.asg(f"g{n:03d}", max_size=3, tags={TAG: ""})
    config = aws.config([f"asg:tag={TAG}"])
    reader = AwsReader(config)
    sent: list[str] = []
    throttled = [0]

    def wire(request: Any, event_name: str = "", **_: Any) -> Any:
        """The network, seen after the reader's counter: the first two sends of
        DescribeAutoScalingGroups come back throttled, as AWS answers a busy account."""
        _, service, operation = event_name.split(".")
        sent.append(f"{SERVICES[service]}.{operation}")
        if operation == "DescribeAutoScalingGroups" and throttled[0] < 2:
            throttled[0] += 1
            return AWSResponse(
                request.url,
                400,
                {"Content-Type": "text/xml"},
                _Body(query_error("Throttling", "Rate exceeded")),
            )
        return None

    reader.clients.autoscaling.meta.events.register("before-send", wire)
    reader.clients.ec2.meta.events.register("before-send", wire)
    groups = reader.node_groups(config, ClusterView())
    assert len(groups) == 120
    counted = reader.counter.snapshot()
    assert counted == {key: sent.count(key) for key in set(sent)}
    assert counted["AutoScaling.DescribeAutoScalingGroups"] == 2 + 2  # two pages, two retries
    assert all(re.fullmatch(r"(AutoScaling|EC2)\.[A-Z][A-Za-z]+", key) for key in counted)
