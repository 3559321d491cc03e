"""cluster-autoscaler found wherever it runs, its times read with their UTC offsets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from reconciler.kube.autoscaler import detect_autoscaler, go_time
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
    found = detect_autoscaler([configmap], [], NOW)
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
    found = detect_autoscaler([], [stale, live], NOW)
    assert found is not None and found.source == "lease openshift-machine-api/cluster-autoscaler"
    assert detect_autoscaler([], [stale], NOW) is None


def test_state_builder_takes_any_namespace_and_renamed_objects() -> None:
    renewed = (NOW - timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    builder = StateBuilder("ca-leader", "ca-status")
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
