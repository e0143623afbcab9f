"""The page bench (inference/bench/pages.py) in Chromium: on its reference app (`tests/apps/fragment_floor.py`) each
Step adds one id to the `.token-box` it counts and the server CPU per Step is read; on SmolLM2-135M-Instruct the first
Step paints a chip, each timed Step one more, and Play counts chips as they flow (2 timed Steps, 8 chips)."""

import psutil
import pytest
from playwright.sync_api import sync_playwright

from inference.bench import pages
from inference.core import real_model
from inference.core.app_process import running_app
from tests.browser import SKIP_REASON, chromium_available

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not chromium_available(), reason=SKIP_REASON)]


def test_the_floor_app_makes_one_chip_a_step_and_the_bench_counts_its_cpu():
    with running_app(script=pages.FLOOR_APP) as app, sync_playwright() as p:
        browser, page = pages._open(p, app.url, ready=".token-box")
        ms, first, last = pages.step_cpu(page, psutil.Process(app.process.pid), 3)
        assert (first, last) == (0, 3)
        assert page.get_by_text("3 steps · next: step 3").is_visible()
        assert ms > 0  # a Step's rerun costs the server CPU (psutil's clock ticks are 10 ms; 3 Steps take more)
        browser.close()


@pytest.mark.skipif(not real_model.is_available(), reason=f"{real_model.REAL_MODEL_NAME} is not installed here")
def test_generate_on_the_real_model_times_the_first_step_each_step_and_play():
    figures = pages.real_generate_figures(steps=2, play_tokens=8)
    assert 0 < figures["real_first_step_s"] < figures["real_start_to_first_step_s"]
    assert figures["real_step_paint_steps"] == 2 and figures["real_step_paint_ms"] > 0
    # the poem request is longer than 8 tokens; Play paints at most every 0.1 s, so one paint can bring the 9th too
    assert 8 <= figures["real_play_tokens_counted"] <= 12 and figures["real_play_tokens_per_s"] > 0
