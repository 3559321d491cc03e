"""What-if's comment on an application's pull request is always this head's: cut to what GitHub
accepts (65,536 characters) with a note, never left standing from an earlier head because the new
one was too long; replaced by "failed" when even that cannot be posted. And it tells the pull
request nothing outside its own namespaces: no pod of another namespace, no AWS account or role.
Found by the attack on issue 28."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from tests.e2e.test_cli_what_if import TOKEN, cluster, config, snapshot
from tests.support import k8s_objects as k
from tests.support.aws import MotoAws, _Body, on_every_session, query_error
from tests.support.cli import Result, run
from tests.support.github_api import FakeGitHub
from tests.support.what_if_world import deployment, manifest, pod_template, write_yaml

MARKER = "<!-- asg-reconciler what-if -->"
ACCOUNT = "123456789012"
ROLE_ARN = f"arn:aws:sts::{ACCOUNT}:assumed-role/ci-what-if-reader/GitHubActions"


class Pull:
    def __init__(self, github: FakeGitHub, cfg: Path, snap: Path, tmp: Path) -> None:
        self.github, self.cfg, self.snap, self.tmp = github, cfg, snap, tmp
        self.number = github.open_pull("feature", author="alice")

    def what_if(self, capsys: pytest.CaptureFixture[str], *documents: dict[str, Any]) -> Result:
        app = write_yaml(self.tmp / "app.yaml", *documents)
        args = ("--config", str(self.cfg), "--snapshot", str(self.snap), "--comment", str(self.number))
        return run(capsys, "what-if", *args, str(app))

    def comment(self) -> str:
        (ours,) = [c for c in self.github.comments(self.number) if c.startswith(MARKER)]
        return ours


@pytest.fixture
def pull(
    aws: MotoAws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Any:
    objects = cluster(aws) + getattr(request, "param", [])
    with FakeGitHub(repo="org/app", token=TOKEN) as github:
        monkeypatch.setenv("APP_TOKEN", TOKEN)
        cfg = config(
            tmp_path,
            f"forge: {{type: github, repo: org/app, tokenEnv: APP_TOKEN, baseUrl: '{github.url}'}}\n",
        )
        yield Pull(github, cfg, snapshot(tmp_path, objects), tmp_path)


def many(count: int) -> list[dict[str, Any]]:
    """`count` Deployments with long names: a workload line each, far past 65,536 characters."""
    documents = []
    for n in range(count):
        document = deployment("svc", 1, {"cpu": "1m"})
        document["metadata"]["name"] = f"service-{n:04d}-" + "x" * 180
        documents.append(document)
    return documents


def test_a_long_answer_is_cut_to_fit_and_replaces_the_earlier_one(
    pull: Pull, capsys: pytest.CaptureFixture[str]
) -> None:
    first = pull.what_if(capsys, deployment("web", 1, {"cpu": "1m"}))
    assert first.code == 0, first.err
    assert "for 1 new pod(s)" in pull.comment()

    second = pull.what_if(capsys, *many(400))
    assert second.code == 0, second.err
    comment = pull.comment()
    assert len(comment) <= 65_536
    assert "for 400 new pod(s)" in comment  # the verdict, first
    assert "longer than a comment may be" in comment
    assert "more workloads not shown here" in comment


def test_an_answer_the_forge_still_refuses_is_replaced_by_failed(
    pull: Pull, capsys: pytest.CaptureFixture[str]
) -> None:
    assert pull.what_if(capsys, deployment("web", 1, {"cpu": "1m"})).code == 0
    pull.github.body_limit = 700  # GitHub counting more strictly than we cut
    refused = pull.what_if(capsys, *many(20))
    assert refused.code == 1
    assert 'the comment there now says "failed"' in refused.err
    comment = pull.comment()
    assert "**failed**" in comment and "for 1 new pod(s)" not in comment


VAULT = k.pod(
    "vault-0",
    "secrets",
    node_name="n1",
    requests={"cpu": "10m"},
    labels={"app": "vault"},
    owner_kind="StatefulSet",
)


@pytest.mark.parametrize("pull", [[VAULT]], indirect=True)
def test_the_comment_names_no_pod_of_another_namespace(
    pull: Pull, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pull request's DaemonSet must not share a node with app=vault of any namespace: its pod
    for n1 has nowhere to go, and the planner's reason names secrets/vault-0."""
    agent = manifest(
        "DaemonSet", "agent", selector={"matchLabels": {"app": "agent"}}, template=pod_template("agent", {})
    )
    agent["spec"]["template"]["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "vault"}},
                    "namespaceSelector": {},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    result = pull.what_if(capsys, agent)
    assert result.code == 0, result.err
    comment = pull.comment()
    assert "secrets" not in comment and "vault" not in comment, comment
    assert (
        "`apps/agent-n1`: DaemonSet pod for node n1, the only node it may run on: anti-affinity with pod"
        in comment
    )


def test_a_failure_names_no_aws_account_nor_role(
    pull: Pull, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert pull.what_if(capsys, deployment("web", 1, {"cpu": "1m"})).code == 0
    message = f"User: {ROLE_ARN} is not authorized to perform: autoscaling:DescribeAutoScalingGroups"

    def denied(request: Any, **_: Any) -> Any:
        if "DescribeAutoScalingGroups" in str(request.body):
            body = query_error("AccessDenied", message)
            return AWSResponse(request.url, 403, {"Content-Type": "text/xml"}, _Body(body))
        return None

    on_every_session(monkeypatch, "before-send.auto-scaling", denied)
    failed = pull.what_if(capsys, deployment("web", 2, {"cpu": "1m"}))
    assert failed.code != 0
    comment = pull.comment()
    assert "**failed**" in comment
    assert ACCOUNT not in comment and "ci-what-if-reader" not in comment and "arn:aws" not in comment
