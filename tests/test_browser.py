"""The real app in real Chromium: stepping, sliders, live charts, escaping, no error boxes.

Screenshots go to $INFERENCE_LAB_SHOTS when it is set, never the repo.
"""

import os

import pytest

from tests.browser import (
    BROWSER_TESTS,
    keep_screenshot,
    launch,
    open_page,
    screenshot_each_size,
    streamlit_server,
    wait_idle,
)
from tests.conftest import PROJECT_ROOT, page_title

pytestmark = BROWSER_TESTS

# Written for the 6M storyteller's speed and token ids: it is these pages' default model here (a new session
# opens on SmolLM2-135M-Instruct otherwise; tests/test_default_model_page.py covers that).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    context.close()
    assert not errors, f"JavaScript errors: {errors}"


def assert_opened(page, page_file: str):
    """The page on screen is this page file's (its heading is drawn)."""
    heading = page.locator('[data-testid="stMain"] h1').first.inner_text()
    assert page_title(PROJECT_ROOT / "app_pages" / page_file) in heading


def no_exception_box(page):
    assert page.locator('[data-testid="stException"]').count() == 0


def chip_count(page):
    return page.locator(".token-chip[tabindex]").count()


def chart_text(page, index):
    return page.locator('[data-testid="stPlotlyChart"] .js-plotly-plot').nth(index).text_content()


def test_generate_steps_and_temperature_moves_the_charts(server, page):
    open_page(page, server + "/")
    assert_opened(page, "generate.py")
    step = page.get_by_role("button", name="Step", exact=True)
    for i in range(5):
        step.click()
        page.wait_for_function(f"document.querySelectorAll('.token-chip[tabindex]').length >= {i + 1}")
        wait_idle(page)
    assert chip_count(page) == 5
    before = chart_text(page, 0)
    slider = page.get_by_role("slider", name="Temperature")
    slider.focus()
    for _ in range(6):
        slider.press("ArrowRight")
    page.wait_for_function(
        "(b) => { const c = document.querySelector('[data-testid=\"stPlotlyChart\"] .js-plotly-plot');"
        " return c !== null && c.textContent !== b; }",
        arg=before,
    )  # the page's default wait (tests.browser.ACTION_TIMEOUT_MS): a rerun on a loaded machine
    wait_idle(page)
    assert chart_text(page, 0) != before
    assert chip_count(page) == 5  # moving a slider never loses the run
    no_exception_box(page)
    screenshot_each_size(page, "generate")


def test_sampling_lab_plotly_slider_moves_in_the_browser(server, page):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    open_page(page, server + "/sampling")
    assert_opened(page, "sampling.py")
    no_exception_box(page)
    live = page.locator('[data-testid="stPlotlyChart"] .js-plotly-plot').first
    live.scroll_into_view_if_needed()
    title_before = live.locator(".gtitle").text_content()
    title_changed = (
        "(b) => { const t = document.querySelector('[data-testid=\"stPlotlyChart\"] .js-plotly-plot .gtitle');"
        " return t !== null && t.textContent !== b; }"
    )
    # Right after the page loads, a late layout change can scroll the chart away between finding
    # the grip and dragging it (seen on a fresh server's first page): scroll to it and drag
    # again, as a person would, at most three times.
    for attempt in range(3):
        live.scroll_into_view_if_needed()
        grip = live.locator(".slider-grip-rect").first.bounding_box()
        rail = live.locator(".slider-rail-rect").first.bounding_box()
        page.mouse.move(grip["x"] + grip["width"] / 2, grip["y"] + grip["height"] / 2)
        page.mouse.down()
        page.mouse.move(rail["x"] + rail["width"] * 0.15, grip["y"] + grip["height"] / 2, steps=10)
        page.mouse.up()
        try:  # Plotly redraws the frame asynchronously
            page.wait_for_function(title_changed, arg=title_before, timeout=20_000)
            break
        except PlaywrightTimeout:
            if attempt == 2:
                raise
    title_after = live.locator(".gtitle").text_content()
    assert title_after != title_before and title_after.startswith("T = 0.")  # moved in the browser
    screenshot_each_size(page, "sampling")


def test_token_html_is_shown_as_text_and_never_runs(server, page):
    """A prompt full of markup shows its characters; no script runs, no element appears."""
    evil = '<script>window.__xss=1</script><img src=x onerror="window.__xss=1"><b>bold</b>'
    open_page(page, server + "/")
    box = page.get_by_label("Prompt")
    box.fill(evil)
    box.press("Control+Enter")
    wait_idle(page)
    page.get_by_role("button", name="Step", exact=True).click()
    page.wait_for_function("document.querySelectorAll('.token-chip[tabindex]').length >= 1")
    wait_idle(page)
    assert page.evaluate("() => window.__xss") is None
    token_box = page.locator(".token-box")
    assert token_box.locator("script, img, b").count() == 0
    assert "<script>" in token_box.text_content().replace("␣", " ")
    no_exception_box(page)


def test_cost_page_buttons_fill_its_charts(server, page):
    """The batching measurement runs from the browser and draws its chart, with no error box."""
    open_page(page, server + "/cost")
    before = page.locator(".stPlotlyChart").count()
    page.get_by_role("button", name="Measure batching").click()
    page.locator(".stPlotlyChart").nth(before).wait_for(timeout=120_000)  # one more chart
    wait_idle(page)
    no_exception_box(page)
    new_chart = page.locator(".stPlotlyChart").nth(before)
    assert new_chart.locator(".js-plotly-plot .trace").count() > 0  # the measured batches are drawn
    page.set_viewport_size({"width": 1280, "height": 900})
    keep_screenshot(page, "cost_measured_1280x900")


def test_moe_at_scale_button_builds_and_times_three_models(server, page):
    """/moe's random-weight section (moved from /cost) builds its three models from the browser and draws the chart."""
    open_page(page, server + "/moe")
    before = page.locator(".stPlotlyChart").count()
    page.locator("summary", has_text="At scale: the same trade on bigger models").first.click()  # closed (#46 item 11)
    page.get_by_role("button", name="Build and measure the three models").click()
    page.locator(".stPlotlyChart").nth(before).wait_for(timeout=180_000)
    wait_idle(page)
    no_exception_box(page)
    assert page.locator(".stPlotlyChart").nth(before).locator(".js-plotly-plot .trace").count() > 0
