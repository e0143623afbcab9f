"""The app as it ships, in real Chromium: a first visit opens Generate on SmolLM2-135M-Instruct with a factual
question in its chat template, and five Steps each come back well under a second."""

import time

from inference.core import real_model
from tests.browser import BROWSER_TESTS, launch, open_page, streamlit_server, wait_idle

pytestmark = BROWSER_TESTS


def test_a_first_visit_opens_generate_on_smollm2_and_steps_fast(smollm2):
    from playwright.sync_api import sync_playwright

    with (
        streamlit_server({"INFERENCE_LAB_DEFAULT_MODEL": real_model.REAL_MODEL_NAME}) as url,
        sync_playwright() as p,
    ):
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        open_page(page, url + "/")
        sidebar = page.locator('[data-testid="stSidebar"]').inner_text()
        assert f"In use: {real_model.REAL_MODEL_NAME}" in sidebar
        assert page.get_by_label("Prompt").input_value() == "What is the capital of France? Answer in one sentence."
        assert page.get_by_label("Wrap in the model's chat template").is_checked()
        step = page.get_by_role("button", name="Step", exact=True)
        step.click()  # the first Step pays for the prompt's prefill
        page.wait_for_function("document.querySelectorAll('.token-chip[tabindex]').length >= 1")
        wait_idle(page)
        took = []
        for i in range(2, 6):
            started = time.perf_counter()
            step.click()
            page.wait_for_function(f"document.querySelectorAll('.token-chip[tabindex]').length >= {i}")
            wait_idle(page)
            took.append(time.perf_counter() - started)
        assert page.locator('[data-testid="stException"]').count() == 0 and not errors, errors
        # Click to the chip drawn and the script idle, on a machine shared with Chromium and other work.
        assert sorted(took)[len(took) // 2] < 1.0, took
        browser.close()
