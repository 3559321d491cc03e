"""Untrusted text in a pull request's comment or body never becomes a link, a cross-reference or a
mention: GitHub links `https://...` and `www....` (its autolink extension) and `#1`, `org/repo#12`,
`GH-7` (its reference filter) in prose, so a workload named by a pull request's author could point
reviewers anywhere or spam another issue's timeline. Found by the attack on issue 28."""

from __future__ import annotations

import pytest

from reconciler.domain.markdown import code, inline
from tests.support.markdown_shape import links, shown

PIECES = [
    "https://evil.example/login",
    "see http://x.io",
    "ftp://files.example",
    "www.evil.example",
    "mirror (www.evil.example)",
    "#1",
    "fixes #12 and #13",
    "org/repo#12",
    "GH-7",
    "gh-7 too",
    "@org/team",
    "cc @alice",
]


@pytest.mark.parametrize("piece", PIECES)
def test_inline_text_links_nothing_and_reads_the_same(piece: str) -> None:
    assert links(piece), "the probe itself must see the link in the raw text"
    made = inline(piece)
    assert links(made) == [], made
    assert shown(made) == piece


@pytest.mark.parametrize("piece", PIECES)
def test_a_code_span_links_nothing(piece: str) -> None:
    assert links(code(piece)) == []


def test_an_email_address_and_plain_numbers_stay_as_they_are() -> None:
    assert inline("alice@example.com") == "alice@example.com"
    assert inline("3 pods, 2 × m5.large, 0.5 cpu") == "3 pods, 2 × m5.large, 0.5 cpu"
