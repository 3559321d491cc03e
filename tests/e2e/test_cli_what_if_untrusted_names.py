"""Names in a pull request's manifests are untrusted: one that is not a Kubernetes name (the API
server would refuse it) is one line naming the file and the field, exit 2, and a valid one that
GitHub would link (`www.evil.example` is a DNS-1123 subdomain) never becomes a link, a
cross-reference or a mention in the comment."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli_what_if import TOKEN, cluster, config, snapshot
from tests.support.aws import MotoAws
from tests.support.cli import run
from tests.support.github_api import FakeGitHub
from tests.support.markdown_shape import links
from tests.support.what_if_world import deployment, one_line_error, write_yaml

BAD = ["https://evil.example", "#1", "org/repo#12", "GH-7", "@org/team", "Web", "web\nx", "a" * 254]


def changed(path: str, value: Any) -> dict[str, Any]:
    document = copy.deepcopy(deployment("web", 1, {"cpu": "10m"}))
    node: Any = document
    keys = [int(k) if k.isdigit() else k for k in path.split(".")]
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    return document


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("metadata.name", "Deployment: metadata.name: "),
        ("metadata.namespace", "Deployment: metadata.namespace: "),
        ("spec.template.spec.containers.0.name", "Deployment web: spec.template.spec.containers[0].name: "),
        ("spec.template.metadata.labels.app", "Deployment web: spec.template.metadata.labels.app: "),
    ],
)
@pytest.mark.parametrize("value", BAD, ids=range(len(BAD)))
def test_a_name_kubernetes_would_refuse_is_one_line_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str, field: str, value: str
) -> None:
    if path.endswith("labels.app") and value in ("Web", "GH-7"):
        return  # a label value may hold capitals
    bad = write_yaml(tmp_path / "app.yaml", changed(path, value))
    result = run(capsys, "what-if", "--config", str(tmp_path / "none.yaml"), str(bad))
    one_line_error(result, "app.yaml:1: document 1: ", field, "is not a ")


def test_a_valid_name_github_would_link_is_inert_in_the_comment(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    snap = snapshot(tmp_path, cluster(aws))
    web = deployment("www.evil.example", 2, {"cpu": "64"}, priorityClassName="www.evil.example")
    app = write_yaml(tmp_path / "app.yaml", web)
    with FakeGitHub(repo="org/app", token=TOKEN) as github:
        monkeypatch.setenv("APP_TOKEN", TOKEN)
        cfg = config(
            tmp_path,
            f"forge: {{type: github, repo: org/app, tokenEnv: APP_TOKEN, baseUrl: '{github.url}'}}\n",
        )
        number = github.open_pull("feature", author="alice")
        args = ("what-if", "--config", str(cfg), "--snapshot", str(snap), "--comment", str(number))
        result = run(capsys, *args, str(app))
        assert result.code == 0, result.err
        (comment,) = github.comments(number)
    assert "www" in comment and "evil.example" in comment
    assert links(comment) == [], links(comment)
