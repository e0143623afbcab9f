"""Keys and a presenter's clicker on Generate (app_pages/shared/keys.py), pressed for real in Chromium: → and PageDown
make one token a press, ← and PageUp take one back, P plays and P stops, nothing happens while the focus is in the
prompt or on a slider; Step is reached in at most 5 Tab presses from page load, and a clicker pressed at the top of
a presenter screen brings Step and the new token into view once."""

import pytest
from playwright.sync_api import sync_playwright

from tests.browser import BROWSER_TESTS, launch, open_page, shared_server, toggle_presenter, wait_idle

pytestmark = BROWSER_TESTS

STEP = ".st-key-gen_step button"
MAX_TAB_PRESSES = 5
# Counts the calls of scrollIntoView from now on (the keys script's one way of moving the page).
COUNT_SCROLLS = """() => {
  window.scrollsIntoView = 0;
  const original = Element.prototype.scrollIntoView;
  Element.prototype.scrollIntoView = function (...args) { window.scrollsIntoView += 1; return original.apply(this, args); };
}"""


@pytest.fixture(scope="module")
def browser():
    with shared_server() as url, sync_playwright() as pw:
        browser = launch(pw)
        yield browser, url
        browser.close()


def open_generate(browser, url: str):
    """Generate in a new session, idle, its keys script run and Step on the page (the skip link's Tab stop)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    open_page(page, url)
    page.wait_for_selector("#lab-skip-step", state="attached")
    page.wait_for_selector(STEP, state="visible")
    return page


def generated(page) -> int:
    ids = page.locator(".token-box").first.get_attribute("data-generated-ids")
    return len([i for i in ids.split(",") if i])


def press(page, key: str) -> int:
    page.keyboard.press(key)
    wait_idle(page)
    return generated(page)


def in_view(page, selector: str, last: bool = False) -> bool:
    pick = f"[...document.querySelectorAll('{selector}')].pop()" if last else f"document.querySelector('{selector}')"
    return page.evaluate(
        f"() => {{ const r = {pick}.getBoundingClientRect(); return r.top >= 0 && r.bottom <= window.innerHeight; }}"
    )


def test_keys_step_back_play_and_stop_but_never_while_typing_or_on_a_slider(browser):
    browser, url = browser
    page = open_generate(browser, f"{url}/?max=200")
    assert "→ or PageDown: Step" in page.locator(".keys-hint").inner_text()
    page.locator('[data-testid="stMain"] h1').first.click()  # the focus on the page, as after a click on a slide
    start = generated(page)
    counts = [press(page, key) for key in ("ArrowRight", "PageDown", "PageDown", "ArrowLeft", "PageUp")]
    assert counts == [start + 1, start + 2, start + 3, start + 2, start + 1]

    start = generated(page)
    page.keyboard.press("p")
    page.wait_for_selector(".st-key-gen_stop button")
    page.wait_for_function(
        f"() => document.querySelector('.token-box').dataset.generatedIds.split(',').length > {start + 2}"
    )
    made = press(page, "p")
    assert start + 2 < made < 200 and page.locator(".st-key-gen_stop button").count() == 0  # P stopped it

    prompt = page.locator(".st-key-gen_prompt textarea")
    prompt.click()
    prompt.press("End")
    for key in ("ArrowRight", "PageDown", "p", "P", "ArrowLeft"):
        prompt.press(key)
    page.wait_for_timeout(500)
    assert generated(page) == made and prompt.input_value().endswith("pP")  # the letters went into the prompt
    slider = page.locator(".st-key-gen_temperature input[type=range]")
    before = slider.input_value()
    slider.focus()
    slider.press("ArrowRight")
    wait_idle(page)
    assert slider.input_value() != before and generated(page) <= made  # the edited prompt may start a new run
    page.close()


def test_tab_reaches_step_and_a_clicker_at_the_top_of_a_presenter_screen_brings_it_into_view(browser):
    browser, url = browser
    long_prompt = "+".join(["Once upon a time, a little dog ran to the park."] * 12)  # puts Step below the screen
    page = open_generate(browser, f"{url}/?max=200&prompt={long_prompt}")
    start, visited = generated(page), []
    for _ in range(MAX_TAB_PRESSES):
        page.keyboard.press("Tab")
        focused = page.evaluate("() => document.activeElement.id || document.activeElement.textContent")
        visited.append(str(focused)[:40])
        if focused == "lab-skip-step" or page.evaluate(
            f"() => document.activeElement === document.querySelector('{STEP}')"
        ):
            break
    else:
        pytest.fail(f"neither the skip link nor Step after {MAX_TAB_PRESSES} Tab presses: the focus went {visited}")
    if page.evaluate("() => document.activeElement.id") == "lab-skip-step":
        assert page.locator("#lab-skip-step").is_visible()  # a sighted keyboard user sees where the focus is
        page.keyboard.press("Enter")
    assert page.evaluate(f"() => document.activeElement === document.querySelector('{STEP}')")
    assert press(page, "Enter") == start + 1  # Step itself, from the keyboard

    toggle_presenter(page)  # the focus stays on the toggle, as after a teacher's click: a checkbox owns no key
    page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollTo(0, 0)")
    assert page.evaluate("() => document.activeElement.type") == "checkbox"
    assert not in_view(page, STEP)  # the premise: at the top, Step is off the screen
    page.evaluate(COUNT_SCROLLS)
    assert press(page, "ArrowRight") == start + 2
    assert in_view(page, STEP) and page.evaluate("() => window.scrollsIntoView") == 1
    assert in_view(page, ".token-box .token-chip:not(.prompt):not(.special)", last=True)  # the token just made
    page.evaluate("() => { window.scrollsIntoView = 0; }")
    assert press(page, "PageDown") == start + 3
    assert page.evaluate("() => window.scrollsIntoView") == 0  # a second key does not scroll again
    page.close()
