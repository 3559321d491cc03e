"""Markdown for GitHub from text we do not control, and the size GitHub accepts.

Refs, commit ids and subjects, manifest keys and values, node group and node names, error messages:
anyone who can push a branch or open a pull request chooses them, and a pull request's comment or
body renders them. Each piece goes through one of these, so none can add HTML, a heading, a link,
a table cell or row, a code span that swallows ours, or an @mention that pings a team:

- `inline`: prose and table cells (one line, HTML and Markdown punctuation escaped);
- `code`: a code span that shows the text exactly (a ref with backticks or `|` included);
- `fenced`: a fenced block whose fence no line of the text can close.

GitHub refuses a comment or pull-request body over 65,536 characters (422); `BODY_BUDGET` is what we
write at most, leaving room for GitHub's own counting.
"""

from __future__ import annotations

import re

GITHUB_BODY_LIMIT = 65_536  # characters GitHub accepts in a comment or pull-request body
BODY_BUDGET = 60_000  # what we write at most
PIECE_LIMIT = 2_000  # characters of one untrusted piece (a 100 KB error message is not a line)

# Explicit bidirectional controls (LRE, RLE, PDF, LRO, RLO, LRI, RLI, FSI, PDI, LRM, RLM, ALM): one
# in a ref, a commit or a name would reorder the text after it (a branch `x/<RLO>DEVORPPA` reads as
# "APPROVED"), so every untrusted piece shows each as a visible \uXXXX; right-to-left letters stay.
BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
_MENTION = re.compile(r"(?<![\w.])@")
# What GitHub turns into a link or a cross-reference in prose (its autolink extension and its
# reference filter): `https://...`, `www....`, `#12`, `org/repo#12`, `GH-12`. A zero-width joiner
# inside each keeps the text as it reads and stops the link (code spans and fenced blocks never link).
_SCHEME = re.compile(r"(?i)\b(https?|ftp|mailto|xmpp):")
_WWW = re.compile(r"(?i)\b(www)\.")
_ISSUE = re.compile(r"(?i)(#|\bgh-)(?=\d)")
ZWJ = "\u200d"
_ESCAPED = re.compile(r"([\\`*_\[\]|~])")
_TICKS = re.compile(r"`+")


def show_bidi(text: str) -> str:
    """`text` with its bidirectional controls made visible (\u202e), so it cannot reorder a line."""
    if BIDI.search(text):  # rare: a search is cheaper than a substitution on every piece
        return BIDI.sub(lambda m: f"\\u{ord(m[0]):04x}", text)
    return text


def clip(text: str, limit: int = PIECE_LIMIT) -> str:
    """At most `limit` characters, saying how many were cut; bidirectional controls made visible
    (every untrusted piece passes here: inline, code spans, fenced lines)."""
    text = show_bidi(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} characters more)"


def inline(text: str, limit: int = PIECE_LIMIT) -> str:
    """Untrusted text as one inert line of prose or one table cell: no HTML, no link or image
    syntax, no emphasis, code span or cell boundary it did not bring escaped, no @mention that pings
    (a zero-width joiner after the @; alice@example.com stays as it is), no autolink nor issue
    cross-reference (`unlinked`)."""
    text = clip(" ".join(text.split()), limit)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _ESCAPED.sub(r"\\\1", text)
    return unlinked(_MENTION.sub("@" + ZWJ, text))


def unlinked(text: str) -> str:
    """`text` with nothing GitHub would make a link or a cross-reference of: a zero-width joiner
    after a URL's scheme, in `www.`, and between `#` or `GH-` and the number."""
    text = _SCHEME.sub(lambda m: f"{m[1]}{ZWJ}:", text)
    text = _WWW.sub(lambda m: f"{m[1]}{ZWJ}.", text)
    return _ISSUE.sub(lambda m: f"{m[1]}{ZWJ}", text)


def code(text: str, *, in_table: bool = False, limit: int = PIECE_LIMIT) -> str:
    """A code span showing `text` as it is (one line): fenced by more backticks than any run in
    it, padded when it starts or ends with one (CommonMark strips that space). HTML and entities
    are literal inside a code span, so nothing else is escaped there, except `|` in a table, where
    GitHub splits cells before it reads code spans (`\\|` shows as `|`). A cell whose text holds
    both `\\` and `|` is escaped prose instead: a reader pairing backslashes would split it."""
    text = clip(" ".join(text.split()), limit) or " "
    if in_table and "\\" in text and "|" in text:
        return inline(text, limit)
    fence = "`" * (1 + max((len(run) for run in _TICKS.findall(text)), default=0))
    if text.startswith("`") or text.endswith("`"):
        text = f" {text} "
    if in_table:
        text = text.replace("|", "\\|")
    return f"{fence}{text}{fence}"


def fenced(text: str, info: str = "text", line_limit: int = PIECE_LIMIT) -> list[str]:
    """`text` as a fenced block: a fence longer than any backtick run inside, so no line of it
    closes the block; each line clipped."""
    lines = [clip(line, line_limit) for line in text.rstrip("\n").split("\n")]
    longest = max((len(run) for line in lines for run in _TICKS.findall(line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{info}", *lines, fence]


class Part:
    """A section of a body that may be cut: `lines` from the end, `before` and `after` always kept
    (a heading, a table's header, a fence); `what` names a line in the summary ("rows of ...")."""

    def __init__(
        self, lines: list[str], what: str, before: list[str], after: list[str] | None = None
    ) -> None:
        self.lines, self.what, self.before, self.after = lines, what, before, after or []


def _size(lines: list[str]) -> int:
    return sum(len(line) + 1 for line in lines)


_RESERVE = 200  # per cut part: the line saying how many more there were


def fit(head: list[str], parts: list[Part], budget: int, summary: str) -> str:
    """`head` and `parts` as one text of at most `budget` characters. When they are longer, each
    part keeps as many of its first lines as a fair share of the room allows (a small part keeps
    all of its own and leaves the rest to the others), says how many it left out, and `summary`
    plus what was cut follows `head` (which holds the verdict, so it stays first)."""
    full = head + [line for p in parts for line in (*p.before, *p.lines, *p.after)]
    if _size(full) <= budget:
        return "\n".join(full) + "\n"
    fixed = _size(head) + sum(_size(p.before) + _size(p.after) + _RESERVE for p in parts)
    room = budget - fixed - len(summary) - _RESERVE * (1 + len(parts))
    kept: dict[int, int] = {}
    order = sorted(range(len(parts)), key=lambda i: _size(parts[i].lines))
    for n, i in enumerate(order):
        share, used, taken = max(0, room) // (len(order) - n), 0, 0
        for line in parts[i].lines:
            if used + len(line) + 1 > share:
                break
            used, taken = used + len(line) + 1, taken + 1
        kept[i], room = taken, room - used
    cuts = [f"{kept[i]} of {len(p.lines)} {p.what}" for i, p in enumerate(parts) if kept[i] < len(p.lines)]
    lines = [*head, f"{summary} Shown here: {'; '.join(cuts)}.", ""]
    for i, p in enumerate(parts):
        lines += [*p.before, *p.lines[: kept[i]], *p.after]
        if kept[i] < len(p.lines):
            lines += ["", f"*... {len(p.lines) - kept[i]} more {p.what} not shown here.*"]
    text = "\n".join(lines) + "\n"
    if len(text) > budget:  # only a head beyond the budget: nothing fits but the head, clipped
        text = clip("\n".join([*head, summary]), budget - 40) + "\n"
    return text
