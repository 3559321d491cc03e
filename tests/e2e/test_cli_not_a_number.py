"""YAML's `.nan` passes every JSON Schema bound (NaN compares false with all of them): a price, a
discount or a threshold of NaN must be refused like any other value out of range, not reach the
planner (where `Fraction(nan)` is a traceback and every comparison with it is false)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import run


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("expanderOptions: {prices: {m5.large: .nan}}", "expanderOptions.prices.m5.large"),
        ("expanderOptions: {spotPrices: {m5.large: .NaN}}", "expanderOptions.spotPrices.m5.large"),
        ("expanderOptions: {spotDiscount: .nan}", "expanderOptions.spotDiscount"),
        ("scaleDown: {utilizationThreshold: .nan}", "scaleDown.utilizationThreshold"),
    ],
)
def test_nan_is_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, path: str
) -> None:
    config = tmp_path / "asg-reconciler.yaml"
    config.write_text(f"cluster: prod\nregion: us-east-1\nexpander: price\n{text}\n")
    for command in (("validate", str(config)), ("plan", "--dry-run", "--config", str(config))):
        result = run(capsys, *command)
        assert result.code == 2, result.out + result.err
        [line] = (result.out + result.err).strip().splitlines()
        assert f"{path}: NaN is not a number" in line, line
