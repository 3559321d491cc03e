"""Apply refuses to fight cluster-autoscaler wherever it runs: its Lease or status ConfigMap in its
own namespace (OpenShift-on-AWS guides deploy it with --namespace=cluster-autoscaler), a renamed
Lease, or a status written with a local UTC offset."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from tests.support import k8s_objects as k
from tests.support.apply_world import World, pod


def _scale_up_planned(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.kube.put(pod("web-b2", "node-b", "1500m"))
    world.kube.put(k.pod("job-0", "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="j"))
    assert world.cli(capsys, "plan").code == 0
    assert world.desired() == 2


def test_a_lease_in_its_own_namespace_stops_apply(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    _scale_up_planned(world, capsys)
    world.kube.put(
        k.lease("cluster-autoscaler", "cluster-autoscaler", holder="ca-0", renew_time=datetime.now(UTC))
    )
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "cluster-autoscaler is live" in refused.err
    assert "cluster-autoscaler/cluster-autoscaler" in refused.err  # where it was seen
    assert world.desired() == 2


def test_a_status_in_pacific_time_is_fresh(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    """`-0800 PST` read as UTC would be eight hours old, and apply would raise the group."""
    _scale_up_planned(world, capsys)
    pacific = datetime.now(UTC).astimezone(timezone(timedelta(hours=-8))) - timedelta(seconds=20)
    stamp = pacific.strftime("%Y-%m-%d %H:%M:%S.%f000 -0800 PST")
    world.kube.put(
        k.configmap(
            "cluster-autoscaler-status",
            "openshift-machine-api",
            data={"status": "autoscalerStatus: Running\n"},
            annotations={"cluster-autoscaler.kubernetes.io/last-updated": stamp},
        )
    )
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "configmap openshift-machine-api/cluster-autoscaler-status" in refused.err
    assert world.desired() == 2


def test_a_renamed_lease_is_found_through_the_config(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    _scale_up_planned(world, capsys)
    world.kube.put(k.lease("ca-leader", "autoscaling", holder="ca-0", renew_time=datetime.now(UTC)))
    unnamed = world.cli(capsys, "apply", "--dry-run")
    assert "cluster-autoscaler is live" not in unnamed.out + unnamed.err  # not its default name
    world.config.write_text(
        world.config.read_text().replace(
            "kubernetes: {kubeconfig:", "kubernetes: {clusterAutoscaler: {leaseName: ca-leader}, kubeconfig:"
        )
    )
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "lease autoscaling/ca-leader" in refused.err
    assert world.desired() == 2
