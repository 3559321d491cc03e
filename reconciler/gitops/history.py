"""`history`: the capacity audit trail, read from commit trailers with a single `git log`.

Every capacity commit carries its changes as trailers (`trailers`), so the whole timeline is one
`git log` whose output we split, never a YAML parse per commit. Merge commits in the same output tell
who merged a scale-down proposal, and when it landed. Apply records (`refs/notes/asg-reconciler`,
written by apply) can join the same timeline through `note_entries`: the log then also prints each
commit's note, and the entries it yields carry `kind="apply"`.
"""

from __future__ import annotations

import codecs
import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from reconciler import output
from reconciler.errors import OperationError, UserError
from reconciler.gitops.trailers import Scanned, last_paragraph, scan_trailers

NOTES_REF = "refs/notes/asg-reconciler"
KIND_CHANGE = "change"
KIND_APPLY = "apply"

# %B rather than %(trailers): git prints raw messages faster than it parses trailers, and only
# capacity commits (a substring test away) need parsing at all.
_FORMAT = "%x1e" + "%x00".join(("%H", "%P", "%an", "%ae", "%cn", "%ct", "%B"))
_PULL = re.compile(r"#[0-9]+")
_BRANCH = re.compile(r"^Merge (?:remote-tracking )?branch '([^']+)'")


class Entry(NamedTuple):
    """One group's capacity change (or, with kind="apply", one apply record) on the timeline.

    Immutable like our frozen dataclasses, but a NamedTuple: `history` makes one per change of a
    long-lived repo (10,000s), and tuples are several times cheaper to build.
    """

    kind: str
    cluster: str
    group: str
    time: datetime  # when it landed on the branch (the merge, for a merged proposal)
    before: int | None
    after: int | None
    direction: str  # up | down | none
    reason: str
    commit: str
    author: str
    author_email: str = ""
    source: str = ""  # "" the planner, "external" adopted drift
    instances: tuple[str, ...] = ()  # removed by a scale-down
    proposal: str = ""
    merged_by: str = ""


class LogRecord(NamedTuple):
    """One commit as the history's `git log` prints it (what a `NoteParser` is given).

    A NamedTuple, like `Entry`, because `parse_log` may make one per commit of a long branch.
    """

    sha: str
    parents: tuple[str, ...]
    author: str
    author_email: str
    committer: str
    time: str  # committer date, seconds since the epoch
    message: str
    note: str

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0]


NoteParser = Callable[[LogRecord], Sequence[Entry]]


# ------------------------------------------------------------------------------------ the command


def history_command(
    repo_path: Path | str,
    cluster: str | None,
    node_group: str | None = None,
    since: str | None = None,
    *,
    ref: str = "HEAD",
    now: datetime | None = None,
    note_entries: NoteParser | None = None,
) -> list[Entry]:
    """What `asg-reconciler history` shows: entries newest first, filtered. Bad --since: UserError.

    Parses git's output while git is still printing it (two processes, two cores), which keeps a
    10,000-commit history within a small multiple of a bare `git log`.
    """
    cutoff = parse_since(since, now or datetime.now(UTC)) if since else None
    index = LogIndex(notes=note_entries is not None)
    stream_log(repo_path, ref, index.add, notes=note_entries is not None)
    found = index.entries(note_entries, cluster=cluster, node_group=node_group, since=cutoff)
    if node_group is not None and not found:
        known = sorted({e.group for e in index.entries(note_entries, cluster=cluster) if e.group})
        if node_group not in known:  # a typo is not "nothing happened"
            names = ", ".join(known) if known else "none yet"
            raise UserError(
                f"--node-group: {node_group!r} never appears in the capacity history"
                f"{f' of cluster {cluster}' if cluster else ''} (known groups: {names})"
            )
    return found


def _log_args(ref: str, notes: bool) -> list[str]:
    args = ["git", "log", f"--format={_FORMAT}" + ("%x00%N" if notes else "")]
    args += [f"--notes={NOTES_REF}"] if notes else ["--no-notes"]
    return [*args, ref, "--"]


def read_log(repo_path: Path | str, ref: str = "HEAD", *, notes: bool = False) -> str:
    """The history's `git log` output in one string ("" when there are no commits yet)."""
    parts: list[str] = []
    stream_log(repo_path, ref, lambda chunk: parts.append("\x1e" + chunk), notes=notes)
    return "".join(parts)


def stream_log(repo_path: Path | str, ref: str, sink: Callable[[str], None], *, notes: bool = False) -> None:
    """Run the one `git log` and hand each commit's record to `sink` as soon as it is complete."""
    if not Path(repo_path).is_dir():
        raise OperationError(f"git log: {repo_path} is not a directory")
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(
            _log_args(ref, notes), cwd=repo_path, stdout=subprocess.PIPE, stderr=errors
        )
        assert process.stdout is not None
        pending = ""
        with process.stdout:
            while data := os.read(process.stdout.fileno(), 1 << 16):
                records = (pending + decoder.decode(data)).split("\x1e")
                pending = records.pop()
                for record in records:
                    if record:
                        sink(record)
        pending += decoder.decode(b"", final=True)
        if pending:
            sink(pending)
        code = process.wait()
        errors.seek(0)
        stderr = errors.read().decode("utf-8", errors="replace").strip()
    if code != 0:
        if any(s in stderr for s in ("unknown revision", "bad revision", "does not have any commits")):
            return
        reason = stderr.splitlines()[-1] if stderr else f"exit code {code}"
        raise OperationError(f"git log in {repo_path}: {reason.removeprefix('fatal: ')}")


def parse_log(text: str) -> list[LogRecord]:
    """Every commit of `read_log`'s output as a record."""
    return [_record(chunk.split("\x00")) for chunk in text.split("\x1e")[1:]]


def _record(parts: list[str]) -> LogRecord:
    note = parts[7].strip("\n") if len(parts) > 7 else ""
    return LogRecord(
        parts[0], tuple(parts[1].split()), parts[2], parts[3], parts[4], parts[5], parts[6], note
    )


# -------------------------------------------------------------------------------- the pure core


def build_entries(
    text: str,
    note_entries: NoteParser | None = None,
    *,
    cluster: str | None = None,
    node_group: str | None = None,
    since: datetime | None = None,
) -> list[Entry]:
    """Entries from `read_log` output, newest first, keeping only those the filters match."""
    index = LogIndex(notes=note_entries is not None)
    for chunk in text.split("\x1e")[1:]:
        index.add(chunk)
    return index.entries(note_entries, cluster=cluster, node_group=node_group, since=since)


class LogIndex:
    """What history needs from the log, gathered one commit at a time (so it can run while git prints).

    Every commit contributes its parents (to find merges); only capacity commits, merges and commits
    with notes are kept whole. Hot path: 10,000s of commits.
    """

    def __init__(self, *, notes: bool = False) -> None:
        self._notes = notes
        self.tip: str | None = None  # git log prints the commit it starts from first
        self.parents_of: dict[str, str] = {}
        self.kept: dict[str, list[str]] = {}  # merges and noted commits
        self.found: dict[str, tuple[list[str], Scanned]] = {}

    def add(self, chunk: str) -> None:
        parts = chunk.split("\x00")
        sha, parents, message = parts[0], parts[1], parts[6]
        if self.tip is None:
            self.tip = sha
        self.parents_of[sha] = parents
        if " " in parents or (self._notes and len(parts) > 7 and parts[7].strip()):
            self.kept[sha] = parts
        if "apacity-" in message or "APACITY-" in message:  # cheap pre-filter
            paragraph = last_paragraph(message)
            scanned = scan_trailers(paragraph) if paragraph is not None else None
            if scanned is not None:
                self.found[sha] = (parts, scanned)

    def entries(
        self,
        note_entries: NoteParser | None = None,
        *,
        cluster: str | None = None,
        node_group: str | None = None,
        since: datetime | None = None,
    ) -> list[Entry]:
        """The timeline, newest first, keeping only the entries the filters match."""
        landed_by = _landings(self.tip, self.parents_of)
        entries: list[Entry] = []
        if note_entries is not None:
            for parts in self.kept.values():
                if len(parts) > 7 and parts[7].strip():
                    found = note_entries(_record(parts))
                    entries += select(found, cluster=cluster, node_group=node_group, since=since)
        merges_with_content = {landed_by[sha] for sha in self.found if sha in landed_by}
        for sha, (parts, scanned) in self.found.items():
            if sha in merges_with_content or (cluster is not None and scanned.cluster != cluster):
                continue
            merge = landed_by.get(sha)
            entries += _entries(parts, scanned, self.kept[merge] if merge else None, node_group, since)
        entries.sort(key=lambda e: e.time, reverse=True)
        return entries


def select(
    entries: Sequence[Entry],
    *,
    cluster: str | None = None,
    node_group: str | None = None,
    since: datetime | None = None,
) -> list[Entry]:
    return [
        e
        for e in entries
        if (cluster is None or e.cluster == cluster)
        and (node_group is None or e.group == node_group)
        and (since is None or e.time >= since)
    ]


def _landings(tip: str | None, parents_of: dict[str, str]) -> dict[str, str]:
    """Commit -> the merge commit that brought it onto the branch's first-parent line."""
    mainline: list[str] = []
    merges: list[str] = []
    sha = tip
    while sha and sha in parents_of:
        mainline.append(sha)
        parents = parents_of[sha]
        if " " in parents:
            merges.append(sha)
        sha = parents.split(" ", 1)[0]
    if not merges:
        return {}
    on_main = set(mainline)
    landed_by: dict[str, str] = {}
    for merge in reversed(merges):  # oldest first: a commit lands with the first merge that has it
        stack = parents_of[merge].split()[1:]
        while stack:
            sha = stack.pop()
            if sha in on_main or sha in landed_by or sha not in parents_of:
                continue
            landed_by[sha] = merge
            stack.extend(parents_of[sha].split())
    return landed_by


def _entries(
    parts: list[str], found: Scanned, merge: list[str] | None, node_group: str | None, since: datetime | None
) -> list[Entry]:
    """One entry per group the commit changes (or names instances of). Hot: keep it plain.

    `parts` and `merge` are split log records: sha, parents, author, email, committer, time, message.
    """
    sha, _, author, email, committer, _, message = parts[:7]
    time = datetime.fromtimestamp(int((merge or parts)[5]), UTC)
    if since is not None and time < since:
        return []
    proposal, merged_by = found.proposal, ""
    if merge is not None:
        merged_by = merge[2]
        proposal = proposal or _proposal_of(merge[0], merge[6].split("\n", 1)[0])
    elif committer != author and (found.removals or any(c[2] < c[1] for c in found.changes)):
        merged_by = committer  # squashed or rebased by a forge: the committer merged it
        pulls: list[str] = _PULL.findall(message.split("\n", 1)[0])
        proposal = proposal or (pulls[-1] if pulls else "")
    own: dict[str, list[str]] = {}
    general: list[str] = []
    for group, text in found.reasons:
        if group:
            own.setdefault(group, []).append(text)
        else:
            general.append(text)
    general_reason = "; ".join(general)
    removed: dict[str, list[str]] = {}
    for group, instance in found.removals:
        removed.setdefault(group, []).append(instance)
    sizes: list[tuple[str, int | None, int | None]] = list(found.changes)
    if removed:
        changed = {c[0] for c in found.changes}
        sizes += [(group, None, None) for group in removed if group not in changed]
    entries = []
    for group, before, after in sizes:
        if node_group is not None and group != node_group:
            continue
        if before is None or after is None:
            direction = "down"  # instances named for removal without a size change trailer
        else:
            direction = "up" if after > before else "down" if after < before else "none"
        entries.append(
            Entry(
                KIND_CHANGE,
                found.cluster,
                group,
                time,
                before,
                after,
                direction,
                "; ".join(own[group]) if group in own else general_reason,
                sha,
                author,
                email,
                found.source,
                tuple(removed[group]) if group in removed else (),
                proposal,
                merged_by,
            )
        )
    return entries


def _proposal_of(merge_sha: str, subject: str) -> str:
    pull = _PULL.search(subject)
    if pull:
        return pull[0]
    branch = _BRANCH.match(subject)
    return branch[1] if branch else merge_sha[:12]


# ------------------------------------------------------------------------------------ --since WHEN

_AGO = re.compile(r"([0-9]+)(w|d|h|m|s)")
_UNIT = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")


def parse_since(text: str, now: datetime) -> datetime:
    """`--since WHEN`: a duration ago (`24h`, `7d`, `1d12h`), a date (UTC midnight) or an ISO time."""
    value = text.strip()
    parts = _AGO.findall(value)
    if parts and "".join(n + u for n, u in parts) == value:
        return now - timedelta(seconds=sum(int(n) * _UNIT[u] for n, u in parts))
    try:
        when = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        raise UserError(
            f"--since {text!r}: use a duration ago (24h, 7d), a date (2024-11-29)"
            " or an ISO time (2024-11-29T10:00:00Z)"
        ) from None
    if _DATE.match(value) or when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when


# -------------------------------------------------------------------------------------- rendering

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
    if fmt == "json":
        return output.to_json(rows)
    if fmt == "yaml":
        return output.to_yaml(rows)
    if fmt == "csv":
        return output.to_csv(rows, COLUMNS)
    if fmt != "table":
        raise UserError(f"--output {fmt!r}: use one of {', '.join(output.FORMATS)}")
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
