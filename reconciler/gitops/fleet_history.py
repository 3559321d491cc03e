"""The fleet's capacity history, for `history --report`: every cluster whose manifest is in the folder
of `git.path`, from the same entries `history` shows (one model, one reader of Git).

`read_fleet` is the I/O: `history_command` over the whole repository (every cluster's trailers and
apply's records, in one `git log`), the holds people set by hand (`hold_entries`), the proposals still
open (`open_proposal_entries`) and the manifests at the branch's tip, read side by side. `build_fleet`
is pure: per cluster and group, the manifest's target and AWS's desired as step lines, markers for
what happened, each proposal from opened to applied, the holds, and the events (docs/history.md).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath

from reconciler.domain.errors import UserError
from reconciler.gitops.history import (
    KIND_APPLY,
    KIND_CHANGE,
    KIND_HOLD,
    KIND_OPEN,
    KIND_RELEASE,
    Entry,
    NoteParser,
    git_output,
    history_command,
    hold_entries,
    in_folder,
    lenient_groups,
    open_proposal_entries,
    read_blobs,
)
from reconciler.gitops.manifest import GroupEntry, Manifest, parse_manifest

Point = tuple[datetime, int]  # a step line's value from this time on

# what a marker on a chart says; docs/history.md explains each
SCALE_UP, SCALE_DOWN, CANCELLED, ADOPTED = "scale-up", "scale-down", "cancelled", "adopted"
DRIFT, RESTORE, REFUSED, FAILED = "drift", "restore", "refused", "failed"

_CANCEL = "cancel approved removal"  # the planner's reason when pending pods need a removal back
_INSTANCE = re.compile(r"\bi-[0-9a-f]+\b")
_EARLIEST = datetime(1, 1, 2, tzinfo=UTC)  # an apply record may say year 1: the axis starts there


@dataclass(frozen=True)
class ManifestFile:
    """A manifest of the folder at the branch's tip; `manifest` None when it cannot be read (`problem`)."""

    path: str
    manifest: Manifest | None
    problem: str = ""


@dataclass(frozen=True)
class FleetSource:
    """What `read_fleet` read: every entry (history's, the holds, the open proposals), newest first,
    and the folder's manifests."""

    entries: tuple[Entry, ...]
    manifests: tuple[ManifestFile, ...]


@dataclass(frozen=True)
class Marker:
    kind: str  # SCALE_UP, SCALE_DOWN, CANCELLED, ADOPTED, DRIFT, RESTORE, REFUSED, FAILED
    time: datetime
    value: int  # where on the chart: the target after a change, AWS's desired for apply's
    entry: Entry


@dataclass(frozen=True)
class ProposalTrack:
    """One scale-down from the commit that proposed it to the apply that terminated its instances."""

    proposal: str
    instances: tuple[str, ...]
    before: int | None
    after: int | None
    reason: str
    commit: str
    opened: datetime | None  # the proposal's commit (unknown for a squash merge)
    approved: datetime | None  # landed on the branch (None: still open)
    approved_by: str
    applied: datetime | None = None
    cancelled: datetime | None = None

    @property
    def is_open(self) -> bool:
        return self.approved is None

    def waited(self, now: datetime) -> timedelta | None:
        """How long it waited for a person: opened to approved (or to now, while open)."""
        if self.opened is None:
            return None
        return (self.approved or now) - self.opened


@dataclass(frozen=True)
class HoldSpan:
    start: datetime | None  # None: held since before anything history shows
    end: datetime | None  # None: still held
    by: str = ""
    reason: str = ""


@dataclass(frozen=True)
class GroupHistory:
    name: str
    in_manifest: bool
    target: int | None  # the manifest's now: desired minus the removals it lists
    desired: int | None
    removals: tuple[str, ...]
    held: bool
    aws_desired: int | None  # as the newest apply record left it (None: never applied)
    last_apply: Entry | None
    drift: Entry | None  # the newest drift seen: an apply record noting it, or adopted drift
    target_steps: tuple[Point, ...]
    aws_steps: tuple[Point, ...]
    markers: tuple[Marker, ...]
    proposals: tuple[ProposalTrack, ...]
    holds: tuple[HoldSpan, ...]
    events: tuple[Entry, ...]  # in the window, newest first


@dataclass(frozen=True)
class ClusterHistory:
    name: str
    path: str  # its manifest ("" when the folder has none now)
    problem: str
    groups: tuple[GroupHistory, ...]
    events: tuple[Entry, ...]  # every group's, in the window, newest first
    start: datetime  # the charts' time axis
    end: datetime

    @property
    def open_proposals(self) -> tuple[ProposalTrack, ...]:
        return tuple(p for g in self.groups for p in g.proposals if p.is_open)


@dataclass(frozen=True)
class FleetHistory:
    repository: str
    branch: str
    folder: str
    generated: datetime
    since: datetime | None
    node_group: str | None
    clusters: tuple[ClusterHistory, ...]

    @property
    def group_count(self) -> int:
        return sum(len(c.groups) for c in self.clusters)

    @property
    def event_count(self) -> int:
        return sum(len(c.events) for c in self.clusters)


# ------------------------------------------------------------------------------------------ the I/O


def read_fleet(
    repo_path: Path | str,
    ref: str,
    folder: str,
    namespace: str,
    note_entries: NoteParser | None,
    *,
    label: str = "",
) -> FleetSource:
    """Every entry of the repository and the manifests of `folder` at `ref`, read concurrently (git
    prints while we parse). `namespace` holds the branches (e.g. "refs/remotes/origin/")."""
    with ThreadPoolExecutor(3) as pool:
        holds = pool.submit(hold_entries, repo_path, ref, folder)
        opened = pool.submit(open_proposal_entries, repo_path, ref, namespace)
        manifests = pool.submit(read_manifests, repo_path, ref, folder, label or ref)
        entries = history_command(repo_path, None, ref=ref, note_entries=note_entries)
        entries += holds.result() + opened.result()
    entries.sort(key=lambda e: e.time, reverse=True)
    return FleetSource(tuple(entries), tuple(manifests.result()))


def read_manifests(repo_path: Path | str, ref: str, folder: str, label: str) -> list[ManifestFile]:
    """The manifests directly in `folder` at `ref`, by path; one that does not parse says why."""
    spec = folder.strip("/")
    listed = git_output(repo_path, ["ls-tree", "--name-only", ref, "--", f"{spec}/" if spec else "."])
    paths = sorted(p for p in listed.splitlines() if in_folder(p, spec))
    texts = read_blobs(repo_path, [f"{ref}:{p}" for p in paths])
    found = []
    for path, text in zip(paths, texts, strict=True):
        if text is None:
            continue  # a directory named *.yaml
        try:
            found.append(ManifestFile(path, parse_manifest(text, f"{label}:{path}")))
        except UserError as exc:
            found.append(ManifestFile(path, _lenient(text, path), str(exc)))
    return found


def _lenient(text: str, path: str) -> Manifest | None:
    """What a manifest the schema refuses still says (its cluster, groups, targets, holds), so the
    page names the problem and still shows the groups; None when it is not YAML at all."""
    read = lenient_groups(text, path)
    if read is None:
        return None
    cluster, groups = read
    return Manifest(cluster, tuple(GroupEntry(g, target, hold) for g, (hold, target) in groups.items()), path)


# -------------------------------------------------------------------------------- the pure model


def build_fleet(
    source: FleetSource,
    *,
    now: datetime,
    since: datetime | None = None,
    node_group: str | None = None,
    repository: str = "",
    branch: str = "",
    folder: str = "",
) -> FleetHistory:
    """The report's model. `since` cuts the window (the lines start at their value then); an unknown
    `node_group` is a UserError naming the known ones."""
    files: dict[str, ManifestFile] = {}
    others: dict[str, list[str]] = {}  # a cluster named by more than one manifest: the ones not shown
    for read in source.manifests:
        name = read.manifest.cluster if read.manifest else PurePosixPath(read.path).stem
        shown = files.setdefault(name, read)
        if shown is not read:  # the file named after the cluster wins, else the first by path
            if PurePosixPath(read.path).stem == name and PurePosixPath(shown.path).stem != name:
                files[name], read = read, shown
            others.setdefault(name, []).append(read.path)
    for name, paths in others.items():
        shown = files[name]
        also = ", ".join(paths)
        problem = f"{also} also say{'s' if len(paths) == 1 else ''} cluster {name}: not shown"
        files[name] = replace(shown, problem=f"{shown.problem}; {problem}" if shown.problem else problem)
    owners: dict[str, list[str]] = {}
    for name, read in files.items():
        for g in read.manifest.groups if read.manifest else ():
            owners.setdefault(g.name, []).append(name)
    by_group: dict[str, dict[str, list[Entry]]] = {name: {} for name in files}
    for e in sorted(source.entries, key=lambda e: e.time):  # oldest first; stable for equal times
        cluster = e.cluster or (owners[e.group][0] if len(owners.get(e.group, ())) == 1 else "")
        if cluster and e.group:
            by_group.setdefault(cluster, {}).setdefault(e.group, []).append(e)
    known = sorted({g for groups in by_group.values() for g in groups} | set(owners))
    if node_group is not None and node_group not in known:
        names = ", ".join(known) if known else "none yet"
        raise UserError(
            f"--node-group: {node_group!r} is in no manifest and never appears in the capacity history"
            f" (known groups: {names})"
        )
    clusters = []
    for name in [*files, *sorted(set(by_group) - set(files))]:
        f = files.get(name)
        manifest = f.manifest if f else None
        order = [g.name for g in manifest.groups] if manifest else []
        order += sorted(set(by_group.get(name, {})) - set(order))
        if node_group is not None:
            order = [g for g in order if g == node_group]
            if not order:
                continue
        entries = by_group.get(name, {})
        times = [t for g in order for e in entries.get(g, ()) for t in (e.time, e.opened) if t is not None]
        end = max([now, *times])
        start = since or (min(times) if times else end - timedelta(days=1))
        if start >= end:
            start = end - timedelta(days=1)
        elif since is None:  # a little room before the first event, so its markers show whole
            start -= min((end - start) * 0.02, start - _EARLIEST)
        listed = {g.name: g for g in manifest.groups} if manifest else {}
        groups = tuple(_group(g, listed.get(g), entries.get(g, []), since, start, end, now) for g in order)
        events = sorted((e for g in groups for e in g.events), key=lambda e: e.time, reverse=True)
        clusters.append(
            ClusterHistory(
                name, f.path if f else "", f.problem if f else "", groups, tuple(events), start, end
            )
        )
    return FleetHistory(repository, branch, folder, now, since, node_group, tuple(clusters))


def _group(
    name: str,
    entry: GroupEntry | None,  # the group in the manifest now
    entries: Sequence[Entry],  # oldest first
    since: datetime | None,
    start: datetime,
    end: datetime,
    now: datetime,
) -> GroupHistory:
    target_points: list[Point] = []
    aws_points: list[Point] = []
    applies: list[Entry] = []
    for e in entries:
        if e.before is None or e.after is None:
            continue
        if e.kind == KIND_CHANGE:
            target_points += ((e.time, e.before), (e.time, e.after))
        elif e.kind == KIND_APPLY:
            aws_points += ((e.time, e.before), (e.time, e.after))
            applies.append(e)
    target_steps = _line(target_points, since, end, entry.target if entry else None)
    aws_steps = _line(aws_points, since, end, None)
    window = [e for e in entries if since is None or e.time >= since]
    drifts = [e for e in entries if (e.kind == KIND_APPLY and "drift:" in e.reason) or e.source == "external"]
    return GroupHistory(
        name=name,
        in_manifest=entry is not None,
        target=entry.target if entry else None,
        desired=entry.desired if entry else None,
        removals=entry.removal_ids if entry else (),
        held=entry.hold if entry else False,
        aws_desired=applies[-1].after if applies else None,
        last_apply=applies[-1] if applies else None,
        drift=drifts[-1] if drifts else None,
        target_steps=target_steps,
        aws_steps=aws_steps,
        markers=tuple(m for e in window for m in _markers(e)),
        proposals=_proposals(entries, since),
        holds=_holds(entries, since, entry.hold if entry else False),
        events=tuple(reversed(window)),
    )


def _line(
    points: list[Point], since: datetime | None, end: datetime, now_value: int | None
) -> tuple[Point, ...]:
    """A step line: each point's value holds until the next; it starts at `since` with the value
    it had then and ends at `end` with `now_value` (the manifest's, when known) or its last value."""
    if since is not None and points:
        earlier = [p for p in points if p[0] < since]
        at_start = earlier[-1][1] if earlier else points[0][1]
        points = [(since, at_start), *(p for p in points if p[0] >= since)]
    last = now_value if now_value is not None else (points[-1][1] if points else None)
    if last is None:
        return ()
    if not points:
        return (
            ((since, last), (end, last))
            if since is not None
            else ((end - timedelta(days=1), last), (end, last))
        )
    return (*points, (end, last))


def _markers(e: Entry) -> list[Marker]:
    if e.before is None or e.after is None:
        return []
    if e.kind == KIND_CHANGE:
        if _CANCEL in e.reason:
            return [Marker(CANCELLED, e.time, e.after, e)]
        if e.source == "external":
            return [Marker(ADOPTED, e.time, e.after, e)]
        if e.direction in ("up", "down"):
            return [Marker(SCALE_UP if e.direction == "up" else SCALE_DOWN, e.time, e.after, e)]
        return []
    if e.kind != KIND_APPLY:
        return []
    found = []
    if "drift:" in e.reason:
        found.append(Marker(DRIFT, e.time, e.before, e))
        # restore: apply raised back what was lowered outside the tool (apply.drift restore; warn
        # and adopt say so in their own notes)
        if "lowered outside" in e.reason and e.after > e.before and "apply.drift" not in e.reason:
            found.append(Marker(RESTORE, e.time, e.after, e))
    if e.reason.startswith(REFUSED) or e.reason.startswith(FAILED):
        found.append(Marker(REFUSED if e.reason.startswith(REFUSED) else FAILED, e.time, e.after, e))
    return found


def _proposals(entries: Sequence[Entry], since: datetime | None) -> tuple[ProposalTrack, ...]:
    """Scale-downs (merged or open) with when they were opened, approved, applied or cancelled."""
    downs = [a for a in entries if a.kind == KIND_APPLY and a.direction == "down"]
    cancels = [c for c in entries if c.kind == KIND_CHANGE and _CANCEL in c.reason]
    landed = {i for e in entries if e.kind == KIND_CHANGE for i in e.instances}
    tracks = []
    for e in entries:
        if e.kind == KIND_OPEN:
            if e.instances and landed.issuperset(e.instances):
                continue  # squash-merged, its branch kept: Git calls it unmerged, main has it
            tracks.append(
                ProposalTrack(
                    e.proposal,
                    e.instances,
                    e.before,
                    e.after,
                    e.reason,
                    e.commit,
                    e.opened or e.time,
                    None,
                    "",
                )
            )
            continue
        if e.kind != KIND_CHANGE or e.direction != "down" or not (e.instances or e.merged_by):
            continue
        named = set(e.instances)
        applied = next(
            (
                a.time
                for a in _from(downs, e.time)
                if not (named and a.instances) or named.intersection(a.instances)
            ),
            None,
        )
        cancelled = next(
            (
                c.time
                for c in _from(cancels, e.time)
                if (applied is None or c.time <= applied)
                and (not named or named.intersection(_INSTANCE.findall(c.reason)))
            ),
            None,
        )
        tracks.append(
            ProposalTrack(
                e.proposal,
                e.instances,
                e.before,
                e.after,
                e.reason,
                e.commit,
                e.opened,
                e.time,
                e.merged_by,
                None if cancelled is not None else applied,
                cancelled,
            )
        )
    if since is not None:
        tracks = [
            t
            for t in tracks
            if t.is_open or max(x for x in (t.approved, t.applied, t.cancelled) if x) >= since
        ]
    return tuple(tracks)


def _from(entries: Sequence[Entry], when: datetime) -> Iterator[Entry]:
    """The entries (oldest first) at `when` or later: a binary search, then a walk."""
    low, high = 0, len(entries)
    while low < high:
        middle = (low + high) // 2
        if entries[middle].time < when:
            low = middle + 1
        else:
            high = middle
    return itertools.islice(entries, low, None)


def _holds(entries: Sequence[Entry], since: datetime | None, held_now: bool) -> tuple[HoldSpan, ...]:
    spans: list[HoldSpan] = []
    current: HoldSpan | None = None
    for e in entries:
        if e.kind == KIND_HOLD and current is None:
            current = HoldSpan(e.time, None, e.author, e.reason)
        elif e.kind == KIND_RELEASE:
            spans.append(
                HoldSpan(
                    current.start if current else None,
                    e.time,
                    *((current.by, current.reason) if current else (e.author, e.reason)),
                )
            )
            current = None
    if current is not None:
        spans.append(current)
    elif held_now:  # held with no commit in the history setting it (a seeded manifest, say)
        spans.append(HoldSpan(None, None))
    return tuple(s for s in spans if since is None or s.end is None or s.end >= since)
