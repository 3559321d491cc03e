"""The files what-if is given, read as an untrusted pull request's: which files (a symbolic link
only when it stays in its folder), how much of them (one budget of bytes and objects for all, checked
before each document is parsed), and their documents as kubectl splits them, with the lines people
see in their editor."""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from reconciler.config.documents import parse_yaml
from reconciler.domain.errors import UserError

_SEPARATOR = re.compile(r"^---(\s.*)?$")  # kubectl's YAMLReader: `---`, then nothing but a comment
_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class Source:
    """Where an object was read: the file, the document (1-based) and, in a list, the item."""

    file: str
    document: int
    line: int | None
    item: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        inside = f"document {self.document}" + (f", item {self.item}" if self.item is not None else "")
        return f"{where}: {inside}"


def manifest_files(paths: Sequence[Path]) -> list[tuple[Path, Path]]:
    """(path, what to open) of every file to read. A symbolic link is followed only when it stays in
    the folder it was found in (the directory given, or a FILE's own directory): a pull request may
    hold a link to `/etc/passwd` or to the runner's credentials, and what-if must neither read nor
    quote what it reaches."""
    files: list[tuple[Path, Path]] = []
    for path in paths:
        _no_way_out(path)
        if not path.is_dir() or path.is_symlink():
            files.append((path, _inside(path, path.parent)))
            continue
        root = path.resolve()
        found: list[tuple[Path, Path]] = []
        for folder, dirs, names in os.walk(path):  # never descends into a linked directory
            for name in dirs:
                linked = Path(folder, name)
                if linked.is_symlink():
                    _inside(linked, root)
            for name in names:
                candidate = Path(folder, name)
                if candidate.suffix in _SUFFIXES:
                    found.append((candidate, _inside(candidate, root)))
        if not found:
            raise UserError(f"{path}: no .yaml, .yml or .json files in this directory")
        files.extend(sorted(found))
    return files


def _no_way_out(path: Path) -> None:
    """A relative path (as a workflow passes a pull request's files) whose folders include a link
    must still lead to a place under the current directory: `deploy/sub/creds.yaml` with `deploy/sub`
    a link to the runner's home is refused like a link in a folder given."""
    if path.is_absolute():
        return
    prefixes = [Path(*path.parts[:n]) for n in range(1, len(path.parts))]
    if any(p.is_symlink() for p in prefixes if p.name != ".."):
        cwd = Path.cwd().resolve()
        target = path.resolve()
        if target != cwd and cwd not in target.parents:
            raise UserError(
                f"{path}: its folders include a symbolic link that leads out of the current directory "
                "(refused: what-if reads only the files in the folders it is given)"
            )


def _inside(path: Path, folder: Path) -> Path:
    """`path` with every link resolved, refused when that leaves `folder`: one line that names the
    link, never its target nor a byte of what it points to."""
    if not path.is_symlink():
        return path
    target, root = path.resolve(), folder.resolve()
    if target != root and root not in target.parents:
        raise UserError(
            f"{path}: a symbolic link that leads out of {folder} (refused: what-if reads only the "
            "files in the folders it is given; copy the manifest in instead of linking to it)"
        )
    return target


# Parsing YAML costs time (the pure-Python round-trip parser, the one that keeps line numbers):
# ~7 s a MiB for block-style manifests, ~20 s for flow style or JSON, more for crafted ones
# (thousands of one-line documents). what-if reads the few manifests a pull request changes, so all
# the files given are read against one budget, MAX_INPUT_BYTES in all and MAX_OBJECTS objects
# (documents and list items), checked before each is parsed: ~10 s at worst.
MAX_INPUT_BYTES = 512 * 1024
MAX_OBJECTS = 2_000


def _read_text(path: Path, target: Path, budget: int) -> str:
    """At most `budget` bytes of `target` (found as `path`), opened without following a link (a
    link was resolved and checked already: one swapped in since is refused, not followed) and
    without blocking on a FIFO."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        descriptor = os.open(target, flags)
    except FileNotFoundError:
        raise UserError(f"{path}: file not found (pass Kubernetes YAML or JSON manifests)") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UserError(f"{path}: a symbolic link (refused: pass the file itself)") from None
        raise UserError(f"{path}: cannot read: {exc.strerror}") from None
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise UserError(f"{path}: not a regular file (pass Kubernetes YAML or JSON manifests)")
        try:
            data = handle.read(budget + 1)
        except OSError as exc:
            raise UserError(f"{path}: cannot read: {exc.strerror}") from None
    if len(data) > budget:
        raise UserError(
            f"{path}: the manifests given are larger than {_bytes(MAX_INPUT_BYTES)} in all; pass "
            "the workload manifests you are changing, not a dump of the cluster (what-if reads the "
            "cluster itself)"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file (expected UTF-8 YAML or JSON)") from None


def split_documents(text: str) -> Iterator[tuple[int, str]]:
    """(first line index, text) of each `---`-separated document, as kubectl splits them."""
    start, lines = 0, text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if _SEPARATOR.match(line.rstrip("\r\n")) and not line.startswith("----"):
            yield start, "".join(lines[start:index])
            start = index + 1
    yield start, "".join(lines[start:])


def _bytes(count: int) -> str:
    for unit, size in (("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return f"{count / size:g} {unit}"
    return f"{count} bytes"


class InputBudget:
    """What is left of MAX_INPUT_BYTES and MAX_OBJECTS for the files still to read."""

    def __init__(self) -> None:
        self.bytes = MAX_INPUT_BYTES
        self.objects = MAX_OBJECTS

    def count_object(self, where: Source | str) -> None:
        self.objects -= 1
        if self.objects < 0:
            raise UserError(
                f"{where}: more than {MAX_OBJECTS} objects in the manifests given; pass the workload "
                "manifests you are changing (what-if reads the cluster itself)"
            )


def documents(path: Path, target: Path, budget: InputBudget) -> Iterator[tuple[Source, Any]]:
    text = _read_text(path, target, budget.bytes)
    budget.bytes -= len(text.encode())
    for number, (offset, chunk) in enumerate(split_documents(text), start=1):
        if not chunk.strip():
            continue
        if budget.objects <= 0:  # before parsing: each document costs the parser's time
            budget.count_object(f"{path}:{offset + 1}: document {number}")
        # every line number (the parser's too) is the file's: the document starts on line `offset`
        document = parse_yaml(chunk, str(path), first_line=offset)
        if document is None:
            continue  # only comments
        yield Source(str(path), number, line_of(document) or offset + 1), document


def line_of(node: Any, key: str | int | None = None) -> int | None:
    """1-based line of `node` (or of its `key`) in the file, when the round-trip parser kept it."""
    try:
        if key is None:
            return int(node.lc.line) + 1 if isinstance(node, CommentedMap | CommentedSeq) else None
        if isinstance(node, CommentedMap) and key in node:
            return int(node.lc.key(key)[0]) + 1
        if isinstance(node, CommentedSeq) and isinstance(key, int) and key < len(node):
            return int(node.lc.item(key)[0]) + 1
    except (AttributeError, KeyError, TypeError):
        return None
    return None
