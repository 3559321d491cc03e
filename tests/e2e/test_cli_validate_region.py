"""`validate` (pull-request CI) says when a config's region is one botocore does not know: every
command that talks to AWS refuses it (unless AWS endpoints of one's own are set), so a typo should
not pass review as "valid". A warning, not an error: a region newer than botocore is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import run


def test_validate_warns_of_a_region_typo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "asg-reconciler.yaml"
    config.write_text("cluster: prod\nregion: us-eest-1\nnodeGroups: {explicit: ['0:3:a']}\n")
    result = run(capsys, "validate", str(config))
    assert result.code == 0, result.err
    shown = result.out + result.err
    assert f"{config}:2: region: 'us-eest-1' is not an AWS region" in shown, shown
    assert "did you mean" in shown and "us-east-1" in shown, shown
    for region in ("us-east-1", "us-gov-west-1", "cn-north-1"):
        config.write_text(f"cluster: prod\nregion: {region}\nnodeGroups: {{explicit: ['0:3:a']}}\n")
        result = run(capsys, "validate", str(config))
        assert result.code == 0 and "not an AWS region" not in result.out + result.err, region
