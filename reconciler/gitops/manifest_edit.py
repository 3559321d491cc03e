"""Edit a manifest the way a careful person would: touch only the values that change.

`ManifestEditor` edits the ruamel.yaml round-trip document in place (comments, key order and quoting
survive) and `render()` replays just those edits on the original text (`textmerge`), so a write
changes nothing else byte-for-byte. `apply_edits` is the pure front door: text + edits -> text.

Groups written by the tool keep the key order `removeInstances, hold, desired, minSize, maxSize`.
Git refuses to merge changes on adjacent lines, so this order keeps a proposal's only lines
(`removeInstances`) two lines away from what main keeps changing (`desired`, the mirror, new groups
appended at the end): an approved scale-down stays mergeable while scale-ups land.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from reconciler.config.documents import Problem, parse_yaml, plain, yaml_loader
from reconciler.domain.errors import UserError
from reconciler.gitops.manifest import Manifest, Removal, document_problems, from_document
from reconciler.gitops.textmerge import carry_over

GROUP_KEY_ORDER = ("removeInstances", "hold", "desired", "minSize", "maxSize")


def new_manifest_text(cluster: str) -> str:
    """The text of a manifest with no groups yet (what the first plan on an empty repo writes)."""
    return (
        f"# Desired capacity of the Auto Scaling Groups of cluster {cluster}, kept by asg-reconciler.\n"
        "# Scale-ups land here automatically; scale-downs arrive as pull requests listing removeInstances.\n"
        "# minSize/maxSize only mirror the ASG: editing them changes nothing. Format: docs/manifest.md\n"
        "version: 1\n"
        f"cluster: {cluster}\n"
        "nodeGroups: {}\n"
    )


# ------------------------------------------------------------------------------------- edits as data


@dataclass(frozen=True)
class SetDesired:
    group: str
    desired: int


@dataclass(frozen=True)
class SetRemovals:
    """Replace the group's removal set (a proposal being written or rewritten)."""

    group: str
    removals: tuple[Removal, ...]


@dataclass(frozen=True)
class ShrinkRemovals:
    """Keep only `keep` of the approved removals (rule 3: an approved set only shrinks)."""

    group: str
    keep: frozenset[str]


@dataclass(frozen=True)
class SettleRemovals:
    """Removals apply has carried out: drop them and lower `desired` by as many."""

    group: str
    gone: frozenset[str]


@dataclass(frozen=True)
class SetMirror:
    group: str
    min_size: int
    max_size: int


@dataclass(frozen=True)
class AddGroup:
    group: str
    desired: int
    min_size: int | None = None
    max_size: int | None = None
    hold: bool = False


@dataclass(frozen=True)
class RemoveGroup:
    group: str


Edit = SetDesired | SetRemovals | ShrinkRemovals | SettleRemovals | SetMirror | AddGroup | RemoveGroup


def apply_edits(text: str, label: str, edits: Iterable[Edit]) -> str:
    """`text` with `edits` applied; unchanged lines stay byte-for-byte. Unknown groups raise ValueError."""
    editor = ManifestEditor(text, label)
    for edit in edits:
        editor.apply(edit)
    return editor.render()


# ----------------------------------------------------------------------------------------- the editor


class ManifestEditor:
    """One manifest's round-trip document plus the original text it came from."""

    def __init__(self, text: str, label: str) -> None:
        self.label = label
        self._original = text
        self._indent = _guess_indent(text)
        self._yaml = _yaml_for(self._indent)
        document = parse_yaml(text, label, self._yaml)  # anchors, depth, syntax: UserError file:line
        if not isinstance(document, CommentedMap):
            raise UserError(f"{label}: a manifest must be a YAML mapping with cluster: and nodeGroups:")
        self._doc: CommentedMap = document
        self._dirty = False

    @classmethod
    def new(cls, cluster: str, label: str) -> ManifestEditor:
        return cls(new_manifest_text(cluster), label)

    # ------------------------------------------------------------------------------------- reading

    def problems(self) -> list[Problem]:
        return document_problems(self._doc, self.label)

    def manifest(self, *, check: bool = True) -> Manifest:
        """The read model of the document as edited so far (UserError if it is not valid).

        `check=False` skips the checks, for a document whose shape is known to be right.
        """
        problems = self.problems() if check else []
        if problems:
            raise UserError(str(problems[0]))
        return from_document(self._doc, self.label)

    def is_held(self, group: str) -> bool:
        return bool(self._group(group).get("hold", False))

    def has_group(self, group: str) -> bool:
        groups = self._doc.get("nodeGroups")
        return isinstance(groups, CommentedMap) and group in groups

    @property
    def changed(self) -> bool:
        return self.render() != self._original

    # ------------------------------------------------------------------------------------- editing

    def apply(self, edit: Edit) -> None:
        match edit:
            case SetDesired(group, desired):
                self.set_desired(group, desired)
            case SetRemovals(group, removals):
                self.set_removals(group, removals)
            case ShrinkRemovals(group, keep):
                self.shrink_removals(group, keep)
            case SettleRemovals(group, gone):
                self.settle_removals(group, gone)
            case SetMirror(group, min_size, max_size):
                self.set_mirror(group, min_size, max_size)
            case AddGroup(group, desired, min_size, max_size, hold):
                self.add_group(group, desired, min_size, max_size, hold=hold)
            case RemoveGroup(group):
                self.remove_group(group)

    def set_desired(self, group: str, desired: int) -> None:
        self._set(self._group(group), "desired", desired)

    def set_mirror(self, group: str, min_size: int, max_size: int) -> None:
        body = self._group(group)
        self._set(body, "minSize", min_size)
        self._set(body, "maxSize", max_size)

    def set_removals(self, group: str, removals: Sequence[Removal]) -> None:
        body = self._group(group)
        current = body.get("removeInstances")
        if [r.instance_id for r in removals] == _ids(current):
            return
        seq = CommentedSeq([r.instance_id for r in removals])
        if removals:
            seq.fa.set_block_style()
            column = self._removal_comment_column(removals)
            for index, removal in enumerate(removals):
                if removal.node:
                    seq.yaml_add_eol_comment(f"# {removal.node}", index, column=column)
        else:
            seq.fa.set_flow_style()
        if "removeInstances" in body:
            body["removeInstances"] = seq
        else:
            body.insert(0, "removeInstances", seq)
        self._dirty = True

    def shrink_removals(self, group: str, keep: Collection[str]) -> None:
        """Drop every removal not in `keep`; the ones kept keep their line and comment."""
        body = self._group(group)
        current = body.get("removeInstances")
        if not isinstance(current, CommentedSeq):
            return
        ids = _ids(current)
        if all(i in keep for i in ids):
            return
        if not any(i in keep for i in ids):
            empty = CommentedSeq()
            empty.fa.set_flow_style()
            body["removeInstances"] = empty
        else:
            for index in reversed(range(len(ids))):
                if ids[index] not in keep:
                    del current[index]
        self._dirty = True

    def settle_removals(self, group: str, gone: Collection[str]) -> None:
        body = self._group(group)
        ids = _ids(body.get("removeInstances"))
        done = [i for i in ids if i in gone]
        if not done:
            return
        self.shrink_removals(group, [i for i in ids if i not in gone])
        self._set(body, "desired", int(body["desired"]) - len(done))

    def add_group(
        self,
        group: str,
        desired: int,
        min_size: int | None = None,
        max_size: int | None = None,
        *,
        hold: bool = False,
    ) -> None:
        """Append a group (appending keeps it away from lines an open proposal changes)."""
        groups = self._doc.get("nodeGroups")
        if not isinstance(groups, CommentedMap):
            groups = CommentedMap()
            self._doc["nodeGroups"] = groups
        if group in groups:
            raise ValueError(f"{self.label}: node group {group} is already in the manifest")
        groups.fa.set_block_style()
        removals = CommentedSeq()
        removals.fa.set_flow_style()
        body = CommentedMap([("removeInstances", removals), ("hold", hold), ("desired", desired)])
        if min_size is not None:
            body["minSize"] = min_size
        if max_size is not None:
            body["maxSize"] = max_size
        groups[group] = body
        self._dirty = True

    def remove_group(self, group: str) -> None:
        self._group(group)
        del self._doc["nodeGroups"][group]
        self._dirty = True

    # ----------------------------------------------------------------------------------- rendering

    def render(self) -> str:
        """The edited text: the original with only the edited lines changed."""
        if not self._dirty:
            return self._original
        edited = self._dump(self._doc)
        baseline = self._dump(self._yaml.load(self._original))
        merged = carry_over(self._original, baseline, edited)
        if merged == edited or self._same_data(merged):
            return merged
        return edited  # the replay went wrong somewhere: correct data beats pretty text

    # ------------------------------------------------------------------------------------- helpers

    def _group(self, group: str) -> CommentedMap:
        groups = self._doc.get("nodeGroups")
        body = groups.get(group) if isinstance(groups, CommentedMap) else None
        if not isinstance(body, CommentedMap):
            raise ValueError(f"{self.label}: node group {group} is not in the manifest")
        return body

    def _set(self, body: CommentedMap, key: str, value: int) -> None:
        current = body.get(key)
        if isinstance(current, int) and not isinstance(current, bool) and int(current) == value:
            return
        if key in body:
            body[key] = value
        else:
            body.insert(_insert_position(body, key), key, value)
        self._dirty = True

    def _removal_comment_column(self, removals: Sequence[Removal]) -> int:
        """Line the node-name comments up two spaces after the longest id."""
        mapping, _sequence, offset = self._indent
        return 2 * mapping + offset + 2 + max(len(r.instance_id) for r in removals) + 2

    def _dump(self, document: Any) -> str:
        stream = io.StringIO()
        self._yaml.dump(document, stream)
        return stream.getvalue()

    def _same_data(self, text: str) -> bool:
        try:
            return bool(plain(self._yaml.load(text)) == plain(self._doc))
        except YAMLError:
            return False


def _ids(items: Any) -> list[str]:
    if not isinstance(items, list):
        return []
    return [str(i["id"]) if isinstance(i, dict) else str(i) for i in items]


def _insert_position(body: CommentedMap, key: str) -> int:
    """Where a missing key goes so the tool's key order holds (unknown keys keep their place)."""
    rank = GROUP_KEY_ORDER.index(key) if key in GROUP_KEY_ORDER else len(GROUP_KEY_ORDER)
    position = 0
    for index, existing in enumerate(body):
        if existing in GROUP_KEY_ORDER and GROUP_KEY_ORDER.index(existing) < rank:
            position = index + 1
    return position


def _guess_indent(text: str) -> tuple[int, int, int]:
    """(mapping, sequence, offset) as the file already uses them, so new blocks look like old ones.

    Read from the first nested mapping and the first block sequence; defaults are 2-space mappings
    with dashes indented like a mapping (`key:` then `  - item`).
    """
    mapping: int | None = None
    offset: int | None = None
    meaningful = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    for parent, line in itertools.pairwise(meaningful):
        body = parent.split(" #", 1)[0].rstrip()
        if not body.endswith(":"):
            continue
        stripped = parent.lstrip()
        key_column = len(parent) - len(stripped)
        if stripped.startswith("- "):
            key_column += 2 + len(stripped[2:]) - len(stripped[2:].lstrip())
        column = len(line) - len(line.lstrip())
        if line.lstrip().startswith("- "):
            if offset is None and column >= key_column:
                offset = column - key_column
        elif mapping is None and column > key_column:
            mapping = column - key_column
        if mapping is not None and offset is not None:
            break
    mapping = mapping or 2
    offset = mapping if offset is None else offset
    return mapping, offset + 2, offset


def _yaml_for(indent: tuple[int, int, int]) -> YAML:
    yaml = yaml_loader("rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a long comment or value
    mapping, sequence, offset = indent
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    return yaml
