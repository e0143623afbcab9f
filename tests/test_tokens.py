"""One decoding and one escaping of a token's text for every place that shows it: a token spelling markup,
Markdown or LaTeX shows as its characters, and never leaves a raw newline inside an HTML block."""

import html
import re

import pytest

from app_pages.shared.escaping import escape
from inference.core.tokens import (
    counted_runs,
    html_token_text,
    markdown_token_text,
    prompt_tail,
    readable_token,
    token_text,
)

pytestmark = pytest.mark.unit

NASTY = ["\n\n", "<script>alert(1)</script>", "$x$", "**b**", "`code`", "a|b", "<img src=x onerror=alert(2)>", "\t"]
SYNTAX = re.compile(r"<script|<img|\$|\*\*|`|\|")


@pytest.mark.parametrize("text", NASTY)
def test_the_helpers_keep_every_character_and_leave_no_syntax(text):
    shown = text.replace("\n", "↵").replace("\t", "⇥")
    assert html.unescape(markdown_token_text(text)) == shown
    assert html.unescape(html_token_text(text).replace("<br>", "")) == shown
    for rendered in (markdown_token_text(text), html_token_text(text).replace("<br>", "")):
        assert "\n" not in rendered and not SYNTAX.search(rendered)
    assert html.unescape(escape(text)) == text and "<" not in escape(text)


class CleaningTokenizer:
    """A tokenizer whose default decode 'cleans up' a space before punctuation, as WordPiece-style ones do."""

    all_special_ids = []

    def decode(self, ids, skip_special_tokens=False, clean_up_tokenization_spaces=True):
        return " ." if clean_up_tokenization_spaces is False else "."

    def convert_ids_to_tokens(self, token_id):
        return "Ġ."


def test_a_token_shows_its_exact_text():
    assert token_text(CleaningTokenizer(), 7) == " ." and readable_token(CleaningTokenizer(), 7) == "␣."


def test_a_long_run_of_one_whitespace_mark_is_counted():
    assert counted_runs("↵␣␣␣␣␣␣␣␣") == "↵␣×8" and counted_runs("⇥⇥⇥⇥") == "⇥×4"
    assert counted_runs("␣␣␣") == "␣␣␣" and counted_runs("␣the") == "␣the"  # short runs stay drawn mark by mark


def test_prompt_tail_keeps_the_last_tokens_and_counts_the_rest():
    label, kept = prompt_tail([5, 6, 7, 8, 9], 2)
    assert kept == [8, 9] and "3" in label
    assert prompt_tail([5, 6], 2) == ("", [5, 6]) and prompt_tail([], 4) == ("", [])
