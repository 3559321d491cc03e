"""Found by review (issue 28): a 3-line trace with `at: 1e12` or `desired: 1e8` made `simulate` run
for ever. What a trace can ask for is bounded by its schema (31 days, 5,000 nodes a group) and what
the run would do by the plans it may take; each refusal is one line naming the field, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run
from tests.support.simulation_world import START, arrive

MONTH = 31 * 24 * 3600


def group(**changes: Any) -> dict[str, Any]:
    raw = {"name": "general", "instanceType": "m5.large", "minSize": 1, "maxSize": 10, "desired": 2}
    return {**raw, "zones": ["us-east-1a"], **changes}


def write(path: Path, *lines: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def cluster(*groups: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "cluster", "start": START, "groups": list(groups or [group()])}


def simulate(trace: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """In a child process with a deadline: the bug was a run that never ends, and that must fail the
    test rather than hang the suite."""
    return subprocess.run(
        [sys.executable, "-m", "reconciler", "simulate", "--trace", str(trace), *extra],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def refused(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode == 2, result
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_an_arrival_a_trillion_seconds_away_is_refused(tmp_path: Path) -> None:
    trace = write(
        tmp_path / "far.jsonl", cluster(), arrive("web-1", 0, "100m"), arrive("web-2", 1e12, "100m")
    )
    refused(simulate(trace), "far.jsonl:3", "arrive.at", "at most 2678400")


def test_a_departure_past_the_bound_is_refused(tmp_path: Path) -> None:
    late = {"kind": "depart", "at": MONTH + 1, "pod": "web-1"}
    trace = write(tmp_path / "late.jsonl", cluster(), arrive("web-1", 0, "100m"), late)
    refused(simulate(trace), "late.jsonl:3", "depart.at", "at most 2678400")


def test_a_run_for_past_the_bound_is_refused(tmp_path: Path) -> None:
    trace = write(tmp_path / "long.jsonl", cluster(), arrive("job-1", 0, "100m", run_for=1e15))
    refused(simulate(trace), "long.jsonl:2", "arrive.runFor", "at most 2678400")


@pytest.mark.parametrize("field", ["desired", "maxSize", "minSize"])
def test_a_hundred_million_nodes_are_refused(tmp_path: Path, field: str) -> None:
    sizes = {"minSize": 1, "maxSize": 10, "desired": 2, field: 100_000_000}
    if field == "minSize":
        sizes.update(maxSize=100_000_000, desired=100_000_000)
    trace = write(tmp_path / "huge.jsonl", cluster(group(**sizes)), arrive("web-1", 60, "100m"))
    refused(simulate(trace), "huge.jsonl:1", "cluster.groups.0.", "at most 5000")


def test_desired_written_as_an_exponent_is_refused_too(tmp_path: Path) -> None:
    """JSON Schema's integers include 1e8 (a float with no fraction): the bound is what stops it."""
    trace = tmp_path / "exp.jsonl"
    line = json.dumps(cluster(group(maxSize=10))).replace('"maxSize": 10', '"maxSize": 1e8')
    trace.write_text(line + "\n" + json.dumps(arrive("web-1", 60, "100m")) + "\n")
    refused(simulate(trace), "exp.jsonl:1", "cluster.groups.0.maxSize", "at most 5000")


def test_the_groups_together_start_with_at_most_5000_nodes(tmp_path: Path) -> None:
    groups = [group(name=f"g{i}", minSize=0, maxSize=5000, desired=3000) for i in range(2)]
    trace = write(tmp_path / "many.jsonl", cluster(*groups), arrive("web-1", 60, "100m"))
    refused(simulate(trace), "many.jsonl:1", "cluster.groups", "6000 nodes", "at most 5000")


def test_a_duration_past_the_bound_is_refused(tmp_path: Path) -> None:
    trace = write(tmp_path / "t.jsonl", cluster(), arrive("web-1", 60, "100m"))
    refused(simulate(trace, "--duration", "100000h"), "--duration", "at most 744h")


def test_too_many_plans_for_the_interval_names_run_interval(tmp_path: Path) -> None:
    """31 days at a 1-second run.interval is 2.7 million plans: refused before the first, naming the
    interval, not run for hours."""
    trace = write(tmp_path / "t.jsonl", cluster(), arrive("web-1", 60, "100m"))
    config = tmp_path / "c.yaml"
    config.write_text("cluster: sim\nrun:\n  interval: 1s\n")
    refused(simulate(trace, "--config", str(config), "--duration", "744h"), "run.interval", "300,000")


def test_a_generated_trace_longer_than_the_bound_is_refused(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "reconciler", "simulate", "trace", "generate", "--hours", "1e9"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    refused(result, "--hours: 1e+09 is out of range", "at most 744")


def test_a_duration_in_days_is_taken_as_history_since_takes_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`--duration 2d` (and `1d12h`) as `history --since 7d`; a bound in days is still refused in
    one line."""
    trace = write(tmp_path / "t.jsonl", cluster(), arrive("web-1", 60, "100m"))
    for duration, plans in (("2d", 5761), ("1d12h", 4321)):
        result = run(capsys, "simulate", "--trace", str(trace), "--output", "json", "--duration", duration)
        assert result.code == 0, result.err
        (ours,) = json.loads(result.out)["policies"]
        assert ours["plans"] == plans, (duration, ours["plans"])
    refused(simulate(trace, "--duration", "32d"), "--duration", "at most 744h")
    refused(simulate(trace, "--duration", "2 days"), "--duration", "use e.g. 90s, 10m, 4h or 2d")


def test_the_bounds_themselves_are_accepted(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """An arrival at exactly 31 days and a 5,000-node group are valid (simulated here for an hour)."""
    trace = write(
        tmp_path / "t.jsonl",
        cluster(group(minSize=0, maxSize=5000, desired=0)),
        arrive("web-1", 0, "100m"),
        arrive("web-2", MONTH, "100m", run_for=MONTH),
    )
    result = run(capsys, "simulate", "--trace", str(trace), "--output", "json", "--duration", "1h")
    assert result.code == 0, result.err
    (ours,) = json.loads(result.out)["policies"]
    assert ours["plans"] == 121
