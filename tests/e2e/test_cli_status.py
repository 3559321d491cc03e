"""`asg-reconciler status` end to end: moto for AWS, a kubectl dump or the fake API for the cluster."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jsonschema
import pytest

from reconciler.config.documents import load_schema
from reconciler.demo.kube_api import FakeKubeAPI
from tests.support import k8s_objects as k
from tests.support.aws import MotoAws
from tests.support.cli import run
from tests.support.git import ALICE, git
from tests.support.kube import write_kubeconfig

DISCOVERY = "asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod"
TAGS = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/prod": "owned"}


def write_config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "asg-reconciler.yaml"
    path.write_text(
        f"cluster: prod\nregion: us-east-1\nnodeGroups:\n  autoDiscovery: ['{DISCOVERY}']\n{extra}"
    )
    return path


def cluster_objects(aws: MotoAws) -> list[dict]:  # type: ignore[type-arg]
    groups = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])
    instances = sorted(groups["AutoScalingGroups"][0]["Instances"], key=lambda i: i["InstanceId"])
    first = instances[0]
    return [
        k.node(
            "node-1",
            zone=first["AvailabilityZone"],
            instance_id=first["InstanceId"],
            instance_type="t3.small",
        ),
        k.node("stray", instance_id="i-0000000000000000f"),
        k.pod(
            "web-1",
            "shop",
            requests={"cpu": "500m", "memory": "256Mi"},
            node_name="node-1",
            owner_kind="ReplicaSet",
            owner_name="web-1",
        ),
        k.pod("pending-1", "shop", requests={"cpu": "4"}, owner_kind="ReplicaSet", owner_name="web-1"),
    ]


@pytest.fixture
def world(aws: MotoAws, tmp_path: Path) -> tuple[Path, Path]:
    aws.asg("general", min_size=1, max_size=5, desired=2, tags=TAGS)
    aws.asg(
        "gpu",
        min_size=0,
        max_size=3,
        desired=0,
        tags={**TAGS, "k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu": "true:NoSchedule"},
    )
    aws.asg("other-cluster", desired=1, tags={"k8s.io/cluster-autoscaler/enabled": "true"})
    snapshot = tmp_path / "dump.json"
    snapshot.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": cluster_objects(aws)}))
    return write_config(tmp_path), snapshot


def test_status_table(world: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    config, snapshot = world
    result = run(capsys, "status", "--config", str(config), "--snapshot", str(snapshot))
    assert result.code == 0, result.err
    lines = {line.split()[0]: line for line in result.out.splitlines() if line.strip()}
    assert "general" in lines and "gpu" in lines and "other-cluster" not in lines
    assert lines["general"].split()[1:5] == ["1/5", "2", "1/1", "1"]
    assert "pending (unschedulable) pods: 1" in result.out
    assert "shop/pending-1" in result.out
    assert "unmanaged nodes (in no node group): 1" in result.out


def test_status_json(world: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    config, snapshot = world
    result = run(capsys, "status", "--config", str(config), "--snapshot", str(snapshot), "--output", "json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    jsonschema.validate(report, load_schema("status"))  # the public shape, camelCase like the plan's
    general = next(g for g in report["nodeGroups"] if g["name"] == "general")
    assert (general["registeredNodes"], general["readyNodes"], general["unregisteredInstances"]) == (1, 1, 1)
    assert general["cpuRequestedMillicores"] == 500
    assert general["templateSource"] == "node node-1"
    gpu = next(g for g in report["nodeGroups"] if g["name"] == "gpu")
    assert gpu["templateSource"].startswith("asg gpu")
    assert report["pendingPods"] == ["shop/pending-1"]
    assert report["unmanagedNodes"] == ["stray"]


def test_status_live_through_the_fake_api(
    aws: MotoAws, kube_api: FakeKubeAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.asg("general", min_size=1, max_size=5, desired=2, tags=TAGS)
    for obj in cluster_objects(aws):
        kube_api.put(obj)
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kube_api.url)
    config = write_config(tmp_path, f"kubernetes: {{kubeconfig: {kubeconfig}}}\n")
    result = run(capsys, "status", "--config", str(config), "--output", "json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["pendingPods"] == ["shop/pending-1"]


def test_status_warns_when_cluster_autoscaler_is_live(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Lease renewed a moment ago. (Until issue 28 this test renewed it in 2099, which read as
    fresh for ever; such a time is now no evidence, and said so.)"""
    aws.asg("general", min_size=1, max_size=5, desired=1, tags=TAGS)
    renewed = (datetime.now(UTC) - timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease = k.lease("cluster-autoscaler", "kube-system", holder="ca-0", renew_time=renewed)
    snapshot = tmp_path / "dump.json"
    snapshot.write_text(json.dumps({"kind": "List", "items": [lease, *cluster_objects(aws)]}))
    result = run(capsys, "status", "--config", str(write_config(tmp_path)), "--snapshot", str(snapshot))
    assert result.code == 0
    assert "cluster-autoscaler is live" in result.out
    lease = k.lease(
        "cluster-autoscaler", "kube-system", holder="ca-0", renew_time="2099-01-01T00:00:00.000000Z"
    )
    snapshot.write_text(json.dumps({"kind": "List", "items": [lease, *cluster_objects(aws)]}))
    result = run(capsys, "status", "--config", str(write_config(tmp_path)), "--snapshot", str(snapshot))
    assert result.code == 0
    assert "cluster-autoscaler is live" not in result.out
    assert "lease kube-system/cluster-autoscaler is ignored" in result.out


@pytest.mark.parametrize(
    ("config_text", "message"),
    [
        (
            "cluster: prod\nscaleDown: {unneededTime: 10 minutes}\n",
            '"10 minutes" is not a duration (use 10m)',
        ),
        ("cluster: prod\nregion: us-east-1\nnodeGroups: {explicit: ['0:3:nope']}\n", "nodeGroups.explicit"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str], config_text: str, message: str
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(config_text)
    snapshot = tmp_path / "empty.json"
    snapshot.write_text('{"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "n"}}]}')
    result = run(capsys, "status", "--config", str(config), "--snapshot", str(snapshot))
    assert result.code == 2
    assert message in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert "Traceback" not in result.err


def test_missing_credentials_exit_2(
    aws: MotoAws, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    snapshot = tmp_path / "n.json"
    snapshot.write_text('{"kind": "Node", "metadata": {"name": "n"}}')
    result = run(capsys, "status", "--config", str(write_config(tmp_path)), "--snapshot", str(snapshot))
    assert result.code == 2
    assert "credentials" in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_unreachable_api_server_exit_1(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")
    config = write_config(tmp_path, f"kubernetes: {{kubeconfig: {kubeconfig}}}\n")
    result = run(capsys, "status", "--config", str(config))
    assert result.code == 1
    assert "cannot reach the Kubernetes API" in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_a_malformed_kubeconfig_is_one_line_exit_2(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nclusters: [\n  - name: x\n  bad: : :\n")
    config = write_config(tmp_path, f"kubernetes: {{kubeconfig: {kubeconfig}}}\n")
    result = run(capsys, "status", "--config", str(config))
    assert result.code == 2, result.err
    assert f"kubernetes.kubeconfig: cannot load {kubeconfig}: not valid YAML at line 3" in result.err
    assert len(result.err.strip().splitlines()) == 1 and "Traceback" not in result.err


def test_config_from_environment(
    world: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config, snapshot = world
    monkeypatch.setenv("ASG_RECONCILER_CONFIG", str(config))
    assert run(capsys, "status", "--snapshot", str(snapshot)).code == 0


def test_usage_error_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "status", "--output", "xml")
    assert result.code == 2
    assert "Invalid value" in result.err


def _manifest(general: str) -> str:
    return f"version: 1\ncluster: prod\n\nnodeGroups:\n  general:\n{general}"


def test_status_compares_each_group_with_the_manifest_on_main(
    aws: MotoAws, world: tuple[Path, Path], bare_remote: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """AWS says 2 for general; main says 4 with one of its instances listed for removal: 4 - 1 = 3
    is the target, one to add and one to drain. The commit that listed it is not signed, so under
    approval.mode signed it is listed, not approved (counts, never "-1"). gpu is not in the
    manifest. Reading changes nothing."""
    config, snapshot = world
    config.write_text(
        config.read_text() + f"git: {{url: '{bare_remote}', workDir: '{config.parent / 'w'}'}}\n"
    )
    groups = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])
    doomed = sorted(i["InstanceId"] for i in groups["AutoScalingGroups"][0]["Instances"])[1]
    manifest = _manifest(f"    removeInstances: [{doomed}]\n    hold: false\n    desired: 4\n")
    tip = ALICE.commit(bare_remote, "main", {"capacity/prod.yaml": manifest}, "capacity: by hand")

    result = run(capsys, "status", "--config", str(config), "--snapshot", str(snapshot))
    assert result.code == 0, result.err
    assert "manifest main:capacity/prod.yaml" in result.out
    general = next(line for line in result.out.splitlines() if line.startswith("general "))
    assert "3 (+2 to apply, 1 listed, not approved)" in general
    assert f"general: listed for removal on main but not approved: {doomed}" in result.out
    assert "asg-reconciler plan" in result.out  # the way out
    assert "gpu: not in the manifest yet" in result.out

    report = json.loads(
        run(capsys, "status", "--config", str(config), "--snapshot", str(snapshot), "-o", "json").out
    )
    entry = next(g for g in report["nodeGroups"] if g["name"] == "general")
    assert (entry["manifestDesired"], entry["unappliedIncrease"], entry["approvedRemovals"]) == (3, 2, [])
    assert entry["unapprovedRemovals"] == [doomed]
    assert report["manifest"] == "main:capacity/prod.yaml"
    assert git("rev-parse", "refs/heads/main", cwd=bare_remote).strip() == tip
    assert git("for-each-ref", "--format=%(refname)", cwd=bare_remote).split() == ["refs/heads/main"]


def test_status_reports_aws_above_the_manifest(
    world: tuple[Path, Path], bare_remote: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, snapshot = world
    config.write_text(
        config.read_text() + f"git: {{url: '{bare_remote}', workDir: '{config.parent / 'w'}'}}\n"
    )
    ALICE.commit(bare_remote, "main", {"capacity/prod.yaml": _manifest("    desired: 1\n")}, "lowered")
    result = run(capsys, "status", "--config", str(config), "--snapshot", str(snapshot), "-o", "csv")
    assert result.code == 0, result.err
    rows = {r["name"]: r for r in csv.DictReader(io.StringIO(result.out))}
    assert rows["general"]["desired"] == "2" and rows["general"]["manifestDesired"] == "1"
    assert "is 1 above the manifest" in rows["general"]["warnings"]
    assert rows["gpu"]["manifestDesired"] == "-"


def test_status_without_a_readable_manifest_still_reports(
    world: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, snapshot = world
    missing = tmp_path / "nowhere.git"
    config.write_text(config.read_text() + f"git: {{url: '{missing}', workDir: '{tmp_path / 'w'}'}}\n")
    result = run(capsys, "status", "--config", str(config), "--snapshot", str(snapshot))
    assert result.code == 0, result.err
    assert "manifest not compared:" in result.out
    assert "MANIFEST" not in result.out


def test_an_explicit_group_without_the_cluster_tag_is_named_in_status_and_plan(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shipped apply IAM policy writes only to groups tagged k8s.io/cluster-autoscaler/<cluster>:
    an untagged explicit group would be planned, committed, then denied at apply."""
    aws.asg("general", min_size=1, max_size=5, desired=2, tags=TAGS)
    aws.asg("legacy", min_size=0, max_size=3, desired=1, tags={"team": "web"})
    snapshot = tmp_path / "dump.json"
    snapshot.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": cluster_objects(aws)}))
    config = tmp_path / "explicit.yaml"
    config.write_text(
        "cluster: prod\nregion: us-east-1\n"
        f"nodeGroups: {{autoDiscovery: ['{DISCOVERY}'], explicit: ['0:3:legacy', '1:5:general']}}\n"
    )
    for command in ("status", "plan"):
        args = [command, "--config", str(config), "--snapshot", str(snapshot)]
        result = run(capsys, *args, *(["--dry-run"] if command == "plan" else []), "--output", "json")
        assert result.code == 0, result.err
        text = result.out + result.err
        assert "asg legacy: has no tag k8s.io/cluster-autoscaler/prod" in text, command
        assert "asg general: has no tag" not in text, command  # tagged: nothing to say


def test_a_kubeconfig_from_the_environment_is_named_as_such_and_a_missing_one_says_so(
    aws: MotoAws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """KUBECONFIG, not kubernetes.kubeconfig, is what the user set: the error names what to fix
    (found by a new user's trial: it blamed a config key that the config does not have)."""
    missing = tmp_path / "no-such-kubeconfig"
    monkeypatch.setenv("KUBECONFIG", str(missing))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    config = write_config(tmp_path, "")
    result = run(capsys, "status", "--config", str(config))
    assert result.code == 2, result.err
    assert result.err.startswith(f"error: KUBECONFIG: cannot load {missing}: no such file"), result.err
    assert "kubernetes.kubeconfig: cannot load" not in result.err
    assert len(result.err.strip().splitlines()) == 1 and "Traceback" not in result.err
