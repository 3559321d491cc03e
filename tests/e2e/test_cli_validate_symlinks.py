"""`validate` runs in pull-request CI on files the pull request chose. A symlink committed in the pull
request (`capacity/prod.yaml -> /home/runner/.aws/credentials`, `-> ../../secrets.env`) must not make
validate read and quote a file outside the folder the link sits in; a link within it (a ConfigMap
mount's `config.yaml -> ..data/config.yaml`) is read as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import run


def test_a_symlink_out_of_its_folder_is_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "secrets.env"
    secret.write_text("AWS_SECRET_ACCESS_KEY_wJalrXUtnFEMI: x\ncluster: [hunter2]\n")
    folder = tmp_path / "repo" / "capacity"
    folder.mkdir(parents=True)
    link = folder / "prod.yaml"
    link.symlink_to(Path("..") / ".." / "secrets.env")
    result = run(capsys, "validate", str(link))
    assert result.code == 2, result.out + result.err
    shown = result.out + result.err
    assert "hunter2" not in shown and "wJalrXUtnFEMI" not in shown, shown
    assert f"{link}: a symlink to a file outside its folder" in shown, shown


def test_a_symlink_within_its_folder_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "mount" / "..2026_12_06"
    data.mkdir(parents=True)
    (data / "asg-reconciler.yaml").write_text(
        "cluster: prod\nregion: us-east-1\nnodeGroups: {explicit: ['0:3:a']}\n"
    )
    (tmp_path / "mount" / "..data").symlink_to("..2026_12_06")
    link = tmp_path / "mount" / "asg-reconciler.yaml"
    link.symlink_to(Path("..data") / "asg-reconciler.yaml")
    result = run(capsys, "validate", str(link))
    assert result.code == 0, result.out + result.err
