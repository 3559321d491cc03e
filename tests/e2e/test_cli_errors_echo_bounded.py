"""An error quotes what it is about, never a whole value: a config or manifest under the 1 MiB cap may
still hold a 900 KB value, or thousands of unknown keys (a symlink to some other file, `validate` in
pull-request CI on a file the pull request chose), and the one-line error must stay one readable
line that does not replay the file into a log."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import run

LONGEST = 1000  # characters a one-line error may take


def test_a_huge_value_is_quoted_by_its_start_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "asg-reconciler.yaml"
    config.write_text("cluster: " + "a" * 900_000 + "\nregion: us-east-1\n")
    for command in (("validate", str(config)), ("status", "--config", str(config))):
        result = run(capsys, *command)
        assert result.code == 2, result.err
        [line] = (result.out + result.err).strip().splitlines()
        assert len(line) < LONGEST, line[:300]
        assert "cluster" in line and "characters)" in line, line[:300]


def test_thousands_of_unknown_keys_are_counted_not_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "asg-reconciler.yaml"
    config.write_text("cluster: prod\n" + "".join(f"secret-line-{i}: x\n" for i in range(5000)))
    result = run(capsys, "validate", str(config))
    assert result.code == 2, result.err
    [line] = (result.out + result.err).strip().splitlines()
    assert len(line) < LONGEST, line[:300]
    assert "unknown key 'secret-line-0'" in line and "and 4,995 more" in line, line[:300]
