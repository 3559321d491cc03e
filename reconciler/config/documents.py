"""Load a YAML document and check it against one of our JSON Schemas, with errors people can act on.

Shared by the config loader, the manifest reader and `validate`: every problem becomes one line
`file:line: key.path: what is wrong (the fix)`.

Every YAML we are handed (manifests from Git, configs, trace groups, snapshots, what-if workloads) is
read through `yaml_loader`/`parse_yaml`: anchors and aliases are refused and nesting is bounded
(`MAX_DEPTH`) as the parser's events arrive, before anything is composed, let alone expanded. A
"billion laughs" of ~1 KB otherwise expands to 10^9 values, and 5,000 levels of `[` overflow the
recursion of the composer, the schema check and `_plain`. Our own files never need either.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.composer import Composer
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import AliasEvent, CollectionStartEvent
from ruamel.yaml.scanner import RoundTripScanner, Scanner

from reconciler.domain.errors import UserError

MAX_DOCUMENT_BYTES = 1024 * 1024  # a config or a manifest (docs/configuration.md, docs/manifest.md)
MAX_DEPTH = 100  # nested mappings/sequences; a manifest needs 4, a config 5, a kubectl object ~20
_NO_ANCHORS = (
    "YAML anchors and aliases are refused, so a small file cannot expand to millions of values "
    "(write the value out in full; `yq 'explode(.)' FILE` does it)"
)
JSON_TOO_DEEP = (
    "JSON nested too deeply to read (nothing asg-reconciler reads needs more than "
    f"{MAX_DEPTH} levels; flatten it)"
)  # JSON has no aliases; its readers catch the RecursionError of a document like `[[[[...]]]]`
_TOO_DEEP = (
    f"nested more than {MAX_DEPTH} levels deep (nothing asg-reconciler reads needs that many; flatten it)"
)


@dataclass(frozen=True)
class Problem:
    file: str
    line: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


@cache
def load_schema(name: str) -> dict[str, Any]:
    """A schema shipped with the package (`config`, `manifest`, `plan`)."""
    text = resources.files("reconciler").joinpath("schemas", f"{name}.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def read_yaml(path: Path, label: str | None = None) -> Any:
    """Round-trip load (keeps line numbers); a missing file or bad YAML is a UserError."""
    label = label or str(path)
    try:
        data = read_bounded(path, label)
    except FileNotFoundError:
        raise UserError(
            f"{label}: file not found (pass --config FILE or set ASG_RECONCILER_CONFIG)"
        ) from None
    return parse_yaml(decode_utf8(data, label), label)


def read_bounded(path: Path, label: str) -> bytes:
    """A config's or a manifest's bytes, refused before reading when the file is not a regular one
    (a FIFO would block for ever) or is over MAX_DOCUMENT_BYTES; FileNotFoundError is left to the
    caller, who knows what to suggest. Any other OSError is a UserError."""
    try:
        size = path.stat().st_size
        if path.is_dir():
            raise UserError(f"{label}: is a directory, not a YAML file (name the file itself)")
        if not path.is_file():
            raise UserError(f"{label}: not a regular file (a FIFO, socket or device); name a YAML file")
        too_big(size, label)
        with path.open("rb") as file:
            data = file.read(MAX_DOCUMENT_BYTES + 1)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UserError(f"{label}: cannot read: {exc.strerror or type(exc).__name__}") from None
    too_big(len(data), label)  # it grew since stat
    return data


def too_big(size: int, label: str) -> None:
    """A config or manifest over MAX_DOCUMENT_BYTES is a UserError before any parsing: the
    round-trip parser reads about 60 KB a second, so 89 MB took minutes to refuse."""
    if size > MAX_DOCUMENT_BYTES:
        raise UserError(
            f"{label}: {size:,} bytes, more than the {MAX_DOCUMENT_BYTES:,} (1 MiB) a config or manifest "
            "may have (a manifest of 1,000 groups is about 150 KB): check that it is the file meant "
            "(--config, git.path), or restore it from its Git history"
        )


def text_too_big(text: str, label: str) -> None:
    """`too_big` for a text already in memory (a manifest read from Git)."""
    if len(text) * 4 > MAX_DOCUMENT_BYTES:  # UTF-8 takes at most 4 bytes a character
        too_big(len(text.encode("utf-8", errors="surrogatepass")), label)


def decode_utf8(data: bytes, label: str, then: str = "") -> str:
    """`data` as text; anything but UTF-8 is a UserError naming the line, the byte and the fix
    (`then` adds the step after re-saving, e.g. committing it), never a UnicodeDecodeError."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise UserError(
            f"{label}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} in column {column}); "
            f"save it as UTF-8 (e.g. `iconv -f latin1 -t utf-8`){then}"
        ) from None


class _Refused(MarkedYAMLError):
    """An anchor, an alias or too deep a nesting: `problem` is the whole message after file:line."""


class _GuardedComposer(Composer):
    """ruamel's composer, refusing anchors, aliases and nesting deeper than MAX_DEPTH at the parser
    event that starts them: nothing past it is composed, so nothing is ever expanded, and the
    composer's own recursion (two frames a level) stays far below Python's limit."""

    _nesting = 0

    def compose_document(self) -> Any:
        self._nesting = 0  # a reused loader after a refused document starts afresh
        return super().compose_document()

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.parser.peek_event()
        if isinstance(event, AliasEvent):
            raise _Refused(problem=f"alias *{event.anchor}: {_NO_ANCHORS}", problem_mark=event.start_mark)
        if event.anchor is not None:
            raise _Refused(problem=f"anchor &{event.anchor}: {_NO_ANCHORS}", problem_mark=event.start_mark)
        if not isinstance(event, CollectionStartEvent):
            return super().compose_node(parent, index)
        if self._nesting >= MAX_DEPTH:
            raise _Refused(problem=_TOO_DEEP, problem_mark=event.start_mark)
        self._nesting += 1
        node = super().compose_node(parent, index)
        self._nesting -= 1
        return node


def _flow_start(scanner: Scanner) -> None:
    """Refuse the `[` or `{` that would open flow level MAX_DEPTH + 1, in the scanner already: each
    of them may start a key, so the scanner reads up to 1,024 characters ahead to decide, keeping
    every open one as a candidate; 1,000 nested `[` took seconds before the composer saw any."""
    if scanner.flow_level >= MAX_DEPTH:
        raise _Refused(problem=_TOO_DEEP, problem_mark=scanner.reader.get_mark())


class _GuardedScanner(Scanner):
    def fetch_flow_collection_start(self, TokenClass: Any, to_push: str) -> None:
        _flow_start(self)
        super().fetch_flow_collection_start(TokenClass, to_push)


class _GuardedRoundTripScanner(RoundTripScanner):
    def fetch_flow_collection_start(self, TokenClass: Any, to_push: str) -> None:
        _flow_start(self)
        super().fetch_flow_collection_start(TokenClass, to_push)


def yaml_loader(typ: str = "rt") -> YAML:
    """The one way to read YAML we are handed: `rt` keeps comments and lines (manifests, configs),
    `safe` builds plain values (snapshots). Always the pure-Python parser: the C one would bypass
    the guarded scanner and composer."""
    if typ not in ("rt", "safe"):
        raise ValueError(f"yaml_loader: typ {typ!r} (rt or safe)")
    yaml = YAML(typ=typ, pure=True)
    yaml.Scanner = _GuardedRoundTripScanner if typ == "rt" else _GuardedScanner
    yaml.Composer = _GuardedComposer
    return yaml


def parse_yaml(text: str, label: str, loader: YAML | None = None, first_line: int = 0) -> Any:
    """One document from `text` (with `loader`, a `yaml_loader` the caller has configured); every
    problem, a refused anchor or depth included, is one UserError line `label:line: ...`.
    `first_line`: the 0-based line of the file `text` starts on (a document of a `---` stream), so
    that the lines in messages and in the round-trip document are the file's."""
    conflict_markers(text, label, first_line)
    yaml = loader or yaml_loader()
    guarded = yaml.Scanner in (_GuardedScanner, _GuardedRoundTripScanner)
    if yaml.Composer is not _GuardedComposer or not guarded:
        raise TypeError("parse_yaml needs a loader made by yaml_loader()")
    try:
        document = yaml.load(text)
    except YAMLError as exc:
        raise _user_error(exc, label, first_line) from None
    if first_line:
        _shift_lines(document, first_line)
    return document


_CONFLICT_START = re.compile(r"^<{7}(?: .*)?$", re.MULTILINE)
_CONFLICT_REST = re.compile(r"^(?:={7}|>{7}(?: .*)?|\|{7}(?: .*)?)$", re.MULTILINE)


def conflict_markers(text: str, label: str, first_line: int = 0) -> None:
    """A merge's unresolved conflict (`<<<<<<<`, `=======`, `>>>>>>>` at the start of lines) is a
    UserError naming it, the line and the fix: as YAML it reads as "not valid YAML" at some line
    near it, which sends a person looking for a typo. Linear in the text (two regex scans)."""
    start = _CONFLICT_START.search(text)
    if start is None or _CONFLICT_REST.search(text, start.end()) is None:
        return
    line = text.count("\n", 0, start.start()) + 1 + first_line
    raise UserError(
        f"unresolved merge conflict in {label} line {line} (the <<<<<<< ======= >>>>>>> markers a "
        "merge leaves): keep one side, delete the three marker lines, and commit the file"
    )


def _shift_lines(node: Any, offset: int) -> None:
    """Move every line a round-trip document records down by `offset` (iteratively: the depth is
    bounded by MAX_DEPTH, the width is not)."""
    pending = [node]
    while pending:
        item = pending.pop()
        if not isinstance(item, CommentedMap | CommentedSeq):
            continue
        lc = item.lc
        if lc.line is not None:
            lc.line += offset
        for place in (lc.data or {}).values():  # an empty flow mapping `{}` records none
            for index in (0, 2):
                if index < len(place) and place[index] is not None:
                    place[index] += offset
        pending.extend(item.values() if isinstance(item, CommentedMap) else item)


def parse_yaml_all(text: str, label: str, typ: str = "safe") -> Iterator[Any]:
    """Every document of a `---` stream; a refused anchor or depth is a UserError naming the line,
    any other YAMLError is left to the caller (who knows what the file was meant to be)."""
    try:
        yield from yaml_loader(typ).load_all(text)
    except _Refused as exc:
        raise _user_error(exc, label) from None


def _user_error(exc: YAMLError, label: str, first_line: int = 0) -> UserError:
    mark = getattr(exc, "problem_mark", None)
    line = f":{mark.line + 1 + first_line}" if mark is not None else ""
    if isinstance(exc, _Refused):
        return UserError(f"{label}{line}: {exc.problem}")
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return UserError(f"{label}{line}: not valid YAML: {problem}")


def _line_of(document: Any, path: list[str | int]) -> int | None:
    """Line of the deepest key along `path` that exists in the round-trip document."""
    node, line = document, None
    for key in path:
        if isinstance(node, CommentedMap) and key in node:
            line = node.lc.key(key)[0] + 1
            node = node[key]
        elif isinstance(node, CommentedSeq) and isinstance(key, int) and key < len(node):
            line = node.lc.item(key)[0] + 1
            node = node[key]
        else:
            break
    if line is None and isinstance(document, CommentedMap | CommentedSeq):
        line = document.lc.line + 1
    return line


_DURATION_WORDS = re.compile(r"^\s*([0-9]+)\s*(h|hours?|m|min|mins|minutes?|s|sec|secs|seconds?)\s*$")


def _duration_hint(value: Any) -> str:
    match = _DURATION_WORDS.match(str(value))
    if match:
        return f"use {match[1]}{match[2][0]}"
    if isinstance(value, int | float):
        return f"use {value}s or {value}m"
    return "use Go-style durations such as 30s, 10m, 1h30m"


QUOTED = 80  # characters of a value, a key or a path an error quotes
LISTED = 5  # unknown keys an error names before counting the rest


def clip(text: str, limit: int = QUOTED) -> str:
    """The start of `text`, saying how long it is: an error quotes what it is about, and a 900 KB
    value under the 1 MiB cap must neither flood a log nor replay a file (a symlink) into it."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters)"


def _message(error: jsonschema.ValidationError) -> str:
    """One error as `what is wrong (the fix)`, using the schema's `x-hint` where it has one."""
    return clip(_unclipped(error), 4 * QUOTED + 200)


def _unclipped(error: jsonschema.ValidationError) -> str:
    hint = None
    for candidate in (error, error.parent):
        if candidate is not None and isinstance(candidate.schema, dict) and "x-hint" in candidate.schema:
            hint = candidate.schema["x-hint"]
            break
    value = clip(json.dumps(error.instance, default=str))
    schema: dict[str, Any] = error.schema if isinstance(error.schema, dict) else {}
    validator_value: Any = error.validator_value
    if error.validator == "additionalProperties":
        instance: Any = error.instance
        known_keys = sorted(schema.get("properties", {}))
        extra = sorted(set(instance) - set(known_keys))
        guesses = [m for key in extra[:LISTED] for m in difflib.get_close_matches(key, known_keys, n=1)]
        hint = (
            f"did you mean {', '.join(guesses)}?" if guesses else f"known keys here: {', '.join(known_keys)}"
        )
        named = ", ".join(repr(clip(key)) for key in extra[:LISTED])
        more = f" and {len(extra) - LISTED:,} more" if len(extra) > LISTED else ""
        return f"unknown key {named}{more} ({hint})"
    if error.validator == "required":
        return f"{error.message} (add it)"
    if hint == "duration":
        return f"{value} is not a duration ({_duration_hint(error.instance)})"
    if error.validator == "enum":
        return f"{value} is not one of {', '.join(map(str, validator_value))}"
    if error.validator == "type":
        base = f"{value} is not of type {validator_value}"
        if not hint and validator_value == "boolean":
            hint = "use true or false"
        return f"{base} ({hint})" if hint else base
    if error.validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        word = "at least" if "inimum" in str(error.validator) else "at most"
        return f"{value} is out of range (use a value {word} {validator_value})"
    if hint:
        return f"{value} is not valid ({hint})"
    return error.message


def _best(errors: Iterator[jsonschema.ValidationError]) -> list[jsonschema.ValidationError]:
    """One error per location, preferring the most specific (oneOf branches collapse to the parent)."""
    chosen: dict[tuple[Any, ...], jsonschema.ValidationError] = {}
    for error in errors:
        key = tuple(error.absolute_path)
        if key not in chosen:
            chosen[key] = error
    return sorted(chosen.values(), key=lambda e: [str(p) for p in e.absolute_path])


def check(document: Any, schema_name: str, label: str) -> list[Problem]:
    """Every schema problem of `document`, each naming file, line, key path and the fix."""
    schema = load_schema(schema_name)
    validator = jsonschema.Draft202012Validator(schema)
    problems: list[Problem] = []
    plain = _plain(document)
    for path in _not_numbers(plain, []):  # NaN passes every bound: a schema cannot refuse it
        problems.append(
            Problem(
                label,
                _line_of(document, path),
                clip(".".join(str(p) for p in path)),
                "NaN is not a number (write a number in the range this field takes)",
            )
        )
    for error in _best(validator.iter_errors(plain)):
        path = list(error.absolute_path)
        line = _line_of(document, path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            # point at the unknown key itself, not at the mapping holding it
            known = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
            extra = sorted(set(error.instance) - set(known))
            line = _line_of(document, [*path, extra[0]]) if extra else line
        problems.append(Problem(label, line, clip(".".join(str(p) for p in path)), _message(error)))
    return problems


def _not_numbers(node: Any, path: list[Any]) -> Iterator[list[Any]]:
    """Where a YAML `.nan` sits."""
    if isinstance(node, float) and math.isnan(node):
        yield path
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _not_numbers(value, [*path, key])
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _not_numbers(value, [*path, index])


def _plain(node: Any) -> Any:
    """ruamel's round-trip types as plain JSON types (jsonschema checks `dict`/`list`/`str`)."""
    if isinstance(node, dict):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    return node


def plain(node: Any) -> Any:
    return _plain(node)


def fill_defaults(document: dict[str, Any], schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """A copy of `document` with every `default` of the schema filled in, recursively for objects."""
    result = dict(document)
    for key, sub in schema.get("properties", {}).items():
        sub = _resolve(sub, root)
        if key not in result and "default" in sub:
            result[key] = json.loads(json.dumps(sub["default"]))
        if isinstance(result.get(key), dict) and sub.get("type") == "object":
            result[key] = fill_defaults(result[key], sub, root)
    return result


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if not ref:
        return schema
    target: Any = root
    for part in ref.removeprefix("#/").split("/"):
        target = target[part]
    merged = dict(target)
    merged.update({k: v for k, v in schema.items() if k != "$ref"})
    return merged
