"""Keys and a presenter's clicker on a page that steps a run (app_pages/shared/keys.py), pressed for real in Chromium:
→ and PageDown make one token a press, ← and PageUp take one back, P plays and P stops; nothing happens while the
focus is in the prompt or on a slider; Step is reached in at most 5 Tab presses from page load."""

import pytest
from playwright.sync_api import sync_playwright

from tests.browser import BROWSER_TESTS, launch, open_page, shared_server, toggle_presenter, wait_idle

pytestmark = BROWSER_TESTS

STEP = ".st-key-gen_step button"
MAX_TAB_PRESSES = 5


@pytest.fixture(scope="module")
def server():
    with shared_server() as url:
        yield url


@pytest.fixture
def page(server):
    with sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        yield page
        browser.close()


def open_generate(page, url: str) -> None:
    """Generate, drawn, idle, and its keys script run (st.html runs it a moment after the page is drawn)."""
    open_page(page, url)
    page.wait_for_selector("#lab-skip-step", state="attached")
    # the skip link is a Tab stop only once Step is on the page (its CSS rule); on a busy machine Step can come later
    page.wait_for_selector(STEP, state="visible")


def generated(page) -> int:
    """How many tokens the run holds: Generate's token box lists their ids."""
    ids = page.locator(".token-box").first.get_attribute("data-generated-ids")
    return len([i for i in ids.split(",") if i])


# Counts the calls of scrollIntoView from now on (the keys script's one way of moving the page).
COUNT_SCROLLS = """() => {
  window.scrollsIntoView = 0;
  const original = Element.prototype.scrollIntoView;
  Element.prototype.scrollIntoView = function (...args) { window.scrollsIntoView += 1; return original.apply(this, args); };
}"""


def press(page, key: str) -> None:
    """One key press with the focus on the page itself, then the rerun it caused (or none) to its end."""
    page.keyboard.press(key)
    wait_idle(page)


def test_arrow_keys_and_a_clickers_page_keys_step_and_go_back_one_token_a_press(server, page):
    open_generate(page, f"{server}/?max=200")
    assert "→ or PageDown: Step" in page.locator(".keys-hint").inner_text()
    page.locator('[data-testid="stMain"] h1').first.click()  # the focus on the page, as after a click on a slide
    start = generated(page)
    counts = []
    for key in ("ArrowRight", "PageDown", "PageDown", "ArrowLeft", "PageUp"):
        press(page, key)
        counts.append(generated(page))
    assert counts == [start + 1, start + 2, start + 3, start + 2, start + 1]


def test_keys_do_nothing_while_typing_in_the_prompt_or_moving_a_slider(server, page):
    open_generate(page, f"{server}/?max=200")
    start = generated(page)
    prompt = page.locator(".st-key-gen_prompt textarea")
    prompt.click()
    prompt.press("End")
    for key in ("ArrowRight", "PageDown", "p", "P", "ArrowLeft"):
        prompt.press(key)
    page.wait_for_timeout(500)
    assert generated(page) == start
    assert prompt.input_value().endswith("pP")  # the letters went into the prompt, not to Play
    slider = page.locator(".st-key-gen_temperature input[type=range]")
    before = slider.input_value()
    slider.focus()
    slider.press("ArrowRight")
    wait_idle(page)
    assert slider.input_value() != before  # the slider moved...
    assert generated(page) <= start  # ...and no token was made (the edited prompt may have started a new run)


def test_p_plays_the_run_and_p_again_stops_it(server, page):
    open_generate(page, f"{server}/?max=200")
    page.locator('[data-testid="stMain"] h1').first.click()
    start = generated(page)
    page.keyboard.press("p")
    page.wait_for_selector(".st-key-gen_stop button")
    page.wait_for_function(
        f"() => document.querySelector('.token-box').dataset.generatedIds.split(',').length > {start + 2}"
    )
    page.keyboard.press("p")
    wait_idle(page)
    made = generated(page)
    assert start + 2 < made < 200  # Play made tokens, and P stopped it before the end
    assert page.locator(".st-key-gen_stop button").count() == 0


def test_step_is_reached_in_at_most_five_tab_presses_from_page_load(server, page):
    open_generate(page, server)
    start = generated(page)
    visited = []
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
    page.keyboard.press("Enter")  # Step itself, from the keyboard
    wait_idle(page)
    assert generated(page) == start + 1


def in_view(page, selector: str, last: bool = False) -> bool:
    """Whether the (first, or `last`) element matching `selector` lies wholly on the screen."""
    pick = f"[...document.querySelectorAll('{selector}')].pop()" if last else f"document.querySelector('{selector}')"
    return page.evaluate(
        f"() => {{ const r = {pick}.getBoundingClientRect(); return r.top >= 0 && r.bottom <= window.innerHeight; }}"
    )


def test_a_clicker_pressed_at_the_top_of_a_presenter_screen_brings_step_and_the_new_token_into_view(server, page):
    """A teacher's → from the top of a presenter screen (a long prompt puts Step below it), the focus still on the
    presenter toggle, steps and scrolls Step and the new token into view once; a second key does not scroll."""
    open_generate(
        page, f"{server}/?max=200&prompt=" + "+".join(["Once upon a time, a little dog ran to the park."] * 12)
    )
    toggle_presenter(page)  # the focus stays on the toggle, as after a teacher's click: a checkbox owns no key
    page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollTo(0, 0)")
    assert page.evaluate("() => document.activeElement.type") == "checkbox"
    assert not in_view(page, STEP)  # the premise: at the top, Step is off the screen
    start = generated(page)
    page.evaluate(COUNT_SCROLLS)
    press(page, "ArrowRight")
    assert generated(page) == start + 1
    assert in_view(page, STEP) and page.evaluate("() => window.scrollsIntoView") == 1
    assert in_view(page, ".token-box .token-chip:not(.prompt):not(.special)", last=True)  # the token just made
    page.evaluate("() => { window.scrollsIntoView = 0; }")
    press(page, "PageDown")
    assert generated(page) == start + 2
    # The script does not scroll again (where the new token starts a line above Step, the page may still move by that
    # line, or Chromium's scroll anchoring keep Step in place: either is the text growing, not the key)
    assert page.evaluate("() => window.scrollsIntoView") == 0
