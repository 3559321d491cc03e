"""cluster-autoscaler found where the operator says it runs (kube-system and the configured
namespaces, never a tenant's), its times read with their UTC offsets, a future time no evidence."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from reconciler.kube.autoscaler import detect_autoscaler, go_time, judge_autoscaler
from reconciler.kube.state import StateBuilder

NOW = datetime(2026, 1, 2, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-01-02 03:58:00.123456789 -0800 PST", datetime(2026, 1, 2, 11, 58, tzinfo=UTC)),
        ("2026-01-02 20:58:00 +0900 JST m=+12.5", datetime(2026, 1, 2, 11, 58, tzinfo=UTC)),
        ("2026-01-02 11:58:00.1 +0000 UTC", datetime(2026, 1, 2, 11, 58, tzinfo=UTC)),
        ("2026-01-02T11:58:00.000000Z", datetime(2026, 1, 2, 11, 58, tzinfo=UTC)),
        ("2026-01-02T13:58:00+02:00", datetime(2026, 1, 2, 11, 58, tzinfo=UTC)),
        ("2026-01-02 11:58:00", datetime(2026, 1, 2, 11, 58, tzinfo=UTC)),
        ("yesterday", None),
        ("2026-13-40 99:00:00 +0000 UTC", None),
    ],
)
def test_go_time_keeps_the_offset(text: str, expected: datetime | None) -> None:
    assert go_time(text) == expected


def test_a_pacific_status_configmap_is_fresh_not_eight_hours_old() -> None:
    """Go prints local time with its offset: read as UTC it would be 8 hours stale and ignored."""
    configmap = {
        "metadata": {
            "namespace": "cluster-autoscaler",
            "name": "cluster-autoscaler-status",
            "annotations": {"cluster-autoscaler.kubernetes.io/last-updated": "2026-01-02 03:59:00 -0800 PST"},
        }
    }
    found = detect_autoscaler([configmap], [], NOW, ("kube-system", "cluster-autoscaler"))
    assert found is not None
    assert found.source == "configmap cluster-autoscaler/cluster-autoscaler-status"
    assert found.last_seen == NOW - timedelta(minutes=1)
    east = timezone(timedelta(hours=9))
    assert found.last_seen.astimezone(east).hour == 20


def test_the_freshest_of_several_namespaces_wins() -> None:
    def lease(namespace: str, renewed: datetime) -> dict[str, object]:
        return {
            "metadata": {"namespace": namespace, "name": "cluster-autoscaler"},
            "spec": {"renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")},
        }

    stale = lease("kube-system", NOW - timedelta(hours=3))
    live = lease("openshift-machine-api", NOW - timedelta(seconds=5))
    namespaces = ("kube-system", "openshift-machine-api")
    found = detect_autoscaler([], [stale, live], NOW, namespaces)
    assert found is not None and found.source == "lease openshift-machine-api/cluster-autoscaler"
    assert detect_autoscaler([], [stale], NOW, namespaces) is None


def test_state_builder_takes_configured_namespaces_and_renamed_objects() -> None:
    renewed = (NOW - timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    builder = StateBuilder("ca-leader", "ca-status", ("kube-system", "ops"))
    builder.add(
        "Lease",
        {"metadata": {"namespace": "ops", "name": "cluster-autoscaler"}, "spec": {"renewTime": renewed}},
    )
    assert builder.build(NOW).autoscaler is None  # not the configured name
    builder.add(
        "Lease", {"metadata": {"namespace": "ops", "name": "ca-leader"}, "spec": {"renewTime": renewed}}
    )
    found = builder.build(NOW).autoscaler
    assert found is not None and found.source == "lease ops/ca-leader"


def _status(namespace: str, updated: datetime) -> dict[str, object]:
    return {
        "metadata": {
            "namespace": namespace,
            "name": "cluster-autoscaler-status",
            "annotations": {
                "cluster-autoscaler.kubernetes.io/last-updated": updated.strftime(
                    "%Y-%m-%d %H:%M:%S +0000 UTC"
                )
            },
        }
    }


def test_a_tenant_namespace_is_no_evidence_and_says_which_line_to_add() -> None:
    """Anyone who may create a ConfigMap in their own namespace could make every apply refuse."""
    found, warnings = judge_autoscaler([_status("team-a", NOW - timedelta(seconds=5))], [], NOW)
    assert found is None
    assert len(warnings) == 1
    assert "configmap team-a/cluster-autoscaler-status" in warnings[0]
    assert "kubernetes.clusterAutoscaler.namespaces (kube-system)" in warnings[0]
    # an old object elsewhere is no news: nothing to say
    assert judge_autoscaler([_status("team-a", NOW - timedelta(days=3))], [], NOW) == (None, ())
    found, _ = judge_autoscaler([_status("kube-system", NOW - timedelta(seconds=5))], [], NOW)
    assert found is not None and found.source == "configmap kube-system/cluster-autoscaler-status"


def test_a_time_far_in_the_future_is_no_evidence() -> None:
    """`last-updated` in 2099 would be "fresh" for ever and stop every apply."""
    found, warnings = judge_autoscaler([_status("kube-system", datetime(2099, 1, 1, tzinfo=UTC))], [], NOW)
    assert found is None
    assert "configmap kube-system/cluster-autoscaler-status is ignored" in warnings[0]
    assert "ahead of ours" in warnings[0]
    lease = {
        "metadata": {"namespace": "kube-system", "name": "cluster-autoscaler"},
        "spec": {"renewTime": (NOW + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")},
    }
    found, warnings = judge_autoscaler([], [lease], NOW)
    assert found is None and "lease kube-system/cluster-autoscaler" in warnings[0]


def test_a_clock_slightly_ahead_is_still_evidence() -> None:
    """cluster-autoscaler's node may run a minute ahead of ours: that is a live autoscaler."""
    found, warnings = judge_autoscaler([_status("kube-system", NOW + timedelta(seconds=60))], [], NOW)
    assert found is not None and warnings == ()
