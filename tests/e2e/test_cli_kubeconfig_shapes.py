"""A kubeconfig that is valid YAML but not a kubeconfig's shape (a scalar, a list, `clusters: 5`) is a
user's mistake: one line naming the file and the fix, exit 2, never the client library's TypeError."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import run

CONTEXT = "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"


@pytest.mark.parametrize(
    "text",
    [
        "hello",
        "[1, 2]",
        "42",
        "clusters: 5",
        "users: 7\ncurrent-context: c",
        "contexts: [{name: c, context: 5}]\ncurrent-context: c",
        CONTEXT + "clusters: [{name: c, cluster: 5}]\nusers: [{name: u, user: 5}]",
        CONTEXT + "clusters: [{name: c, cluster: {server: 5}}]\nusers: [{name: u, user: {token: [1]}}]",
    ],
)
def test_a_kubeconfig_of_the_wrong_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(text + "\n")
    config = tmp_path / "asg-reconciler.yaml"
    config.write_text(
        "cluster: prod\nregion: us-east-1\nnodeGroups: {explicit: ['0:3:a']}\n"
        f"kubernetes: {{kubeconfig: '{kubeconfig}'}}\n"
    )
    result = run(capsys, "status", "--config", str(config))
    assert result.code == 2, result.err
    [line] = result.err.strip().splitlines()
    assert f"kubernetes.kubeconfig: cannot load {kubeconfig}: not a kubeconfig" in line, line


def test_a_context_the_kubeconfig_does_not_have_lists_those_it_has(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kubernetes.context: prod-admn` (a typo): one line naming the contexts the kubeconfig has, the
    current one and the closest, exit 2, before anything is asked."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "contexts:\n"
        "  - {name: prod-admin, context: {cluster: c, user: u}}\n"
        "  - {name: staging, context: {cluster: c, user: u}}\n"
        "current-context: prod-admin\n"
        "users: [{name: u, user: {token: t}}]\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
    )
    config = tmp_path / "asg-reconciler.yaml"
    config.write_text(
        "cluster: prod\nregion: us-east-1\nnodeGroups: {explicit: ['0:3:a']}\n"
        f"kubernetes: {{kubeconfig: '{kubeconfig}', context: prod-admn}}\n"
    )
    result = run(capsys, "status", "--config", str(config))
    assert result.code == 2, result.err
    [line] = result.err.strip().splitlines()
    assert f"kubernetes.context: 'prod-admn' is not a context of {kubeconfig}" in line, line
    assert "it has prod-admin, staging (current-context: prod-admin)" in line
    assert "did you mean prod-admin?" in line
