"""The capacity manifest (docs/manifest.md): read model, schema and semantic checks.

One YAML file per cluster, edited by the bot and by people. This module only reads: it turns the text
into frozen `Manifest`/`GroupEntry` values and lists every problem with file:line and the fix. Edits
live in `manifest_edit`, so the planner's pure core never holds a mutable YAML tree.

`desired` counts the instances still listed under `removeInstances`: an approved scale-down only adds
lines to `removeInstances`, never touches `desired`, so it stays mergeable while scale-ups keep moving
`desired` on main. The group's size after apply is `target = desired - len(removeInstances)`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from reconciler.config.documents import Problem, check, parse_yaml, text_too_big
from reconciler.domain.errors import UserError
from reconciler.domain.model import CPU, EPHEMERAL_STORAGE, MEMORY, Resources
from reconciler.domain.quantity import QuantityError, int_value, milli_value, parse_quantity
from reconciler.planning.types import Headroom

SCHEMA = "manifest"
MIRROR_KEYS = ("minSize", "maxSize")


def default_path(cluster: str) -> str:
    """Where a cluster's manifest lives when `git.path` is not set."""
    return f"capacity/{cluster}.yaml"


@dataclass(frozen=True)
class Removal:
    """One approved instance removal; `node` is informational (a comment or `{id, node}` in YAML)."""

    instance_id: str
    node: str = ""


@dataclass(frozen=True)
class GroupEntry:
    name: str
    desired: int
    hold: bool = False
    remove_instances: tuple[Removal, ...] = ()
    min_size: int | None = None  # read-only mirror of the ASG
    max_size: int | None = None
    headroom: Headroom | None = None  # room kept free for virtual pods (docs/headroom.md)
    lines: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)  # key -> line

    @property
    def removal_ids(self) -> tuple[str, ...]:
        return tuple(r.instance_id for r in self.remove_instances)

    @property
    def target(self) -> int:
        """The group's size once every approved removal is applied."""
        return self.desired - len(self.remove_instances)


@dataclass(frozen=True)
class Manifest:
    cluster: str
    groups: tuple[GroupEntry, ...] = ()
    source: str = field(default="", compare=False)

    def group(self, name: str) -> GroupEntry | None:
        return next((g for g in self.groups if g.name == name), None)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.groups)


# ------------------------------------------------------------------------------------------ reading


def manifest_problems(text: str, label: str) -> list[Problem]:
    """Every schema and semantic problem of a manifest text (empty when it is fine)."""
    try:
        text_too_big(text, label)
        document = parse_yaml(text, label)
    except UserError as exc:
        return [problem_from_error(exc, label)]
    return document_problems(document, label)


def document_problems(document: Any, label: str) -> list[Problem]:
    """Schema problems first; semantic ones only once the shape is right (they assume it)."""
    if not isinstance(document, CommentedMap):
        return [Problem(label, 1, "", "a manifest must be a YAML mapping with cluster: and nodeGroups:")]
    problems = check(document, SCHEMA, label)
    if problems:
        return problems
    problems = headroom_problems(document, label)
    if problems:
        return problems  # the read model parses the quantities: only once they are right
    return semantic_problems(from_document(document, label), label)


def parse_manifest(text: str, label: str) -> Manifest:
    """The read model of a valid manifest; any problem is a UserError naming the line and the fix."""
    text_too_big(text, label)
    document = parse_yaml(text, label)
    problems = document_problems(document, label)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UserError(str(problems[0]) + more)
    return from_document(document, label)


def for_cluster(manifest: Manifest, cluster: str, config_label: str) -> Manifest:
    """`manifest`, refused when it is another cluster's: a copied file or a `git.path` pointing at
    another cluster's manifest would otherwise have this cluster's ASGs sized by that one's."""
    if manifest.cluster != cluster:
        raise UserError(
            f"{manifest.source}: cluster: {manifest.cluster!r}, but {config_label} says cluster: "
            f"{cluster!r}; point git.path at this cluster's manifest (default capacity/<cluster>.yaml), "
            "or correct the manifest's cluster if the file is this cluster's"
        )
    return manifest


def from_document(document: CommentedMap, label: str = "") -> Manifest:
    """Build the read model from a schema-valid round-trip document."""
    groups = document.get("nodeGroups") or {}
    return Manifest(
        cluster=str(document["cluster"]),
        groups=tuple(_group(str(name), body) for name, body in groups.items()),
        source=label,
    )


def _group(name: str, body: CommentedMap) -> GroupEntry:
    def optional(key: str) -> int | None:
        return int(body[key]) if body.get(key) is not None else None

    return GroupEntry(
        name=name,
        desired=int(body["desired"]),
        hold=bool(body.get("hold", False)),
        remove_instances=tuple(_removals(body.get("removeInstances"))),
        min_size=optional("minSize"),
        max_size=optional("maxSize"),
        headroom=_headroom(body.get("headroom")),
        lines=_key_lines(body),
    )


def _headroom(body: Any) -> Headroom | None:
    """The planner's Headroom from a checked `headroom:` mapping (quantities rounded up, as Kubernetes
    rounds requests: CPU to the millicore, the rest to a whole unit)."""
    if not isinstance(body, Mapping):
        return None
    values = {str(name): _amount(str(name), _text(value)) for name, value in body["requests"].items()}
    return Headroom(int(body["replicas"]), Resources({k: v for k, v in values.items() if v}))


def _amount(name: str, text: str) -> int:
    return milli_value(text) if name == CPU else int_value(text)


def _text(value: Any) -> str:
    """A YAML scalar as the quantity text a person meant (`1` and `0.5` are numbers in YAML)."""
    return str(value).strip()


def _removals(items: Any) -> list[Removal]:
    result = []
    for index, item in enumerate(items or ()):
        if isinstance(item, Mapping):
            result.append(Removal(str(item["id"]), str(item.get("node") or "")))
        else:
            result.append(Removal(str(item), _item_comment(items, index)))
    return result


def _item_comment(items: Any, index: int) -> str:
    """The node name written as `- i-0abc  # ip-10-0-1-2`, if any."""
    if not isinstance(items, CommentedSeq):
        return ""
    entry = items.ca.items.get(index)
    token = entry[0] if entry else None
    if token is None or not hasattr(token, "value"):
        return ""
    first = str(token.value).strip().splitlines()[0] if str(token.value).strip() else ""
    return first.lstrip("#").strip()


def _key_lines(body: CommentedMap) -> dict[str, int]:
    lines = {"": body.lc.line + 1}
    for key in body:
        lines[str(key)] = body.lc.key(key)[0] + 1
    return lines


def problem_from_error(exc: UserError, label: str) -> Problem:
    """A YAML syntax error as a Problem (`label:line: message` from `parse_yaml`)."""
    message = str(exc)
    rest = message.removeprefix(label)
    line = None
    if rest.startswith(":") and rest[1:].split(":", 1)[0].isdigit():
        number, _, rest = rest[1:].partition(":")
        line = int(number)
    return Problem(label, line, "", rest.lstrip(": ").strip())


# ----------------------------------------------------------------------------------------- checking

# Container resource names Kubernetes accepts in requests: the standard ones, hugepages of a size,
# or an extended resource, which is always domain-prefixed (`nvidia.com/gpu`, `vpc.amazonaws.com/efa`).
_RESOURCE_NAME = re.compile(
    r"^(cpu|memory|ephemeral-storage|hugepages-[0-9A-Za-z.]+"
    r"|[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$"
)
_BYTES = (MEMORY, EPHEMERAL_STORAGE)


def headroom_problems(document: CommentedMap, label: str) -> list[Problem]:
    """What the schema cannot say about each group's `headroom.requests`: names Kubernetes accepts,
    quantities that parse, none negative, extended resources in whole units, and something reserved."""
    problems: list[Problem] = []
    groups = document.get("nodeGroups")
    if not isinstance(groups, CommentedMap):
        return problems
    for name, body in groups.items():
        headroom = body.get("headroom") if isinstance(body, CommentedMap) else None
        if not isinstance(headroom, CommentedMap) or not isinstance(headroom.get("requests"), CommentedMap):
            continue
        requests = headroom["requests"]
        path = f"nodeGroups.{name}.headroom.requests"
        found = 0
        for key, value in requests.items():
            resource = str(key)
            line = requests.lc.key(key)[0] + 1
            message = _request_problem(resource, _text(value))
            if message:
                problems.append(Problem(label, line, f"{path}.{resource}", message))
            elif _amount(resource, _text(value)) > 0:
                found += 1
        if not found and not any(p.path.startswith(f"{path}.") for p in problems):
            problems.append(
                Problem(
                    label,
                    headroom.lc.key("requests")[0] + 1,
                    path,
                    "reserves nothing (give cpu, memory or another resource above 0)",
                )
            )
    return problems


def _request_problem(resource: str, text: str) -> str:
    """Why one request is wrong, with the fix; "" when it is fine."""
    if not _RESOURCE_NAME.match(resource):
        return (
            f"{resource!r} is not a resource name (use cpu, memory, ephemeral-storage, hugepages-<size>,"
            " or an extended resource with its domain such as nvidia.com/gpu)"
        )
    try:
        value = parse_quantity(text)
    except QuantityError as exc:
        return str(exc)
    if value < 0:
        return f"{text!r} is negative (use 0 or more)"
    whole = resource == CPU or resource in _BYTES or resource.startswith("hugepages-")
    if not whole and value != Fraction(int(value)):
        return f"{text!r} is not a whole number ({resource} is counted in whole units, e.g. 1)"
    return ""


def semantic_problems(manifest: Manifest, label: str) -> list[Problem]:
    """What the schema cannot say: sizes within the ASG bounds, each instance approved once."""
    problems: list[Problem] = []
    owner: dict[str, str] = {}
    for group in manifest.groups:
        path = f"nodeGroups.{group.name}"

        def at(key: str, message: str, group: GroupEntry = group, path: str = path) -> Problem:
            return Problem(label, group.lines.get(key) or group.lines.get(""), f"{path}.{key}", message)

        if group.max_size is not None and group.desired > group.max_size:
            problems.append(
                at(
                    "desired",
                    f"{group.desired} is above maxSize {group.max_size} (raise the ASG's MaxSize first)",
                )
            )
        if group.min_size is not None and group.desired < group.min_size:
            problems.append(
                at(
                    "desired",
                    f"{group.desired} is below minSize {group.min_size} (lower the ASG's MinSize first)",
                )
            )
        if group.min_size is not None and group.max_size is not None and group.min_size > group.max_size:
            problems.append(
                at("minSize", f"{group.min_size} is above maxSize {group.max_size} (mirror the ASG)")
            )
        floor = group.min_size or 0
        if group.remove_instances and group.target < floor:
            problems.append(
                at(
                    "removeInstances",
                    f"removing {len(group.remove_instances)} of {group.desired} would leave {group.target},"
                    f" below minSize {floor} (remove fewer instances)",
                )
            )
        seen: set[str] = set()
        for removal in group.remove_instances:
            if removal.instance_id in seen:
                problems.append(
                    at("removeInstances", f"{removal.instance_id} is listed twice (list it once)")
                )
            seen.add(removal.instance_id)
            previous = owner.setdefault(removal.instance_id, group.name)
            if previous != group.name:
                problems.append(
                    at(
                        "removeInstances",
                        f"{removal.instance_id} is also listed under {previous} (list it once)",
                    )
                )
    return problems


def mirror_edits(previous: Manifest, current: Manifest, label: str) -> list[Problem]:
    """Warnings for minSize/maxSize changed by hand: they only mirror the ASG, so the edit does nothing."""
    warnings = []
    for group in current.groups:
        before = previous.group(group.name)
        if before is None:
            continue
        for key, old, new in (
            ("minSize", before.min_size, group.min_size),
            ("maxSize", before.max_size, group.max_size),
        ):
            if old != new:
                warnings.append(
                    Problem(
                        label,
                        group.lines.get(key) or group.lines.get(""),
                        f"nodeGroups.{group.name}.{key}",
                        f"changed {_show(old)} -> {_show(new)}: editing {key} changes nothing; change the ASG"
                        " (the next plan mirrors it back)",
                    )
                )
    return warnings


def _show(value: int | None) -> str:
    return "unset" if value is None else str(value)
