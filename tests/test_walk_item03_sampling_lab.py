"""Issue #46 item 3: the Sampling lab's live top-p title says what top-p kept and what a later stage cut; the raw
favourite a penalty pushed down keeps its bar with a ✂ mark; each temperature slider says which one it is."""

import pytest
import torch

from inference.lessons.generate.figures import next_token_bars
from inference.lessons.sampling_lab import text as lab_text
from inference.lessons.sampling_lab.figures import TEMPERATURE_GRID, lab_table, live_slider_figure, slider_frames
from inference.sampling.pipeline import SamplingSettings, stage_logits
from inference.sampling.stages import finite_count
from inference.sampling.step_view import step_view

pytestmark = pytest.mark.unit


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


def test_each_temperature_slider_says_which_it_is(bundled):
    logits = spread_logits(len(bundled.tokenizer))
    fig = live_slider_figure(logits, bundled.tokenizer, "temperature", TEMPERATURE_GRID, 1.0, SamplingSettings())
    prefix = fig.layout.sliders[0].currentvalue.prefix
    assert prefix.startswith("this chart's"), prefix
    assert "every chart" in lab_text.PAGE_TEMPERATURE_HELP and "own slider" in lab_text.PAGE_TEMPERATURE_HELP
    assert (
        "alone" in lab_text.LIVE_TEMPERATURE_CAPTION and "Temperature slider above" in lab_text.LIVE_TEMPERATURE_CAPTION
    )
