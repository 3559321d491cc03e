"""Apply refuses to fight cluster-autoscaler where the operator says it runs, and only there.

cluster-autoscaler keeps its Lease and status ConfigMap in the namespace it runs in (--namespace):
kube-system on EKS, `cluster-autoscaler` in the common OpenShift-on-AWS guide, `openshift-machine-api`
elsewhere. Until issue 28 these tests read both "in any namespace": a tenant who may create a
ConfigMap named `cluster-autoscaler-status` in their own namespace, annotated `last-updated` in
2099, made every apply refuse for ever. Now evidence counts in kube-system and the namespaces of
`kubernetes.clusterAutoscaler.namespaces` (one config line away), a time beyond a small clock skew in
the future is none, and both are said in a warning. A renamed Lease and a status written with a
local UTC offset are still found."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from tests.support import k8s_objects as k
from tests.support.apply_world import World, pod

LAST_UPDATED = "cluster-autoscaler.kubernetes.io/last-updated"


def _scale_up_planned(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.kube.put(pod("web-b2", "node-b", "1500m"))
    world.kube.put(k.pod("job-0", "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="j"))
    assert world.cli(capsys, "plan").code == 0
    assert world.desired() == 2


def _configure(world: World, clusterautoscaler: str) -> None:
    world.config.write_text(
        world.config.read_text().replace(
            "kubernetes: {kubeconfig:", f"kubernetes: {{clusterAutoscaler: {clusterautoscaler}, kubeconfig:"
        )
    )


def _status(namespace: str, stamp: str) -> dict[str, object]:
    return k.configmap(
        "cluster-autoscaler-status",
        namespace,
        data={"status": "autoscalerStatus: Running\n"},
        annotations={LAST_UPDATED: stamp},
    )


def test_a_lease_in_its_own_namespace_stops_apply_once_that_namespace_is_configured(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    _scale_up_planned(world, capsys)
    world.kube.put(
        k.lease("cluster-autoscaler", "cluster-autoscaler", holder="ca-0", renew_time=datetime.now(UTC))
    )
    unlisted = world.cli(capsys, "apply", "--dry-run")
    assert "cluster-autoscaler is live" not in unlisted.out + unlisted.err
    said = unlisted.out + unlisted.err
    assert "lease cluster-autoscaler/cluster-autoscaler" in said  # the warning names it...
    assert "kubernetes.clusterAutoscaler.namespaces" in said  # ...and the line to add
    _configure(world, "{namespaces: [kube-system, cluster-autoscaler]}")
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "cluster-autoscaler is live" in refused.err
    assert "cluster-autoscaler/cluster-autoscaler" in refused.err  # where it was seen
    assert world.desired() == 2


def test_a_status_in_pacific_time_is_fresh(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    """`-0800 PST` read as UTC would be eight hours old, and apply would raise the group."""
    _scale_up_planned(world, capsys)
    _configure(world, "{namespaces: [kube-system, openshift-machine-api]}")
    pacific = datetime.now(UTC).astimezone(timezone(timedelta(hours=-8))) - timedelta(seconds=20)
    world.kube.put(_status("openshift-machine-api", pacific.strftime("%Y-%m-%d %H:%M:%S.%f000 -0800 PST")))
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "configmap openshift-machine-api/cluster-autoscaler-status" in refused.err
    assert world.desired() == 2


def test_a_renamed_lease_is_found_through_the_config(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    _scale_up_planned(world, capsys)
    world.kube.put(k.lease("ca-leader", "kube-system", holder="ca-0", renew_time=datetime.now(UTC)))
    unnamed = world.cli(capsys, "apply", "--dry-run")
    assert "cluster-autoscaler is live" not in unnamed.out + unnamed.err  # not its default name
    _configure(world, "{leaseName: ca-leader}")
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "lease kube-system/ca-leader" in refused.err
    assert world.desired() == 2


def test_a_tenants_status_configmap_stops_nothing(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    """A tenant may create ConfigMaps in their namespace; one named like cluster-autoscaler's, dated
    2099, is no evidence: apply raises the group and says what it ignored."""
    _scale_up_planned(world, capsys)
    world.kube.put(_status("team-a", "2099-01-01 00:00:00.000000000 +0000 UTC"))
    world.kube.put(_status("team-b", datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S +0000 UTC")))
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert "cluster-autoscaler is live" not in applied.err
    assert "configmap team-b/cluster-autoscaler-status looks like cluster-autoscaler's" in applied.out
    assert world.desired() == 3  # the planned raise went through


def test_a_status_dated_2099_in_kube_system_is_ignored_with_a_warning(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Even where cluster-autoscaler may run, a time far ahead of ours would be "fresh" for ever."""
    _scale_up_planned(world, capsys)
    world.kube.put(_status("kube-system", "2099-01-01 00:00:00.000000000 +0000 UTC"))
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert "configmap kube-system/cluster-autoscaler-status is ignored" in applied.out
    assert "ahead of ours" in applied.out
    assert world.desired() == 3  # the planned raise went through
