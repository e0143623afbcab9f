"""The Sampling lab's live top-p chart applies every other knob, and the draw chart's band is the 95% band."""

import numpy as np
import pytest

from inference.core.run import new_trace
from inference.lessons.sampling_lab.figures import draw_band, live_slider_figure
from inference.sampling.pipeline import SamplingSettings, seen_mask
from inference.sampling.step_view import step_view
from tests.conftest import plotly_array

pytestmark = pytest.mark.unit


def test_live_top_p_frames_equal_the_whole_pipeline_with_penalty_top_k_and_min_p(bundled):
    """Each frame is the final distribution of every setting together, the penalty on the tokens seen."""
    prompt = bundled.tokenizer("Once upon a time, the cat saw the cat")["input_ids"]
    logits = next(new_trace(bundled.model, bundled.tokenizer, prompt, 1).run(SamplingSettings(temperature=0))).logits
    seen = seen_mask(prompt, len(logits))
    fixed = SamplingSettings(temperature=0.8, top_k=6, min_p=0.05, repetition_penalty=1.3)
    fig = live_slider_figure(logits, bundled.tokenizer, "top_p", [0.5, 0.9], 0.9, fixed, top_n=10, seen=seen)
    for value in (0.5, 0.9):
        frame = next(f for f in fig.frames if f.name == f"{value:g}")
        shown = plotly_array(frame.data[0].x)
        settings = SamplingSettings(temperature=0.8, top_k=6, top_p=value, min_p=0.05, repetition_penalty=1.3)
        np.testing.assert_allclose(shown[::-1], step_view(logits, settings, seen).final[:10].numpy(), atol=1e-12)
        assert (shown > 0).sum() <= 6  # top-k held


def test_draw_band_is_1_96_binomial_standard_deviations():
    """A 30% token over 1,000 draws: ±2.84 points, not the ±1.45 of one standard deviation."""
    assert float(draw_band(0.3, 1000)) == pytest.approx(1.96 * (0.3 * 0.7 / 1000) ** 0.5)
    assert float(draw_band(0.3, 1000)) == pytest.approx(0.0284, abs=1e-4)
