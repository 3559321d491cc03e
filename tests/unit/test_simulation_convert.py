"""kubectl dumps taken over time into a trace: three hand-written dumps give exactly the arrivals,
departures and groups worked out by hand."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from reconciler.domain.errors import UserError
from reconciler.domain.model import Resources
from reconciler.simulation.convert import convert, dump_paths, dump_time
from reconciler.simulation.trace import read_trace

T0 = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)


def node(name: str, group: str, instance_type: str, zone: str, **extra: Any) -> dict[str, Any]:
    labels = {
        "eks.amazonaws.com/nodegroup": group,
        "node.kubernetes.io/instance-type": instance_type,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        **extra.pop("labels", {}),
    }
    if not extra.pop("provider_zone", False):
        labels["topology.kubernetes.io/zone"] = zone
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"providerID": f"aws:///{zone}/i-0{sum(map(ord, name)):016x}", **extra},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def pod(namespace: str, name: str, uid: str, node_name: str = "", **extra: Any) -> dict[str, Any]:
    owner = extra.pop("owner", {"kind": "ReplicaSet", "name": "web-5d8f", "controller": True})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": "12345",
            "creationTimestamp": "2026-05-30T10:00:00Z",
            "labels": {"app": name.rsplit("-", 1)[0]},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
            "ownerReferences": [owner],
            **extra.pop("metadata", {}),
        },
        "spec": {
            **({"nodeName": node_name} if node_name else {}),
            "containers": [
                {
                    "name": "app",
                    "image": "nginx:1.27",
                    "env": [{"name": "A", "value": "b"}],
                    "resources": {
                        "requests": {"cpu": "250m", "memory": "256Mi"},
                        "limits": {"memory": "1Gi"},
                    },
                }
            ],
            **extra.pop("spec", {}),
        },
        "status": {"phase": extra.pop("phase", "Running" if node_name else "Pending")},
    }


DAEMON = {"kind": "DaemonSet", "name": "aws-node", "controller": True}
STATIC = {"kubernetes.io/config.mirror": "abc"}
BATCH_SPEC = {
    "nodeSelector": {"workload": "batch"},
    "tolerations": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}],
}
JOB = {"kind": "Job", "name": "nightly", "controller": True}
BATCH_NODE = node(
    "b1",
    "batch",
    "m5.2xlarge",
    "us-east-1c",
    labels={"workload": "batch"},
    taints=[
        {"key": "dedicated", "value": "batch", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
    ],
)

# 09:00: two general nodes (zones from the label and from the providerID), web-1 and web-2, and pods
# that come with nodes (a DaemonSet pod, a static pod): not workload.
DUMP_1 = [
    node("n1", "general", "m5.large", "us-east-1a"),
    node("n2", "general", "m5.large", "us-east-1b", provider_zone=True),
    pod("default", "web-1", "u-web-1", "n1"),
    pod("default", "web-2", "u-web-2", "n2"),
    pod("kube-system", "aws-node-x1", "u-ds-1", "n1", owner=DAEMON),
    pod("kube-system", "kube-proxy-n1", "u-static", "n1", metadata={"annotations": STATIC}),
]
# 09:10: a third general node and a batch node; web-2 is gone, web-3 and a batch job came, a
# finished job is not there.
DUMP_2 = [
    node("n1", "general", "m5.large", "us-east-1a"),
    node("n2", "general", "m5.large", "us-east-1b"),
    node("n3", "general", "m5.large", "us-east-1a"),
    BATCH_NODE,
    pod("default", "web-1", "u-web-1", "n1"),
    pod("default", "web-3", "u-web-3", "n3"),
    pod("batch", "job-1", "u-job-1", owner=JOB, spec=BATCH_SPEC),
    pod("batch", "job-0", "u-job-0", "b1", owner=JOB, spec=BATCH_SPEC, phase="Succeeded"),
    pod("kube-system", "aws-node-x1", "u-ds-1", "n1", owner=DAEMON),
]
# 09:30: one general node left; the job finished; web-1 was recreated (same name, new uid).
DUMP_3 = [
    node("n1", "general", "m5.large", "us-east-1a"),
    BATCH_NODE,
    pod("default", "web-1", "u-web-1-again", "n1"),
    pod("default", "web-3", "u-web-3", "n1"),
]


def write_dumps(directory: Path) -> Path:
    directory.mkdir()
    (directory / "dump-2026-06-01T09:00:00Z.json").write_text(json.dumps({"kind": "List", "items": DUMP_1}))
    (directory / "dump-20260601T091000Z.json").write_text(  # basic format, a stream of objects
        "\n".join(json.dumps(item) for item in DUMP_2)
    )
    with (directory / "dump-2026-06-01T11:30:00+02:00.yaml").open("w") as out:  # YAML, another zone
        YAML().dump({"apiVersion": "v1", "kind": "List", "items": DUMP_3}, out)
    (directory / "README.txt").write_text("not a dump")
    return directory


def web_pod(name: str) -> dict[str, Any]:
    """What the trace keeps of a dumped web pod: scheduling, not where it ran or its status."""
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"app": "web"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web-5d8f", "controller": True}],
        },
        "spec": {
            "containers": [{"name": "app", "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}]
        },
    }


JOB_POD = {
    "metadata": {
        "name": "job-1",
        "namespace": "batch",
        "labels": {"app": "job"},
        "ownerReferences": [JOB],
    },
    "spec": {
        "containers": [{"name": "app", "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}],
        **BATCH_SPEC,
    },
}


def test_three_dumps_give_exactly_the_arrivals_departures_and_groups_seen(tmp_path: Path) -> None:
    dumps = dump_paths([write_dumps(tmp_path / "dumps")])
    assert [at for at, _ in dumps] == [T0, T0.replace(minute=10), T0.replace(minute=30)]
    trace = convert(dumps)
    assert trace.start == T0
    assert list(trace.events) == [
        {"kind": "arrive", "at": 0.0, "pod": web_pod("web-1")},
        {"kind": "arrive", "at": 0.0, "pod": web_pod("web-2")},
        {"kind": "depart", "at": 600.0, "namespace": "default", "pod": "web-2"},
        {"kind": "arrive", "at": 600.0, "pod": JOB_POD},
        {"kind": "arrive", "at": 600.0, "pod": web_pod("web-3")},
        {"kind": "depart", "at": 1800.0, "namespace": "batch", "pod": "job-1"},
        {"kind": "depart", "at": 1800.0, "namespace": "default", "pod": "web-1"},
        {"kind": "arrive", "at": 1800.0, "pod": web_pod("web-1")},
    ]
    assert list(trace.groups) == [
        {
            "name": "batch",
            "instanceType": "m5.2xlarge",
            "minSize": 0,
            "maxSize": 1,
            "desired": 0,
            "zones": ["us-east-1c"],
            "labels": {
                "eks.amazonaws.com/nodegroup": "batch",
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m5.2xlarge",
                "workload": "batch",
            },
            "taints": ["dedicated=batch:NoSchedule"],
        },
        {
            "name": "general",
            "instanceType": "m5.large",
            "minSize": 1,
            "maxSize": 3,
            "desired": 2,
            "zones": ["us-east-1a", "us-east-1b"],
            "labels": {
                "eks.amazonaws.com/nodegroup": "general",
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m5.large",
            },
        },
    ]
    trace.write(tmp_path / "trace.jsonl")
    read = read_trace(tmp_path / "trace.jsonl")
    assert len(read.events) == 8 and [g.desired for g in read.groups] == [0, 2]


def test_nodes_without_a_group_label_are_grouped_by_instance_type(tmp_path: Path) -> None:
    plain = node("n9", "x", "c5.xlarge", "us-east-1a")
    del plain["metadata"]["labels"]["eks.amazonaws.com/nodegroup"]
    path = tmp_path / "dump-2026-06-01T09:00:00Z.json"
    path.write_text(json.dumps({"kind": "List", "items": [plain, pod("default", "web-1", "u1", "n9")]}))
    (group,) = convert(dump_paths([path])).groups
    assert (group["name"], group["instanceType"], group["desired"]) == ("c5.xlarge", "c5.xlarge", 1)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("dump-2026-06-01T09:00:00Z.json", T0),
        ("dump-20260601T090000Z.json", T0),
        ("cluster-2026-06-01T11:00:00.123+02:00.yaml", T0),
        ("x-20260601T103000+0130.json", T0),
    ],
)
def test_dump_times_come_from_file_names(name: str, expected: datetime) -> None:
    assert dump_time(Path(name)) == expected


def test_bad_dump_series_are_one_line_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"dump\.json: no time in the file name \(name dumps by when"):
        dump_time(tmp_path / "dump.json")
    with pytest.raises(UserError, match="not a real time"):
        dump_time(tmp_path / "dump-2026-13-01T00:00:00Z.json")
    same = [tmp_path / "a-2026-06-01T09:00:00Z.json", tmp_path / "b-20260601T090000Z.json"]
    for path in same:
        path.write_text(json.dumps({"kind": "List", "items": DUMP_1}))
    with pytest.raises(UserError, match="taken at the same time as"):
        dump_paths(same)
    with pytest.raises(UserError, match="dump not found"):
        dump_paths([tmp_path / "missing-2026-06-01T09:00:00Z.json"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"empty: no \.json or \.yaml dumps in this directory"):
        dump_paths([tmp_path / "empty"])
    pods_only = tmp_path / "pods-2026-06-01T10:00:00Z.json"
    pods_only.write_text(json.dumps({"kind": "List", "items": DUMP_1[2:]}))
    with pytest.raises(
        UserError, match=r"pods-.*\.json: no Node objects \(a dump needs both: kubectl get nodes,pods"
    ):
        convert(dump_paths([pods_only]))
    with pytest.raises(UserError, match="no dumps given"):
        convert([])


def test_pod_level_requests_are_kept_in_the_trace(tmp_path: Path) -> None:
    """A dumped pod asking 2 CPU / 4Gi at pod level (its container says 250m) arrives in the trace
    with those requests, not its container's; pod-level limits are not scheduling and are dropped."""
    level = {"resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "4"}}}
    dump = [
        node("n1", "general", "m5.large", "us-east-1a"),
        pod("default", "big-1", "u-big", "n1", spec=level),
    ]
    (tmp_path / "dump-2026-06-01T09:00:00Z.json").write_text(json.dumps({"kind": "List", "items": dump}))
    trace = convert(dump_paths([tmp_path]))
    [arrival] = trace.events
    assert arrival["pod"]["spec"]["resources"] == {"requests": {"cpu": "2", "memory": "4Gi"}}
    trace.write(tmp_path / "trace.jsonl")
    [read] = read_trace(tmp_path / "trace.jsonl").events
    assert read.pod.requests == Resources({"cpu": 2000, "memory": 4 * 2**30})  # type: ignore[union-attr]


def test_an_object_of_the_wrong_shape_is_a_one_line_error_naming_it(tmp_path: Path) -> None:
    """The snapshot reader hands on an object its schema refuses (issue 28: one object must not fail
    a plan's read) marked as such; a trace must not be built from what is left of it."""
    wrong = json.loads(json.dumps(DUMP_1[2]))
    wrong["spec"]["priority"] = "high"
    path = tmp_path / "dump-2026-06-01T09:00:00Z.json"
    path.write_text(json.dumps({"kind": "List", "items": [*DUMP_1[:2], wrong]}))
    name = f"{wrong['metadata'].get('namespace') or ''}/{wrong['metadata']['name']}".lstrip("/")
    with pytest.raises(UserError, match=rf"dump-.*\.json: Pod {name}: Expected `int`, got `str`"):
        convert(dump_paths([path]))
