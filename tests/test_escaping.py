"""One escaping rule for token text: every HTML builder and Markdown sentence that shows token text shows a token
spelling markup, Markdown or LaTeX as its characters, and never leaves a raw blank line inside an HTML block."""

import html
import re

import pytest

from inference.core.tokens import html_token_text, markdown_token_text
from inference.lessons.classroom import session
from inference.lessons.compare.figures import parting_html
from inference.lessons.generate.figures import token_html
from inference.lessons.moe import text as moe_text
from inference.lessons.moe.figures import routing_chips
from inference.lessons.quantization.figures import greedy_text_html

pytestmark = pytest.mark.unit

NASTY = ["\n\n", "<script>alert(1)</script>", "$x$", "**b**", "`code`", "a|b", "<img src=x onerror=alert(2)>"]
SYNTAX = re.compile(r"<script|<img|\$|\*\*|`|\|")


def assert_literal(rendered: str, originals) -> None:
    """No markup or Markdown/LaTeX syntax survives, no raw blank line, and unescaped it reads as the text."""
    without_tags = re.sub(r"<(/?)(span|div|mark|i|b|br|style)\b[^>]*>", "", rendered)
    without_style = re.sub(r"[^\n]*\{[^}]*\}", "", without_tags)  # the chip CSS block
    assert not SYNTAX.search(without_style), without_style[:300]
    assert "\n\n" not in rendered
    plain = html.unescape(without_tags).replace("↵", "\n").replace("␣", " ")
    for text in originals:
        assert text.strip() in plain


def test_the_two_helpers_keep_every_character():
    for text in NASTY:
        assert html.unescape(markdown_token_text(text)) == text.replace("\n", "↵")
        assert html.unescape(html_token_text(text).replace("<br>", "")) == text.replace("\n", "↵")
        assert "\n" not in html_token_text(text) and "\n" not in markdown_token_text(text)


def test_generate_chips(bundled):
    tok = bundled.tokenizer
    ids = tok.encode("".join(NASTY))
    assert_literal(token_html(tok, ids, []), ["<script>alert(1)</script>", "$x$", "**b**"])


def test_compare_parting_text(bundled):
    tok = bundled.tokenizer
    ids = tok.encode("".join(NASTY))
    assert_literal(parting_html(tok, ids[:3], ids[3:], ids[3:], None, "A"), ["alert(1)", "**b**"])


def test_quantization_text_box():
    assert_literal(greedy_text_html("float32", "$x$ \n\n", NASTY, departure=2), NASTY[1:4])


def test_moe_chips_and_router_sentence():
    assert_literal(routing_chips(NASTY, [[0, 1]] * len(NASTY), [[0.5, 0.5]] * len(NASTY)), ["$x$", "**b**"])
    sentence = moe_text.token_router(3, markdown_token_text(repr("**b**|$x$")), 0, 8, [0.1] * 8, [0, 1], [0.5, 0.5])
    assert "**b**|$x$" not in sentence and "**b**|$x$" in html.unescape(sentence)


def test_class_reveal_sentence_is_plain_text_the_page_escapes():
    rv = {"answers": 1, "something_else": 0, "u": 0.5, "chosen_label": "**b**", "chosen_rank": 1, "chosen_prob": 0.5}
    rv["rows"] = [{"answers": 1, "label": "$x$", "model_prob": 0.5}]
    shown = markdown_token_text(session.reveal_sentence(rv))
    assert not SYNTAX.search(shown) and "'$x$'" in html.unescape(shown)
