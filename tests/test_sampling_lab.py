"""The Sampling lab's charts: the live sliders' frames are the whole pipeline at each value (every other knob
applied), their titles count what each stage kept, the raw favourite a penalty pushed down keeps its bar, and the
draw chart's band is the 95% band."""

import numpy as np
import pytest
import torch

from inference.core.run import new_trace
from inference.lessons.generate.figures import next_token_bars
from inference.lessons.sampling_lab.figures import (
    TEMPERATURE_GRID,
    draw_band,
    lab_table,
    live_slider_figure,
    slider_frames,
)
from inference.sampling.pipeline import SamplingSettings, seen_mask, stage_logits
from inference.sampling.stages import finite_count
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


def spread_logits(vocab: int) -> torch.Tensor:
    """A distribution over 12 likely tokens falling slowly, the rest of the vocabulary far below."""
    logits = torch.full((vocab,), -30.0)
    logits[10:22] = torch.linspace(3.0, 0.0, 12)
    return logits


def test_the_top_p_title_counts_top_ps_tokens_and_names_the_stage_that_cut_more(bundled):
    logits = spread_logits(len(bundled.tokenizer))
    settings = SamplingSettings(top_p=0.9, min_p=0.3)
    seen = torch.zeros(len(logits), dtype=torch.bool)
    stages = stage_logits(logits, settings, seen)
    by_top_p, final = finite_count(stages["top_p"]), finite_count(stages["min_p"])
    assert by_top_p > final  # the set-up: min-p cuts some of what top-p kept
    title = slider_frames(logits, bundled.tokenizer, "top_p", [0.9], settings).frames[0]["layout"]["title"]["text"]
    assert f"top-p keeps {by_top_p}" in title and f"min-p leaves {final}" in title, title


def test_the_raw_favourite_a_penalty_pushed_down_keeps_its_bar_with_a_cut_mark(bundled):
    tokenizer = bundled.tokenizer
    logits = spread_logits(len(tokenizer))
    seen = torch.zeros(len(logits), dtype=torch.bool)
    seen[10] = True  # the raw favourite was already written
    settings = SamplingSettings(repetition_penalty=2.0, top_p=0.5)
    view = step_view(logits, settings, seen, u=None)
    assert int(view.order[0]) != 10  # the penalty pushed it off the top
    names = list(next_token_bars(lab_table(view, logits, seen, None, tokenizer, top_n=3)).data[0].y)
    favourite = [name for name in names if "✂" in name and "penalty" in name]
    assert len(favourite) == 1, names
    assert not any("other" in name for name in favourite)


def test_the_live_temperature_frames_equal_the_view_and_read_zero_bits_for_one_sure_token(bundled):
    logits = torch.full((len(bundled.tokenizer),), -200.0)
    logits[5] = 10.0  # one token holds all but 1e-40 of the probability
    made = slider_frames(logits, bundled.tokenizer, "temperature", [0.0, 1.0], SamplingSettings())
    titles = [frame["layout"]["title"]["text"] for frame in made.frames]
    assert all("-0.00" not in title for title in titles), titles
    assert "1 kept" in titles[0] and "0.00 bits" in titles[0]
    logits = spread_logits(len(bundled.tokenizer))
    fig = live_slider_figure(logits, bundled.tokenizer, "temperature", TEMPERATURE_GRID, 0.7, SamplingSettings())
    shown = plotly_array(next(f for f in fig.frames if f.name == "0.7").data[0].x)
    view = step_view(logits, SamplingSettings(temperature=0.7), seen_mask([], len(logits)))
    np.testing.assert_allclose(shown[::-1], view.final[: len(shown)].numpy(), atol=1e-12)
