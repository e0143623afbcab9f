"""Opened without a click, the Speculative page's first round (chips) is on the first screen, every size and mode."""

import os

import pytest

from tests.browser import BROWSER_TESTS, each_screen, keep_screenshot, launch, streamlit_server, wait_idle

pytestmark = BROWSER_TESTS

os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")

# Where the first chip the first round added sits in the viewport, stMain scrolled to its top.
PLACES = """() => {
  document.querySelector('[data-testid=stMain]').scrollTop = 0;
  const box = document.querySelector('.spec-box');
  if (!box) return null;
  const made = box.querySelector('.spec-chip.accepted, .spec-chip.target');
  const sep = box.querySelector('.spec-round-sep');
  return {box_top: box.getBoundingClientRect().top, made_bottom: made ? made.getBoundingClientRect().bottom : null,
          sep_bottom: sep ? sep.getBoundingClientRect().bottom : null};
}"""


def settle(page) -> None:
    """Wait until the page has drawn everything: no element still a skeleton (its stale placeholder), idle twice."""
    for _ in range(2):
        page.wait_for_timeout(1000)
        wait_idle(page)
    page.wait_for_function("() => !document.querySelector('[data-testid=stSkeleton]')")


@pytest.mark.parametrize("presenter", [False, True], ids=["normal", "presenter"])
def test_the_first_round_is_on_the_first_screen_without_a_click(presenter):
    from playwright.sync_api import sync_playwright

    mode = "presenter" if presenter else "normal"
    with streamlit_server() as url, sync_playwright() as p:
        browser = launch(p)
        for page, width, height, _ in each_screen(browser, f"{url}/speculative", modes=(presenter,)):
            settle(page)
            at = page.evaluate(PLACES)
            keep_screenshot(page, f"speculative_first_screen_{width}_{mode}", full=False)
            assert at is not None and at["made_bottom"] is not None, f"{width}x{height} {mode}: no round drafted: {at}"
            assert at["made_bottom"] <= height, f"{width}x{height} {mode}: the round's first token below the fold: {at}"
        browser.close()
