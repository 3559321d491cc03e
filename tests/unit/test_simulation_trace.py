"""The trace format: what reading gives the simulator, the write/read round trip, and that every
mistake is one line naming the file, the line, the field and the fix."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from reconciler.domain.errors import UserError
from reconciler.domain.model import OwnerRef, Resources, Taint, Toleration
from reconciler.simulation.trace import (
    Arrival,
    Departure,
    TraceGroup,
    read_groups,
    read_trace,
    trace_lines,
    write_trace,
)

START = datetime(2026, 6, 1, tzinfo=UTC)
GROUP: dict[str, Any] = {
    "name": "general",
    "instanceType": "m5.large",
    "minSize": 1,
    "maxSize": 20,
    "desired": 3,
    "zones": ["us-east-1a"],
}
CLUSTER = {"kind": "cluster", "start": "2026-06-01T00:00:00Z", "groups": [GROUP]}


def pod(name: str, cpu: str = "500m", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": cpu}}}], **spec},
    }


def arrive(at: Any, name: str = "web-1", **extra: Any) -> dict[str, Any]:
    return {"kind": "arrive", "at": at, "pod": pod(name), **extra}


def depart(at: Any, name: str = "web-1") -> dict[str, Any]:
    return {"kind": "depart", "at": at, "namespace": "default", "pod": name}


def write_lines(path: Path, *documents: Any) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in documents))
    return path


def test_reading_gives_groups_pending_pods_from_the_project_parser_and_departures(tmp_path: Path) -> None:
    batch_group = {**GROUP, "name": "batch", "minSize": 0, "desired": 0, "instanceType": "m5.2xlarge"}
    batch_group |= {
        "labels": {"workload": "batch"},
        "taints": ["dedicated=batch:NoSchedule", "spot:NoExecute"],
    }
    job = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "job-1",
            "namespace": "jobs",
            "uid": "from-the-dump",
            "labels": {"app": "job"},
            "ownerReferences": [{"kind": "Job", "name": "nightly", "controller": True}],
        },
        "spec": {
            "nodeName": "ip-10-0-0-1",  # ignored: a trace pod arrives Pending
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "2", "memory": "2Gi"}}}],
            "tolerations": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}],
            "nodeSelector": {"workload": "batch"},
            "priority": 100,
        },
        "status": {"phase": "Running"},
    }
    path = write_lines(
        tmp_path / "t.jsonl",
        {**CLUSTER, "groups": [GROUP, batch_group]},
        arrive(120.0),
        {"kind": "arrive", "at": 120, "pod": job, "runFor": 1800},
        depart(3600.5),
    )
    trace = read_trace(path)
    assert trace.start == START
    assert trace.groups == (
        TraceGroup("general", "m5.large", 1, 20, 3, ("us-east-1a",), {}, ()),
        TraceGroup(
            "batch",
            "m5.2xlarge",
            0,
            20,
            0,
            ("us-east-1a",),
            {"workload": "batch"},
            (Taint("dedicated", "batch", "NoSchedule"), Taint("spot", "", "NoExecute")),
        ),
    )
    web, batch, gone = trace.events
    assert isinstance(web, Arrival) and isinstance(batch, Arrival)
    assert (web.at, web.run_for, web.pod.namespace, web.pod.name) == (120.0, None, "default", "web-1")
    assert web.pod.requests == Resources.of(cpu=500)
    assert batch.run_for == 1800.0
    assert batch.pod.node_name == "" and batch.pod.phase == "Pending"
    assert batch.pod.created == START + timedelta(seconds=120)
    assert batch.pod.requests == Resources.of(cpu=2000, memory=2 * 2**30)
    assert batch.pod.owner == OwnerRef("Job", "nightly", True)
    assert batch.pod.priority == 100
    assert batch.pod.scheduling.node_selector == (("workload", "batch"),)
    assert batch.pod.scheduling.tolerations == (Toleration("dedicated", "Equal", "batch", "NoSchedule"),)
    assert batch.pod.uid not in ("", "from-the-dump")
    assert gone == Departure(3600.5, "default", "web-1")
    assert trace.end_at == 3600.5


def test_uids_are_stable_across_reads_and_differ_for_a_name_that_comes_back(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.jsonl", CLUSTER, arrive(1), depart(2), arrive(3))
    first, _, again = read_trace(path).events
    assert isinstance(first, Arrival) and isinstance(again, Arrival)
    assert first.pod.uid != again.pod.uid
    assert [e.pod.uid for e in read_trace(path).events if isinstance(e, Arrival)] == [
        first.pod.uid,
        again.pod.uid,
    ]


def test_write_then_read_round_trip_sorts_events_by_time(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    events = [depart(50, "web-1"), arrive(10, "web-1"), arrive(10, "web-2", runFor=60)]
    write_trace(path, START, [GROUP], events)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == [CLUSTER, arrive(10, "web-1"), arrive(10, "web-2", runFor=60), depart(50, "web-1")]
    trace = read_trace(path)
    assert [(type(e).__name__, e.at) for e in trace.events] == [
        ("Arrival", 10),
        ("Arrival", 10),
        ("Departure", 50),
    ]
    assert trace_lines(START, [GROUP], events) == path.read_text().splitlines()


def test_write_refuses_what_read_would_refuse_and_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    with pytest.raises(UserError) as caught:
        write_trace(path, START, [GROUP], [arrive(10), depart(20, "web-9")])
    assert str(caught.value) == (
        f"{path}:3: depart.pod: no pod default/web-9 is there at 20s (it never arrived or already departed)"
    )
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(UserError, match="start has no time zone"):
        write_trace(path, datetime(2026, 6, 1), [GROUP], [])


P = pod("web-1")
BAD = [
    ([CLUSTER, arrive(-1)], 2, "arrive.at: -1 is out of range (use a value at least 0)"),
    (
        [CLUSTER, arrive("soon")],
        2,
        'arrive.at: "soon" is not of type number (must be a number of seconds >= 0',
    ),
    ([CLUSTER, {"kind": "arrive", "pod": P}], 2, "arrive: 'at' is a required property (add it)"),
    ([CLUSTER, arrive(1, runfor=5)], 2, "arrive: unknown key 'runfor' (did you mean runFor?)"),
    ([CLUSTER, arrive(1, runFor=0)], 2, "arrive.runFor: 0 is out of range (use a value at least 1)"),
    ([CLUSTER, {"kind": "arrival", "at": 1}], 2, 'kind: "arrival" is not one of cluster, arrive, depart'),
    ([CLUSTER, {"at": 1}], 2, "'kind' is a required property (add it)"),
    ([CLUSTER, [1]], 2, 'expected a JSON object such as {"kind": ...}, found an array'),
    ([arrive(1)], 1, "kind: the first line must be the cluster line"),
    (
        [CLUSTER, CLUSTER],
        2,
        "kind: only the first line may be a cluster line (make this one arrive or depart)",
    ),
    (
        [CLUSTER, arrive(10), depart(5)],
        3,
        "depart.at: 5 is before the previous line's 10 (sort the lines after the first by at)",
    ),
    (
        [CLUSTER, depart(5)],
        2,
        "depart.pod: no pod default/web-1 is there at 5s (it never arrived or already departed)",
    ),
    (
        [CLUSTER, arrive(1), depart(2), depart(3)],
        4,
        "depart.pod: no pod default/web-1 is there at 3s (it never arrived or already departed)",
    ),
    ([CLUSTER, arrive(10), arrive(11)], 3, "arrive.pod.metadata.name: default/web-1 is still there"),
    (
        [CLUSTER, arrive(10, runFor=5), depart(20)],
        3,
        "depart.pod: default/web-1 has runFor and leaves by itself (remove this line or its runFor)",
    ),
    (
        [CLUSTER, arrive(10, runFor=5), arrive(20)],
        3,
        "arrive.pod.metadata.name: default/web-1 arrived earlier with runFor",
    ),
    (
        [CLUSTER, {"kind": "arrive", "at": 1, "pod": pod("web-1", cpu="lots")}],
        2,
        'arrive.pod.spec.containers.0.resources.requests.cpu: "lots" is not valid (use a Kubernetes quantity',
    ),
    (
        [CLUSTER, {"kind": "arrive", "at": 1, "pod": pod("Web_1")}],
        2,
        'arrive.pod.metadata.name: "Web_1" is not valid (use a pod name',
    ),
    (
        [CLUSTER, {"kind": "arrive", "at": 1, "pod": {"metadata": {"name": "x"}, "spec": {}}}],
        2,
        "arrive.pod.spec: 'containers' is a required property (add it)",
    ),
    (
        [{**CLUSTER, "groups": [{**GROUP, "desired": 30}]}],
        1,
        "cluster.groups.0.desired: 30 is not within minSize 1 and maxSize 20 (use minSize <= desired",
    ),
    (
        [{**CLUSTER, "groups": [GROUP, GROUP]}],
        1,
        "cluster.groups.1.name: 'general' is listed twice (give each group its own name)",
    ),
    (
        [{**CLUSTER, "groups": [{**GROUP, "instanceType": "large"}]}],
        1,
        'cluster.groups.0.instanceType: "large" is not valid (use an EC2 instance type, e.g. m5.large)',
    ),
    (
        [{**CLUSTER, "start": "2026-06-01"}],
        1,
        'cluster.start: "2026-06-01" is not valid (use an RFC 3339 time',
    ),
    (
        [{**CLUSTER, "start": "2026-13-01T00:00:00Z"}],
        1,
        "cluster.start: '2026-13-01T00:00:00Z' is not a real time",
    ),
    (
        [{**CLUSTER, "groups": [{**GROUP, "taints": ["gpu"]}]}],
        1,
        'cluster.groups.0.taints.0: "gpu" is not valid (use key=value:Effect or key:Effect',
    ),
    ([{**CLUSTER, "groups": []}], 1, "cluster.groups: [] is not valid (list the node groups, e.g."),
]


@pytest.mark.parametrize(("documents", "line", "message"), BAD, ids=[m[:40] for _, _, m in BAD])
def test_every_mistake_is_one_line_naming_file_line_field_and_fix(
    tmp_path: Path, documents: list[Any], line: int, message: str
) -> None:
    path = write_lines(tmp_path / "trace.jsonl", *documents)
    with pytest.raises(UserError) as caught:
        read_trace(path)
    text = str(caught.value)
    assert "\n" not in text
    assert text.startswith(f"{path}:{line}: {message}")


def test_bad_json_empty_file_missing_file_and_bad_encoding(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text(json.dumps(CLUSTER) + '\n\n{"kind": "arrive", "at": 1,\n')
    with pytest.raises(
        UserError, match=rf"^{path}:3: not valid JSON: .* \(column 28; one JSON object per line\)$"
    ):
        read_trace(path)
    path.write_text("\n")
    with pytest.raises(UserError, match=rf"^{path}: empty trace \(the first line must be the cluster line"):
        read_trace(path)
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(UserError, match=rf"^{path}: not UTF-8 text at byte 0"):
        read_trace(path)
    with pytest.raises(UserError, match="trace file not found"):
        read_trace(tmp_path / "missing.jsonl")


def test_the_documented_example_is_a_valid_trace(tmp_path: Path) -> None:
    text = (Path(__file__).parents[2] / "docs" / "traces.md").read_text()
    block = text.split("```jsonl\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "example.jsonl"
    path.write_text(block)
    trace = read_trace(path)
    assert [g.name for g in trace.groups] == ["general", "batch"]
    assert [(type(e).__name__, e.at) for e in trace.events] == [
        ("Arrival", 0),
        ("Arrival", 120),
        ("Departure", 7200),
    ]
    job = trace.events[1]
    assert isinstance(job, Arrival) and job.run_for == 1800 and job.pod.namespace == "batch"


def test_nan_and_infinity_are_refused_reading_and_writing(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text(json.dumps(CLUSTER) + '\n{"kind": "arrive", "at": NaN, "pod": {}}\n')
    with pytest.raises(UserError, match=rf"^{path}:2: NaN is not a JSON number \(use finite numbers\)$"):
        read_trace(path)
    with pytest.raises(UserError, match=rf"^{path}:2: a number is NaN or infinite \(use finite numbers\)$"):
        write_trace(path, START, [GROUP], [arrive(float("inf"))])


def test_a_pod_the_parser_cannot_read_is_a_user_error_not_a_traceback(tmp_path: Path) -> None:
    broken = {"kind": "arrive", "at": 1, "pod": pod("web-1", affinity={"nodeAffinity": [1]})}
    path = write_lines(tmp_path / "trace.jsonl", CLUSTER, broken)
    with pytest.raises(UserError, match=rf"^{path}:2: arrive.pod.spec: not readable as a Kubernetes Pod \("):
        read_trace(path)


def test_what_is_written_is_what_is_checked_tuples_and_odd_characters_included(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    group = {**GROUP, "zones": ("us-east-1a", "us-east-1b"), "labels": {"note": "a\u2028b é"}}
    write_trace(path, START, [group], [arrive(1)])
    assert read_trace(path).groups[0].labels == {"note": "a\u2028b é"}
    assert read_trace(path).groups[0].zones == ("us-east-1a", "us-east-1b")
    assert len(path.read_text(encoding="utf-8").split("\n")) == 3  # two lines and the final newline


def test_groups_files_are_checked_like_cluster_lines_naming_their_own_lines(tmp_path: Path) -> None:
    path = tmp_path / "groups.yaml"
    path.write_text("groups:\n  - name: a\n    instanceType: large\n    minSize: 0\n")
    with pytest.raises(UserError) as caught:
        read_groups(path)
    assert str(caught.value).startswith(f"{path}:2: groups.0: 'maxSize' is a required property (add it)")
    path.write_text('{"groups": [' + json.dumps(GROUP) + ", " + json.dumps(GROUP) + "]}")
    with pytest.raises(UserError, match=rf"^{path}:1: groups.1.name: 'general' is listed twice"):
        read_groups(path)
    path.write_text("- name: a\n")
    with pytest.raises(UserError, match="expected a `groups:` list of node groups"):
        read_groups(path)
    with pytest.raises(UserError, match="groups file not found"):
        read_groups(tmp_path / "missing.yaml")
    path.write_text("groups:\n  - " + json.dumps(GROUP) + "\n")
    assert read_groups(path) == [GROUP]


def test_the_documented_groups_file_is_valid(tmp_path: Path) -> None:
    text = (Path(__file__).parents[2] / "docs" / "traces.md").read_text()
    path = tmp_path / "groups.yaml"
    path.write_text(text.split("```yaml\n", 1)[1].split("```", 1)[0])
    assert [(g["name"], g["desired"]) for g in read_groups(path)] == [("web", 2), ("batch", 0)]
