"""/training-vs-inference in real Chromium at 1280x900 and 800x1000, normal and presenter mode: the first screen, then
Train, then both closed sections opened and measured; no error box, no JavaScript error.

Screenshots go to $INFERENCE_LAB_SHOTS when it is set, never the repo.
"""

import os

import pytest

from tests.browser import (
    BROWSER_TESTS,
    each_screen,
    keep_screenshot,
    launch,
    streamlit_server,
    wait_idle,
)

pytestmark = BROWSER_TESTS

os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")
WAIT_MS = 240_000


@pytest.mark.parametrize("presenter", [False, True], ids=["normal", "presenter"])
def test_the_page_trains_measures_and_shows_no_error(presenter):
    from playwright.sync_api import sync_playwright

    with streamlit_server() as url, sync_playwright() as p:
        browser = launch(p)
        errors = []
        for page, width, height, _ in each_screen(
            browser, f"{url}/training-vs-inference", modes=(presenter,), errors=errors
        ):
            main = page.locator('[data-testid="stMain"]')
            main.get_by_text("are equal bit for bit").first.wait_for(timeout=WAIT_MS)
            mode = "presenter" if presenter else "normal"
            keep_screenshot(page, f"training_vs_inference_{width}x{height}_{mode}_first", full=False)
            page.get_by_role("button", name="Train 3 steps").click()
            main.get_by_text("(unchanged)").first.wait_for(timeout=WAIT_MS)
            wait_idle(page, WAIT_MS)
            for section in ("3. What a step costs", "4. Once vs every request"):
                main.get_by_text(section).first.click()
            page.get_by_role("button", name="Measure a pass and a step").click()
            main.get_by_text("Memory each needs").first.wait_for(timeout=WAIT_MS)
            wait_idle(page, WAIT_MS)
            page.get_by_role("button", name="Measure one request").click()
            main.get_by_text("inference has cost as much machine time").first.wait_for(timeout=WAIT_MS)
            wait_idle(page, WAIT_MS)
            assert page.locator('[data-testid="stException"]').count() == 0
            # before; before and after; every tensor and the loss (in a closed section, drawn all the same); pass vs
            # step; memory; once vs every request
            assert page.locator('[data-testid="stPlotlyChart"] .js-plotly-plot').count() == 7
            keep_screenshot(page, f"training_vs_inference_{width}x{height}_{mode}")
            assert not errors, f"JavaScript errors: {errors}"
        browser.close()
