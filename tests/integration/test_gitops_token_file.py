"""`git.tokenFile`: the https token is read from the file at every fetch and push, so a `run` loop
keeps working across a GitHub App installation token's hourly refresh (the file is rewritten by
whatever refreshes it: a sidecar, a Secret the kubelet updates). Against a real smart-HTTP server."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from reconciler.config.settings import GitConfig
from reconciler.domain.errors import OperationError, UserError
from reconciler.gitops.repo import Update, WorkingCopy
from tests.support.git import GitServer, git, init_bare


def test_the_token_file_is_read_again_at_every_fetch_and_push(git_http: GitServer, tmp_path: Path) -> None:
    init_bare(git_http.root / "cap.git")
    subprocess.run(["git", "config", "http.receivepack", "true"], cwd=git_http.root / "cap.git", check=True)
    token_file = tmp_path / "token"
    token_file.write_text(git_http.token + "\n")
    config = GitConfig(url=git_http.url("cap.git"), token_env="CAP_TOKEN", token_file=str(token_file))
    copy = WorkingCopy.from_config(config, tmp_path / "work", environ={**os.environ, "CAP_TOKEN": "not-used"})
    copy.sync()
    assert copy.update("main", "f.yaml", lambda t: Update("a: 1\n", "first")) is not None

    token_file.write_text("ghs_expired-an-hour-ago\n")  # the same process, later: the token changed
    with pytest.raises(OperationError) as info:
        copy.sync()
    assert "ghs_expired" not in str(info.value) and "\n" not in str(info.value)

    token_file.write_text(git_http.token)  # refreshed
    assert copy.update("main", "f.yaml", lambda t: Update("a: 2\n", "second")) is not None
    assert git("show", "main:f.yaml", cwd=git_http.root / "cap.git") == "a: 2\n"
    on_disk = b"".join(p.read_bytes() for p in (tmp_path / "work").rglob("*") if p.is_file())
    assert git_http.token.encode() not in on_disk


def test_an_unreadable_token_file_names_git_token_file(git_http: GitServer, tmp_path: Path) -> None:
    init_bare(git_http.root / "cap.git")
    missing = tmp_path / "no-token"
    config = GitConfig(url=git_http.url("cap.git"), token_file=str(missing))
    with pytest.raises(UserError, match=f"git.tokenFile: {missing} cannot be read"):
        WorkingCopy.from_config(config, tmp_path / "work").sync()
