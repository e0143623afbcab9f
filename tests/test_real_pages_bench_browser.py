"""The real-model page bench (`inference/bench/real_pages.py`) on SmolLM2-135M-Instruct in Chromium: the first Step
paints a chip, each timed Step paints one more, and Play counts chips as they flow (the figures the issue's goals
are read from). A short run: 2 timed Steps, 8 chips of Play."""

import pytest

from inference.bench import real_pages
from inference.core import real_model
from tests.browser import SKIP_REASON, chromium_available

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not chromium_available(), reason=SKIP_REASON),
    pytest.mark.skipif(not real_model.is_available(), reason=f"{real_model.REAL_MODEL_NAME} is not installed here"),
]


def test_generate_on_the_real_model_times_the_first_step_each_step_and_play():
    figures = real_pages.real_generate_figures(steps=2, play_tokens=8)
    assert 0 < figures["real_first_step_s"] < figures["real_start_to_first_step_s"]
    assert figures["real_step_paint_steps"] == 2 and figures["real_step_paint_ms"] > 0
    # the poem request is longer than 8 tokens; Play paints at most every 0.1 s, so one paint can bring the 9th too
    assert 8 <= figures["real_play_tokens_counted"] <= 12
    assert figures["real_play_tokens_per_s"] > 0
