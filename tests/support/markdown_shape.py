"""What GitHub would make of a Markdown text's structure, enough to tell whether untrusted text
added any: table cells as GitHub splits them, code spans as CommonMark reads them, fenced blocks.

No Markdown library is a dependency, so this reads the few constructs our bodies use, as the
CommonMark and GFM specs define them; every check is stricter than GitHub where they differ."""

from __future__ import annotations

import re


def cells(row: str) -> list[str]:
    """A table row's cells as GitHub splits them: at each `|` not escaped by a backslash. The row
    must split the same way whether a backslash pair `\\\\` is read first or not (GFM's scanner
    takes `\\|` as an escaped pipe whatever precedes it; a stricter reading pairs backslashes)."""

    def split(pair_backslashes: bool) -> list[str]:
        out, cell, i = [], "", 0
        while i < len(row):
            ch = row[i]
            if ch == "\\" and i + 1 < len(row) and (row[i + 1] == "|" or pair_backslashes):
                cell += row[i : i + 2]
                i += 2
                continue
            if ch == "|":
                out.append(cell)
                cell = ""
            else:
                cell += ch
            i += 1
        out.append(cell)
        return [c.strip() for c in out[1:-1]] if row.startswith("|") and row.endswith("|") else out

    first, second = split(False), split(True)
    assert first == second, f"the row splits differently by reading: {row!r}"
    return first


def code_spans(line: str) -> list[str]:
    """The contents of the code spans in one line, as CommonMark reads them (a run of N backticks
    opens, the next run of exactly N closes; one space each side is stripped when both are there)."""
    spans, i = [], 0
    while i < len(line):
        if line[i] == "\\" and i + 1 < len(line):
            i += 2
            continue
        if line[i] != "`":
            i += 1
            continue
        run = re.match(r"`+", line[i:])
        assert run is not None
        fence = run.group(0)
        j = i + len(fence)
        closing = None
        for match in re.finditer(r"`+", line[j:]):
            if len(match.group(0)) == len(fence):
                closing = j + match.start()
                break
        if closing is None:
            i = j  # a lone run is literal backticks
            continue
        content = line[j:closing]
        if content.startswith(" ") and content.endswith(" ") and content.strip():
            content = content[1:-1]
        spans.append(content)
        i = closing + len(fence)
    return spans


def outside_fences(text: str) -> list[str]:
    """The lines not inside a fenced code block; asserts every block that opens is closed."""
    lines, fence = [], ""
    for line in text.split("\n"):
        if fence:
            if line.strip() == fence or (set(line.strip()) == {"`"} and len(line.strip()) >= len(fence)):
                fence = ""
            continue
        opening = re.match(r"^ {0,3}(`{3,})", line)
        if opening:
            fence = opening.group(1)
            continue
        lines.append(line)
    assert not fence, "a fenced block is never closed"
    return lines


def unescaped(text: str, chars: str) -> list[str]:
    """The characters of `chars` in `text` not escaped by a backslash (outside code spans)."""
    found, i = [], 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] in chars:
            found.append(text[i])
        i += 1
    return found


def without_code_spans(line: str) -> str:
    """The line with every code span's content blanked (inside one, HTML and Markdown are literal)."""
    out, i = "", 0
    while i < len(line):
        if line[i] == "\\" and i + 1 < len(line):
            out += line[i : i + 2]
            i += 2
            continue
        run = re.match(r"`+", line[i:])
        if run is None:
            out += line[i]
            i += 1
            continue
        fence = run.group(0)
        j = i + len(fence)
        closing = next(
            (j + m.start() for m in re.finditer(r"`+", line[j:]) if len(m.group(0)) == len(fence)), None
        )
        if closing is None:
            out += fence
            i = j
            continue
        out += "`code`"
        i = closing + len(fence)
    return out


def shown(cell: str) -> str:
    """The text one table cell or piece of prose shows: a whole code span's content (its `\\|`
    unescaped by the table), else the prose with backslash escapes, the three entities we write
    and the zero-width joiners that break mentions, autolinks and cross-references undone."""
    cell = cell.replace("\\|", "|") if cell.startswith("`") else cell
    spans = code_spans(cell)
    if len(spans) == 1 and without_code_spans(cell) == "`code`":
        return spans[0]
    text = re.sub(r"\\(.)", r"\1", cell)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").replace("\u200d", "")


# What GitHub links in prose (outside code spans and fenced blocks): its autolink extension
# (`http(s)://`, `www.`), and its reference filter (`#12`, `org/repo#12`, `GH-12`, `@user`).
_LINKS = re.compile(
    r"(?i)\b(?:https?|ftp)://\S"
    r"|(?:^|[\s*_~(])www\.[\w-]"
    r"|(?:^|[^\w&])#\d"
    r"|[\w.-]+/[\w.-]+#\d"
    r"|\bgh-\d"
    r"|(?<![\w.`])@[a-z0-9]"
)


def links(text: str) -> list[str]:
    """Every piece of `text` GitHub would render as a link, a cross-reference or a mention."""
    return [m[0] for line in outside_fences(text) for m in _LINKS.finditer(without_code_spans(line))]
