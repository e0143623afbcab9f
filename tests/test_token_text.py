"""One decoding of a token's text for every place that shows it (prompt chips, generated chips, chart labels)."""

import html

import pytest

from inference.core.tokens import counted_runs, prompt_tail, readable_token, token_text
from inference.lessons.generate.figures import token_html

pytestmark = pytest.mark.unit


class CleaningTokenizer:
    """A tokenizer whose default decode 'cleans up' a space before punctuation, as WordPiece-style ones do."""

    all_special_ids = []

    def decode(self, ids, skip_special_tokens=False, clean_up_tokenization_spaces=True):
        return " ." if clean_up_tokenization_spaces is False else "."

    def convert_ids_to_tokens(self, token_id):
        return "Ġ."


def test_prompt_chips_show_the_exact_token_text_like_generated_chips_and_labels():
    """A prompt token ' .' shows its space (␣.), the same text token_text and chart labels give."""
    tokenizer = CleaningTokenizer()
    assert token_text(tokenizer, 7) == " ."
    assert readable_token(tokenizer, 7) == "␣."
    assert "␣." in html.unescape(token_html(tokenizer, [7], []))


def test_a_long_run_of_one_whitespace_mark_is_counted():
    assert counted_runs("↵␣␣␣␣␣␣␣␣") == "↵␣×8" and counted_runs("⇥⇥⇥⇥") == "⇥×4"
    assert counted_runs("␣␣␣") == "␣␣␣" and counted_runs("␣the") == "␣the"  # short runs stay drawn mark by mark


def test_prompt_tail_keeps_the_last_tokens_and_counts_the_rest():
    assert prompt_tail([5, 6, 7, 8, 9], 2) == ("… 3 earlier prompt tokens", [8, 9])
    assert prompt_tail([5, 6, 7], 2) == ("… 1 earlier prompt token", [6, 7])
    assert prompt_tail([5, 6], 2) == ("", [5, 6]) and prompt_tail([], 4) == ("", [])
