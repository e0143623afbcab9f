"""Presenter mode's lines under folded settings (Generate, Same luck): every knob acting on the draw is named, a
knob at its 'off' value is not, and a stage order is named by its preset where it is one."""

import pytest

from inference.lessons.compare import text as cmp_text
from inference.lessons.generate import text as gen_text
from inference.sampling.pipeline import LLAMA_CPP_ORDER, TRANSFORMERS_ORDER, SamplingSettings

pytestmark = pytest.mark.unit


def test_knobs_now_names_what_acts_and_only_that():
    assert gen_text.knobs_now(SamplingSettings(temperature=0.7, top_p=0.9)) == ["temperature 0.7", "top-p 0.9"]
    assert gen_text.knobs_now(SamplingSettings(temperature=0.0)) == ["temperature 0 (greedy)"]
    off_tau = gen_text.knobs_now(SamplingSettings(mirostat_tau=4.0))  # mirostat off: its τ acts on nothing
    assert off_tau == ["temperature 1"]
    on = gen_text.knobs_now(SamplingSettings(mirostat=True, mirostat_tau=4.0))
    assert on[-1] == "mirostat v2" and any("4" in part for part in on[1:-1])


def test_a_stage_order_is_named_by_its_preset_else_listed():
    assert not [p for p in gen_text.knobs_now(SamplingSettings(order=TRANSFORMERS_ORDER)) if "order" in p]
    assert gen_text.knobs_now(SamplingSettings(order=LLAMA_CPP_ORDER))[-1] == "stage order: llama.cpp default"
    custom = (TRANSFORMERS_ORDER[1], TRANSFORMERS_ORDER[0], *TRANSFORMERS_ORDER[2:])
    assert gen_text.knobs_now(SamplingSettings(order=custom))[-1] == "stage order: " + ", ".join(custom)


def test_same_lucks_lines_say_what_both_share_then_each_side():
    lines = cmp_text.settings_now(
        True, 3, 40, {"A": ("M · float32", ["temperature 0.8"]), "B": ("M · int8", ["temperature 1.2"])}
    ).split("  \n")
    assert lines == [
        "Now: in the chat template · seed 3 (shared) · at most 40 new tokens",
        "**A**: M · float32 · temperature 0.8",
        "**B**: M · int8 · temperature 1.2",
    ]
