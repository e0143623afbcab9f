"""The real app in real Chromium: stepping, sliders moving live charts, escaping, a measuring button's chart.
(Every page opening clean: tests/test_pages_browser.py; every measuring button: tests/test_every_button_browser.py.)"""

import os

import pytest

from tests.browser import BROWSER_TESTS, launch, open_page, screenshot_each_size, streamlit_server, wait_idle

pytestmark = BROWSER_TESTS

os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")  # these pages' model here
FIRST_CHART = "document.querySelector('[data-testid=\"stPlotlyChart\"] .js-plotly-plot{}')"


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    page.close()
    assert not errors, f"JavaScript errors: {errors}"


def no_exception_box(page):
    assert page.locator('[data-testid="stException"]').count() == 0


def test_generate_shows_markup_as_text_steps_and_temperature_moves_the_charts(server, page):
    """A prompt full of markup shows its characters (no script runs, no element appears); each Step draws a chip;
    moving a slider redraws the chart and never loses the run."""
    open_page(page, server + "/")
    box = page.get_by_label("Prompt")
    box.fill('<script>window.__xss=1</script><img src=x onerror="window.__xss=1"><b>bold</b>')
    box.press("Control+Enter")
    wait_idle(page)
    step = page.get_by_role("button", name="Step", exact=True)
    for i in range(5):
        step.click()
        page.wait_for_function(f"document.querySelectorAll('.token-chip[tabindex]').length >= {i + 1}")
        wait_idle(page)
    assert page.evaluate("() => window.__xss") is None
    token_box = page.locator(".token-box")
    assert token_box.locator("script, img, b").count() == 0 and "<script>" in token_box.text_content().replace("␣", " ")
    before = page.evaluate(f"() => {FIRST_CHART.format('')}.textContent")
    slider = page.get_by_role("slider", name="Temperature")
    slider.focus()
    for _ in range(6):
        slider.press("ArrowRight")
    page.wait_for_function(f"(b) => {FIRST_CHART.format('')}?.textContent !== b", arg=before)
    wait_idle(page)
    assert page.locator(".token-chip[tabindex]").count() == 5  # moving a slider never loses the run
    no_exception_box(page)
    screenshot_each_size(page, "generate")


def test_sampling_lab_plotly_slider_moves_in_the_browser(server, page):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    open_page(page, server + "/sampling")
    no_exception_box(page)
    live = page.locator('[data-testid="stPlotlyChart"] .js-plotly-plot').first
    title_before = live.locator(".gtitle").text_content()
    # A late layout change can scroll the chart away between finding the grip and dragging it (a fresh server's
    # first page): scroll to it and drag again, as a person would, at most three times.
    for attempt in range(3):
        live.scroll_into_view_if_needed()
        grip = live.locator(".slider-grip-rect").first.bounding_box()
        rail = live.locator(".slider-rail-rect").first.bounding_box()
        page.mouse.move(grip["x"] + grip["width"] / 2, grip["y"] + grip["height"] / 2)
        page.mouse.down()
        page.mouse.move(rail["x"] + rail["width"] * 0.15, grip["y"] + grip["height"] / 2, steps=10)
        page.mouse.up()
        try:  # Plotly redraws the frame asynchronously
            page.wait_for_function(f"(b) => {FIRST_CHART.format(' .gtitle')}?.textContent !== b", arg=title_before,
                                   timeout=20_000)  # fmt: skip
            break
        except PlaywrightTimeout:
            if attempt == 2:
                raise
    assert live.locator(".gtitle").text_content().startswith("T = 0.")  # moved in the browser
    screenshot_each_size(page, "sampling")


def test_moe_at_scale_button_builds_and_times_three_models(server, page):
    open_page(page, server + "/moe")
    before = page.locator(".stPlotlyChart").count()
    page.locator("summary", has_text="At scale: the same trade on bigger models").first.click()  # a closed section
    page.get_by_role("button", name="Build and measure the three models").click()
    page.locator(".stPlotlyChart").nth(before).wait_for(timeout=180_000)
    wait_idle(page)
    no_exception_box(page)
    assert page.locator(".stPlotlyChart").nth(before).locator(".js-plotly-plot .trace").count() > 0
