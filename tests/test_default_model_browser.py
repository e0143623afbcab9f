"""The app as it ships, in real Chromium: a first visit opens Generate on SmolLM2-135M-Instruct with a factual
question in its chat template, and five Steps each come back well under a second."""

import time

import pytest

from inference.core import real_model
from tests.browser import BROWSER_TESTS, launch, open_page, streamlit_server, toggle_presenter, wait_idle

pytestmark = BROWSER_TESTS


@pytest.fixture(scope="module")
def url(smollm2):
    """One app server on the default real model for the module's tests (a server and its model load cost ~15 s)."""
    with streamlit_server({"INFERENCE_LAB_DEFAULT_MODEL": real_model.REAL_MODEL_NAME}) as url:
        yield url


def test_a_first_visit_opens_generate_on_smollm2_and_steps_fast(url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
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


# Where a page's first live result is, opened in presenter mode at the top of the page: its bottom edge (Generate's
# Step), the line under its title (Sampling lab's first chart) or its top edge (KV cache's bytes per token), in CSS
# pixels from the window's top.
FIRST_RESULT = {
    "": "() => [...document.querySelectorAll('button')].find(b => b.innerText.trim() === 'Step')"
    ".getBoundingClientRect().bottom",
    "sampling": "() => document.querySelector('[data-testid=stPlotlyChart]').getBoundingClientRect().top + 40",
    "kv-cache": "() => [...document.querySelectorAll('[data-testid=stMarkdownContainer] p')]"
    ".find(p => p.innerText.startsWith('Bytes per token')).getBoundingClientRect().bottom",
    # Same luck's two texts (their first line) and Constrained decoding's first chip, the step it opens with
    "compare": "() => document.querySelector('[data-testid=stMarkdownContainer] div[style*=padding]')"
    ".getBoundingClientRect().top + 40",
    "constrained": "() => document.querySelector('.token-chip[tabindex]').getBoundingClientRect().bottom",
    # Serve many's simulated traffic (its settings folded: they took the first screen before it)
    "serving": "() => document.querySelector('[data-testid=stPlotlyChart]').getBoundingClientRect().top + 40",
}


def test_presenter_modes_first_screen_shows_each_pages_first_live_result(url):
    """Presenter mode at 1280x900 and 800x1000 (the sidebar folded away, as it opens): Generate's Step with the chat
    template's 42 prompt chips (it was 1,750 px down at 1280x900), Sampling lab's first chart, Same luck's two texts,
    Constrained decoding's first step, KV cache's bytes per token and Serve many's traffic are on the first screen."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p)
        for width, height in ((1280, 900), (800, 1000)):
            page = browser.new_page(viewport={"width": width, "height": height})
            for path, where in FIRST_RESULT.items():
                open_page(page, f"{url}/{path}")  # a new session: presenter mode is off
                toggle_presenter(page)
                page.wait_for_timeout(500)  # the larger text's reflow
                wait_idle(page)
                page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollTo(0, 0)")
                assert page.evaluate(where) <= height, f"/{path} at {width}x{height}: {page.evaluate(where)}"
            page.close()
        browser.close()
