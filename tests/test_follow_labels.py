"""#46 item 6's remaining slips: "1 token" never "1 tokens", and a signed change that rounds to zero reads "0.000",
never "-0.000", on the Constrained, Inside one pass and MoE pages and in the MoE model card."""

from types import SimpleNamespace

import pandas as pd
import pytest

from inference.lessons import glossary
from inference.lessons.constrained import figures as constrained_figures
from inference.lessons.constrained import text as constrained_text
from inference.lessons.inside import text as inside_text
from inference.lessons.moe import figures as moe_figures
from inference.lessons.moe import text as moe_text
from inference.lessons.moe.stored import TrainedPair

pytestmark = pytest.mark.unit


def test_plural_says_one_token_and_counts_with_commas():
    assert glossary.plural(1, "token") == "1 token"
    assert glossary.plural(0, "token") == "0 tokens" and glossary.plural(49_152, "token") == "49,152 tokens"
    assert glossary.plural(2, "query", "queries") == "2 queries"


def test_signed_never_prints_minus_zero():
    signed = glossary.signed
    assert signed(-0.00004, 3) == "0.000" and signed(0.00004, 4) == "0.0000" and signed(0.0, 3) == "0.000"
    assert signed(-0.0123, 3) == "-0.012" and signed(0.0123, 3) == "+0.012"


def test_constrained_labels_of_one_allowed_token_and_one_step():
    step = SimpleNamespace(index=3, allowed=1, allowed_mass=0.5)
    record = SimpleNamespace(token_text="a", token_id=7)
    chips = constrained_figures.text_by_fight(None, [record], [step])
    assert "1 token allowed" in chips and "1 tokens" not in chips
    fig = constrained_figures.fight_over_run([step], presenter=False)
    assert list(fig.data[0].customdata) == ["1 token allowed"]
    said = constrained_text.strategy_sentence("m", 100, 1, 1, 5.0, 2.0, 1)
    assert "1 of 1 step" in said and "1 steps" not in said


def test_inside_says_one_token_of_cache():
    said = inside_text.grouped_query(2, 2, [[0], [1]], 512, 1)
    assert "holds 1 token:" in said and "1 tokens" not in said


def test_moe_changes_that_round_to_zero_read_zero():
    pair = TrainedPair(
        moe_heldout=1.021, dense_heldout=1.013, moe_gap=-0.00004, dense_gap=0.0123, tokens_seen=1, parameters=1,
        corpus_bytes=6e6,
    )  # fmt: skip
    said = moe_text.trained_finding(pair)
    assert "-0.000" not in said and "0.000 bits/byte off" in said and "+0.012" in said
    experiments = pd.DataFrame({"name": ["as trained", "expert 0 off"], "bits_per_byte": [1.02, 1.01999999]})
    bar = moe_figures.experiments_figure(experiments).data[0]
    assert "-0.000" not in " ".join(bar.text) and "-0.0000" not in " ".join(bar.customdata)
    assert "%{customdata}" in bar.hovertemplate
