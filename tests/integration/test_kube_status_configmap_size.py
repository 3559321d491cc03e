"""The status ConfigMap stays under the API server's 1 MiB (issue 19): cut, as cluster-autoscaler cuts
its status, to 1,000,000 bytes in all, saying so — against the fake API, which answers 422 to a
ConfigMap over 1 MiB as the real server does."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import yaml
from kubernetes import client

from reconciler.demo.kube_api import FakeKubeAPI
from reconciler.kube.status_configmap import MAX_STATUS_BYTES, StatusConfigMap, fit
from reconciler.telemetry.status import render_status

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def data(kube_api: FakeKubeAPI) -> dict[str, str]:
    found = kube_api.get_object("ConfigMap", "kube-system", "asg-reconciler-status")
    assert found is not None
    return dict(found["data"])


def size(values: dict[str, str]) -> int:
    return sum(len(v.encode()) for v in values.values())


def big_document(groups: int, busy: set[int]) -> dict[str, Any]:
    """A status document with `groups` node groups, those in `busy` scaling up."""
    return {
        "cluster": "prod",
        "autoscalerStatus": "Running",
        "nodeGroups": [
            {
                "name": f"group-{i:05d}",
                "action": "scale-up" if i in busy else "none",
                "scaleUp": {"status": "Needed" if i in busy else "NotNeeded"},
                "scaleDown": {"status": "NoCandidates", "removeInstances": []},
                "minSize": 0,
                "maxSize": 100,
                "current": 3,
                "target": 4 if i in busy else 3,
                "warnings": [f"warning {i}: " + "x" * 1_000],
            }
            for i in range(groups)
        ],
    }


def test_a_status_over_the_cap_is_cut_and_says_so(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    text = "".join(f"line {i:07d}: {'é' * 20}\n" for i in range(30_000))  # ~1.5 MB
    assert StatusConfigMap(kube_client, "kube-system").publish(text, T0) is True
    written = data(kube_api)["status"]
    assert len(written.encode()) <= MAX_STATUS_BYTES == 1_000_000
    assert written.startswith("line 0000000: ") and "truncated" in written.splitlines()[-1]
    assert all(line.startswith("line ") for line in written.splitlines()[:-1])  # whole lines only


def test_the_split_deployments_two_keys_fit_together(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    half = "".join(f"row {i:06d}\n" for i in range(70_000))  # ~770 KB each
    assert StatusConfigMap(kube_client, "kube-system", key="status-plan").publish(half, T0) is True
    assert StatusConfigMap(kube_client, "kube-system", key="status-apply").publish(half, T0) is True
    both = data(kube_api)
    assert both["status-plan"] == half
    assert "truncated" in both["status-apply"] and size(both) <= MAX_STATUS_BYTES


def test_a_rendered_document_drops_quiet_node_groups_first_and_stays_yaml(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    document = big_document(1_500, busy={17, 1_321})
    assert len(render_status(document).encode()) > 1_048_576  # a real server would refuse it
    assert StatusConfigMap(kube_client, "kube-system").publish(lambda room: render_status(document, room), T0)
    written = data(kube_api)["status"]
    assert len(written.encode()) <= MAX_STATUS_BYTES
    shown = yaml.safe_load(written)
    names = [g["name"] for g in shown["nodeGroups"]]
    assert "group-00017" in names and "group-01321" in names  # what is happening is kept
    assert names == sorted(names) and 500 < len(names) < 1_500
    assert shown["truncated"].startswith(f"{len(names)} of 1500 node groups shown")
    assert len(written.encode()) > MAX_STATUS_BYTES - 5_000  # left out only what had to go


def test_fit_keeps_what_fits_and_cuts_at_a_line() -> None:
    assert fit("a: 1\n", 100) == "a: 1\n"
    cut = fit("a: 1\nb: 2\nc: 3\n" + "d" * 200 + "\n", 120)
    assert cut.startswith("a: 1\nb: 2\nc: 3\n") and cut.endswith("\n") and len(cut.encode()) <= 120
    assert "truncated" in cut
    assert len(fit("x" * 500, 10).encode()) <= 10
