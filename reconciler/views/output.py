"""Render rows for `--output table|json|yaml|csv`: the same data for people and for scripts."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ruamel.yaml import YAML

from reconciler.domain.errors import UserError

FORMATS = ("table", "json", "yaml", "csv")


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, default=str) + "\n"


def to_yaml(data: Any) -> str:
    stream = io.StringIO()
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.dump(json.loads(json.dumps(data, default=str)), stream)
    return stream.getvalue()


def to_csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    stream = io.StringIO()
    writer = csv.DictWriter(stream, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: csv_cell(row.get(k)) for k in columns})
    return stream.getvalue()


# What makes a spreadsheet read a cell as a formula (OWASP "CSV Injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> str:
    """A CSV cell a spreadsheet shows as the text it is: names, reasons and commit messages come
    from people and pull requests, and `=HYPERLINK(...)` or `@SUM(...)` would run when opened, so
    text starting with = + - @ tab or CR gets a leading ' (OWASP); numbers stay numbers."""
    if value is None:
        return "-"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    text = _cell(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """A plain aligned text table (no box drawing: it must survive logs and CI output)."""
    cells = [[str(h) for h in headers]] + [[_cell(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def render(
    fmt: str,
    *,
    as_table: Callable[[], str],
    as_data: Callable[[], Any] | None = None,
    as_csv: Callable[[], str] | None = None,
) -> str:
    """One `--output` switch for every command: a table for people, the same data as JSON or YAML
    for scripts, CSV where a command has rows. Each is computed only when asked for. The command
    line offers only the formats a command has (click.Choice); anything else is a UserError here."""
    if fmt == "table":
        return as_table()
    if fmt == "csv" and as_csv is not None:
        return as_csv()
    if fmt == "json" and as_data is not None:
        return to_json(as_data())
    if fmt == "yaml" and as_data is not None:
        return to_yaml(as_data())
    offered = ["table", *(["json", "yaml"] if as_data else []), *(["csv"] if as_csv else [])]
    raise UserError(f"--output {fmt!r}: use one of {', '.join(offered)}")
