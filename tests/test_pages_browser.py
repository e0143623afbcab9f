"""Every page of the app as it ships (SmolLM2-135M-Instruct, the default model), in Chromium, one server and one
browser for the module. The pages come from app.py's SECTIONS at test time, so a new page is checked too:

- each opens with no exception box and no JavaScript error, every Plotly chart followed by its text, and no WCAG 2.2
  AA violation the project owns (axe-core; the axe-playwright-python wheel carries axe.min.js). Violations of
  Streamlit's own DOM are listed once, in STREAMLIT_OWNED, with their Streamlit issue (docs/ACCESSIBILITY.md);
- the sidebar lists every page, none folded behind "View N more";
- a first visit opens Generate on SmolLM2 with a factual question in its chat template, and each Step draws a token;
- presenter mode keeps every text at least as large, captions at 4.5:1, and each page's first live result on the
  first screen at 1280x900 and 800x1000.

The other bundled models are opened on every page by tests/test_every_page_every_model.py (AppTest)."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect, sync_playwright

from inference.core import real_model
from tests.browser import (
    BROWSER_TESTS,
    PROJECT_ROOT,
    keep_screenshot,
    launch,
    open_page,
    open_sidebar,
    page_paths,
    shared_server,
    toggle_presenter,
    wait_idle,
)
from tests.conftest import APP_FILE

pytestmark = BROWSER_TESTS

axe_base = pytest.importorskip("axe_playwright_python.base", reason="pip install -r tests/requirements.txt")

TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]

# Violations in Streamlit's DOM, not ours: rule id -> (the Streamlit element the nodes are in, the issue that tracks
# it). A violation passes only where every node axe names is inside that element. The sidebar list's is fixed by roles
# (app_pages/shared/keys.py) where the page has run that script; until then it is Streamlit's to fix.
SIDEBAR_LIST = '[data-testid="stSidebarNavItems"]'
STREAMLIT_OWNED = {
    "list": (
        SIDEBAR_LIST,
        "streamlit/streamlit#8399 (basic accessibility; no issue of its own found): the sidebar's page list, a <ul>"
        " whose children are its sections' <div>s",
    ),
    "listitem": (
        SIDEBAR_LIST,
        "streamlit/streamlit#8399 (as above): the sidebar's page links, <li>s whose parent is a section <div>",
    ),
}


@pytest.fixture(scope="module")
def url(smollm2):
    """One app server on the default real model (a server and its model load cost ~15 s)."""
    with shared_server({"INFERENCE_LAB_DEFAULT_MODEL": real_model.REAL_MODEL_NAME}) as url:
        yield url


@pytest.fixture(scope="module")
def browser(url):
    with sync_playwright() as pw:
        browser = launch(pw)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def browser_page(url, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield url, page, errors
    page.close()


def axe_violations(page, rules: list[str] | None = None) -> list[dict]:
    """axe-core's violations on the page as it is now (`rules`: only these rule ids)."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(axe_base.AXE_SCRIPT)
    only = {"type": "rule", "values": rules} if rules else {"type": "tag", "values": TAGS}
    options = json.dumps({"runOnly": only, "resultTypes": ["violations"]})
    return page.evaluate(f"axe.run(document, {options})")["violations"]


def ours(page, violations: list[dict]) -> list[str]:
    """The violations the project owns, one line each (rule, impact, first nodes' HTML and axe's message)."""
    found = []
    for violation in violations:
        owner = STREAMLIT_OWNED.get(violation["id"], (None, ""))[0]
        nodes = [node for node in violation["nodes"] if owner is None or not inside(page, node["target"], owner)]
        for node in nodes[:3]:
            checks = node.get("any") or node.get("all") or node.get("none") or [{}]
            found.append(
                f"{violation['id']} ({violation['impact']}): {node['html'][:160]} | {checks[0].get('message')}"
            )
    return found


def inside(page, target: list, owner: str) -> bool:
    """Whether axe's node (its selector; one per frame) is `owner` or inside it, in the page itself."""
    if len(target) != 1:
        return False
    script = "([node, owner]) => { const e = document.querySelector(node); return !!(e && e.closest(owner)); }"
    return page.evaluate(script, [target[0], owner])


def wait_for_charts(page) -> tuple[int, int]:
    """Plotly charts mount a moment after the script ends: wait until every chart text has its chart."""
    count = "document.querySelectorAll('[data-testid=\"stPlotlyChart\"]').length"
    texts = "document.querySelectorAll('.chart-text').length"
    with contextlib.suppress(PlaywrightTimeout):  # the test's assertion says what is missing
        page.wait_for_function(f"() => {count} >= {texts}", timeout=30_000)
    return page.evaluate(f"() => [{count}, {texts}]")


PATHS = page_paths()


def test_the_pages_are_app_pys_list():
    assert len(PATHS) >= 16 and "" in PATHS  # the parse found app.py's list, Generate the default page


@pytest.mark.parametrize("path", PATHS)
def test_every_page_opens_clean_with_a_text_under_every_chart_and_no_axe_violation_of_ours(browser_page, path):
    url, page, errors = browser_page
    errors.clear()
    open_page(page, f"{url}/{path}")
    assert page.locator('[data-testid="stException"]').count() == 0, page.locator(
        '[data-testid="stException"]'
    ).first.inner_text()
    assert not errors, errors
    charts, texts = wait_for_charts(page)
    assert charts == texts, f"/{path}: {charts} Plotly charts but {texts} chart texts"
    problems = ours(page, axe_violations(page))
    assert not problems, f"/{path}:\n" + "\n".join(problems)


def text_sizes(page) -> dict[str, float]:
    """The font size of every visible text in the main area, by its text (the first 60 characters)."""
    return page.evaluate(
        """() => {
            const sizes = {};
            const walker = document.createTreeWalker(document.querySelector('[data-testid="stMain"]'), NodeFilter.SHOW_TEXT);
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                const text = node.textContent.trim().slice(0, 60);
                const el = node.parentElement;
                if (!text || !el || !el.getClientRects().length || el.closest('[data-testid="stPlotlyChart"]')) continue;
                sizes[text] = Math.min(sizes[text] ?? Infinity, parseFloat(getComputedStyle(el).fontSize));
            }
            return sizes;
        }"""
    )


@pytest.mark.parametrize("path", ["", "sampling"])
def test_presenter_mode_keeps_every_text_at_least_as_large_and_captions_readable(browser_page, path):
    url, page, _ = browser_page
    open_page(page, f"{url}/{path}")
    normal = text_sizes(page)
    toggle_presenter(page)
    try:
        large = text_sizes(page)
        smaller = {text: (normal[text], size) for text, size in large.items() if text in normal and size < normal[text]}
        assert len(set(normal) & set(large)) > 10, "too few texts in common to compare"
        assert not smaller, f"/{path}: smaller in presenter mode (normal px, presenter px): {smaller}"
        assert not ours(page, axe_violations(page, ["color-contrast"]))
    finally:
        toggle_presenter_off(page)


def toggle_presenter_off(page) -> None:
    """Presenter mode off again, so the module's other tests see normal mode."""
    open_sidebar(page)
    toggle = page.locator('[data-testid="stSidebar"]').get_by_text("Presenter mode").first
    toggle.click()
    page.wait_for_function("() => getComputedStyle(document.body).fontSize === '16px'")


def test_the_streamlit_owned_list_names_an_issue_for_every_rule():
    """Each exception says where Streamlit tracks it (and the doc lists the same rules)."""
    doc = (Path(PROJECT_ROOT) / "docs" / "ACCESSIBILITY.md").read_text()
    for rule, (marker, issue) in STREAMLIT_OWNED.items():
        assert marker and "streamlit/streamlit#" in issue
        assert f"`{rule}`" in doc


def test_the_sidebar_lists_every_page_with_nothing_folded_away(browser_page):
    url, page, _ = browser_page
    titles = re.findall(r'st\.Page\([^)]*?title="([^"]+)"', Path(APP_FILE).read_text(), re.DOTALL)
    assert len(titles) == len(PATHS)
    open_page(page, f"{url}/start")
    nav = page.locator('[data-testid="stSidebarNav"]')
    shown = [link.inner_text().strip() for link in nav.locator("a").all()]
    keep_screenshot(page, "sidebar_1280")
    missing = [title for title in titles if not any(title in text for text in shown)]
    assert not missing, f"not in the sidebar: {missing}; shown: {shown}"
    assert not re.search(r"View \d+ more", nav.inner_text()), nav.inner_text()


def test_a_first_visit_opens_generate_on_smollm2_and_each_step_draws_a_token(url, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    open_page(page, url + "/")
    sidebar = page.locator('[data-testid="stSidebar"]').inner_text()
    assert f"In use: {real_model.REAL_MODEL_NAME}" in sidebar
    # expect() waits for the value: on a busy machine the widget can be drawn a moment before its value arrives
    expect(page.get_by_label("Prompt")).to_have_value("What is the capital of France? Answer in one sentence.")
    expect(page.get_by_label("Wrap in the model's chat template")).to_be_checked()
    step = page.get_by_role("button", name="Step", exact=True)
    step.click()  # the first Step pays for the prompt's prefill
    page.wait_for_function("document.querySelectorAll('.token-chip[tabindex]').length >= 1")
    wait_idle(page)
    for i in range(2, 4):
        step.click()
        page.wait_for_function(f"document.querySelectorAll('.token-chip[tabindex]').length >= {i}")
        wait_idle(page)
    assert page.locator('[data-testid="stException"]').count() == 0 and not errors, errors
    page.close()


# Where a page's first live result is, opened in presenter mode at the top of the page: its bottom edge (Generate's
# Step), the line under its title (Sampling lab's first chart) or its top edge (KV cache's bytes per token), in CSS
# pixels from the window's top.
FIRST_RESULT = {
    "": "() => [...document.querySelectorAll('button')].find(b => b.innerText.trim() === 'Step')"
    ".getBoundingClientRect().bottom",
    "sampling": "() => document.querySelector('[data-testid=stPlotlyChart]').getBoundingClientRect().top + 40",
    "kv-cache": "() => [...document.querySelectorAll('[data-testid=stMarkdownContainer] p')]"
    ".find(p => p.innerText.startsWith('Bytes per token')).getBoundingClientRect().bottom",
    # Same luck's two texts (their first line) and Constrained decoding's first chip, the step it opens with
    "compare": "() => document.querySelector('[data-testid=stMarkdownContainer] div[style*=padding]')"
    ".getBoundingClientRect().top + 40",
    "constrained": "() => document.querySelector('.token-chip[tabindex]').getBoundingClientRect().bottom",
    # Serve many's simulated traffic (its settings folded: they took the first screen before it)
    "serving": "() => document.querySelector('[data-testid=stPlotlyChart]').getBoundingClientRect().top + 40",
}


def test_presenter_modes_first_screen_shows_each_pages_first_live_result(url, browser):
    """Presenter mode at 1280x900 and 800x1000 (the sidebar folded away, as it opens): Generate's Step with the chat
    template's 42 prompt chips (it was 1,750 px down at 1280x900), Sampling lab's first chart, Same luck's two texts,
    Constrained decoding's first step, KV cache's bytes per token and Serve many's traffic are on the first screen."""
    for width, height in ((1280, 900), (800, 1000)):
        page = browser.new_page(viewport={"width": width, "height": height})
        for path, where in FIRST_RESULT.items():
            open_page(page, f"{url}/{path}")  # a new session: presenter mode is off
            toggle_presenter(page)
            page.wait_for_timeout(500)  # the larger text's reflow
            wait_idle(page)
            page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollTo(0, 0)")
            assert page.evaluate(where) <= height, f"/{path} at {width}x{height}: {page.evaluate(where)}"
        page.close()
