"""The glossary (each term of art has one line, used as a hover help or a one-line note where it first appears) and
the lessons' number words (inference/core/wording): "1 token", never "1 tokens"; a change that rounds to zero reads
"0.000"."""

import pytest

from inference.core import wording
from inference.lessons import glossary

pytestmark = pytest.mark.unit

ISSUE_TERMS = ("Z_t", "nats", "GFLOP/s", "bootstrap", "α", "-b/-ub", "cache_n", "--cache-ram", "<|endoftext|>",
               "<|im_end|>", "␣")  # fmt: skip


def test_every_term_the_issue_names_has_one_line():
    for term in ISSUE_TERMS:
        line = glossary.explain(term)
        assert line and "\n" not in line and len(line) < 220, term


def test_an_unknown_term_is_an_error_naming_it():
    with pytest.raises(KeyError, match="nope"):
        glossary.explain("nope")


def test_a_note_and_a_help_name_each_term_with_its_line():
    note = glossary.note("Z_t", "nats")
    assert "\n" not in note
    assert glossary.explain("Z_t") in note and glossary.explain("nats") in note
    help_text = glossary.help_for("GFLOP/s")
    assert help_text.startswith("GFLOP/s") and glossary.explain("GFLOP/s") in help_text


def test_terms_found_in_a_text_in_the_order_they_appear():
    assert glossary.terms_in("α rose; each ␣ marks a space; Z_t fell") == ["α", "␣", "Z_t"]


def test_plural_says_one_token_and_counts_with_commas():
    assert wording.plural(1, "token") == "1 token"
    assert wording.plural(0, "token") == "0 tokens" and wording.plural(49_152, "token") == "49,152 tokens"
    assert wording.plural(2, "query", "queries") == "2 queries"


def test_signed_never_prints_minus_zero():
    signed = wording.signed
    assert signed(-0.00004, 3) == "0.000" and signed(0.00004, 4) == "0.0000" and signed(0.0, 3) == "0.000"
    assert signed(-0.0123, 3) == "-0.012" and signed(0.0123, 3) == "+0.012"
