"""Review of issue 12: `run`'s plan stage reuses ASG descriptions for aws.refreshInterval while it
reads the cluster fresh every cycle. An instance terminated since (by apply in another pod, by apply
in this process while it still drains its next batch, a spot interruption) still reads InService,
its node is gone: it must not look "unregistered longer than maxNodeProvisionTime"."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reconciler.aws.reader import AwsReader
from reconciler.config.settings import load_config
from reconciler.runtime.plan_stage import plan_once
from tests.support import k8s_objects as k
from tests.support.aws import MotoAws

TAG = "k8s.io/cluster-autoscaler/reuse"
T3_SMALL = {"cpu": "1930m", "memory": "1471840Ki", "pods": "11"}


def test_a_terminated_instance_in_a_reused_description_does_not_back_the_group_off(
    aws: MotoAws, tmp_path: Path
) -> None:
    aws.launch_template("lt", "t3.small")
    aws.asg("general", min_size=0, max_size=5, desired=2, tags={TAG: ""}, launch_template="lt")
    described = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])
    instances = sorted(
        (i["InstanceId"], i["AvailabilityZone"]) for i in described["AutoScalingGroups"][0]["Instances"]
    )
    path = tmp_path / "asg-reconciler.yaml"
    path.write_text(
        f"cluster: reuse\nregion: {aws.region}\nnodeGroups:\n  autoDiscovery: ['asg:tag={TAG}']\n"
    )
    config = load_config(path)
    now = datetime.now(UTC) + timedelta(hours=1)  # the instances have been up for an hour

    def cluster(live: list[tuple[str, str]]) -> Path:
        items = []
        for n, (iid, zone) in enumerate(live):
            items.append(
                k.node(
                    f"node-{n}", instance_id=iid, zone=zone, instance_type="t3.small", allocatable=T3_SMALL
                )
            )
            items.append(
                k.pod(
                    f"web-{n}",
                    "shop",
                    node_name=f"node-{n}",
                    requests={"cpu": "1500m"},
                    owner_kind="ReplicaSet",
                    owner_name="web",
                )
            )
        snapshot = tmp_path / "cluster.json"
        snapshot.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
        return snapshot

    reader = AwsReader(config, reuse=True)  # the run loop's plan stage
    first = plan_once(config, cluster(instances), now, dry_run=True, reader=reader)
    assert first.plan.groups[0].backoff_until is None
    # 20 seconds later: the first instance is terminated (approved removal) and its Node deleted
    gone, _ = instances[0]
    aws.autoscaling.terminate_instance_in_auto_scaling_group(
        InstanceId=gone, ShouldDecrementDesiredCapacity=True
    )
    second = plan_once(
        config, cluster(instances[1:]), now + timedelta(seconds=20), dry_run=True, reader=reader
    )
    group = second.plan.groups[0]
    assert group.backoff_until is None and gone not in group.remove_instances, (
        group.reasons,
        group.backoff_until,
    )
