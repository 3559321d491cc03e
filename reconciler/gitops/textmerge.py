"""Carry a YAML emitter's edits over to the original text, so a write changes only the edited lines.

ruamel.yaml round-trips comments and order, but normalises some spelling (spaces after a colon,
flow-map spacing, mixed indentation). People diff and review the manifest, so we diff the emitter's
output before and after our edits and replay only those hunks on the original text: everything we did
not edit stays byte-for-byte what the person wrote. This is a diff3 merge with the unedited emitter
output as the base; where a normalisation and an edit touch the same lines, the edit wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher


@dataclass(frozen=True)
class _Hunk:
    start: int  # in base lines, half-open
    end: int
    lines: tuple[str, ...]
    ours: bool  # True: an edit (base -> edited); False: a normalisation (base -> original)


def carry_over(original: str, baseline: str, edited: str) -> str:
    """`original` with the changes `baseline -> edited` applied (baseline ~ original, normalised)."""
    if baseline == original:
        return edited
    if baseline == edited:
        return original
    base = baseline.splitlines(keepends=True)
    hunks = sorted(
        _hunks(base, original.splitlines(keepends=True), ours=False)
        + _hunks(base, edited.splitlines(keepends=True), ours=True),
        key=lambda h: (h.start, h.end, h.ours),
    )
    out: list[str] = []
    position = 0
    for cluster in _clusters(hunks):
        start = min(h.start for h in cluster)
        end = max(h.end for h in cluster)
        out.extend(base[position:start])
        inserts_only = all(h.start == h.end for h in cluster)
        chosen = cluster if inserts_only else [h for h in cluster if h.ours] or cluster
        cursor = start
        for hunk in chosen:
            out.extend(base[cursor : hunk.start])
            out.extend(hunk.lines)
            cursor = hunk.end
        out.extend(base[cursor:end])
        position = end
    out.extend(base[position:])
    return "".join(out)


def _hunks(base: list[str], other: list[str], *, ours: bool) -> list[_Hunk]:
    matcher = SequenceMatcher(None, base, other, autojunk=False)
    hunks = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        lines = other[j1:j2]
        if ours:
            lines = lines + _orphaned_comments(base[i1:i2], lines)
        hunks.append(_Hunk(i1, i2, tuple(lines), ours))
    return hunks


def _orphaned_comments(removed: list[str], replacement: list[str]) -> list[str]:
    """Comment and blank lines trailing a deleted block, which the emitter drops along with it.

    ruamel attaches the comment lines above a key to the node before it, so deleting a group or the
    last removal would also delete the comment (or the blank lines) introducing what follows.
    """
    run = 0
    while run < len(removed) and _is_comment(removed[len(removed) - 1 - run]):
        run += 1
    if run == 0 or run == len(removed):
        return []
    tail = removed[len(removed) - run :]
    return [] if replacement[-run:] == tail else tail


def _is_comment(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _overlaps(a_start: int, a_end: int, hunk: _Hunk) -> bool:
    if a_start == a_end == hunk.start == hunk.end:
        return True  # two insertions at the same place
    return hunk.start < a_end and a_start < hunk.end


def _clusters(hunks: list[_Hunk]) -> list[list[_Hunk]]:
    """Group hunks whose base ranges overlap; each group is resolved as one."""
    clusters: list[list[_Hunk]] = []
    for hunk in hunks:
        if clusters:
            current = clusters[-1]
            start, end = min(h.start for h in current), max(h.end for h in current)
            if _overlaps(start, end, hunk):
                current.append(hunk)
                continue
        clusters.append([hunk])
    return clusters
