"""Issue #46 item 1: Start here's step 3 quotes the probability its top tokens really hold, not "half"."""

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
