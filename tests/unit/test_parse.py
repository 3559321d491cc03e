"""Raw Kubernetes objects into the model: requests arithmetic, scheduling fields, volumes."""

import json
from datetime import UTC, datetime

import pytest

from reconciler.domain.model import Node, Resources, instance_id_from_provider_id
from reconciler.kube.autoscaler import detect_autoscaler
from reconciler.kube.parse import ObjectReader, Unreadable
from reconciler.kube.schema import item_decoder, list_decoder


def container(cpu: str = "", memory: str = "", **extra: object) -> dict:  # type: ignore[type-arg]
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    return {"name": "c", "resources": {"requests": requests}, **extra}


def pod(**spec: object) -> dict:  # type: ignore[type-arg]
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def test_requests_are_max_of_sum_and_largest_init_plus_overhead() -> None:
    reader = ObjectReader()
    parsed = reader.pod(
        pod(
            containers=[container("100m", "100Mi"), container("200m", "50Mi")],
            initContainers=[container("500m", "10Mi"), container("50m", "400Mi")],
            overhead={"cpu": "10m", "memory": "1Mi"},
        )
    )
    assert parsed.requests == Resources({"cpu": 510, "memory": 401 * 2**20})


def test_sidecar_init_containers_add_to_the_app() -> None:
    parsed = ObjectReader().pod(
        pod(
            containers=[container("100m")],
            initContainers=[container("1"), container("200m", restartPolicy="Always"), container("250m")],
        )
    )
    # max(app 100m + sidecar 200m, init 1 (before sidecar), init 250m + sidecar 200m)
    assert parsed.requests.cpu == 1000


def test_extended_resources_and_gpu() -> None:
    parsed = ObjectReader().pod(
        pod(
            containers=[
                {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "2", "example.com/foo": "3"}}}
            ]
        )
    )
    assert parsed.requests.get("nvidia.com/gpu") == 2
    assert parsed.requests.get("example.com/foo") == 3


def test_scheduling_fields() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["a"]}]}]
            }
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        },
    }
    parsed = ObjectReader().pod(
        pod(
            containers=[container("1", ports=[{"containerPort": 80, "hostPort": 8080}])],
            nodeSelector={"disk": "ssd"},
            affinity=affinity,
            tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
            topologySpreadConstraints=[
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                }
            ],
            volumes=[
                {"name": "scratch", "emptyDir": {}},
                {"name": "shm", "emptyDir": {"medium": "Memory"}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
                {"name": "logs", "hostPath": {"path": "/var/log"}},
            ],
        )
    )
    s = parsed.scheduling
    assert s.node_selector == (("disk", "ssd"),)
    assert s.required_node_affinity[0].match_expressions[0].values == ("a",)
    assert s.pod_anti_affinity[0].topology_key == "kubernetes.io/hostname"
    assert s.tolerations[0].effect == "NoSchedule"
    assert s.host_ports[0].port == 8080
    assert s.topology_spread[0].when_unsatisfiable == "DoNotSchedule"
    assert parsed.volumes.local_storage == ("scratch", "logs")
    assert parsed.volumes.pvc_claims == ("data-0",)


def test_identical_specs_are_shared() -> None:
    reader = ObjectReader()
    spec = {"containers": [container("1")], "tolerations": [{"operator": "Exists"}]}
    a, b = reader.pod(pod(**spec)), reader.pod(pod(**spec))
    assert a.scheduling is b.scheduling
    assert a.requests is b.requests


def test_deletion_and_grace_period() -> None:
    reader = ObjectReader()
    alive = reader.pod(pod(containers=[]))
    assert alive.deleting_since is None and alive.grace_period_seconds == 30  # the API's default
    raw = pod(containers=[], terminationGracePeriodSeconds=0)
    raw["metadata"]["deletionTimestamp"] = "2026-01-01T12:00:00Z"
    deleting = reader.pod(raw)
    assert deleting.deleting_since == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert deleting.grace_period_seconds == 0  # zero is a value, not "unset"
    assert not deleting.is_long_terminating(datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC))
    assert deleting.is_long_terminating(datetime(2026, 1, 1, 12, 0, 31, tzinfo=UTC))


def test_nominated_node_of_an_unbound_pod() -> None:
    """status.nominatedNodeName survives the pruned decoding (live listing, JSON snapshots) and plain
    dicts (YAML snapshots); a bound pod's is not kept (CA goes by spec.nodeName first)."""
    waiting = pod(containers=[])
    waiting["status"]["nominatedNodeName"] = "n1"
    bound = pod(containers=[], nodeName="n2")
    bound["status"]["nominatedNodeName"] = "n1"
    listed = list_decoder("Pod").decode(json.dumps({"kind": "PodList", "items": [waiting, bound]}))["items"]
    for source in ([waiting, bound], [item_decoder("Pod").decode(json.dumps(waiting)), bound], listed):
        reader = ObjectReader()
        assert [reader.pod(raw).nominated_node for raw in source] == ["n1", ""]
    assert ObjectReader().pod(pod(containers=[])).nominated_node == ""


def test_only_relevant_pod_annotations_are_kept() -> None:
    raw = pod(containers=[])
    raw["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": "{...}" * 100,
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
    }
    assert dict(ObjectReader().pod(raw).annotations) == {
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"
    }


def test_provider_id_mapping() -> None:
    assert instance_id_from_provider_id("aws:///us-east-1a/i-08736224042c4ee75") == "i-08736224042c4ee75"
    assert instance_id_from_provider_id("aws://us-east-1a/i-0abc") == "i-0abc"
    assert instance_id_from_provider_id("gce://p/z/n") == ""
    assert instance_id_from_provider_id("aws:///us-east-1a/fargate-ip-1") == ""
    node = Node(
        "n", {"topology.kubernetes.io/zone": "z9"}, (), Resources(), Resources(), True, None, False, "", None
    )
    assert node.zone == "z9" and node.instance_id == ""


def test_cluster_autoscaler_detection() -> None:
    now = datetime(2026, 1, 2, 12, 0, tzinfo=UTC)
    fresh_cm = {
        "metadata": {
            "namespace": "kube-system",
            "annotations": {
                "cluster-autoscaler.kubernetes.io/last-updated": "2026-01-02 11:58:00.1 +0000 UTC"
            },
        }
    }
    stale_cm = {
        "metadata": {"namespace": "kube-system"},
        "data": {"status": "Cluster-autoscaler status at 2026-01-01 11:58:00.1 +0000 UTC:\n..."},
    }
    lease = {"metadata": {"namespace": "kube-system"}, "spec": {"renewTime": "2026-01-02T11:59:30.000000Z"}}
    found = detect_autoscaler([fresh_cm], [], now)
    assert found is not None and "configmap" in found.source
    assert detect_autoscaler([stale_cm], [], now) is None
    found = detect_autoscaler([stale_cm], [lease], now)
    assert found is not None and "lease" in found.source
    assert detect_autoscaler([], [], now) is None


def test_a_field_of_the_wrong_kind_names_itself_briefly() -> None:
    """A dump's `priority: high` is named with its field, and a long value is not repeated whole."""
    with pytest.raises(Unreadable, match=r"^spec\.priority: 'x+\.\.\. is not an integer$"):
        ObjectReader().pod({"metadata": {"name": "p"}, "spec": {"priority": "x" * 1000}})
