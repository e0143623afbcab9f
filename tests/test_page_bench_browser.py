"""The page bench's reference app (`tests/apps/fragment_floor.py`) steps as Generate does for the bench: each Step
adds one id to the `.token-box` the bench counts, and the server CPU per Step is read over the Steps made."""

import os

import psutil
import pytest
from playwright.sync_api import sync_playwright

from inference.bench import pages as page_bench
from inference.core.app_process import running_app
from tests.browser import SKIP_REASON, chromium_available

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not chromium_available(), reason=SKIP_REASON)]

# Written for the 6M storyteller's speed and token ids: it is these pages' default model here (a new session
# opens on SmolLM2-135M-Instruct otherwise; tests/test_default_model_page.py covers that).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")


def test_the_floor_app_makes_one_chip_a_step_and_the_bench_counts_its_cpu():
    with running_app(script=page_bench.FLOOR_APP) as app, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=page_bench.CHROMIUM, headless=True, args=page_bench.ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(180_000)
        page.goto(app.url)
        page.wait_for_selector(".token-box", state="attached")
        page_bench._idle(page)
        ms, first, last = page_bench.step_cpu(page, psutil.Process(app.process.pid), 3)
        assert (first, last) == (0, 3)
        assert page.get_by_text("3 steps · next: step 3").is_visible()
        assert ms > 0  # a Step's rerun costs the server CPU (psutil's clock ticks are 10 ms; 3 Steps take more)
        browser.close()
