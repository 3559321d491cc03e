"""Every snapshot format kubectl prints reads into the same ClusterState."""

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from reconciler.domain.errors import UserError
from reconciler.domain.model import ClusterState
from reconciler.kube.snapshot import read_snapshot
from tests.data import EKS_T3SMALL

FIXTURE = EKS_T3SMALL
NOW = datetime(2026, 1, 2, 21, 0, tzinfo=UTC)


def fixture_lists() -> dict[str, dict]:  # type: ignore[type-arg]
    return {f.stem: json.loads(f.read_text()) for f in sorted(FIXTURE.glob("*.json"))}


def summary(state: ClusterState) -> tuple:  # type: ignore[type-arg]
    return (state.nodes, tuple(sorted(state.pods, key=lambda p: p.key)), state.daemonsets)


def test_fixture_directory_reads_cleanly() -> None:
    state = read_snapshot(FIXTURE, NOW)
    assert [n.name for n in state.nodes] == ["ip-10-0-10-170.ec2.internal", "ip-10-0-20-143.ec2.internal"]
    node = state.nodes[0]
    assert node.instance_id == "i-08736224042c4ee75"
    assert node.zone == "us-east-1a"
    assert node.ready
    assert node.allocatable.cpu == 1930
    assert node.allocatable.memory == 1471840 * 1024
    assert node.allocatable.pods == 11
    assert node.capacity.memory == 1959264 * 1024
    assert len(state.pods) == 6
    coredns = [p for p in state.pods if p.name.startswith("coredns")]
    assert coredns[0].requests.cpu == 100 and coredns[0].requests.memory == 70 * 2**20
    assert coredns[0].owner is not None and coredns[0].owner.kind == "ReplicaSet"
    assert sum(p.is_daemonset for p in state.pods) == 4
    assert {d.name for d in state.daemonsets} == {"aws-node", "kube-proxy"}


def test_typed_list_files_equal_kubectl_list(tmp_path: Path) -> None:
    lists = fixture_lists()
    items = []
    for document in lists.values():
        kind = document["kind"].removesuffix("List")
        items += [{"kind": kind, "apiVersion": document["apiVersion"], **item} for item in document["items"]]
    combined = tmp_path / "all.json"
    combined.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    assert summary(read_snapshot(combined, NOW)) == summary(read_snapshot(FIXTURE, NOW))


def test_multi_document_json_stream(tmp_path: Path) -> None:
    stream = tmp_path / "dump.json"
    stream.write_text("\n".join(json.dumps(d, indent=4) for d in fixture_lists().values()))
    assert summary(read_snapshot(stream, NOW)) == summary(read_snapshot(FIXTURE, NOW))


def test_yaml_stream(tmp_path: Path) -> None:
    stream = tmp_path / "dump.yaml"
    yaml = YAML(typ="safe", pure=True)
    with stream.open("w") as handle:
        yaml.dump_all(list(fixture_lists().values()), handle)
    assert summary(read_snapshot(stream, NOW)) == summary(read_snapshot(FIXTURE, NOW))


def test_single_object_and_bare_array(tmp_path: Path) -> None:
    nodes = fixture_lists()["nodes"]["items"]
    single = tmp_path / "node.json"
    single.write_text(json.dumps({"kind": "Node", "apiVersion": "v1", **nodes[0]}))
    assert len(read_snapshot(single, NOW).nodes) == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"kind": "PodList", "items": [', "not valid JSON"),
        ('{"kind": "List", "items": []}\n{oops', "not valid JSON"),
        ("key: [unclosed", "not a kubectl snapshot"),
        ('{"metadata": {"name": "x"}}', "without `kind`"),
        ("42", "expected Kubernetes objects"),
        ("", "no Kubernetes objects"),
    ],
)
def test_malformed_snapshot_is_one_line_user_error(tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    with pytest.raises(UserError) as info:
        read_snapshot(bad, NOW)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    assert str(bad) in str(info.value)


def test_missing_snapshot(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="snapshot file not found"):
        read_snapshot(tmp_path / "nope.json", NOW)


def test_terminal_pods_left_out(tmp_path: Path) -> None:
    pods = [
        {"metadata": {"name": n, "namespace": "d"}, "spec": {"containers": []}, "status": {"phase": phase}}
        for n, phase in [("a", "Running"), ("b", "Succeeded"), ("c", "Failed"), ("d", "Pending")]
    ]
    path = tmp_path / "pods.json"
    path.write_text(json.dumps({"kind": "PodList", "apiVersion": "v1", "items": pods}))
    assert sorted(p.name for p in read_snapshot(path, NOW).pods) == ["a", "d"]


NAMESPACES = [
    {"metadata": {"name": "shop", "labels": {"kubernetes.io/metadata.name": "shop", "team": "shop"}}},
    {"metadata": {"name": "default", "labels": {"kubernetes.io/metadata.name": "default"}}},
    {"metadata": {"name": "bare"}},
]
EXPECTED_NAMESPACES = {
    "bare": {},
    "default": {"kubernetes.io/metadata.name": "default"},
    "shop": {"kubernetes.io/metadata.name": "shop", "team": "shop"},
}


def test_a_snapshot_without_namespaces_leaves_them_unread() -> None:
    state = read_snapshot(FIXTURE, NOW)  # `kubectl cluster-info dump` prints no Namespace objects
    assert state.namespaces is None
    assert state.warnings == ()


def test_namespaces_in_a_kubectl_list(tmp_path: Path) -> None:
    """`kubectl get nodes,pods,namespaces,... -o json`: items carry their kind."""
    items = [{"kind": "Namespace", "apiVersion": "v1", **n} for n in NAMESPACES]
    items += [{"kind": "Node", "apiVersion": "v1", **n} for n in fixture_lists()["nodes"]["items"]]
    path = tmp_path / "all.json"
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    state = read_snapshot(path, NOW)
    assert state.namespaces == EXPECTED_NAMESPACES
    assert list(state.namespaces) == ["bare", "default", "shop"]  # one order whatever the file's
    assert len(state.nodes) == 2


def test_namespaces_as_a_typed_list_in_a_dump_directory(tmp_path: Path) -> None:
    """`kubectl get namespaces -o json > dump/namespaces.json` beside a cluster-info dump."""
    for source in FIXTURE.glob("*.json"):
        (tmp_path / source.name).write_bytes(source.read_bytes())
    typed = {"kind": "NamespaceList", "apiVersion": "v1", "items": NAMESPACES}
    (tmp_path / "namespaces.json").write_text(json.dumps(typed))
    state = read_snapshot(tmp_path, NOW)
    assert state.namespaces == EXPECTED_NAMESPACES
    assert summary(state) == summary(read_snapshot(FIXTURE, NOW))


def test_namespaces_in_yaml(tmp_path: Path) -> None:
    """`kubectl get namespaces -o yaml` (read without the pruned JSON schemas)."""
    document = {"apiVersion": "v1", "kind": "List", "items": [{"kind": "Namespace", **n} for n in NAMESPACES]}
    stream = tmp_path / "namespaces.yaml"
    with stream.open("w") as handle:
        YAML(typ="safe", pure=True).dump(document, handle)
    assert read_snapshot(stream, NOW).namespaces == EXPECTED_NAMESPACES


@pytest.mark.parametrize(
    ("pods", "problem"),
    [
        (
            '{"metadata":{"name":"bad","namespace":"team-a"},"spec":{"containers":'
            '[{"name":"app","resources":{"requests":{"cpu":"lots"}}}]},"status":{"phase":"Running"}}',
            "spec.containers[app].resources.requests.cpu: 'lots' is not a Kubernetes quantity",
        ),
        (
            '{"metadata":{"name":"bad","namespace":"team-a"},"spec":{"priority":"high"}}',
            "Expected `int`, got `str` - at `$.spec.priority`",
        ),
    ],
)
def test_an_unreadable_object_in_a_snapshot_is_left_out_with_a_warning(
    tmp_path: Path, pods: str, problem: str
) -> None:
    """A tenant's object is input, never a reason to stop (issue 28): until then one pod the reader
    could not read failed the whole snapshot, and `plan --snapshot` exited 2."""
    good = '{"metadata":{"name":"good","namespace":"team-b"},"spec":{"containers":[{"name":"app"}]}}'
    dump = tmp_path / "dump.json"
    dump.write_text(f'{{"kind":"PodList","items":[{pods},{good}]}}')
    state = read_snapshot(dump, NOW)
    assert [p.key for p in state.pods] == ["team-b/good"]
    assert len(state.warnings) == 1
    assert state.warnings[0].startswith(f"pod team-a/bad left out of the plan: it cannot be read: {problem}")
