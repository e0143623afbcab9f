"""/moe in real Chromium at 1280x900 and 800x1000: from the dense model, one click loads the bundled
MoE; every section is drawn, Step routes one more token, no error box.

Screenshots go to $INFERENCE_LAB_SHOTS when it is set, never the repo.
"""

import pytest

from inference.core.routing import BUNDLED_MOE_DIR
from tests.browser import (
    BROWSER_TESTS,
    each_screen,
    keep_screenshot,
    launch,
    streamlit_server,
    wait_idle,
)

pytestmark = [
    *BROWSER_TESTS,
    pytest.mark.skipif(not BUNDLED_MOE_DIR.is_dir(), reason="the bundled MoE model is not in this checkout"),
]
SECTIONS = [
    "1. Routing, live",
    "2. One token's router",
    "3. Load",
    "4. What the experts learned",
    "5. What sparsity costs and buys",
    "6. At scale",
]


def test_moe_page_draws_every_section_for_the_bundled_moe():
    from playwright.sync_api import sync_playwright

    with streamlit_server() as url, sync_playwright() as p:
        browser = launch(p)
        errors = []
        for page, width, height, _ in each_screen(browser, f"{url}/moe?layer=99", modes=(False,), errors=errors):
            page.get_by_role("button", name="Load the bundled MoE").click()
            page.get_by_text("1. Routing, live").wait_for(timeout=240_000)
            wait_idle(page, 240_000)
            main = page.locator('[data-testid="stMain"]')
            for heading in SECTIONS:
                assert main.get_by_text(heading).count() >= 1, heading
            assert main.get_by_text("is outside layers").count() == 1  # ?layer=99 was clamped and said
            chips = page.locator(".token-chip").count()
            page.get_by_role("button", name="Step", exact=True).click()
            page.wait_for_function(f"() => document.querySelectorAll('.token-chip').length > {chips}", timeout=120_000)
            wait_idle(page, 240_000)
            assert page.locator('[data-testid="stException"]').count() == 0
            assert page.locator('[data-testid="stPlotlyChart"] .js-plotly-plot').count() >= 7
            keep_screenshot(page, f"moe_{width}x{height}")
        browser.close()
        assert not errors, f"JavaScript errors: {errors}"
