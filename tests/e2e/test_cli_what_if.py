"""`what-if FILE...` end to end: ASGs in moto, the cluster from a kubectl dump, workload manifests as
an application's pull request has them, and one comment on that pull request in the fake GitHub."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from reconciler.config.documents import load_schema
from reconciler.planning import plan as planner
from reconciler.runtime import plan_stage
from tests.support import k8s_objects as k
from tests.support.apply_world import World
from tests.support.aws import MotoAws
from tests.support.check_world import remote_refs
from tests.support.cli import run
from tests.support.github_api import FakeGitHub
from tests.support.what_if_world import deployment, manifest, one_line_error, pod_template, write_yaml

TAGS = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/prod": "owned"}
M5_LARGE = 0.096  # USD per hour, the shipped us-east-1 price


def config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "asg-reconciler.yaml"
    path.write_text(
        "cluster: prod\nregion: us-east-1\nnodeGroups:\n  autoDiscovery:\n"
        "    - asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod\n" + extra
    )
    return path


def snapshot(tmp_path: Path, objects: list[dict[str, Any]], name: str = "cluster.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": objects}))
    return path


def cluster(aws: MotoAws, *, nodes: int = 2, max_size: int = 10) -> list[dict[str, Any]]:
    """The group `general` (m5.large) with `nodes` registered nodes, each running a 1Gi pod."""
    aws.launch_template("lt", "m5.large")
    aws.asg("general", desired=nodes, max_size=max_size, tags=TAGS, launch_template="lt")
    described = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])
    instances = sorted(described["AutoScalingGroups"][0]["Instances"], key=lambda i: i["InstanceId"])
    objects: list[dict[str, Any]] = []
    for index, instance in enumerate(instances):
        name = f"n{index + 1}"
        objects.append(k.node(name, instance_id=instance["InstanceId"], zone=instance["AvailabilityZone"]))
        objects.append(
            k.pod(
                f"base-{index}", "apps", node_name=name, requests={"memory": "1Gi"}, owner_kind="ReplicaSet"
            )
        )
    return objects


def what_if(capsys: pytest.CaptureFixture[str], cfg: Path, snap: Path, *args: str) -> dict[str, Any]:
    result = run(capsys, "what-if", "--config", str(cfg), "--snapshot", str(snap), "--output", "json", *args)
    assert result.code == 0, result.err
    document: dict[str, Any] = json.loads(result.out)
    jsonschema.validate(document, load_schema("what-if"))
    return document


def group(document: dict[str, Any], name: str) -> dict[str, Any]:
    return next(g for g in document["nodeGroups"] if g["name"] == name)


def test_twenty_replicas_of_2gi_add_what_a_plan_with_them_pending_adds(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The classic experiment, answered before the merge: 20 x 2Gi on m5.large nodes (6.9Gi
    allocatable, 1Gi taken on each of the two): 2 fit each existing node, 16 need 6 new nodes of 3."""
    objects = cluster(aws)
    cfg, snap = config(tmp_path), snapshot(tmp_path, objects)
    app = write_yaml(tmp_path / "app.yaml", deployment("web", 20, {"memory": "2Gi"}))

    document = what_if(capsys, cfg, snap, str(app))

    general = group(document, "general")
    assert (general["add"], general["instanceType"]) == (6, "m5.large")
    assert general["monthlyCost"] == round(6 * M5_LARGE * 730, 2) == document["monthlyCost"]
    assert (general["pods"], general["podsOnExistingNodes"], general["pendingToday"]) == (16, 4, 0)
    assert len(document["pods"]) == 20 and all(p["nodeGroup"] == "general" for p in document["pods"])
    assert document["workloads"][0]["added"] == 20

    # the same pods pending in the cluster: plan --dry-run adds exactly as many nodes
    pending = [
        k.pod(f"web-{i}", "apps", requests={"memory": "2Gi"}, labels={"app": "web"}, owner_kind="ReplicaSet")
        for i in range(20)
    ]
    planned = run(
        capsys,
        "plan",
        "--dry-run",
        "--config",
        str(cfg),
        "--snapshot",
        str(snapshot(tmp_path, objects + pending, "pending.json")),
        "--output",
        "json",
    )
    assert planned.code == 0, planned.err
    plan_general = next(g for g in json.loads(planned.out)["nodeGroups"] if g["name"] == "general")
    assert plan_general["desired"] - plan_general["current"] == general["add"]

    table = run(capsys, "what-if", "--config", str(cfg), "--snapshot", str(snap), str(app))
    assert table.code == 0, table.err
    assert "+6 node(s), $420.48 a month on demand for 20 new pod(s)" in table.out
    assert "+ general  +6 × m5.large" in table.out
    assert "Deployment apps/web: 20 pod(s): adds 20" in table.out


def test_from_zero_nodes_as_plan_from_zero(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty group: new nodes come from the ASG's template (launch template, DescribeInstanceTypes),
    as in plan --dry-run with the same pods pending."""
    aws.launch_template("lt", "m5.large")
    aws.asg("general", max_size=10, tags=TAGS, launch_template="lt")
    cfg = config(tmp_path)
    app = write_yaml(tmp_path / "app.yaml", deployment("web", 20, {"memory": "2Gi"}))
    document = what_if(capsys, cfg, snapshot(tmp_path, []), str(app))
    pending = [
        k.pod(f"web-{i}", "apps", requests={"memory": "2Gi"}, owner_kind="ReplicaSet") for i in range(20)
    ]
    snap = snapshot(tmp_path, pending, "pending.json")
    planned = run(
        capsys, "plan", "--dry-run", "--config", str(cfg), "--snapshot", str(snap), "--output", "json"
    )
    assert planned.code == 0, planned.err
    (general,) = json.loads(planned.out)["nodeGroups"]
    assert document["add"] == group(document, "general")["add"] == general["desired"] > 0
    assert document["monthlyCost"] == round(general["desired"] * M5_LARGE * 730, 2)


def test_the_planner_is_plan_dry_runs_own_make_plan(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No second planner: what-if goes through the plan stage, which calls make_plan once, on the
    observed cluster with the workload's pods added as pending."""
    seen: list[Any] = []

    def spy(inputs: Any) -> Any:
        seen.append(inputs)
        return planner.make_plan(inputs)

    monkeypatch.setattr(plan_stage, "make_plan", spy)
    objects = cluster(aws)
    app = write_yaml(tmp_path / "app.yaml", deployment("web", 3, {"memory": "2Gi"}))
    document = what_if(capsys, config(tmp_path), snapshot(tmp_path, objects), str(app))
    assert len(seen) == 1
    pending = {p.key for p in seen[0].inventory.pending}
    assert pending == {f"apps/web-what-if-{i}" for i in (1, 2, 3)}
    assert {p["pod"] for p in document["pods"]} == pending


def test_an_existing_deployment_counts_only_its_difference(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = cluster(aws, nodes=2)
    objects += [  # web runs 5 replicas today: its ReplicaSet web-5d8f7c, pod-template-hash 5d8f7c
        k.pod(
            f"web-5d8f7c-{i}",
            "apps",
            node_name=f"n{1 + i % 2}",
            requests={"cpu": "100m"},
            labels={"app": "web", "pod-template-hash": "5d8f7c"},
            owner_kind="ReplicaSet",
            owner_name="web-5d8f7c",
        )
        for i in range(5)
    ]
    objects.append(  # another Deployment whose name starts the same is not web's
        k.pod(
            "web-api-77f9-0",
            "apps",
            node_name="n1",
            labels={"app": "web-api", "pod-template-hash": "77f9"},
            owner_kind="ReplicaSet",
            owner_name="web-api-77f9",
        )
    )
    cfg, snap = config(tmp_path), snapshot(tmp_path, objects)

    up = what_if(
        capsys, cfg, snap, str(write_yaml(tmp_path / "up.yaml", deployment("web", 20, {"cpu": "100m"})))
    )
    (web,) = up["workloads"]
    assert (web["wanted"], web["running"], web["added"]) == (20, 5, 15)
    assert web["note"] == "5 pod(s) running: adds 15"
    assert len(up["pods"]) == 15

    down = what_if(
        capsys, cfg, snap, str(write_yaml(tmp_path / "down.yaml", deployment("web", 3, {"cpu": "100m"})))
    )
    (web,) = down["workloads"]
    assert (web["running"], web["added"]) == (5, 0)
    assert web["note"].startswith("scales down from 5 to 3 pod(s): adds nothing")
    assert down["pods"] == [] and down["add"] == 0 and down["monthlyCost"] == 0

    bare = deployment("web", 20, {"cpu": "100m"})
    del bare["metadata"]["namespace"]  # as kubectl -n applies it
    path = str(write_yaml(tmp_path / "bare.yaml", bare))
    assert what_if(capsys, cfg, snap, "--namespace", "apps", path)["workloads"][0]["added"] == 15
    other = what_if(capsys, cfg, snap, path)["workloads"][0]
    assert (other["namespace"], other["added"]) == ("default", 20)  # another namespace's web


def test_a_daemonset_runs_on_every_node_new_ones_included(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new DaemonSet: a pod on each existing node (n2 is full: its pod has nowhere else to go), and
    its pod on every new node, so a Deployment pod that fits a bare m5.large no longer fits one."""
    objects = cluster(aws)
    objects.append(k.pod("hog", "apps", node_name="n2", requests={"cpu": "1800m"}, owner_kind="ReplicaSet"))
    objects.append(k.pod("busy", "apps", node_name="n1", requests={"cpu": "1"}, owner_kind="ReplicaSet"))
    cfg, snap = config(tmp_path), snapshot(tmp_path, objects)
    agent = manifest(
        "DaemonSet",
        "agent",
        "kube-system",
        selector={"matchLabels": {"app": "agent"}},
        template=pod_template("agent", {"cpu": "500m"}),
    )

    alone = what_if(capsys, cfg, snap, str(write_yaml(tmp_path / "agent.yaml", agent)))
    assert alone["add"] == 0
    pods = {p["pod"]: p for p in alone["pods"]}
    assert pods["kube-system/agent-n1"]["nodeGroup"] == "general"
    assert pods["kube-system/agent-n2"]["nodeGroup"] is None
    assert pods["kube-system/agent-n2"]["reason"] == (
        "DaemonSet pod for node n2, the only node it may run on: insufficient cpu: needs 0.5, free 0.13; "
        "no new node helps it"
    )
    assert alone["workloads"][0]["wanted"] is None

    worker = deployment("worker", 1, {"cpu": "1500m"})
    without = what_if(capsys, cfg, snap, str(write_yaml(tmp_path / "worker.yaml", worker)))
    assert without["add"] == 1  # 1500m fits a new node's 1930m ...
    both = what_if(capsys, cfg, snap, str(write_yaml(tmp_path / "both.yaml", agent, worker)))
    (stuck,) = [p for p in both["pods"] if p["pod"] == "apps/worker-what-if-1"]
    assert stuck["nodeGroup"] is None  # ... but not beside the agent's 500m on every new node
    assert "insufficient cpu" in stuck["reason"]
    assert both["add"] == 0


def test_a_pod_nothing_can_host_is_named_with_the_reason(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = cluster(aws)
    cfg, snap = config(tmp_path), snapshot(tmp_path, objects)
    app = write_yaml(
        tmp_path / "app.yaml", deployment("giant", 1, {"cpu": "64"}), deployment("web", 1, {"cpu": "1"})
    )
    document = what_if(capsys, cfg, snap, str(app))
    answers = {p["pod"]: p for p in document["pods"]}
    giant = answers["apps/giant-what-if-1"]
    assert giant["nodeGroup"] is None and "insufficient cpu: needs 64" in giant["reason"]
    assert answers["apps/web-what-if-1"]["nodeGroup"] == "general"

    table = run(capsys, "what-if", "--config", str(cfg), "--snapshot", str(snap), str(app))
    assert table.code == 0, table.err  # whatever the answer
    assert "Pods nothing can host (1):" in table.out
    assert "  apps/giant-what-if-1: no node group can help" in table.out


def test_multi_document_files_lists_and_every_kind(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = cluster(aws, nodes=1)
    cfg, snap = config(tmp_path), snapshot(tmp_path, objects)
    small = {"cpu": "10m"}
    stateful = manifest(
        "StatefulSet",
        "db",
        replicas=3,
        selector={"matchLabels": {"app": "db"}},
        template=pod_template("db", small),
        volumeClaimTemplates=[{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}],
    )
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "db"},
        "spec": {"ports": [{"port": 1}]},
    }
    docs = write_yaml(tmp_path / "app.yaml", stateful, service, deployment("web", 2, small))
    docs.write_text("# the application\n" + docs.read_text() + "---\n# trailing comments only\n")
    listed = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            manifest("Job", "migrate", parallelism=4, completions=10, template=pod_template("m", small)),
            manifest("Job", "once", completions=1, parallelism=3, template=pod_template("o", small)),
            manifest(
                "CronJob",
                "report",
                schedule="0 * * * *",
                jobTemplate={"spec": {"parallelism": 2, "template": pod_template("r", small)}},
            ),
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "debug"},
                "spec": pod_template("d", small)["spec"],
            },
            manifest(
                "ReplicaSet",
                "rs",
                replicas=2,
                selector={"matchLabels": {"app": "rs"}},
                template=pod_template("rs", small),
            ),
            manifest(
                "ReplicationController",
                "rc",
                replicas=1,
                selector={"app": "rc"},
                template=pod_template("rc", small),
            ),
        ],
    }
    json_file = tmp_path / "more.json"
    json_file.write_text(json.dumps(listed))

    document = what_if(capsys, cfg, snap, str(docs), str(json_file))
    added = {(w["kind"], w["name"]): w["added"] for w in document["workloads"]}
    assert added == {
        ("StatefulSet", "db"): 3,
        ("Deployment", "web"): 2,
        ("Job", "migrate"): 4,
        ("Job", "once"): 1,
        ("CronJob", "report"): 2,
        ("Pod", "debug"): 1,
        ("ReplicaSet", "rs"): 2,
        ("ReplicationController", "rc"): 1,
    }
    assert document["skipped"] == [{"source": f"{docs}:4: document 2", "kind": "Service", "name": "db"}]
    names = {p["pod"] for p in document["pods"]}
    assert {"apps/db-0", "apps/db-1", "apps/db-2", "default/debug"} <= names
    sources = {w["name"]: w["source"] for w in document["workloads"]}
    assert sources["db"] == f"{docs}:2: document 1"
    assert sources["rc"] == f"{json_file}:1: document 1, item 5"


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        (None, ["missing.yaml: file not found"]),
        (
            "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n---\nkind: a: b\n",
            ["bad.yaml:5: not valid YAML: mapping values are not allowed here"],
        ),
        (
            "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {name: web}\nspec: {}\n",
            ["bad.yaml:2: document 1: Rollout web: unsupported kind argoproj.io/v1alpha1 Rollout"],
        ),
        (
            "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\n\n"
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 2}\n",
            ["bad.yaml:7: document 2: Deployment web: spec.template: missing"],
        ),
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: lots\n",
            ["bad.yaml:2: document 1: Deployment web: spec.replicas: 'lots' is not a count"],
        ),
        ("# nothing here\n", ["bad.yaml: no Kubernetes objects in it"]),
    ],
    ids=["missing", "yaml", "kind", "template", "replicas", "empty"],
)
def test_a_missing_or_malformed_file_is_one_line_and_exit_2_before_anything_is_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | None, fragments: list[str]
) -> None:
    """No moto here, no snapshot, no config file: the files are read before anything else."""
    path = tmp_path / ("missing.yaml" if text is None else "bad.yaml")
    if text is not None:
        path.write_text(text)
    good = write_yaml(tmp_path / "good.yaml", deployment("ok", 1, {"cpu": "1"}))
    result = run(capsys, "what-if", "--config", str(tmp_path / "none.yaml"), str(good), str(path))
    one_line_error(result, *fragments)


def test_prices_file_overrides_the_shipped_prices(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, snap = config(tmp_path), snapshot(tmp_path, cluster(aws))
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"prices": {"m5.large": 0.1}}))
    app = write_yaml(tmp_path / "app.yaml", deployment("web", 10, {"memory": "2Gi"}))
    document = what_if(capsys, cfg, snap, "--prices", str(prices), str(app))
    assert document["add"] == 2 and document["monthlyCost"] == 146.0  # 2 x 0.1 x 730
    assert document["prices"] == f"{prices} over shipped us-east-1 on-demand"
    prices.write_text("{not json")
    result = run(
        capsys, "what-if", "--config", str(cfg), "--snapshot", str(snap), "--prices", str(prices), str(app)
    )
    one_line_error(result, f"{prices}:1: not valid JSON")


TOKEN = "app-token-1234"


def test_comment_keeps_one_comment_on_the_application_pull_request(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    snap = snapshot(tmp_path, cluster(aws))
    with FakeGitHub(repo="org/app", token=TOKEN) as github:
        monkeypatch.setenv("APP_TOKEN", TOKEN)
        cfg = config(
            tmp_path,
            f"forge: {{type: github, repo: org/app, tokenEnv: APP_TOKEN, baseUrl: '{github.url}'}}\n",
        )
        number = github.open_pull("feature", author="alice")
        check_comment = github.add_comment(number, "asg-reconciler-bot", "<!-- asg-reconciler check -->\nok")
        args = ("what-if", "--config", str(cfg), "--snapshot", str(snap), "--comment", str(number))

        first = run(
            capsys, *args, str(write_yaml(tmp_path / "a.yaml", deployment("web", 20, {"memory": "2Gi"})))
        )
        assert first.code == 0, first.err
        assert f"commented on pull request #{number}" in first.err
        second = run(
            capsys, *args, str(write_yaml(tmp_path / "b.yaml", deployment("web", 4, {"memory": "2Gi"})))
        )
        assert second.code == 0, second.err
        assert f"updated the comment on pull request #{number}" in second.err

        ours = [c for c in github.comments(number) if c.startswith("<!-- asg-reconciler what-if -->")]
        assert len(ours) == 1 and len(github.comments(number)) == 2  # check's comment stands beside it
        assert "**no new node for 4 new pod(s)**" in ours[0]
        assert "Deployment apps/web: 4 pod(s): adds 4" in ours[0]
        posts = [r for r in github.writes() if r.path.endswith(f"/issues/{number}/comments")]
        patches = [r for r in github.writes() if "/issues/comments/" in r.path]
        assert len(posts) == 1 and len(patches) == 1 and str(check_comment) not in patches[0].path
        assert TOKEN not in first.out + first.err + second.out + second.err

        # a bad file writes nothing but the comment, which no longer stands for this head
        bad = run(capsys, *args, str(tmp_path / "missing.yaml"))
        one_line_error(bad, "missing.yaml: file not found")
        assert len(github.writes()) == 3
        (ours,) = [c for c in github.comments(number) if c.startswith("<!-- asg-reconciler what-if -->")]
        assert "**failed**" in ours and "could not be read" in ours and "missing.yaml: file not found" in ours


def test_comment_needs_a_forge_that_keeps_pull_requests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = write_yaml(tmp_path / "app.yaml", deployment("web", 1, {"cpu": "1"}))
    result = run(capsys, "what-if", "--config", str(config(tmp_path)), "--comment", "7", str(app))
    one_line_error(result, "--comment: forge.type is none")


def test_live_cluster_and_main_are_read_and_nothing_is_written(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """The live API (the fake, over HTTP) and the manifest on main, as plan --dry-run reads them;
    Git, AWS and the cluster are left exactly as they were."""
    assert world.cli(capsys, "plan").code == 0
    refs, desired = remote_refs(world), world.desired()
    served = len(world.kube.requests)
    app = write_yaml(world.tmp / "app.yaml", deployment("checkout", 3, {"cpu": "1500m"}))
    result = world.cli(capsys, "what-if", "--output", "json", str(app))
    assert result.code == 0, result.err
    document = json.loads(result.out)
    jsonschema.validate(document, load_schema("what-if"))
    general = group(document, "general")
    # one fits node-b (100m used of 1930m); two need a t3.small each
    assert (general["add"], general["instanceType"], general["podsOnExistingNodes"]) == (2, "t3.small", 1)
    assert general["monthlyCost"] == round(2 * 0.0208 * 730, 2)
    assert remote_refs(world) == refs and world.desired() == desired
    assert {r.method for r in world.kube.requests[served:]} == {"GET"}
