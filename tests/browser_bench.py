"""Browser benchmark (reported, never asserted): `python -m tests.browser_bench`.

- slider release -> chart updated: p50 over 10 Temperature moves on Generate;
- Play: generated tokens rendered per second, from the click to the last chip.
"""

import statistics
import time

from tests.browser import launch, open_page, streamlit_server, wait_idle

CHART_TEXT = "() => document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .js-plotly-plot')[0]?.textContent"
CHIPS = "(document.querySelector('.token-box')?.dataset.generatedIds || '').split(',').filter(Boolean).length"


def main():
    from playwright.sync_api import sync_playwright

    with streamlit_server() as url, sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        open_page(page, url + "/?max=100&t=0.5&p=1")
        page.get_by_role("button", name="Step", exact=True).click()
        page.wait_for_function(f"{CHIPS} >= 1")
        wait_idle(page)
        slider = page.get_by_role("slider", name="Temperature")
        moves = []
        for _ in range(10):
            before = page.evaluate(CHART_TEXT)
            slider.focus()
            start = time.perf_counter()
            slider.press("ArrowRight")
            # Redrawn chart: its text changes (bar labels, u marker) once the rerun lands.
            page.wait_for_function(f"(b) => ({CHART_TEXT})() !== b", arg=before, timeout=60_000)
            wait_idle(page)
            moves.append(time.perf_counter() - start)
        page.get_by_role("button", name="Reset", exact=True).click()
        wait_idle(page)
        start = time.perf_counter()
        page.get_by_role("button", name="Play", exact=True).click()
        page.wait_for_function("document.body.innerText.includes('stopped:')", timeout=300_000)
        elapsed = time.perf_counter() - start
        tokens = page.evaluate(CHIPS)
        browser.close()
    print(
        f"slider release -> chart updated: p50 {statistics.median(moves) * 1000:.0f} ms "
        f"(min {min(moves) * 1000:.0f}, max {max(moves) * 1000:.0f}) over {len(moves)} moves"
    )
    print(f"Play: {tokens} tokens rendered in {elapsed:.2f} s = {tokens / elapsed:.1f} tokens/s")


if __name__ == "__main__":
    main()
