"""WCAG 2.2 AA on every page, checked by axe-core (the axe-playwright-python wheel carries axe.min.js) in Chromium:
no violation the project owns, at 1280x900 after the page is idle; every Plotly chart followed by its text; in
presenter mode every text at least as large as in normal mode and the captions still at 4.5:1.

Violations of Streamlit's own DOM are listed once, in STREAMLIT_OWNED, with their Streamlit issue
(docs/ACCESSIBILITY.md says more). The pages come from app.py's SECTIONS at test time, so a new page is checked too.
One server and one browser for the module: about a minute and a half on 2 busy cores."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

from tests.browser import (
    BROWSER_TESTS,
    PROJECT_ROOT,
    launch,
    open_page,
    open_sidebar,
    page_paths,
    streamlit_server,
    toggle_presenter,
)

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
def browser_page():
    with streamlit_server() as url, sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        yield url, page
        browser.close()


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


@pytest.mark.parametrize("path", page_paths())
def test_every_page_has_no_axe_violation_of_ours_and_a_text_under_every_chart(browser_page, path):
    url, page = browser_page
    open_page(page, f"{url}/{path}")
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
    url, page = browser_page
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
