"""/inside in real Chromium at 1280x900 and 800x1000: after two Generate steps it follows the run; every
section and chart is drawn, the layer slider redraws the attention, no error box.

Screenshots go to $INFERENCE_LAB_SHOTS when it is set, never the repo.
"""

import os

from tests.browser import (
    BROWSER_TESTS,
    each_screen,
    keep_screenshot,
    launch,
    streamlit_server,
    wait_idle,
)

pytestmark = BROWSER_TESTS

# Written for the 6M storyteller's speed and token ids: it is these pages' default model here (a new session
# opens on SmolLM2-135M-Instruct otherwise; tests/test_default_model_page.py covers that).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")
SECTIONS = ["1. What each layer would say", "2. What each head read", "3. Where the pass's time and bytes go"]


def test_inside_page_follows_the_generate_run_and_draws_every_section():
    from playwright.sync_api import sync_playwright

    with streamlit_server() as url, sync_playwright() as p:
        browser = launch(p)
        errors = []
        for page, width, height, _ in each_screen(
            browser, f"{url}/?prompt=Once+upon+a+time&t=0", modes=(False,), errors=errors
        ):
            for _ in range(2):
                page.get_by_role("button", name="Step", exact=True).click()
                wait_idle(page, 240_000)
            page.get_by_role("link", name="Inside one pass").click()
            page.get_by_text(SECTIONS[-1]).wait_for(timeout=240_000)
            wait_idle(page, 240_000)
            main = page.locator('[data-testid="stMain"]')
            for heading in SECTIONS:
                assert main.get_by_text(heading).count() >= 1, heading
            assert main.get_by_text("My Generate run").count() == 1  # it follows the run
            assert main.get_by_text("token the run chose").count() >= 1
            charts = '[data-testid="stPlotlyChart"] .js-plotly-plot'
            page.wait_for_selector(charts)
            assert page.locator(charts).count() == 4
            slider = page.get_by_role("slider", name="Layer")
            slider.focus()
            slider.press("End")
            main.get_by_text("attention weights in layer 5").wait_for(timeout=120_000)  # the rerun redrew the heads
            wait_idle(page, 240_000)
            assert page.locator('[data-testid="stException"]').count() == 0
            keep_screenshot(page, f"inside_{width}x{height}")
        browser.close()
        assert not errors, f"JavaScript errors: {errors}"
