"""Apply refuses to write when it cannot tell whether cluster-autoscaler is live. The RBAC of an
older release forbids listing cluster-autoscaler's Lease and status ConfigMap by name in every
namespace; the read then looks in kube-system only. For `plan` and `status` that is a warning; for
apply, a writer, "not seen in kube-system" is not "absent": cluster-autoscaler deployed in its own
namespace would be live and undetected, and the two writers would fight (issue 19)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reconciler.demo.kube_api import FaultResult, Query
from tests.support import k8s_objects as k
from tests.support.apply_world import World, pod

FORBIDDEN_LISTS = ("/apis/coordination.k8s.io/v1/leases", "/api/v1/configmaps")


def old_rbac(method: str, path: str, query: Query) -> FaultResult:
    """What the API server answers the cluster-wide lists by name without the resourceNames rules."""
    return (403, None) if method == "GET" and path in FORBIDDEN_LISTS else None


def scale_up_planned(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.kube.put(pod("web-b2", "node-b", "1500m"))
    world.kube.put(k.pod("job-0", "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="j"))
    assert world.cli(capsys, "plan").code == 0
    assert world.desired() == 2


def test_cluster_autoscaler_in_its_own_namespace_behind_a_403_stops_apply(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    scale_up_planned(world, capsys)
    world.kube.put(
        k.lease("cluster-autoscaler", "cluster-autoscaler", holder="ca-0", renew_time=datetime.now(UTC))
    )
    world.kube.fault = old_rbac
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert "cannot tell whether cluster-autoscaler is live" in refused.err
    assert "resourceNames" in refused.err  # the fix: the RBAC rule
    assert world.desired() == 2


def test_with_the_rules_granted_apply_goes_on(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    scale_up_planned(world, capsys)
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert world.desired() == 3
