"""The fake refuses what a real API server refuses (ValidateConfigMap, ValidateLease, MicroTime
decoding, the official OpenAPI schemas), and a client we did not write — kubectl — lists, gets,
patches and watches through it."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from reconciler.demo.kube_api import FakeKubeAPI
from tests.support import k8s_objects as k


def _post(api: FakeKubeAPI, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        api.url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _refused(call: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(client.ApiException) as raised:
        call()
    return raised.value.status, json.loads(raised.value.body)


def test_configmap_keys_and_size_are_validated(kube_client: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_client)
    status, body = _refused(
        lambda: core.create_namespaced_config_map(
            "default", {"metadata": {"name": "control"}, "data": {"suspend.team a/web": "true"}}
        )
    )
    assert status == 422 and body["reason"] == "Invalid"
    assert "a valid config key must consist of alphanumeric characters" in body["message"]
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "control"}, "data": {"ok-key_1.x": "1"}}
    )
    status, body = _refused(
        lambda: core.patch_namespaced_config_map("control", "default", {"data": {"big": "x" * (1024 * 1024)}})
    )
    assert status == 422 and "Too long: may not be more than 1048576 bytes" in body["message"]
    assert core.read_namespaced_config_map("control", "default").data == {"ok-key_1.x": "1"}  # unchanged


def test_lease_fields_are_validated(kube_api: FakeKubeAPI, kube_client: client.ApiClient) -> None:
    coordination = client.CoordinationV1Api(kube_client)
    # a fraction that is not zero: the client's model (which a dict body goes through) prints a zero
    # one as `+00:00` without digits, which the real server's MicroTime decoder refuses
    good = k.lease("l", holder="a", acquire_time="2026-12-04T03:00:00.250000Z")
    coordination.create_namespaced_lease("kube-system", good)
    for spec, code in (
        ({"leaseDurationSeconds": 0}, 422),
        ({"leaseTransitions": -1}, 422),
        ({"renewTime": "2026-12-04T03:00:00Z"}, 400),  # no fraction: MicroTime cannot parse it
        ({"renewTime": "2026-12-04T03:00:00.123Z"}, 400),  # milliseconds, as JavaScript prints
        ({"holder": "a"}, 422),  # not a LeaseSpec field (strict schema)
    ):
        status, _ = _refused(
            lambda spec=spec: coordination.patch_namespaced_lease("l", "kube-system", {"spec": spec})
        )
        assert status == code, spec
    stored = kube_api.get_object("Lease", "kube-system", "l")
    assert stored is not None and stored["spec"]["leaseDurationSeconds"] == 15  # nothing refused was kept
    assert stored["spec"]["renewTime"].startswith("2026-12-04T03:00:00.250000")


def test_events_and_evictions_follow_the_openapi_schema(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    event = {"metadata": {"name": "e1"}, "involvedObject": {"kind": "Node", "name": "n1"}, "count": "1"}
    status, body = _post(kube_api, "/api/v1/namespaces/default/events", event)
    assert status == 422 and "count" in body["message"]
    kube_api.put(k.pod("web", "shop", node_name="n1"))
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "web", "namespace": "shop"},
        "deleteOptions": {"gracePeriodSeconds": "soon"},
    }
    status, _ = _post(kube_api, "/api/v1/namespaces/shop/pods/web/eviction", eviction)
    assert status == 422
    assert kube_api.get_object("Pod", "shop", "web") is not None


needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")


def _kubectl(
    kubeconfig: Path, tmp_path: Path, *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=check,
    )


@needs_kubectl
def test_kubectl_gets_patches_and_is_refused_as_by_a_real_server(
    kube_api: FakeKubeAPI, kubeconfig_path: Path, tmp_path: Path
) -> None:
    kube_api.put(k.node("n1"))
    got = json.loads(_kubectl(kubeconfig_path, tmp_path, "get", "node", "n1", "-o", "json").stdout)
    assert got["metadata"]["name"] == "n1" and got["kind"] == "Node"
    _kubectl(kubeconfig_path, tmp_path, "cordon", "n1")  # a strategic merge patch
    _kubectl(kubeconfig_path, tmp_path, "label", "node", "n1", "team=web")  # a merge patch
    _kubectl(
        kubeconfig_path,
        tmp_path,
        "patch",
        "node",
        "n1",
        "--type=json",
        "-p",
        '[{"op":"add","path":"/spec/taints","value":[{"key":"k","value":"v","effect":"NoSchedule"}]}]',
    )
    node = kube_api.get_object("Node", None, "n1")
    assert node is not None
    assert node["spec"]["unschedulable"] is True and node["metadata"]["labels"]["team"] == "web"
    assert node["spec"]["taints"] == [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    # the kill switch's key for a group named with a space: refused as by a real server
    refused = _kubectl(
        kubeconfig_path,
        tmp_path,
        "create",
        "configmap",
        "control",
        "--from-literal=suspend.team a/web=true",
        check=False,
    )
    assert refused.returncode != 0 and "a valid config key must consist of" in refused.stderr
    _kubectl(kubeconfig_path, tmp_path, "create", "configmap", "control", "--from-literal=suspend=true")
    listed = json.loads(_kubectl(kubeconfig_path, tmp_path, "get", "configmaps", "-A", "-o", "json").stdout)
    assert [c["metadata"]["name"] for c in listed["items"]] == ["control"]


@needs_kubectl
def test_kubectl_watches_through_the_fake(
    kube_api: FakeKubeAPI, kubeconfig_path: Path, tmp_path: Path
) -> None:
    kube_api.put(k.pod("first", "shop"))
    watcher = subprocess.Popen(
        [
            "kubectl",
            "--kubeconfig",
            str(kubeconfig_path),
            "--cache-dir",
            str(tmp_path / "cache"),
            "get",
            "pods",
            "-n",
            "shop",
            "--watch",
            "--output-watch-events",
            "-o",
            "json",
            "--request-timeout=20s",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watcher.stdout is not None
        seen = []
        decoder = json.JSONDecoder()
        buffer = ""
        while len(seen) < 2:
            line = watcher.stdout.readline()
            assert line, watcher.stderr.read() if watcher.stderr else "kubectl ended"
            buffer += line
            try:
                event, end = decoder.raw_decode(buffer.strip())
            except json.JSONDecodeError:
                continue
            buffer = buffer.strip()[end:]
            seen.append((event["type"], event["object"]["metadata"]["name"]))
            if len(seen) == 1:
                kube_api.put(k.pod("second", "shop"))
        assert seen == [("ADDED", "first"), ("ADDED", "second")]
    finally:
        watcher.kill()
        watcher.wait()


def test_quantities_past_int64_are_accepted_as_by_a_real_server(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    """kube-apiserver parses `1e33` (apimachinery's ParseQuantity keeps it as an inf.Dec; only
    Value() overflows) and serves it back; ResourceQuota does not cover DaemonSets. The fake must
    accept it too, or the tests of issue 28 would plant what no client could write."""
    pod = k.pod("greedy", "team-a", requests={"memory": "1e33", "cpu": "1e20"})
    daemonset = k.daemonset("agent", "team-a", requests={"memory": "1e33"})
    status, created = _post(kube_api, "/api/v1/namespaces/team-a/pods", pod)
    assert status == 201, created
    status, created = _post(kube_api, "/apis/apps/v1/namespaces/team-a/daemonsets", daemonset)
    assert status == 201, created
    served = client.CoreV1Api(kube_client).read_namespaced_pod("greedy", "team-a")
    assert served.spec.containers[0].resources.requests["memory"] == "1e33"


def test_a_quantity_no_server_can_parse_is_a_bad_request(kube_api: FakeKubeAPI) -> None:
    """As kube-apiserver's decoder: `cpu: lots` cannot be handled as a Pod (400), on create and on
    update alike; such a pod reaches a reader only through a dump or `put` (the tests' planting)."""
    status, answer = _post(
        kube_api, "/api/v1/namespaces/team-b/pods", k.pod("typo", "team-b", requests={"cpu": "lots"})
    )
    assert status == 400, answer
    assert "cannot be handled as a Pod: quantities must match the regular expression" in answer["message"]
    status, answer = _post(
        kube_api,
        "/apis/apps/v1/namespaces/team-b/daemonsets",
        k.daemonset("agent", "team-b", requests={"memory": "1 Gi"}),
    )
    assert status == 400, answer


@pytest.mark.parametrize(
    ("kind", "create"),
    [
        (
            "Lease",
            lambda api, name: client.CoordinationV1Api(api).create_namespaced_lease(
                "kube-system", {"metadata": {"name": name}, "spec": {}}
            ),
        ),
        (
            "ConfigMap",
            lambda api, name: client.CoreV1Api(api).create_namespaced_config_map(
                "kube-system", {"metadata": {"name": name}, "data": {}}
            ),
        ),
        (
            "Event",
            lambda api, name: client.CoreV1Api(api).create_namespaced_event(
                "default",
                {
                    "metadata": {"name": name},
                    "involvedObject": {"kind": "Node", "name": "node-a"},
                    "reason": "Test",
                    "message": "m",
                    "type": "Normal",
                },
            ),
        ),
    ],
)
def test_names_are_dns_subdomains_as_the_real_server_checks(
    kube_client: client.ApiClient, kind: str, create: Any
) -> None:
    """ValidateObjectMeta with NameIsDNSSubdomain (ValidateLease, ValidateConfigMapName, events)."""
    for bad in ("asg-reconciler-apply-Prod_EKS", "ends-with-dash-", "a..b", "x" * 254):
        status, body = _refused(lambda bad=bad: create(kube_client, bad))
        assert status == 422 and body["reason"] == "Invalid", (kind, bad, body)
        assert "metadata.name: Invalid value" in body["message"], body["message"]
    create(kube_client, "asg-reconciler-apply-prod.eks-1")  # dots are fine in a subdomain


def test_namespace_names_are_dns_labels(kube_client: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_client)
    status, body = _refused(lambda: core.create_namespace({"metadata": {"name": "team.a"}}))
    assert status == 422 and "RFC 1123 label" in body["message"]
    core.create_namespace({"metadata": {"name": "team-a"}})
