"""`simulate trace generate|convert`, driven through the click group as a user would."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from reconciler.cli.trace import trace
from reconciler.domain.errors import UserError
from reconciler.simulation.convert import dump_paths
from reconciler.simulation.generate import generate
from reconciler.simulation.trace import Arrival, read_trace
from tests.unit.test_simulation_convert import write_dumps


def test_generate_to_stdout_is_the_generator_s_trace() -> None:
    result = CliRunner().invoke(trace, ["generate", "--kind", "batch", "--hours", "30", "--seed", "4"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == generate("batch", 30, 4).lines()


def test_generate_to_a_file_with_a_start_says_what_it_wrote(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    args = [
        "generate",
        "--kind",
        "diurnal",
        "--hours",
        "2",
        "--start",
        "2026-07-01T00:00:00Z",
        "--output",
        str(out),
    ]
    result = CliRunner().invoke(trace, args)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    written = read_trace(out)
    assert written.start.isoformat() == "2026-07-01T00:00:00+00:00"
    arrivals = sum(1 for e in written.events if isinstance(e, Arrival))
    assert result.stderr == (
        f"wrote {out}: 2 groups, {arrivals} arrivals, {len(written.events) - arrivals} departures, "
        f"the last event at {written.end_at / 3600:.1f}h\n"
    )


def test_generate_mistakes_are_user_errors_or_usage_errors() -> None:
    runner = CliRunner()
    result = runner.invoke(trace, ["generate", "--start", "tomorrow"])
    assert isinstance(result.exception, UserError)
    assert (
        str(result.exception) == "--start: 'tomorrow' is not a time (use RFC 3339, e.g. 2026-06-01T00:00:00Z)"
    )
    result = runner.invoke(trace, ["generate", "--start", "2026-06-01T00:00:00"])
    assert isinstance(result.exception, UserError) and "has no time zone" in str(result.exception)
    result = runner.invoke(trace, ["generate", "--hours", "-1"])
    assert isinstance(result.exception, UserError) and str(result.exception).startswith(
        "--hours: -1.0 is not a positive number"
    )
    result = runner.invoke(trace, ["generate", "--hours", "2000"])  # the option's name, as typed
    assert isinstance(result.exception, UserError) and str(result.exception).startswith(
        "--hours: 2000 is out of range (at most 744"
    )
    result = runner.invoke(trace, ["generate", "--kind", "weekly"])
    assert result.exit_code == 2 and "'weekly' is not one of" in result.output


def test_convert_a_directory_and_single_files(tmp_path: Path) -> None:
    directory = write_dumps(tmp_path / "dumps")
    out = tmp_path / "trace.jsonl"
    result = CliRunner().invoke(trace, ["convert", str(directory), "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stderr == f"wrote {out}: 2 groups, 5 arrivals, 3 departures, the last event at 0.5h\n"
    assert len(read_trace(out).events) == 8
    first = [path for _, path in dump_paths([directory])[:2]]  # 09:00 and 09:10
    copies = tmp_path / "copies"
    copies.mkdir()
    for path in first:
        shutil.copy(path, copies / path.name)
    result = CliRunner().invoke(trace, ["convert", *map(str, sorted(copies.iterdir()))])
    assert result.exit_code == 0, result.output
    kinds = [json.loads(line)["kind"] for line in result.stdout.splitlines()]
    assert kinds == ["cluster", "arrive", "arrive", "depart", "arrive", "arrive"]


def test_convert_needs_dumps_and_names_a_bad_one() -> None:
    result = CliRunner().invoke(trace, ["convert"])
    assert result.exit_code == 2 and "Missing argument 'DUMP...'" in result.output
    result = CliRunner().invoke(trace, ["convert", "nowhere-2026-06-01T00:00:00Z.json"])
    assert isinstance(result.exception, UserError)
    assert str(result.exception) == "nowhere-2026-06-01T00:00:00Z.json: dump not found"


def test_every_documented_trace_command_and_option_exists() -> None:
    """test_docs stops at the `simulate` group; this checks what docs show under `simulate trace`."""
    import shlex

    from tests.unit.test_docs import _documented_commands

    documented = [
        (where, shlex.split(text.replace("$(", "").replace(")", ""))[3:])
        for where, text in _documented_commands()
        if text.startswith("asg-reconciler simulate trace ")
    ]
    assert {words[0] for _, words in documented} == {"generate", "convert"}
    for where, (name, *rest) in documented:
        known = {option for param in trace.commands[name].params for option in param.opts}
        for word in rest:
            assert not word.startswith("-") or word in known, f"{where}: trace {name} has no option {word}"


def test_generate_on_groups_from_a_file(tmp_path: Path) -> None:
    groups = tmp_path / "groups.yaml"
    groups.write_text(
        "groups:\n"
        "  - name: web\n"
        "    instanceType: c5.xlarge\n"
        "    minSize: 2\n"
        "    maxSize: 30\n"
        "    desired: 2\n"
        "    zones: [eu-west-1a]\n"
    )
    result = CliRunner().invoke(trace, ["generate", "--kind", "steady", "--groups", str(groups)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[0])["groups"] == [
        {
            "name": "web",
            "instanceType": "c5.xlarge",
            "minSize": 2,
            "maxSize": 30,
            "desired": 2,
            "zones": ["eu-west-1a"],
        }
    ]
    groups.write_text(groups.read_text().replace("desired: 2", "desired: 40"))
    result = CliRunner().invoke(trace, ["generate", "--groups", str(groups)])
    assert isinstance(result.exception, UserError)
    assert str(result.exception) == (
        f"{groups}:6: groups.0.desired: 40 is not within minSize 2 and maxSize 30 "
        "(use minSize <= desired <= maxSize)"
    )
