"""Bidirectional controls in a ref, a commit or a name are shown as \\uXXXX in every Markdown body
(check's comment, pull-request bodies, what-if): `git check-ref-format` accepts a branch
`x/<U+202E>DEVORPPA`, whose right-to-left override would make a failed comment read as APPROVED.
Found by the attack on issue 24 item 4."""

from __future__ import annotations

from reconciler.domain.markdown import code, inline
from reconciler.views.check import render_failed_markdown

RLO = "\u202e"
REF = f"x/{RLO}DEVORPPA-yb-nimda-mroftalp"
CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def test_a_ref_with_a_right_to_left_override_cannot_reorder_the_failed_comment() -> None:
    body = render_failed_markdown("<!-- asg-reconciler check cluster=prod -->", REF, f"no such ref {REF}")
    assert not any(ch in body for ch in CONTROLS), repr(body)


def test_inline_and_code_make_bidi_controls_visible() -> None:
    for text in (inline(REF), code(REF), code(REF, in_table=True)):
        assert not any(ch in text for ch in CONTROLS), repr(text)
