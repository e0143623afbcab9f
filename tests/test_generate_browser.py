"""Generate in a browser: Step and the chart it changes share one screen at 1280x900 and 800x1000, normal and
presenter mode (axis labels level, no title running into its legend at 800 px)."""

import os

import pytest

from tests.browser import BROWSER_TESTS, each_screen, keep_screenshot, launch, streamlit_server, wait_idle

pytestmark = BROWSER_TESTS

os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")
PRESENTER_CHART_PX = 400  # in presenter mode the bars are projector-sized: its title and first bars must show

# Scrolls stMain (Streamlit's scrolling element) so Step's top sits 10 px under Streamlit's header (which covers the
# top of the page), then reads where Step and the next-token chart are in the viewport.
PLACES = """() => {
  const main = document.querySelector('[data-testid=stMain]');
  const header = document.querySelector('[data-testid=stHeader]');
  const top = header ? header.getBoundingClientRect().bottom : 0;
  const step = [...document.querySelectorAll('button')].find(b => b.innerText.trim() === 'Step');
  main.scrollTop += step.getBoundingClientRect().top - top - 10;
  const s = step.getBoundingClientRect();
  const bars = document.querySelectorAll('[data-testid=stPlotlyChart]')[0].getBoundingClientRect();
  return {header: top, step_top: s.top, step_bottom: s.bottom, chart_top: bars.top, chart_bottom: bars.bottom};
}"""

# For every chart: x tick labels turned by Plotly (a rotate() other than 0), and a title box meeting a legend box.
CHART_FAULTS = """() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')].map(chart => {
  const turned = [...chart.querySelectorAll('.xtick text')].filter(t => /rotate\\((?!0[,)])/.test(t.getAttribute('transform') || '')).length;
  const title = chart.querySelector('.gtitle'), legend = chart.querySelector('.legend');
  let overlap = false;
  if (title && legend) {
    const a = title.getBoundingClientRect(), b = legend.getBoundingClientRect();
    overlap = a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  }
  return {title: title ? title.textContent : '', turned, overlap};
})"""


@pytest.mark.parametrize("presenter", [False, True], ids=["normal", "presenter"])
def test_step_and_its_chart_share_one_screen(presenter):
    from playwright.sync_api import sync_playwright

    with streamlit_server() as url, sync_playwright() as p:
        browser = launch(p)
        for page, width, height, _ in each_screen(browser, f"{url}/", modes=(presenter,)):
            page.get_by_role("button", name="Step", exact=True).click()
            # open_page can return between the page's first two runs (its charts not drawn yet, at 800 px on a busy
            # machine): wait for the chart the Step draws, not only for an idle script
            page.wait_for_selector("[data-testid=stPlotlyChart] .js-plotly-plot")
            wait_idle(page)
            page.wait_for_timeout(500)
            at = page.evaluate(PLACES)
            page.wait_for_timeout(300)
            mode = "presenter" if presenter else "normal"
            keep_screenshot(page, f"generate_step_{width}_{mode}", full=False)
            seen = at["chart_top"] + PRESENTER_CHART_PX if presenter else at["chart_bottom"]
            assert at["step_top"] >= at["header"] and seen <= height, f"{width}x{height} {mode}: {at}"
            if presenter and width == 800:
                faults = page.evaluate(CHART_FAULTS)
                assert not [f for f in faults if f["turned"] or f["overlap"]], faults
        browser.close()
