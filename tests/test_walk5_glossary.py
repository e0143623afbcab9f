"""#46 item 12: jargon is explained where it first appears, one way: the glossary's one-line explanations, used as a
hover help or a one-line note; the Speculative page's α paragraph carries no pull-request citation."""

import pytest

from inference.lessons import glossary
from inference.lessons.constrained import text as constrained_text
from inference.lessons.speculative import text as spec_text

pytestmark = pytest.mark.unit

ISSUE_TERMS = (
    "Z_t",
    "nats",
    "GFLOP/s",
    "bootstrap",
    "α",
    "-b/-ub",
    "cache_n",
    "--cache-ram",
    "<|endoftext|>",
    "<|im_end|>",
    "␣",
)


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


def test_the_alpha_paragraph_has_no_pull_request_citation():
    assert "pull request" not in spec_text.ALPHA_DEFINITION and "#14104" not in spec_text.ALPHA_DEFINITION


def test_the_constrained_page_explains_z_t_with_the_glossary_line():
    assert glossary.explain("Z_t") in constrained_text.TEXT["zt_note"]


def test_the_speculative_text_legend_says_what_the_space_marker_means():
    from inference.lessons.speculative import figures as spec_fig

    assert glossary.explain("␣") in spec_fig.LEGEND_HTML


def test_a_special_token_in_the_speculative_text_is_explained_under_it(bundled):
    from inference.lessons.speculative import figures as spec_fig

    tokenizer = bundled.tokenizer
    special = tokenizer.convert_ids_to_tokens(tokenizer.eos_token_id)
    assert special in glossary.TERMS
    ids = [tokenizer.eos_token_id, *tokenizer("Once upon a time")["input_ids"]]
    assert glossary.explain(special) in spec_fig.text_html(tokenizer, ids, [])
    plain = tokenizer("Once upon a time", add_special_tokens=False)["input_ids"]
    assert glossary.explain(special) not in spec_fig.text_html(tokenizer, plain, [])
