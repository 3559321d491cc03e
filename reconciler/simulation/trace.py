"""Workload traces for `simulate`: a JSONL file of pod arrivals and departures (docs/traces.md).

A trace is the simulator's only input about the workload, so reading it is strict: every line is
checked against schemas/trace.schema.json and against the rules a schema cannot say (order, pods that
exist), and a mistake is one line naming the file, the line, the field and the fix. Pods are read by
the same parser as live clusters and snapshots (`kube.parse.ObjectReader`), so a trace pod schedules
exactly like the pod it was copied from.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from ruamel.yaml.comments import CommentedMap

from reconciler.config.documents import (
    JSON_TOO_DEEP,
    check,
    decode_utf8,
    load_schema,
    parse_yaml,
    plain,
    read_bounded,
)
from reconciler.domain.errors import UserError
from reconciler.domain.model import Pod, Taint
from reconciler.kube.parse import ObjectReader

SCHEMA = "trace"
DEFAULT_NAMESPACE = "default"
_UID_NAMESPACE = uuid.UUID("6f1c1f3e-5d0c-4b8e-9a57-3f0d2f6c7a10")
_CLUSTER_EXAMPLE = '{"kind": "cluster", "start": "2026-06-01T00:00:00Z", "groups": [...]}'


@dataclass(frozen=True)
class TraceGroup:
    """A node group as the simulation starts it: the ASG's bounds, its size, and what its nodes look
    like (instance type, zones, labels, taints)."""

    name: str
    instance_type: str
    min_size: int
    max_size: int
    desired: int
    zones: tuple[str, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()


@dataclass(frozen=True)
class Arrival:
    """A pod created at `at` seconds after the start, Pending; with `run_for` it leaves by itself
    that many seconds after it starts running (a batch job), else only at its Departure."""

    at: float
    pod: Pod
    run_for: float | None = None


@dataclass(frozen=True)
class Departure:
    """A pod deleted at `at` seconds after the start (only pods without run_for get one)."""

    at: float
    namespace: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


Event = Arrival | Departure


@dataclass(frozen=True)
class Trace:
    start: datetime
    groups: tuple[TraceGroup, ...]
    events: tuple[Event, ...]

    @property
    def end_at(self) -> float:
        """Seconds from the start to the last event (0 for a trace without events)."""
        return self.events[-1].at if self.events else 0.0


# ------------------------------------------------------------------------------------------ reading


MAX_TRACE_BYTES = 256 * 1024 * 1024  # a month of a busy cluster's events is a few tens of MB


def _read_regular(path: Path, label: str) -> bytes:
    """A trace's bytes, refused before reading when the file is not a regular one (a device never
    ends, a FIFO blocks its open for ever) or is over MAX_TRACE_BYTES. FileNotFoundError and other
    OSErrors are the caller's to word."""
    status = path.stat()
    if stat.S_ISDIR(status.st_mode):
        raise UserError(f"{label}: is a directory, not a trace file (name the JSONL file itself)")
    if not stat.S_ISREG(status.st_mode):
        raise UserError(f"{label}: not a regular file (a FIFO, socket or device); name a trace file")
    with path.open("rb") as file:
        data = file.read(MAX_TRACE_BYTES + 1)
    if len(data) > MAX_TRACE_BYTES:
        raise UserError(
            f"{label}: more than the {MAX_TRACE_BYTES:,} bytes a trace may have; split it, or replay "
            "a shorter span"
        )
    return data


def read_trace(path: Path) -> Trace:
    """The trace in `path`, checked line by line; the first mistake is a UserError naming the file,
    the line, the field and the fix."""
    label = str(path)
    try:
        data = _read_regular(path, label)
    except FileNotFoundError:
        raise UserError(
            f"{label}: trace file not found (write one with `asg-reconciler simulate trace generate`)"
        ) from None
    except OSError as exc:
        raise UserError(f"{label}: cannot read: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{label}: not UTF-8 text at byte {exc.start} (a trace is UTF-8 JSONL)") from None
    return _parse(label, _json_lines(label, text))


def parse_trace(label: str, lines: Iterable[Mapping[str, Any]]) -> Trace:
    """A trace from already-decoded lines (the first is the cluster line); errors name `label`
    and the line's number as in a file."""
    return _parse(label, enumerate(lines, 1))


def _json_lines(label: str, text: str) -> Iterator[tuple[int, Any]]:
    # only "\n" ends a line: str.splitlines() would also split at a U+2028 inside a JSON string
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line, parse_constant=_no_constant)
        except json.JSONDecodeError as exc:
            raise UserError(
                f"{label}:{number}: not valid JSON: {exc.msg} (column {exc.colno}; one JSON object per line)"
            ) from None
        except RecursionError:
            raise UserError(f"{label}:{number}: {JSON_TOO_DEEP}") from None
        except ValueError as exc:
            raise UserError(f"{label}:{number}: {exc} (use finite numbers)") from None


def _no_constant(name: str) -> Any:
    """Python's json reads NaN and Infinity, which JSON has not: a time of NaN would pass `>= 0`."""
    raise ValueError(f"{name} is not a JSON number")


def _parse(label: str, lines: Iterable[tuple[int, Any]]) -> Trace:
    checker = _Checker(label)
    for number, document in lines:
        checker.add(number, document)
    return checker.trace()


class _Checker:
    """Reads lines in order, keeping what is alive to check departures and name clashes."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.reader = ObjectReader()
        self.start: datetime | None = None
        self.groups: tuple[TraceGroup, ...] = ()
        self.events: list[Event] = []
        self.last_at = 0.0
        self.alive: set[str] = set()  # namespace/name of pods without runFor not yet departed
        self.ran_for: set[str] = set()  # runFor pods: their names are never reused
        self.arrivals: dict[str, int] = {}  # namespace/name -> arrivals so far (for the uid)

    def fail(self, number: int, path: str, message: str) -> UserError:
        where = f"{self.label}:{number}"
        return UserError(f"{where}: {path}: {message}" if path else f"{where}: {message}")

    def add(self, number: int, document: Any) -> None:
        if not isinstance(document, dict):
            found = "an array" if isinstance(document, list) else json.dumps(document)
            raise self.fail(number, "", f'expected a JSON object such as {{"kind": ...}}, found {found}')
        problems = [] if _validator().is_valid(document) else check(document, SCHEMA, self.label)
        kind = document.get("kind")
        if problems:
            problem = problems[0]
            path = problem.path
            if kind in _KINDS:  # the schema checked this kind's fields: name them as kind.field
                path = f"{kind}.{path}" if path else str(kind)
            raise self.fail(number, path, problem.message)
        if self.start is None:
            if kind != "cluster":
                raise self.fail(
                    number,
                    "kind",
                    f'the first line must be the cluster line ({_CLUSTER_EXAMPLE}), found "{kind}"',
                )
            self._cluster(number, document)
        elif kind == "cluster":
            raise self.fail(
                number, "kind", "only the first line may be a cluster line (make this one arrive or depart)"
            )
        else:
            at = float(document["at"])
            if at < self.last_at:
                raise self.fail(
                    number,
                    f"{kind}.at",
                    f"{document['at']} is before the previous line's {self.last_at:g} "
                    "(sort the lines after the first by at)",
                )
            self.last_at = at
            if kind == "arrive":
                self._arrive(number, at, document)
            else:
                self._depart(number, at, document)

    def _cluster(self, number: int, document: Mapping[str, Any]) -> None:
        try:
            start = datetime.fromisoformat(document["start"].replace("Z", "+00:00")).astimezone(UTC)
        except ValueError as exc:
            raise self.fail(
                number,
                "cluster.start",
                f"{document['start']!r} is not a real time: {exc} (e.g. 2026-06-01T00:00:00Z)",
            ) from None
        problem = _group_problem(document["groups"])
        if problem is not None:
            index, key, message = problem
            raise self.fail(
                number, "cluster.groups" if index is None else f"cluster.groups.{index}.{key}", message
            )
        groups: list[TraceGroup] = []
        for raw in document["groups"]:
            groups.append(
                TraceGroup(
                    name=raw["name"],
                    instance_type=raw["instanceType"],
                    min_size=int(raw["minSize"]),  # JSON Schema's integers include 3.0
                    max_size=int(raw["maxSize"]),
                    desired=int(raw["desired"]),
                    zones=tuple(raw["zones"]),
                    labels=dict(raw.get("labels") or {}),
                    taints=tuple(parse_taint(text) for text in raw.get("taints") or ()),
                )
            )
        self.start, self.groups = start, tuple(groups)

    def _arrive(self, number: int, at: float, document: Mapping[str, Any]) -> None:
        assert self.start is not None
        raw = document["pod"]
        metadata = dict(raw["metadata"])
        metadata.setdefault("namespace", DEFAULT_NAMESPACE)
        key = f"{metadata['namespace']}/{metadata['name']}"
        if key in self.alive:
            raise self.fail(
                number,
                "arrive.pod.metadata.name",
                f"{key} is still there (it arrived earlier and has not departed; give this pod another name "
                "or depart the other first)",
            )
        if key in self.ran_for:
            raise self.fail(
                number,
                "arrive.pod.metadata.name",
                f"{key} arrived earlier with runFor, and when it leaves depends on the simulation "
                "(give each run its own name)",
            )
        count = self.arrivals.get(key, 0) + 1
        self.arrivals[key] = count
        metadata["uid"] = str(uuid.uuid5(_UID_NAMESPACE, f"{key}#{count}"))
        metadata["creationTimestamp"] = (self.start + timedelta(seconds=at)).isoformat()
        metadata.pop("deletionTimestamp", None)
        spec = {k: v for k, v in raw["spec"].items() if k != "nodeName"}
        try:
            pod = self.reader.pod({"metadata": metadata, "spec": spec})
        except UserError as exc:
            raise self.fail(number, "arrive.pod", str(exc)) from None
        except (AttributeError, TypeError, ValueError, KeyError) as exc:
            # the parser trusts what an API server has validated; a hand-written pod may be malformed
            raise self.fail(
                number,
                "arrive.pod.spec",
                f"not readable as a Kubernetes Pod ({type(exc).__name__}: {exc}; "
                "compare with `kubectl get pod NAME -o json`)",
            ) from None
        run_for = document.get("runFor")
        (self.alive if run_for is None else self.ran_for).add(key)
        self.events.append(Arrival(at, pod, None if run_for is None else float(run_for)))

    def _depart(self, number: int, at: float, document: Mapping[str, Any]) -> None:
        namespace = document.get("namespace", DEFAULT_NAMESPACE)
        key = f"{namespace}/{document['pod']}"
        if key in self.ran_for:
            raise self.fail(
                number,
                "depart.pod",
                f"{key} has runFor and leaves by itself (remove this line or its runFor)",
            )
        if key not in self.alive:
            raise self.fail(
                number,
                "depart.pod",
                f"no pod {key} is there at {at:g}s (it never arrived or already departed)",
            )
        self.alive.remove(key)
        self.events.append(Departure(at, namespace, document["pod"]))

    def trace(self) -> Trace:
        if self.start is None:
            raise UserError(
                f"{self.label}: empty trace (the first line must be the cluster line: {_CLUSTER_EXAMPLE})"
            )
        return Trace(self.start, self.groups, tuple(self.events))


_KINDS = ("cluster", "arrive", "depart")


def _group_problem(groups: Sequence[Mapping[str, Any]]) -> tuple[int | None, str, str] | None:
    """What the schema cannot say about schema-valid groups: (index, key, message), index None for
    the groups together, or None."""
    seen: set[str] = set()
    for index, raw in enumerate(groups):
        if raw["name"] in seen:
            return index, "name", f"{raw['name']!r} is listed twice (give each group its own name)"
        seen.add(raw["name"])
        if not raw["minSize"] <= raw["desired"] <= raw["maxSize"]:
            return (
                index,
                "desired",
                f"{raw['desired']} is not within minSize {raw['minSize']} and maxSize {raw['maxSize']} "
                "(use minSize <= desired <= maxSize)",
            )
    nodes = sum(int(raw["desired"]) for raw in groups)
    if nodes > max_nodes():
        return (
            None,
            "desired",
            f"the groups start with {nodes} nodes together, at most {max_nodes()} "
            "(Kubernetes supports 5,000 nodes a cluster: lower desired)",
        )
    return None


@cache
def max_seconds() -> float:
    """The latest time a trace may name (the schema's bound, 31 days): how long a run may be."""
    bound = load_schema(SCHEMA)["$defs"]["seconds"]["maximum"]
    assert isinstance(bound, int | float)
    return float(bound)


@cache
def max_nodes() -> int:
    """The most nodes a group, and the groups together, may start with (the schema's bound)."""
    bound = load_schema(SCHEMA)["$defs"]["count"]["maximum"]
    assert isinstance(bound, int)
    return bound


def read_groups(path: Path) -> list[dict[str, Any]]:
    """Node groups from a YAML or JSON file holding `groups: [...]` as a cluster line has them (to
    generate a trace on your own groups), checked the same way, errors naming the file's lines."""
    label = str(path)
    try:
        data = read_bounded(path, label)
    except FileNotFoundError:
        raise UserError(f"{label}: groups file not found") from None
    except OSError as exc:
        raise UserError(f"{label}: cannot read: {exc.strerror}") from None
    document = parse_yaml(decode_utf8(data, label), label)
    if not isinstance(document, CommentedMap) or "groups" not in document:
        raise UserError(f"{label}: expected a `groups:` list of node groups, as in a trace's cluster line")
    document.insert(0, "kind", "cluster")  # so the cluster line's schema checks it, lines kept
    document.insert(1, "start", "2026-06-01T00:00:00Z")
    problems = check(document, SCHEMA, label)
    if problems:
        raise UserError(str(problems[0]))
    groups: list[dict[str, Any]] = plain(document["groups"])
    problem = _group_problem(groups)
    if problem is not None:
        index, key, message = problem
        if index is None:
            raise UserError(f"{label}:{document.lc.key('groups')[0] + 1}: groups: {message}")
        line = document["groups"][index].lc.key(key)[0] + 1
        raise UserError(f"{label}:{line}: groups.{index}.{key}: {message}")
    return groups


@cache
def _validator() -> jsonschema.Draft202012Validator:
    """Built once: most lines are valid, and only an invalid one needs `check`'s messages."""
    return jsonschema.Draft202012Validator(load_schema(SCHEMA))


def parse_taint(text: str) -> Taint:
    """`key=value:Effect` or `key:Effect` (the schema has checked the shape)."""
    rest, _, effect = text.rpartition(":")
    key, _, value = rest.partition("=")
    return Taint(key, value, effect)


# ------------------------------------------------------------------------------------------ writing


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with a Z, as the cluster line's `start` wants it."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _at(event: Mapping[str, Any]) -> float:
    at = event.get("at")
    return float(at) if isinstance(at, int | float) and not isinstance(at, bool) else 0.0


def trace_lines(
    start: datetime,
    groups: Sequence[Mapping[str, Any]],
    events: Iterable[Mapping[str, Any]],
    label: str = "trace",
) -> list[str]:
    """The JSONL lines of a trace (events stably sorted by `at`), checked as `read_trace` checks a
    file, so nothing is written that the simulator would refuse; errors name `label`."""
    if start.tzinfo is None:
        raise UserError(f"{label}: start has no time zone (pass an aware datetime, e.g. in UTC)")
    cluster = {"kind": "cluster", "start": format_time(start), "groups": [dict(g) for g in groups]}
    lines: list[str] = []
    for number, document in enumerate([cluster, *sorted(events, key=_at)], 1):
        try:
            lines.append(json.dumps(document, ensure_ascii=False, separators=(", ", ": "), allow_nan=False))
        except ValueError:
            raise UserError(f"{label}:{number}: a number is NaN or infinite (use finite numbers)") from None
    # what is checked is what is written (tuples become lists, numbers JSON's)
    _parse(label, _json_lines(label, "\n".join(lines)))
    return lines


@dataclass(frozen=True)
class RawTrace:
    """A trace as line dicts, what the generator and the converter build: `lines()` and `write()`
    check it as a reader would."""

    start: datetime
    groups: tuple[Mapping[str, Any], ...]
    events: tuple[Mapping[str, Any], ...]

    def lines(self, label: str = "trace") -> list[str]:
        return trace_lines(self.start, self.groups, self.events, label)

    def write(self, path: Path) -> None:
        write_trace(path, self.start, self.groups, self.events)


def write_trace(
    path: Path, start: datetime, groups: Sequence[Mapping[str, Any]], events: Iterable[Mapping[str, Any]]
) -> None:
    """Write a trace file from raw line dicts, checked first; the file appears whole or not at all."""
    lines = trace_lines(start, groups, events, str(path))
    directory = path.parent if str(path.parent) else Path(".")
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write("".join(f"{line}\n" for line in lines))
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise UserError(f"{path}: cannot write: {exc.strerror}") from None
