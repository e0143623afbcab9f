"""The five sampler sliders of Generate and Sampling lab at 1280x900 and 800x1000, normal and presenter mode: no label
word broken across lines ("Temperatu / re"), every value clear above its track, and one row at 1280 px in normal
mode."""

import os

import pytest

from tests.browser import BROWSER_TESTS, each_screen, launch, shared_server, wait_idle

pytestmark = BROWSER_TESTS

# The 6M storyteller is these pages' default model here (tests/test_default_model_page.py covers SmolLM2's).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")

CLASSIC_LABELS = ["Temperature", "Top-p", "Top-k", "Min-p", "Repetition penalty"]
# Per visible slider in the main area: its label, the words whose characters lie on more than one line (a range
# over one word gives one rectangle per line it spans), and the top of the slider.
LABELS = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stSlider"]')]
  .filter(s => s.getBoundingClientRect().height > 0)
  .map(s => {
    const label = s.querySelector('[data-testid="stWidgetLabel"] p');
    const texts = document.createTreeWalker(label, NodeFilter.SHOW_TEXT);
    const broken = [];
    for (let node = texts.nextNode(); node; node = texts.nextNode()) {
      for (const m of node.textContent.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (lines.size > 1) broken.push(m[0]);
      }
    }
    const value = s.querySelector('[data-testid="stSliderThumbValue"]');
    const thumb = value.parentElement.getBoundingClientRect(), text = document.createRange();
    text.selectNodeContents(value);
    return {label: label.textContent.trim(), broken, top: Math.round(s.getBoundingClientRect().top),
            clear: text.getBoundingClientRect().bottom < (thumb.top + thumb.bottom) / 2 - 3};
  })"""


def settled_sliders(page, deadline_ms: int = 30_000) -> dict:
    """The sliders' measurements once the layout after a resize has settled: the same three times, 300 ms apart
    (a fixed 600 ms wait measured a half-done reflow on a loaded 2-core machine)."""
    seen, waited = [], 0
    while True:
        page.wait_for_timeout(300)
        waited += 300
        seen.append(page.evaluate(LABELS))
        if (len(seen) >= 3 and seen[-1] == seen[-2] == seen[-3]) or waited >= deadline_ms:
            return {s["label"]: s for s in seen[-1]}


@pytest.mark.parametrize("path", ["", "sampling"])
def test_slider_labels_stay_whole_at_both_sizes_in_both_modes(path):
    from playwright.sync_api import sync_playwright

    with shared_server() as url, sync_playwright() as p:
        browser = launch(p)
        errors = []
        for screen in each_screen(browser, f"{url}/{path}", errors=errors):
            where = f"/{path} {screen.where}"
            folded = screen.page.locator(
                '[data-testid="stMain"] [data-testid="stExpander"] summary', has_text="Settings:"
            )
            if folded.count():  # Generate in presenter mode: its sliders sit in a closed section
                folded.first.click()
                wait_idle(screen.page)
            sliders = settled_sliders(screen.page)
            assert set(CLASSIC_LABELS) <= set(sliders), f"{where}: {sorted(sliders)}"
            for s in sliders.values():
                assert not s["broken"], f"{where}: {s['label']!r} breaks {s['broken']} across lines"
                assert s["clear"], f"{where}: {s['label']!r}: its value sits on the track"
            rows = {sliders[label]["top"] for label in CLASSIC_LABELS}
            if screen.width == 1280 and not screen.presenter:
                assert len(rows) == 1, f"{where}: the five sliders take {len(rows)} rows"
            elif not screen.presenter:
                assert 2 <= len(rows) <= 3, f"{where}: the five sliders take {len(rows)} rows"
            else:  # presenter mode folds the sidebar away: 1280 px has room for one row, 800 px not
                assert len(rows) <= 3, f"{where}: the five sliders take {len(rows)} rows"
            assert screen.page.locator('[data-testid="stException"]').count() == 0 and errors == []
        browser.close()
