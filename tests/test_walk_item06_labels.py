"""Issue #46 item 6: labels say "1 token", "1 answer" and "0.00 bits", never "1 tokens" or "-0.00 bits"."""

import pytest
import torch

from inference.lessons.classroom.figures import reveal_chart
from inference.lessons.generate.figures import cumulative_curve
from inference.lessons.sampling_lab.figures import slider_frames
from inference.sampling.pipeline import SamplingSettings, entropy_bits
from inference.sampling.step_view import step_view

pytestmark = pytest.mark.unit


def one_sure_token(vocab: int) -> torch.Tensor:
    """Logits where one token holds all but 1e-40 of the probability: its entropy is zero."""
    logits = torch.full((vocab,), -200.0)
    logits[5] = 10.0
    return logits


def test_a_certain_distribution_has_zero_bits_never_minus_zero():
    assert f"{float(entropy_bits(torch.tensor([1.0, 0.0, 0.0]))):.2f}" == "0.00"
    assert f"{float(entropy_bits(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))[1]):.2f}" == "0.00"


def test_the_live_chart_title_of_one_kept_token_reads_zero_bits(bundled):
    logits = one_sure_token(len(bundled.tokenizer))
    made = slider_frames(logits, bundled.tokenizer, "temperature", [0.0, 1.0], SamplingSettings())
    titles = [frame["layout"]["title"]["text"] for frame in made.frames]
    assert all("-0.00" not in title for title in titles), titles
    assert "1 kept" in titles[0] and "0.00 bits" in titles[0]


def test_a_nucleus_of_one_token_is_one_token_not_one_tokens(bundled):
    logits = one_sure_token(len(bundled.tokenizer))
    view = step_view(logits, SamplingSettings(top_p=0.5), torch.zeros(len(logits), dtype=torch.bool), u=0.3)
    assert view.nucleus_size == 1
    notes = [a["text"] for a in cumulative_curve(view, bundled.tokenizer, 0.5).to_dict()["layout"]["annotations"]]
    assert "nucleus: 1 token" in notes and "nucleus: 1 tokens" not in notes


def test_a_class_of_one_answer_says_one_answer():
    reveal = {
        "rows": [{"id": 7, "label": "cat", "share": 1.0, "model_prob": 0.4, "answers": 1}],
        "chosen_id": 7,
        "answers": 1,
    }
    names = [trace.name for trace in reveal_chart(reveal).data]
    assert "the class (1 answer)" in names and "the class (1 answers)" not in names
