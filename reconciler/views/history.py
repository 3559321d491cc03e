"""`history --output table|json|yaml|csv`: the capacity entries gitops/history.py reads, as rows."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC
from typing import Any

from reconciler.gitops.history import Entry
from reconciler.views import output

COLUMNS = (
    "time",
    "kind",
    "cluster",
    "group",
    "from",
    "to",
    "direction",
    "reason",
    "source",
    "instances",
    "commit",
    "author",
    "author_email",
    "proposal",
    "merged_by",
)
_TABLE = ("TIME", "GROUP", "FROM -> TO", "DIR", "REASON", "COMMIT", "AUTHOR", "PROPOSAL", "MERGED BY")


def history_rows(entries: Sequence[Entry]) -> list[dict[str, Any]]:
    """Entries as plain rows with stable keys (`COLUMNS`), the shape json and csv print."""
    return [
        {
            "time": e.time.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "kind": e.kind,
            "cluster": e.cluster,
            "group": e.group,
            "from": e.before,
            "to": e.after,
            "direction": e.direction,
            "reason": e.reason,
            "source": e.source,
            "instances": list(e.instances),
            "commit": e.commit,
            "author": e.author,
            "author_email": e.author_email,
            "proposal": e.proposal,
            "merged_by": e.merged_by,
        }
        for e in entries
    ]


def render_history(entries: Sequence[Entry], fmt: str = "table") -> str:
    rows = history_rows(entries)
    return output.render(
        fmt,
        as_table=lambda: _table(rows, entries),
        as_data=lambda: rows,
        as_csv=lambda: output.to_csv(rows, COLUMNS),
    )


def _table(rows: Sequence[dict[str, Any]], entries: Sequence[Entry]) -> str:
    if not rows:
        return "no capacity commits yet (or none match the filters)\n"
    cells = [
        (
            row["time"].replace("T", " ").removesuffix("Z"),
            row["group"],
            _arrow(entry),
            row["direction"] + (" (external)" if entry.source else ""),
            row["reason"],
            entry.commit[:12],
            row["author"],
            row["proposal"],
            row["merged_by"],
        )
        for row, entry in zip(rows, entries, strict=True)
    ]
    return output.table(cells, _TABLE)


def _arrow(entry: Entry) -> str:
    if entry.before is None or entry.after is None:
        return f"-{len(entry.instances)}" if entry.instances else ""
    return f"{entry.before} -> {entry.after}"
