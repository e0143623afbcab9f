"""Every page of the app as it ships (SmolLM2-135M-Instruct, the default model), in Chromium, each opened once (the
pages come from app.py's SECTIONS, so a new page is checked too):

- at 1280x900: no exception box, no JavaScript error, every Plotly chart followed by its text, and no WCAG 2.2 AA
  violation the project owns (axe-core); violations of Streamlit's own DOM are listed in STREAMLIT_OWNED, with their
  Streamlit issue (docs/ACCESSIBILITY.md);
- presenter mode switched on: every text at least as large and captions at 4.5:1 (Generate, Sampling lab), and each
  page's first live result on the first screen at 1280x900 and 800x1000 (the sidebar folded away, as it opens);
- at 800x1000 with the sidebar open, as opened and after a Step: no text cut to "…" or drawn past its column, no
  label word broken across lines, no chart title or note past the chart, no axis labels on top of each other;
- the sidebar lists every page, none folded away; a first visit opens Generate on SmolLM2 with a factual question
  in its chat template, and each Step draws a token.

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
PATHS = page_paths()
# Violations in Streamlit's DOM, not ours: rule id -> (the element every node axe names must be inside, the issue).
# The sidebar list's is fixed by roles (app_pages/shared/keys.py) once the page has run that script.
SIDEBAR_LIST = '[data-testid="stSidebarNavItems"]'
STREAMLIT_OWNED = {
    "list": (SIDEBAR_LIST, "streamlit/streamlit#8399 (basic accessibility): the sidebar's page list, a <ul> of <div>s"),
    "listitem": (SIDEBAR_LIST, "streamlit/streamlit#8399 (as above): the sidebar's links, <li>s in a section <div>"),
}
TEXT_SIZE_PAGES = ("", "sampling")
# Where a page's first live result is in presenter mode at the top of the page, in CSS pixels from the window's top:
# Generate's Step (under the chat template's prompt chips), Sampling lab's first chart, KV cache's bytes per token,
# Same luck's two texts, Constrained decoding's first chip, Serve many's simulated traffic.
FIRST_RESULT = {
    "": "() => [...document.querySelectorAll('button')].find(b => b.innerText.trim() === 'Step')"
    ".getBoundingClientRect().bottom",
    "sampling": "() => document.querySelector('[data-testid=stPlotlyChart]').getBoundingClientRect().top + 40",
    "kv-cache": "() => [...document.querySelectorAll('[data-testid=stMarkdownContainer] p')]"
    ".find(p => p.innerText.startsWith('Bytes per token')).getBoundingClientRect().bottom",
    "compare": "() => document.querySelector('[data-testid=stMarkdownContainer] div[style*=padding]')"
    ".getBoundingClientRect().top + 40",
    "constrained": "() => document.querySelector('.token-chip[tabindex]').getBoundingClientRect().bottom",
    "serving": "() => document.querySelector('[data-testid=stPlotlyChart]').getBoundingClientRect().top + 40",
}
# Each visible text wider than its box where the box ends it with "…", each widget label word on more than one line,
# text past its column's right edge, chart titles and notes past the chart, tick labels on top of each other.
PROBLEMS = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const shown = e => e.checkVisibility({visibilityProperty: true});  // a chip's hidden tip is not shown
  const cut = [];
  for (const e of main.querySelectorAll('*')) {
    if (shown(e) && e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).textOverflow === 'ellipsis') {
      cut.push(e.textContent.trim());
    }
  }
  const spilled = [];  // text drawn past the right edge of its column (or of the main area), not scrolled nor clipped
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!node.textContent.trim() || !el || !shown(el) || el.closest('[data-testid="stPlotlyChart"], svg')) continue;
    const column = el.closest('[data-testid="stColumn"]') || el.closest('[data-testid="stMainBlockContainer"]');
    let clipped = false;
    for (let a = el; a && a !== column; a = a.parentElement) {
      if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(a).overflowX)) { clipped = true; break; }
    }
    const range = document.createRange();
    range.selectNodeContents(node);
    if (!clipped && column && range.getBoundingClientRect().right > column.getBoundingClientRect().right + 2) {
      spilled.push(node.textContent.trim().slice(0, 60));
    }
  }
  const broken = [];
  for (const label of main.querySelectorAll('[data-testid="stWidgetLabel"], [role="radiogroup"] label')) {
    if (!shown(label)) continue;
    const texts = document.createTreeWalker(label, NodeFilter.SHOW_TEXT);
    for (let node = texts.nextNode(); node; node = texts.nextNode()) {
      for (const m of node.textContent.matchAll(/[^\\s-]+/g)) {  // a break after a hyphen is a line break
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (lines.size > 1) broken.push(`${label.textContent.trim()}: ${m[0]}`);
      }
    }
  }
  const chartCut = [], crowded = [];  // Plotly neither wraps a title nor thins ticks it was given
  for (const plot of main.querySelectorAll('.js-plotly-plot')) {
    if (!shown(plot)) continue;
    const box = plot.getBoundingClientRect();
    for (const t of plot.querySelectorAll('text.gtitle, text.xtitle, text.ytitle, .annotation-text')) {
      const r = t.getBoundingClientRect();  // (4 px: a text's box reaches above its letters)
      if (r.width && (r.left < box.left - 4 || r.right > box.right + 4 || r.top < box.top - 4 || r.bottom > box.bottom + 4)) {
        chartCut.push(t.textContent.trim().slice(0, 60));
      }
    }
    const title = plot.querySelector('text.gtitle'), legend = plot.querySelector('g.legend');
    if (title && legend) {  // a title wrapped onto more lines meets a legend at the top right
      const a = title.getBoundingClientRect(), b = legend.getBoundingClientRect();
      if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) chartCut.push(`${title.textContent} meets its legend`);
    }
    for (const axis of plot.querySelectorAll('g.xaxislayer-above, g.yaxislayer-above')) {
      const ticks = [...axis.querySelectorAll('g.xtick text, g.ytick text')].filter(t => t.getBoundingClientRect().width);
      for (let i = 1; i < ticks.length; i++) {
        const a = ticks[i - 1].getBoundingClientRect(), b = ticks[i].getBoundingClientRect();
        const turn = /rotate\((-?[\d.]+)/.exec(ticks[i].getAttribute('transform') || '');
        const angle = turn ? parseFloat(turn[1]) * Math.PI / 180 : 0;
        const overlap = Math.abs(angle) > 0.02  // turned labels: the gap across their lines, else their boxes
          ? Math.abs(b.right - a.right) * Math.abs(Math.sin(angle)) < 0.9 * parseFloat(getComputedStyle(ticks[i]).fontSize)
          : Math.min(a.right, b.right) - Math.max(a.left, b.left) > -4 && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;  // side by side closer than 4 px reads as one word
        if (overlap) { crowded.push(`${ticks[i - 1].textContent} / ${ticks[i].textContent}`); break; }
      }
    }
  }
  return {cut, spilled, broken, chartCut, crowded};
}"""


@pytest.fixture(scope="module")
def browser(smollm2):
    with shared_server({"INFERENCE_LAB_DEFAULT_MODEL": real_model.REAL_MODEL_NAME}) as url, sync_playwright() as pw:
        browser = launch(pw)
        yield browser, url
        browser.close()


def axe_violations(page, rules: list[str] | None = None) -> list[dict]:
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(axe_base.AXE_SCRIPT)
    only = {"type": "rule", "values": rules} if rules else {"type": "tag", "values": TAGS}
    options = json.dumps({"runOnly": only, "resultTypes": ["violations"]})
    return page.evaluate(f"axe.run(document, {options})")["violations"]


def ours(page, violations: list[dict]) -> list[str]:
    """The violations the project owns, one line each (rule, impact, first nodes' HTML and axe's message)."""
    inside = "([node, owner]) => { const e = document.querySelector(node); return !!(e && e.closest(owner)); }"
    found = []
    for violation in violations:
        owner = STREAMLIT_OWNED.get(violation["id"], (None, ""))[0]
        for node in violation["nodes"]:
            if owner and len(node["target"]) == 1 and page.evaluate(inside, [node["target"][0], owner]):
                continue
            checks = node.get("any") or node.get("all") or node.get("none") or [{}]
            found.append(
                f"{violation['id']} ({violation['impact']}): {node['html'][:160]} | {checks[0].get('message')}"
            )
    return found[:6]


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


def assert_whole(page, where: str) -> None:
    found = {kind: items for kind, items in page.evaluate(PROBLEMS).items() if items}
    assert not found, f"{where}: {found}"


def chips(page) -> int:
    return page.locator(".token-chip[tabindex]").count()


def test_the_pages_are_app_pys_list_and_each_streamlit_owned_rule_names_its_issue():
    assert len(PATHS) >= 16 and "" in PATHS  # the parse found app.py's list, Generate the default page
    doc = (Path(PROJECT_ROOT) / "docs" / "ACCESSIBILITY.md").read_text()
    for rule, (marker, issue) in STREAMLIT_OWNED.items():
        assert marker and "streamlit/streamlit#" in issue and f"`{rule}`" in doc


@pytest.mark.parametrize("path", PATHS)
def test_the_page_is_clean_readable_in_presenter_mode_and_whole_at_800_px(browser, path):
    browser, url = browser
    page = browser.new_page(viewport={"width": 1280, "height": 900})  # a new context: presenter mode off, sidebar free
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    open_page(page, f"{url}/{path}")
    exception = page.locator('[data-testid="stException"]')
    assert exception.count() == 0, exception.first.inner_text()
    count, texts = (
        "document.querySelectorAll('[data-testid=\"stPlotlyChart\"]').length",
        "document.querySelectorAll('.chart-text').length",
    )
    with contextlib.suppress(PlaywrightTimeout):  # Plotly charts mount a moment after the script ends
        page.wait_for_function(f"() => {count} >= {texts}", timeout=30_000)
    charts, chart_texts = page.evaluate(f"() => [{count}, {texts}]")
    assert charts == chart_texts, f"/{path}: {charts} Plotly charts but {chart_texts} chart texts"
    problems = ours(page, axe_violations(page))
    assert not problems, f"/{path}:\n" + "\n".join(problems)
    if path == "":  # a first visit: SmolLM2, a factual question in its chat template, every page in the sidebar
        assert f"In use: {real_model.REAL_MODEL_NAME}" in page.locator('[data-testid="stSidebar"]').inner_text()
        expect(page.get_by_label("Prompt")).to_have_value("What is the capital of France? Answer in one sentence.")
        expect(page.get_by_label("Wrap in the model's chat template")).to_be_checked()
        titles = re.findall(r'st\.Page\([^)]*?title="([^"]+)"', Path(APP_FILE).read_text(), re.DOTALL)
        nav = page.locator('[data-testid="stSidebarNav"]')
        shown = [link.inner_text().strip() for link in nav.locator("a").all()]
        assert len(titles) == len(PATHS) and not [t for t in titles if not any(t in s for s in shown)], shown
        assert not re.search(r"View \d+ more", nav.inner_text()), nav.inner_text()
    normal = text_sizes(page) if path in TEXT_SIZE_PAGES else {}

    toggle_presenter(page)  # the sidebar folds away
    page.wait_for_timeout(500)  # the larger text's reflow
    wait_idle(page)
    if normal:
        large = text_sizes(page)
        smaller = {text: (normal[text], size) for text, size in large.items() if text in normal and size < normal[text]}
        assert len(set(normal) & set(large)) > 10 and not smaller, f"smaller in presenter mode (px): {smaller}"
        assert not ours(page, axe_violations(page, ["color-contrast"]))
    for width, height in ((1280, 900), (800, 1000)):
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(500)
        if path in FIRST_RESULT:
            page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollTo(0, 0)")
            assert page.evaluate(FIRST_RESULT[path]) <= height, f"/{path} at {width}x{height}: first result below"

    open_sidebar(page)  # a teacher picking another page: the narrowest main area presenter mode has
    wait_idle(page)
    assert_whole(page, f"/{path}, opened")
    step = page.locator('[data-testid="stMain"]').get_by_role("button", name="Step", exact=True)
    for i in range(3 if path == "" else min(step.count(), 1)):  # a stepping page's metrics show after one Step
        before = chips(page)
        step.first.click()
        wait_idle(page)
        if path == "":
            page.wait_for_function(f"document.querySelectorAll('.token-chip[tabindex]').length > {before}")
        assert_whole(page, f"/{path}, after Step {i + 1}")
    assert page.locator('[data-testid="stException"]').count() == 0 and not errors, errors
    page.close()
