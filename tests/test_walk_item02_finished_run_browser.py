"""Issue #46 item 2: after a run has finished, moving a slider never leaves the last draw's u marked on a curve
it does not land on: the chart shows the draw as it was made, and says so."""

import os

from tests.browser import BROWSER_TESTS, keep_screenshot, launch, open_page, streamlit_server, wait_idle

pytestmark = BROWSER_TESTS

os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")

# The cumulative chart's traces as Plotly holds them in the page: the final curve and the draw's marker.
CURVE = """() => {
  const plot = [...document.querySelectorAll('[data-testid=stPlotlyChart] .js-plotly-plot')]
    .find(p => (p.layout.title.text || '').includes('Cumulative probability'));
  const named = name => plot._fullData.find(t => t.name === name);
  const draw = named('the draw');
  return {curve: Array.from(named('final (draw walks this)').y), rank: draw ? draw.x[0] : null, u: draw ? draw.y[0] : null};
}"""


def test_a_slider_moved_after_the_run_finished_keeps_the_draw_on_its_curve():
    from playwright.sync_api import sync_playwright

    with streamlit_server() as url, sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        open_page(page, f"{url}/?t=0.8&p=1&seed=0&max=2")
        for _ in range(2):
            page.get_by_role("button", name="Step", exact=True).click()
            wait_idle(page)
        page.get_by_text("the last choice").first.wait_for(timeout=30_000)
        before = page.evaluate(CURVE)

        temperature = page.locator('[data-testid="stSlider"]').filter(has_text="Temperature").get_by_role("slider")
        temperature.focus()
        temperature.press("End")  # T = 2: a flatter distribution than the one the draw was made from
        wait_idle(page)
        page.wait_for_timeout(500)
        after = page.evaluate(CURVE)
        keep_screenshot(page, "generate_finished_slider_moved", full=False)

        for at in (before, after):
            assert at["rank"] is not None, at
            rank, curve = at["rank"], at["curve"]
            below = curve[rank - 2] if rank > 1 else 0.0
            assert below <= at["u"] <= curve[rank - 1] + 1e-9, (
                f"u = {at['u']} is not on rank {rank}'s step: {curve[: rank + 1]}"
            )
        heading = page.locator('[data-testid="stMain"] h3').filter(has_text="the last choice").first.inner_text()
        assert "drawn" in heading and "T = 0.8" in heading, heading  # says whose settings the chart shows
        browser.close()
