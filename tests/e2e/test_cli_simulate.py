"""`asg-reconciler simulate` end to end: the figures in every output format, the plot, the trace
commands under it, and one line with exit 2 for every bad input."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from reconciler.config.documents import load_schema
from tests.support.cli import Result, run
from tests.support.simulation_world import START, arrive

FIXED = ("--approve-after", "30m", "--provisioning-delay", "90s", "--duration", "2h")


def write_trace(path: Path, *events: dict[str, Any], instance_type: str = "m5.large") -> Path:
    group = {
        "name": "general",
        "instanceType": instance_type,
        "minSize": 1,
        "maxSize": 10,
        "desired": 2,
        "zones": ["us-east-1a"],
    }
    lines = [{"kind": "cluster", "start": START, "groups": [group]}, *events]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.fixture
def idle(tmp_path: Path) -> Path:
    """Two nodes, one busy; the other's small pod fits beside the busy one: unneeded from the start."""
    return write_trace(tmp_path / "idle.jsonl", arrive("a-big", 0, "1500m"), arrive("b-small", 0, "100m"))


def one_line_error(result: Result, *fragments: str) -> None:
    assert result.code == 2, result
    assert result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert "Traceback" not in result.err
    for fragment in fragments:
        assert fragment in lines[0]


def test_json_gives_both_policies_figures(capsys: pytest.CaptureFixture[str], idle: Path) -> None:
    result = run(capsys, "simulate", "--trace", str(idle), "--compare", "ca", "--output", "json", *FIXED)
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["trace"]["durationSeconds"] == 7200
    assert data["trace"]["intervalSeconds"] == 30
    ours, ca = data["policies"]
    assert (ours["policy"], ca["policy"]) == ("ours", "ca")
    assert ca["nodeHours"] == round(2 + 600 / 3600, 4)  # removed after unneededTime (10m)
    assert ours["nodeHours"] == round(2 + 2400 / 3600, 4)  # ... and 30m of review later
    assert ours["costUsd"] == round(ours["nodeHours"] * 0.096, 4)
    assert ours["proposals"]["opened"] == ours["proposals"]["approved"] == 1
    assert ca["scaleDowns"] == ca["nodesRemoved"] == 1
    assert ours["plans"] == ca["plans"] == 241
    assert ours["nodeGroups"][0]["instanceType"] == "m5.large"


def test_csv_has_the_same_figures_as_json(capsys: pytest.CaptureFixture[str], idle: Path) -> None:
    args = ("simulate", "--trace", str(idle), "--compare", "ca", *FIXED)
    data = json.loads(run(capsys, *args, "--output", "json").out)
    rows = list(csv.DictReader(io.StringIO(run(capsys, *args, "--output", "csv").out)))
    assert rows
    figures = {(r["policy"], r["nodeGroup"], r["metric"]): r["value"] for r in rows}
    for policy in data["policies"]:
        name = policy["policy"]
        assert figures[(name, "", "nodeHours")] == str(policy["nodeHours"])
        assert figures[(name, "", "pendingPodSeconds")] == str(policy["pendingPodSeconds"])
        assert figures[(name, "", "timeToScheduleSeconds.p99")] == str(policy["timeToScheduleSeconds"]["p99"])
        assert figures[(name, "", "proposals.opened")] == str(policy["proposals"]["opened"])
        group = policy["nodeGroups"][0]
        assert figures[(name, "general", "nodeHours")] == str(group["nodeHours"])
        assert figures[(name, "general", "costUsd")] == str(group["costUsd"])


def test_table_shows_both_policies_side_by_side(capsys: pytest.CaptureFixture[str], idle: Path) -> None:
    result = run(capsys, "simulate", "--trace", str(idle), "--compare", "ca", *FIXED)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    header = next(line for line in lines if line.split() == ["ours", "ca"])
    assert header.index("ours") < header.index("ca")
    total = next(line for line in lines if line.startswith("node-hours total"))
    assert total.split()[-2:] == ["2.7", "2.2"]
    assert "ours vs ca: +0.5 node-hours, +$0.05 (+23.1%), +0 pending pod-seconds" in result.out
    assert "241 plans, one every 30s, seed 1" in lines[0]


def test_the_same_seed_prints_the_same_figures(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    burst = write_trace(tmp_path / "burst.jsonl", *(arrive(f"p{i}", 10, "900m") for i in range(8)))
    args = ("simulate", "--trace", str(burst), "--compare", "ca", "--output", "json", "--duration", "1h")
    first = run(capsys, *args, "--seed", "3")
    assert first.code == 0, first.err
    assert run(capsys, *args, "--seed", "3").out == first.out
    assert json.loads(first.out)["policies"][0]["nodesAdded"] == 2  # 8 pods, two per node, two nodes there


def test_plot_writes_a_png(capsys: pytest.CaptureFixture[str], idle: Path, tmp_path: Path) -> None:
    target = tmp_path / "sim.png"
    result = run(capsys, "simulate", "--trace", str(idle), "--compare", "ca", "--plot", str(target), *FIXED)
    assert result.code == 0, result.err
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot written to {target}" in result.err


def test_plot_without_matplotlib_is_one_line(
    capsys: pytest.CaptureFixture[str], idle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    result = run(capsys, "simulate", "--trace", str(idle), "--plot", str(tmp_path / "x.png"), *FIXED)
    one_line_error(result, "--plot needs matplotlib", "asg-reconciler[plot]")


def test_a_generated_trace_simulates(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "gen.jsonl"
    made = run(
        capsys, "simulate", "trace", "generate", "--kind", "batch", "--hours", "3", "--output", str(target)
    )
    assert made.code == 0, made.err
    result = run(capsys, "simulate", "--trace", str(target), "--compare", "ca", "--output", "json")
    assert result.code == 0, result.err
    ours, ca = json.loads(result.out)["policies"]
    assert ours["podsArrived"] == ca["podsArrived"] > 0
    assert ours["nodesAdded"] > 0


@pytest.mark.parametrize(
    ("extra", "fragments"),
    [
        (("--working-hours", "nine-to-five"), ("--working-hours: 'nine-to-five' is not a span of the day",)),
        (("--working-hours", "09:00-17:00", "--time-zone", "Mars/Olympus"), ("--time-zone:", "Mars/Olympus")),
        (("--approve-within", "soon"), ("--approve-within: 'soon' is not a duration",)),
        (("--provisioning-delay", "m5.large=x"), ("--provisioning-delay m5.large=x",)),
        (("--duration", "0s"), ("--duration: '0s' must be above 0",)),
        # options that would be ignored are refused (found by the new-user trial)
        (("--time-zone", "Europe/Berlin"), ("--time-zone: only shape --working-hours",)),
        (("--weekdays", "mon,tue"), ("--weekdays: only shape --working-hours",)),
        (
            ("--approve-within", "1h", "--approve-after", "30m"),
            ("--approve-after: give it or --approve-within",),
        ),
        (("--provisioning-delay", "zz.huge=90s"), ("no group of", "launches zz.huge", "m5.large")),
        (("--plot", "out.jpg"), ("--plot: out.jpg must end in .png",)),
    ],
)
def test_bad_options_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], idle: Path, extra: tuple[str, ...], fragments: tuple[str, ...]
) -> None:
    one_line_error(run(capsys, "simulate", "--trace", str(idle), *extra), *fragments)


def test_bad_files_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    one_line_error(
        run(capsys, "simulate", "--trace", str(tmp_path / "none.jsonl")), "none.jsonl", "not found"
    )
    odd = write_trace(tmp_path / "odd.jsonl", instance_type="x9.huge")
    one_line_error(
        run(capsys, "simulate", "--trace", str(odd)), "groups.general.instanceType", "--instance-types FILE"
    )
    (tmp_path / "types.json").write_text('{"instanceTypes": {"x9.huge": {"vcpus": 0}}}')
    one_line_error(
        run(capsys, "simulate", "--trace", str(odd), "--instance-types", str(tmp_path / "types.json")),
        "types.json: instanceTypes.x9.huge.vcpus: must be a whole number above 0",
    )
    (tmp_path / "types.json").write_text(
        '{"instanceTypes": {"x9.huge": {"vcpus": 4, "memoryMiB": 16384, "maxENIs": 4, "ipv4PerENI": 15}}}'
    )
    (tmp_path / "prices.json").write_text('{"prices": {"x9.huge": "cheap"}}')
    one_line_error(
        run(
            capsys,
            "simulate",
            "--trace",
            str(odd),
            "--instance-types",
            str(tmp_path / "types.json"),
            "--prices",
            str(tmp_path / "prices.json"),
        ),
        "prices.json: prices.x9.huge: must be a number",
    )
    (tmp_path / "prices.json").write_text('{"prices": {"x9.huge": 0.5}}')
    fine = run(
        capsys,
        "simulate",
        "--trace",
        str(odd),
        "--instance-types",
        str(tmp_path / "types.json"),
        "--prices",
        str(tmp_path / "prices.json"),
        "--output",
        "json",
        "--duration",
        "1h",
    )
    assert fine.code == 0, fine.err
    assert json.loads(fine.out)["policies"][0]["costUsd"] == 1.0  # two nodes for an hour at $0.50


def test_no_trace_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "simulate")
    assert result.code == 2
    assert "Missing option '--trace'" in result.err


def test_a_trace_with_nothing_after_its_start_needs_a_duration(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """It used to print "Simulated 0s ... 1 plans" and $0.00 without a word."""
    bare = write_trace(tmp_path / "bare.jsonl")
    one_line_error(
        run(capsys, "simulate", "--trace", str(bare)), "no event after the trace's start", "--duration"
    )
    result = run(capsys, "simulate", "--trace", str(bare), "--duration", "1h", "--output", "json")
    assert result.code == 0, result.err
    (ours,) = json.loads(result.out)["policies"]
    assert ours["plans"] == 121


def test_json_follows_its_schema_and_csv_keeps_the_warnings(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """schemas/simulate.schema.json is the JSON's contract, as plan's and status's are theirs; a
    warning (here: a pod no group can take) is a CSV row too (found by the new-user trial)."""
    trace = write_trace(
        tmp_path / "stuck.jsonl",
        arrive("a-big", 0, "1500m"),
        arrive("huge", 60, "64"),
        arrive("late", 600, "100m"),
    )
    result = run(capsys, "simulate", "--trace", str(trace), "--compare", "ca", "--output", "json", *FIXED)
    assert result.code == 0, result.err
    document = json.loads(result.out)
    jsonschema.validate(document, load_schema("simulate"))
    warnings = document["policies"][0]["warnings"]
    (never,) = (w for w in warnings if "never scheduled" in w)
    assert never.startswith(
        "1 pod(s) were never scheduled (no group could help, or left waiting): default/huge ("
    )
    result = run(capsys, "simulate", "--trace", str(trace), "--output", "csv", *FIXED)
    rows = list(csv.DictReader(io.StringIO(result.out)))
    assert [r["value"] for r in rows if r["metric"] == "warning"] == warnings
