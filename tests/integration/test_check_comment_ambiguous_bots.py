"""Any failure of `check --comment` replaces the standing comment with a "failed" one (issue 24 item
2), even when a GitHub App token (a workflow's GITHUB_TOKEN is one) without `forge.botLogin` cannot
tell its comment from a second bot's carrying the marker: then every bot comment with the marker is
marked failed (one GitHub refuses to let us edit is not ours), so no earlier "ok" stands under a
head nobody judged. Found by an attack (the check and its "failed" replacement both stopped)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.config.settings import Config, ForgeConfig, GitConfig
from reconciler.domain.errors import ReconcilerError
from reconciler.gitops.forge.github import GitHubForge
from reconciler.runtime.check_comment import check_and_comment, comment_marker
from tests.support.github_api import FakeGitHub

TOKEN = "ghp_person-token"
APP_TOKEN = "ghs_app-installation-token"
APP_BOT = "capacity-app[bot]"
ENV = "CAPACITY_TOKEN"
REPO = "org/capacity"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with FakeGitHub(repo=REPO, token=TOKEN) as fake:
        fake.app_tokens[APP_TOKEN] = APP_BOT
        yield fake


def test_a_second_bots_marker_comment_cannot_keep_an_earlier_ok_standing(
    github: FakeGitHub, tmp_path: Path
) -> None:
    forge_config = ForgeConfig("github", REPO, ENV, github.url)
    forge = GitHubForge(forge_config, {ENV: APP_TOKEN}, timeout=5, backoff=0)
    number = forge.open(
        title="scale down", body="b", head="asg-reconciler/prod/scale-down", base="main"
    ).number
    marker = comment_marker("prod")
    forge.upsert_comment(number, marker, f"{marker}\n**ok**: valid, approved (head 1)")  # the earlier verdict
    github.add_comment(number, "github-actions[bot]", f"{marker}\n**ok**", user_type="Bot")
    later = GitHubForge(forge_config, {ENV: APP_TOKEN}, timeout=5, backoff=0)  # the next CI job
    config = Config(
        cluster="prod",
        forge=forge_config,
        git=GitConfig(url=f"file://{tmp_path / 'missing.git'}", work_dir=str(tmp_path / "work")),
    )
    with pytest.raises(ReconcilerError) as caught:  # head 2 cannot even be read: check fails
        check_and_comment(config, "head-2", datetime.now(UTC), number, later)
    assert "its earlier verdict still stands" not in str(caught.value), caught.value
    ours = [c["body"] for c in github.pull(number).comments if c["user"]["login"] == APP_BOT]
    assert ours and all("**ok**" not in body for body in ours), ours
