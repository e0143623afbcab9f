"""/compare in Chromium: the page opens with no error, the many-seed comparison runs in the
browser on the bundled model behind its progress bar, and full-page screenshots at 1280x900
and 800x1000 go to /tmp for a person to look at."""

import os

from tests.browser import BROWSER_TESTS, keep_screenshot, launch, open_page, streamlit_server, wait_idle

pytestmark = BROWSER_TESTS

# Written for the 6M storyteller's speed and token ids: it is these pages' default model here (a new session
# opens on SmolLM2-135M-Instruct otherwise; tests/test_default_model_page.py covers that).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")


def test_compare_page_runs_many_seeds_in_the_browser():
    """Press "Run A and B" (20 seeds): the progress bar shows, then the interval chart; no exception."""
    from playwright.sync_api import sync_playwright

    with streamlit_server() as url, sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        open_page(page, f"{url}/compare?seed=3")
        assert page.locator('[data-testid="stException"]').count() == 0
        page.get_by_role("slider", name="Seeds").focus()
        page.keyboard.press("Home")  # 20 seeds: the smallest choice
        wait_idle(page)
        page.get_by_role("button", name="Run A and B on 20 seeds").click()
        page.wait_for_selector('[data-testid="stProgress"]', timeout=120_000)
        page.wait_for_function(
            "() => document.body.innerText.includes('Mean per run, with bootstrap')", timeout=600_000
        )
        wait_idle(page, 600_000)
        assert page.locator('[data-testid="stException"]').count() == 0
        assert not errors
        keep_screenshot(page, "compare_1280")
        page.set_viewport_size({"width": 800, "height": 1000})
        page.wait_for_timeout(800)
        keep_screenshot(page, "compare_800")
        browser.close()
