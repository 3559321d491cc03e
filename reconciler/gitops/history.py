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
from typing import NamedTuple

from reconciler.domain.errors import UserError
from reconciler.gitops.errors import GitError
from reconciler.gitops.trailers import Scanned, last_paragraph, scan_trailers

NOTES_REF = "refs/notes/asg-reconciler"
KIND_CHANGE = "change"
KIND_APPLY = "apply"
KIND_HOLD = "hold"  # `hold: true` set on a group in its manifest (`hold_entries`)
KIND_RELEASE = "release"  # the hold lifted
KIND_OPEN = "open"  # a proposal branch not merged yet (`open_proposal_entries`)

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
    direction: str  # up | down | none | restore (a desired lowered by hand put back: not a scale-up)
    reason: str
    commit: str
    author: str
    author_email: str = ""
    source: str = ""  # "" the planner, "external" adopted drift
    instances: tuple[str, ...] = ()  # removed by a scale-down
    proposal: str = ""
    merged_by: str = ""
    opened: datetime | None = None  # a proposal's own commit time (merged or open): how long it waited


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
        raise GitError(f"git log: {repo_path} is not a directory")
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
        raise GitError(f"git log in {repo_path}: {reason.removeprefix('fatal: ')}")


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
    time = commit_time((merge or parts)[5])
    if since is not None and time < since:
        return []
    proposal, merged_by, opened = found.proposal, "", None
    if merge is not None:
        merged_by = merge[2]
        opened = commit_time(parts[5])
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
        elif after > before:
            # a desired lowered by hand on main without names, put back (Capacity-Restore): no scale-up
            direction = "restore" if group in found.restores else "up"
        else:
            direction = "down" if after < before else "none"
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
                opened,
            )
        )
    return entries


_LATEST = int(datetime(9999, 1, 1, tzinfo=UTC).timestamp())  # room for a chart's last tick


def commit_time(seconds: str) -> datetime:
    """A commit's `%ct`. Whoever pushes writes it: a raw commit object may say nothing, a year past
    9999 or more seconds than a time_t holds, which is then 1970 or 9999 rather than a traceback."""
    try:
        value = int(seconds)
    except ValueError:
        value = 0
    return datetime.fromtimestamp(min(max(value, 0), _LATEST), UTC)


def _proposal_of(merge_sha: str, subject: str) -> str:
    pull = _PULL.search(subject)
    if pull:
        return pull[0]
    branch = _BRANCH.match(subject)
    return branch[1] if branch else merge_sha[:12]


# ------------------------------------------------------------------ holds and open proposals (report)

_HOLD_FORMAT = "%x1e" + "%x00".join(("%H", "%P", "%an", "%ae", "%ct", "%s"))
_OPEN_FORMAT = "%x1e" + "%x00".join(("%H", "%P", "%an", "%ae", "%cn", "%ct", "%B", "%S"))


def hold_entries(repo_path: Path | str, ref: str, folder: str) -> list[Entry]:
    """Holds set (kind "hold") and lifted ("release") in the manifests of `folder`, newest first.

    People set `hold` by hand, without trailers, so this is the one place history reads manifest
    text: `git log -G hold:` on the first-parent line (a merged branch shows as its merge) names the
    few commits whose diff touches a `hold:` line, and only their manifests, before and after, are
    read with one `git cat-file --batch`. The commit's subject is the reason.
    """
    spec = folder.strip("/")
    args = ["log", "--first-parent", "--diff-merges=first-parent", f"--format={_HOLD_FORMAT}", "-G", "hold:"]
    out = git_output(repo_path, [*args, "--name-only", ref, "--", spec or "."])
    commits: list[tuple[list[str], list[str]]] = []
    wanted: list[str] = []
    for chunk in out.split("\x1e")[1:]:
        header, _, names = chunk.partition("\n")
        fields = header.split("\x00")
        paths = [n for n in names.split("\n") if in_folder(n, spec)]
        if len(fields) == 6 and paths:
            commits.append((fields, paths))
            parent = fields[1].split(" ", 1)[0]
            for path in paths:
                wanted += [f"{parent}:{path}" if parent else "", f"{fields[0]}:{path}"]
    blobs = iter(read_blobs(repo_path, wanted))
    entries: list[Entry] = []
    for (sha, _, author, email, seconds, subject), paths in commits:
        time = commit_time(seconds)
        for path in paths:
            before, after = lenient_groups(next(blobs), path), lenient_groups(next(blobs), path)
            if after is None:
                continue
            cluster, groups = after
            held_before = before[1] if before else {}
            for group, (held, target) in groups.items():
                if held != held_before.get(group, (False, 0))[0]:
                    kind = KIND_HOLD if held else KIND_RELEASE
                    entries.append(
                        Entry(kind, cluster, group, time, target, target, "none", subject, sha, author, email)
                    )
    return entries


def in_folder(path: str, folder: str) -> bool:
    """A manifest is a .yaml/.yml file directly in the folder (the folder of `git.path`)."""
    if not path.endswith((".yaml", ".yml")):
        return False
    directory, _, _ = path.rpartition("/")
    return directory == folder


def lenient_groups(text: str | None, path: str) -> tuple[str, dict[str, tuple[bool, int]]] | None:
    """(cluster, group -> (held, target)) of a manifest text; None when it is not a readable one.

    A quick, lenient read (libyaml): only the commits `hold_entries` found are read, and a manifest
    that does not parse says nothing about holds (`validate` is where its problems are reported).
    """
    if not text:
        return None
    import yaml  # PyYAML's C loader: a few hundred manifests in milliseconds

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        document = yaml.load(text, Loader=loader)
    except yaml.YAMLError:
        return None
    if not isinstance(document, dict) or not isinstance(document.get("nodeGroups"), dict):
        return None
    cluster = str(document.get("cluster") or path.rpartition("/")[2].rsplit(".", 1)[0])
    groups: dict[str, tuple[bool, int]] = {}
    for name, body in document["nodeGroups"].items():
        if isinstance(body, dict):
            desired, removals = body.get("desired"), body.get("removeInstances")
            target = desired if isinstance(desired, int) else 0
            target -= len(removals) if isinstance(removals, list) else 0
            groups[str(name)] = (body.get("hold") is True, max(target, 0))
    return cluster, groups


def open_proposal_entries(repo_path: Path | str, ref: str, namespace: str) -> list[Entry]:
    """Proposals waiting for a person (kind "open"): the newest capacity commit of each branch under
    `namespace` (e.g. "refs/remotes/origin/") that `ref` has not merged; the planner's state branches
    are not proposals. `proposal` is the commit's own, else the branch; `opened` its commit time."""
    listed = git_output(repo_path, ["for-each-ref", f"--no-merged={ref}", "--format=%(refname)", namespace])
    refs = [r for r in listed.split() if not (r.endswith("/state") and "/asg-reconciler/" in r)]
    if not refs:
        return []
    out = git_output(repo_path, ["log", "--source", f"--format={_OPEN_FORMAT}", *refs, f"^{ref}", "--"])
    entries: list[Entry] = []
    seen: set[str] = set()
    for chunk in out.split("\x1e")[1:]:
        parts = chunk.split("\x00")
        branch = parts[7].strip()
        if branch in seen:
            continue
        paragraph = last_paragraph(parts[6])
        scanned = scan_trailers(paragraph) if paragraph is not None else None
        if scanned is None:
            continue
        seen.add(branch)
        opened = commit_time(parts[5])
        name = scanned.proposal or branch.removeprefix(namespace)
        entries += [
            e._replace(kind=KIND_OPEN, proposal=name, merged_by="", opened=opened)
            for e in _entries(parts[:7], scanned, None, None, None)
        ]
    return entries


def read_blobs(repo_path: Path | str, specs: Sequence[str]) -> list[str | None]:
    """The text of each `<commit>:<path>` (None when there is no such file, or for ""), with one
    `git cat-file --batch`."""
    asked = [s for s in specs if s]
    if not asked:
        return [None] * len(specs)
    result = subprocess.run(
        ["git", "cat-file", "--batch"],
        cwd=repo_path,
        input="".join(f"{s}\n" for s in asked).encode(),
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        raise GitError(f"git cat-file in {repo_path}: {result.stderr.decode(errors='replace').strip()}")
    data, at = result.stdout, 0
    found: list[str | None] = []
    for _ in asked:
        end = data.index(b"\n", at)
        header = data[at:end].split()
        if len(header) == 3 and header[1] == b"blob":
            size = int(header[2])
            found.append(data[end + 1 : end + 1 + size].decode("utf-8", errors="replace"))
            at = end + 2 + size
        else:  # "<spec> missing", or a tree
            found.append(None)
            at = end + 1 + (int(header[2]) + 1 if len(header) == 3 else 0)
    texts = iter(found)
    return [next(texts) if s else None for s in specs]


_NO_COMMITS = (
    "unknown revision",
    "bad revision",
    "does not have any commits",
    "malformed object name",
    "Not a valid object name",
)


def git_output(repo_path: Path | str, args: list[str]) -> str:
    """One git command's output; a ref with no commits yet (an empty repository) is no output."""
    if not Path(repo_path).is_dir():
        raise GitError(f"git {args[0]}: {repo_path} is not a directory")
    result = subprocess.run(["git", *args], cwd=repo_path, capture_output=True, check=False)
    stderr = result.stderr.decode("utf-8", errors="replace").strip()
    if result.returncode != 0:
        if any(s in stderr for s in _NO_COMMITS):
            return ""
        reason = stderr.splitlines()[-1] if stderr else f"exit code {result.returncode}"
        raise GitError(f"git {args[0]} in {repo_path}: {reason.removeprefix('fatal: ')}")
    return result.stdout.decode("utf-8", errors="replace")


# ------------------------------------------------------------------------------------ --since WHEN

_AGO = re.compile(r"([0-9]+)(w|d|h|m|s)")
_UNIT = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")


def parse_since(text: str, now: datetime) -> datetime:
    """`--since WHEN`: a duration ago (`24h`, `7d`, `1d12h`), a date (UTC midnight) or an ISO time."""
    value = text.strip()
    parts = _AGO.findall(value)
    try:
        if parts and "".join(n + u for n, u in parts) == value:
            return now - timedelta(seconds=sum(int(n) * _UNIT[u] for n, u in parts))
        when = datetime.fromisoformat(value.replace("z", "Z"))
        if _DATE.match(value) or when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        when.astimezone(UTC)  # an offset that takes it before year 1 or past 9999
    except ValueError:
        raise UserError(
            f"--since {text!r}: use a duration ago (24h, 7d), a date (2024-11-29)"
            " or an ISO time (2024-11-29T10:00:00Z)"
        ) from None
    except OverflowError:
        raise UserError(f"--since {text!r}: that is before year 1 or after 9999") from None
    return when


# -------------------------------------------------------------------------------------- rendering
