"""`history --report FILE.html`: the fleet's capacity history as one self-contained page.

Wiring only: fetch the capacity repository (branches and apply's notes), read every cluster of the
folder of `git.path` with the history model (`fleet_history.read_fleet`, the same `git log` as
`history`), build the model, render it (`history_report`), and write the file atomically. Bad input
(--since, --node-group, the file's directory) is refused before anything is written. When it takes
longer than a second, progress goes to stderr, so a long history in CI does not look hung.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from functools import partial
from pathlib import Path, PurePosixPath
from typing import TextIO

from reconciler.config.settings import Config
from reconciler.domain.errors import UserError
from reconciler.gitops.fleet_history import build_fleet, read_fleet
from reconciler.gitops.history import NOTES_REF, parse_since
from reconciler.gitops.record_reading import history_entries
from reconciler.gitops.record_signing import load_verifier
from reconciler.runtime.capacity_repo import working_copy
from reconciler.views.history_html import render_report

REMOTE_BRANCHES = "refs/remotes/origin/"


class _Progress:
    """Lines on stderr, only once the whole run has taken `after` seconds; render steps at most
    once a second (and the last one)."""

    def __init__(self, stream: TextIO, after: float) -> None:
        self.stream, self.after = stream, after
        self.started = self._last = time.monotonic()

    def say(self, text: str, *, every: float = 0.0) -> None:
        now = time.monotonic()
        if now - self.started < self.after or (every and now - self._last < every):
            return
        self._last = now
        print(f"history --report: {text}", file=self.stream, flush=True)

    def elapsed(self) -> str:
        return f"{time.monotonic() - self.started:.1f} s"


def write_report(
    config: Config,
    path: Path | str,
    since: str | None = None,
    node_group: str | None = None,
    *,
    now: datetime | None = None,
    stderr: TextIO | None = None,
    progress_after: float = 1.0,
) -> str:
    """Write the report to `path`; returns the one line the CLI prints."""
    progress = _Progress(stderr or sys.stderr, progress_after)
    target = Path(path)
    if target.is_dir() or not target.parent.is_dir():
        why = "is a directory" if target.is_dir() else f"directory {target.parent} does not exist"
        raise UserError(f"--report {path}: {why} (name a file in an existing directory)")
    now = now or datetime.now(UTC)
    cutoff = parse_since(since, now) if since else None
    verifier = load_verifier(config.apply.record_signers, "apply.recordSigners")
    copy = working_copy(config)
    copy.fetch_notes(NOTES_REF)
    parent = str(PurePosixPath(config.manifest_path).parent)
    folder = "" if parent == "." else parent
    branch = config.git.branch
    source = read_fleet(
        copy.path,
        f"{REMOTE_BRANCHES}{branch}",
        folder,
        REMOTE_BRANCHES,
        partial(history_entries, verifier=verifier) if verifier else history_entries,
        label=branch,
    )
    progress.say(
        f"read the history of {_count(len(source.manifests), 'cluster')} ({len(source.entries)} entries)"
        f" in {progress.elapsed()}"
    )
    fleet = build_fleet(
        source,
        now=now,
        since=cutoff,
        node_group=node_group,
        repository=copy.shown_url,
        branch=branch,
        folder=folder,
    )

    def rendered(done: int, total: int) -> None:
        progress.say(f"rendered {done}/{total} node groups", every=0.0 if done == total else 1.0)

    html = render_report(fleet, progress=rendered)
    try:
        _write_atomically(target, html)
    except OSError as exc:
        raise UserError(f"--report {path}: cannot write it: {exc.strerror or exc}") from None
    progress.say(f"wrote {target} ({len(html) // 1024} KiB) in {progress.elapsed()}")
    counts = (_count(len(fleet.clusters), "cluster"), _count(fleet.group_count, "node group"))
    return f"wrote {target}: {', '.join(counts)}, {_count(fleet.event_count, 'event')}"


def _write_atomically(target: Path, text: str) -> None:
    """Readers (a web server, a CI artifact step) never see half a page."""
    handle, scratch = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(scratch, 0o644)
        os.replace(scratch, target)
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
