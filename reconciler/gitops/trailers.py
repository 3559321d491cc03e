"""Capacity commit messages: `capacity(<cluster>): <summary>` plus git trailers (docs/history.md).

The trailers make every capacity commit explain itself and let `history` read the whole audit trail
with one `git log`, without parsing a YAML file per commit:

    Capacity-Cluster: prod-eks
    Capacity-Change: asg-a 3 -> 5           one per group whose target changes
    Capacity-Reason: asg-a: 3 pending pods  per group (`<group>: text`) or for the commit (`text`)
    Capacity-Source: external               adopted drift; absent when the planner decided
    Capacity-Remove: asg-b i-0abc...        one per instance a scale-down names
    Capacity-Proposal: <id>                 the scale-down proposal the commit belongs to
    Capacity-Restore: asg-a                 a desired lowered by hand without names, put back

`parse_message(build_message(m)) == m` for every valid `m`; free text is folded to one line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

CLUSTER = "Capacity-Cluster"
CHANGE = "Capacity-Change"
REASON = "Capacity-Reason"
SOURCE = "Capacity-Source"
REMOVE = "Capacity-Remove"
PROPOSAL = "Capacity-Proposal"
RESTORE = "Capacity-Restore"
KEYS = (CLUSTER, CHANGE, REASON, SOURCE, REMOVE, PROPOSAL, RESTORE)

SOURCE_EXTERNAL = "external"  # a change made outside the tool (drift) and adopted into Git

_SUBJECT = re.compile(r"^capacity\((?P<cluster>[^)\s]+)\): (?P<summary>.*)$")
# counts of up to 18 digits: a longer one (whoever pushes writes trailers) is not a change, not an
# int() that Python refuses past 4,300 digits
_CHANGE = re.compile(r"^(?P<group>\S+) (?P<before>[0-9]{1,18}) -> (?P<after>[0-9]{1,18})$")
_COUNT_LIMIT = 10**18
_REMOVE = re.compile(r"^(?P<group>\S+) (?P<instance>\S+)$")
_TOKEN = re.compile(r"^\S+$")
_PARAGRAPH = re.compile(r"\n[ \t]*\n")


@dataclass(frozen=True)
class Change:
    group: str
    before: int
    after: int

    @property
    def direction(self) -> str:
        return "up" if self.after > self.before else "down" if self.after < self.before else "none"

    def __str__(self) -> str:
        return f"{self.group} {self.before} -> {self.after}"


@dataclass(frozen=True)
class Reason:
    group: str  # "" when it explains the whole commit
    text: str

    def __str__(self) -> str:
        return f"{self.group}: {self.text}" if self.group else self.text


@dataclass(frozen=True)
class InstanceRemoval:
    group: str
    instance_id: str

    def __str__(self) -> str:
        return f"{self.group} {self.instance_id}"


@dataclass(frozen=True)
class CapacityMessage:
    cluster: str
    summary: str
    changes: tuple[Change, ...] = ()
    reasons: tuple[Reason, ...] = ()
    source: str = ""  # "" (the planner) or SOURCE_EXTERNAL
    removals: tuple[InstanceRemoval, ...] = ()
    proposal: str = ""
    body: str = ""  # free text between the subject and the trailers
    # groups whose change puts back a desired lowered by hand on main without naming instances
    # (DESIGN §3 rule 2): a restore, not a scale-up (history shows it so)
    restores: tuple[str, ...] = ()

    def reason_for(self, group: str) -> str:
        """The group's own reasons, else the commit's general ones, joined with '; '."""
        own = [r.text for r in self.reasons if r.group == group]
        return "; ".join(own or [r.text for r in self.reasons if not r.group])

    def removals_for(self, group: str) -> tuple[str, ...]:
        return tuple(r.instance_id for r in self.removals if r.group == group)


def one_line(text: str) -> str:
    """Free text as a single trailer-safe line."""
    return " ".join(text.split())


def summarize(changes: Sequence[Change], limit: int = 72, restores: Sequence[str] = ()) -> str:
    """A subject summary such as `scale up asg-a 3 -> 5, scale down asg-b 4 -> 2`, kept short; the
    changes of `restores` (groups) read `restore asg-c 1 -> 2`."""
    if not changes:
        return "no capacity change"
    parts = []
    for direction in ("up", "restore", "down", "none"):
        chosen = [c for c in changes if _direction(c, restores) == direction]
        if chosen:
            verb = {"up": "scale up", "restore": "restore", "down": "scale down", "none": "update"}[direction]
            parts.append(f"{verb} " + ", ".join(str(c) for c in chosen))
    text = "; ".join(parts)
    if len(text) <= limit:
        return text
    up = sum(c.after - c.before for c in changes if c.direction == "up")
    down = sum(c.before - c.after for c in changes if c.direction == "down")
    counts = [f"+{up}" if up else "", f"-{down}" if down else ""]
    return f"{len(changes)} groups ({', '.join(c for c in counts if c) or 'no size change'})"


def _direction(change: Change, restores: Sequence[str]) -> str:
    return "restore" if change.group in restores and change.direction == "up" else change.direction


def build_message(message: CapacityMessage) -> str:
    """The commit message text; raises ValueError for values a trailer cannot carry."""
    _check(message)
    lines = [f"{CLUSTER}: {message.cluster}"]
    lines += [f"{CHANGE}: {c}" for c in message.changes]
    lines += [f"{REASON}: {r}" for r in message.reasons]
    if message.source:
        lines.append(f"{SOURCE}: {message.source}")
    lines += [f"{REMOVE}: {r}" for r in message.removals]
    if message.proposal:
        lines.append(f"{PROPOSAL}: {message.proposal}")
    lines += [f"{RESTORE}: {group}" for group in message.restores]
    subject = f"capacity({message.cluster}): {message.summary}"
    paragraphs = [subject] + ([message.body] if message.body else []) + ["\n".join(lines)]
    return "\n\n".join(paragraphs) + "\n"


def parse_message(text: str) -> CapacityMessage | None:
    """The capacity message in a commit message, or None when it carries no Capacity-Cluster trailer."""
    paragraphs = split_message(text)
    if paragraphs is None:
        return None
    subject, body, trailers = paragraphs
    scanned = scan_trailers(trailers)
    if scanned is None:
        return None
    subject_match = _SUBJECT.match(subject)
    return CapacityMessage(
        cluster=scanned.cluster,
        summary=subject_match["summary"] if subject_match else subject,
        changes=tuple(Change(*c) for c in scanned.changes),
        reasons=tuple(Reason(*r) for r in scanned.reasons),
        source=scanned.source,
        removals=tuple(InstanceRemoval(*r) for r in scanned.removals),
        proposal=scanned.proposal,
        body=body,
        restores=scanned.restores,
    )


def split_message(text: str) -> tuple[str, str, str] | None:
    """(subject line, body, last paragraph) of a commit message; None if it has one paragraph only."""
    paragraphs = _PARAGRAPH.split(text.strip("\n"))
    if len(paragraphs) < 2:
        return None
    return paragraphs[0].split("\n", 1)[0], "\n\n".join(paragraphs[1:-1]), paragraphs[-1]


class Scanned(NamedTuple):
    """The capacity trailers of one message as plain tuples.

    The single trailer parser: `parse_message` wraps it in dataclasses; `history`, which reads
    thousands of commits, uses it as is (hence a NamedTuple: cheap to build, still immutable).
    """

    cluster: str
    changes: tuple[tuple[str, int, int], ...]  # (group, from, to)
    reasons: tuple[tuple[str, str], ...]  # (group, or "" for the whole commit; text)
    source: str
    removals: tuple[tuple[str, str], ...]  # (group, instance id)
    proposal: str
    restores: tuple[str, ...] = ()  # groups whose change restores a desired lowered by hand


_KIND = {
    "Change": "cha",
    "Reason": "rea",
    "Cluster": "clu",
    "Remove": "rem",
    "Source": "sou",
    "Proposal": "pro",
    "Restore": "res",
}
_OURS = re.compile(
    r"^capacity-(cluster|change|reason|source|remove|proposal|restore)[ \t]*:[ \t]*(.*)", re.I | re.M
)


def last_paragraph(text: str) -> str | None:
    """The trailer paragraph as `split_message` finds it, faster (history needs it per commit)."""
    text = text.strip("\n")
    cut = text.rfind("\n\n")
    if cut < 0:
        return None
    tail = text[cut + 2 :]
    if "\n " in tail or "\n\t" in tail:  # maybe a whitespace-only line: let the exact split decide
        parts = split_message(text)
        return parts[2] if parts else None
    return tail


def scan_trailers(paragraph: str) -> Scanned | None:
    """Our trailers in a message's last paragraph, as git reads them: `Key: value` lines (key case
    ignored), continuation lines unfolded, other lines (a forge's free text) skipped.

    Hot in `history` (once per capacity commit): one regex pass, then a short loop.
    """
    if "\n " in paragraph or "\n\t" in paragraph:
        paragraph = _unfold(paragraph)
    cluster, source, proposal = "", "", ""
    changes: list[tuple[str, int, int]] = []
    reasons: list[str] = []
    removals: list[tuple[str, str]] = []
    restores: list[str] = []
    for key, raw in _OURS.findall(paragraph):
        value = raw.rstrip()
        kind = _KIND.get(key) or key[:3].lower()
        if kind == "cha":
            match = _CHANGE.match(value)
            if match:
                group, before, after = match.groups()
                changes.append((group, int(before), int(after)))
        elif kind == "rea":
            reasons.append(value)
        elif kind == "clu":
            cluster = value
        elif kind == "rem":
            match = _REMOVE.match(value)
            if match:
                removals.append((match[1], match[2]))
        elif kind == "sou":
            source = value
        elif kind == "res":
            if _TOKEN.match(value):
                restores.append(value)
        else:
            proposal = value
    if not cluster:
        return None
    found_reasons: tuple[tuple[str, str], ...] = ()
    if reasons:
        groups = {c[0] for c in changes}
        groups.update(r[0] for r in removals)
        found_reasons = tuple([_reason(v, groups) for v in reasons])
    return Scanned(cluster, tuple(changes), found_reasons, source, tuple(removals), proposal, tuple(restores))


def _unfold(paragraph: str) -> str:
    """Join continuation lines (leading whitespace) to the line before, as git does."""
    lines: list[str] = []
    for line in paragraph.split("\n"):
        if line[:1] in (" ", "\t") and lines:
            lines[-1] = f"{lines[-1].rstrip()} {line.strip()}"
        else:
            lines.append(line)
    return "\n".join(lines)


def _reason(value: str, groups: set[str]) -> tuple[str, str]:
    """`group: text` when `group` is one the commit changes; any other text explains the commit."""
    head, sep, rest = value.partition(": ")
    if sep and head in groups:
        return head, rest
    return "", value


def _check(message: CapacityMessage) -> None:
    groups = {c.group for c in message.changes} | {r.group for r in message.removals}
    if not _TOKEN.match(message.cluster):
        raise ValueError(f"cluster {message.cluster!r} must be one word")
    for value in (message.summary, message.source, message.proposal):
        if value != one_line(value):
            raise ValueError(f"{value!r} must be one line without extra spaces (use one_line())")
    if message.source and not _TOKEN.match(message.source):
        raise ValueError(f"source {message.source!r} must be one word")
    if message.body != message.body.strip() or "\n\n".join(_PARAGRAPH.split(message.body)) != message.body:
        raise ValueError("the body must not start or end with blank space nor hold whitespace-only lines")
    if not message.summary:
        raise ValueError("the summary must not be empty (use summarize())")
    for change in message.changes:
        counts_ok = 0 <= change.before < _COUNT_LIMIT and 0 <= change.after < _COUNT_LIMIT
        if not _TOKEN.match(change.group) or not counts_ok:
            raise ValueError(f"change {change} needs a one-word group and counts of 0 to 10^18 - 1")
    for removal in message.removals:
        if not _TOKEN.match(removal.group) or not _TOKEN.match(removal.instance_id):
            raise ValueError(f"removal {removal} needs a one-word group and instance id")
    raised = {c.group for c in message.changes if c.direction == "up"}
    for group in message.restores:
        if group not in raised or message.restores.count(group) > 1:
            raise ValueError(f"restore of {group!r} needs one change of that group that raises it")
    for reason in message.reasons:
        if reason.text != one_line(reason.text) or not reason.text:
            raise ValueError(f"reason {reason.text!r} must be one non-empty line (use one_line())")
        if reason.group and reason.group not in groups:
            raise ValueError(f"reason for {reason.group} names a group the commit does not change")
        if not reason.group and reason.text.partition(": ")[0] in groups and ": " in reason.text:
            raise ValueError(f"general reason {reason.text!r} would read as the reason of one group")
