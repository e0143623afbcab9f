"""The Sampling lab in real Chromium, in presenter mode at 1280x900 and 800x1000: no error box, every slider's
value stands clear above its track (at projector size it used to sit on the track), and no slider label is
broken inside a word."""

import os

from tests.browser import BROWSER_TESTS, each_screen, launch, streamlit_server

pytestmark = BROWSER_TESTS

# Written for the 6M storyteller's speed and token ids: it is these pages' default model here (a new session
# opens on SmolLM2-135M-Instruct otherwise; tests/test_default_model_page.py covers that).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")

# For each slider: the bottom of its value's text against the middle of its thumb (where the track runs), and whether its label holds a
# word split across two lines (a line that starts with a lower-case letter right after a letter).
GEOMETRY = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stSlider"]')]
  .filter(s => s.getBoundingClientRect().height > 0)  // the closed "More samplers" expander's sliders are hidden
  .map(s => {
    const value = s.querySelector('[data-testid="stSliderThumbValue"]');
    const thumb = value.parentElement;
    const label = s.querySelector('[data-testid="stWidgetLabel"] p');
    const range = document.createRange();
    range.selectNodeContents(label);
    const lines = [...range.getClientRects()].map(r => Math.round(r.top));
    const words = label.textContent.trim().split(/\\s+/).length;
    const text = document.createRange();
    text.selectNodeContents(value);
    const t = thumb.getBoundingClientRect();
    return {label: label.textContent, valueBottom: text.getBoundingClientRect().bottom,
            trackMiddle: (t.top + t.bottom) / 2, lines: new Set(lines).size, words};
})"""


def test_presenter_mode_keeps_slider_values_off_the_tracks_and_labels_whole():
    from playwright.sync_api import sync_playwright

    with streamlit_server() as url, sync_playwright() as p:
        browser = launch(p)
        errors = []
        for screen in each_screen(browser, f"{url}/sampling", modes=(True,), errors=errors):
            screen.page.wait_for_timeout(500)
            sliders = screen.page.evaluate(GEOMETRY)
            assert len(sliders) >= 5, f"{screen.where}: {len(sliders)} sliders"
            for s in sliders:
                assert s["valueBottom"] < s["trackMiddle"] - 3, (
                    f"{screen.where}: {s['label']}: its value sits on the track"
                )
                assert s["lines"] <= s["words"], (
                    f"{screen.where}: {s['label']}: a word of its label is broken across lines"
                )
            assert screen.page.locator('[data-testid="stException"]').count() == 0 and errors == []
        browser.close()
