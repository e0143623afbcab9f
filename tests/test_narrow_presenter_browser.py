"""Every page (from app.py's SECTIONS) at 800x1000 in presenter mode with the sidebar open, on the default real model,
as opened and after one Step: no text cut to "…" or drawn past its column, no label word broken across lines, no
chart title or note past the chart, no axis labels on top of each other."""

from __future__ import annotations

import pytest
from playwright.sync_api import sync_playwright

from tests.browser import (
    BROWSER_TESTS,
    launch,
    open_page,
    page_paths,
    shared_server,
    toggle_presenter,
    wait_idle,
)

pytestmark = BROWSER_TESTS

# Each visible text wider than its box where the box ends it with "…" (a metric, a checkbox's label), and each
# visible widget label or radio option in the main area with a word whose characters lie on more than one line
# ("co-" / "tenants" is a hyphen's break, not a broken word).
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
def narrow_presenter():
    with (
        shared_server({"INFERENCE_LAB_DEFAULT_MODEL": "SmolLM2-135M-Instruct"}) as url,
        sync_playwright() as pw,
    ):
        browser = launch(pw)
        page = browser.new_page(viewport={"width": 800, "height": 1000})
        yield url, page
        browser.close()


def assert_whole(page, where: str) -> None:
    found = page.evaluate(PROBLEMS)
    assert not found["cut"], f"{where}: texts cut to '…': {found['cut']}"
    assert not found["spilled"], f"{where}: texts past their column's edge: {found['spilled']}"
    assert not found["broken"], f"{where}: label words broken across lines: {found['broken']}"
    assert not found["chartCut"], f"{where}: chart titles or notes past the chart's edge: {found['chartCut']}"
    assert not found["crowded"], f"{where}: tick labels on top of each other: {found['crowded']}"


@pytest.mark.parametrize("path", page_paths())
def test_no_text_is_cut_or_spilled_and_no_label_word_breaks_at_800_px_in_presenter_mode(narrow_presenter, path):
    url, page = narrow_presenter
    open_page(page, f"{url}/{path}")
    toggle_presenter(page, sidebar_open=True)  # a new session each page: presenter mode switched on again
    page.wait_for_timeout(800)  # the larger text's reflow
    wait_idle(page)
    assert_whole(page, f"/{path}, opened")
    step = page.locator('[data-testid="stMain"]').get_by_role("button", name="Step", exact=True)
    if step.count():  # a stepping page shows its step's metrics only after one
        step.first.click()
        wait_idle(page)
        assert_whole(page, f"/{path}, after a Step")
