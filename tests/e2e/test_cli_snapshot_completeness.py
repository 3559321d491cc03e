"""A snapshot missing Node objects or Pods is refused end to end before anything is written; an empty
kubectl List is an empty cluster whose groups still appear in the plan (issue 12, "End to end")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.domain.snapshot_completeness import COMPLETE_DUMP
from tests.support import k8s_objects as k
from tests.support.aws import MotoAws
from tests.support.cli import Result, run
from tests.support.git import git

TAGS = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/prod": "owned"}
STATE = "asg-reconciler/prod/state"
T3_SMALL = {"cpu": "1930m", "memory": "1471840Ki", "pods": "11"}


def write_config(tmp_path: Path, remote: Path | None) -> Path:
    path = tmp_path / "asg-reconciler.yaml"
    gitops = f"git: {{url: '{remote}', workDir: '{tmp_path / 'work'}'}}\n" if remote else ""
    path.write_text(
        "cluster: prod\nregion: us-east-1\nnodeGroups:\n  autoDiscovery:\n"
        "    - asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod\n" + gitops
    )
    return path


def write_snapshot(tmp_path: Path, name: str, objects: list[dict[str, Any]]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": objects}))
    return path


def in_service(aws: MotoAws, name: str) -> list[tuple[str, str]]:
    """The group's (instance id, zone) pairs, every one InService (moto launches them at once)."""
    described = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])
    instances = described["AutoScalingGroups"][0]["Instances"]
    assert {i["LifecycleState"] for i in instances} == {"InService"}
    return sorted((i["InstanceId"], i["AvailabilityZone"]) for i in instances)


def cluster(instances: list[tuple[str, str]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One node per instance, and a pod on each: (nodes, pods)."""
    nodes = [
        k.node(f"node-{n}", instance_id=i, zone=z, instance_type="t3.small", allocatable=T3_SMALL)
        for n, (i, z) in enumerate(instances)
    ]
    pods = [
        k.pod(
            f"web-{n}",
            "shop",
            node_name=f"node-{n}",
            requests={"cpu": "100m"},
            owner_kind="ReplicaSet",
            owner_name="web",
        )
        for n in range(len(instances))
    ]
    return nodes, pods


def refs(remote: Path) -> str:
    """Every ref of the bare repository, with what it points at, HEAD included."""
    listed = git("for-each-ref", "--format=%(refname) %(objectname) %(symref)", cwd=remote)
    return listed + git("symbolic-ref", "HEAD", cwd=remote)


def assert_refused(result: Result, snapshot: Path, missing: str) -> None:
    assert result.code == 2, result.err
    assert result.out == ""
    line = result.err.rstrip("\n")
    assert "\n" not in line, result.err  # one line, no traceback
    assert line.startswith(f"error: {snapshot}: {missing}")
    assert line.endswith(COMPLETE_DUMP)


@pytest.mark.parametrize(
    ("dump", "missing"),
    [("pods-only", "no Node objects"), ("nodes-only", "no Pods"), ("empty", "no Node objects")],
)
def test_an_incomplete_snapshot_is_refused_and_nothing_is_written(
    aws: MotoAws,
    bare_remote: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    dump: str,
    missing: str,
) -> None:
    aws.launch_template("lt", "t3.small")
    aws.asg("general", min_size=1, max_size=5, desired=2, tags=TAGS, launch_template="lt")
    nodes, pods = cluster(in_service(aws, "general"))
    config = write_config(tmp_path, bare_remote)
    # a first plan on the whole cluster writes main and the state branch (a node unneeded since now)
    complete = write_snapshot(tmp_path, "complete.json", nodes + pods)
    first = run(capsys, "plan", "--config", str(config), "--snapshot", str(complete))
    assert first.code == 0, first.err
    assert git("rev-parse", "--verify", "--quiet", f"refs/heads/{STATE}", cwd=bare_remote)
    before = refs(bare_remote)

    objects = {"pods-only": pods, "nodes-only": nodes, "empty": []}[dump]
    snapshot = write_snapshot(tmp_path, f"{dump}.json", objects)
    assert_refused(
        run(capsys, "plan", "--config", str(config), "--snapshot", str(snapshot)), snapshot, missing
    )
    assert refs(bare_remote) == before
    assert_refused(
        run(capsys, "plan", "--dry-run", "--config", str(config), "--snapshot", str(snapshot)),
        snapshot,
        missing,
    )
    assert refs(bare_remote) == before


def test_an_empty_list_is_an_empty_cluster_and_its_groups_are_planned(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.launch_template("lt", "t3.small")
    aws.asg("general", max_size=5, tags=TAGS, launch_template="lt")
    aws.asg("spot", min_size=0, max_size=3, tags=TAGS, launch_template="lt")
    empty = tmp_path / "empty.json"
    empty.write_text('{"kind": "List", "items": []}')
    result = run(
        capsys,
        "plan",
        "--dry-run",
        "--config",
        str(write_config(tmp_path, None)),
        "--snapshot",
        str(empty),
        "--output",
        "json",
    )
    assert result.code == 0, result.err
    document = json.loads(result.out)
    groups = {g["name"]: g for g in document["nodeGroups"]}
    assert sorted(groups) == ["general", "spot"]
    assert all(g["desired"] == 0 for g in groups.values())
