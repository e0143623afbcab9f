"""Issue #46 item 1: Start here's step 3 quotes the probability its top tokens really hold, not "half"."""

from dataclasses import replace

import pytest
import torch

from inference.core.loader import encode_prompt
from inference.lessons.start.first_look import PROMPT, first_look
from inference.lessons.start.text import choosing, percent

pytestmark = pytest.mark.unit

torch.set_num_threads(1)


def test_step_three_quotes_the_mass_its_top_tokens_hold(bundled):
    """The sentence names the share the top tokens hold, read from the distribution, and says half lies within."""
    ids = encode_prompt(bundled.tokenizer, PROMPT)
    look = first_look(bundled.model, bundled.tokenizer, ids, seed=0, timed_runs=1)
    with torch.inference_mode():
        probs = bundled.model(input_ids=torch.tensor([ids])).logits[0, -1].double().softmax(-1)
    ranked = probs.sort(descending=True).values
    held = float(ranked[: look.half_of_draws_within].sum())
    sentence = choosing(look, 1.0)
    assert f"hold {percent(held)} of the probability" in sentence or f"holds {percent(held)}" in sentence
    assert "hold half the probability" not in sentence
    assert f"as {percent(held)} of all draws" in sentence  # the share of draws quoted is the same measured mass


def test_one_token_holding_half_reads_as_the_top_token_not_the_1_most_likely(bundled):
    """When the most likely token alone holds half (SmolLM2's 77.3% for "Paris"), no "1 most likely" or "top 1"."""
    ids = encode_prompt(bundled.tokenizer, PROMPT)
    look = replace(
        first_look(bundled.model, bundled.tokenizer, ids, seed=0, timed_runs=1), half_of_draws_within=1, half_mass=0.773
    )
    sentence = choosing(look, 1.0)
    assert "most likely token holds 77.3% of the probability, at least half" in sentence, sentence
    assert "the 1 most likely" not in sentence and "top 1," not in sentence
