"""Many browser sessions pressing Step on the Generate page at once (the load tests' shared driver). Playwright's sync
API is single-threaded: the sessions are interleaved round-robin, every session's Step clicked before any is waited
on, so their steps overlap on the app processes (and on an engine behind them)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from inference.bench.students import PROMPTS as STUDENT_PROMPTS
from inference.core.measuring import ms_since, now
from tests.browser import IDLE, wait_idle

EXCEPTION_BOX = '[data-testid="stException"]'
CHIPS = "(document.querySelector('.token-box')?.dataset.generatedIds || '').split(',').filter(Boolean).length"
# One prompt per session: the simulated students' six, and four more (the class proxy test opens up to ten).
PROMPTS = [
    *STUDENT_PROMPTS,
    "Ben liked to build towers with his blocks.",
    "In a small house by the sea lived an old man",
    "The bird could not fly, so it",
    "Mia was sad because her toy",
]


@dataclass
class LoadRun:
    """What the sessions saw: each one's generated ids, every Step's latency, page errors, exception boxes."""

    tokens: list[list[int]] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)  # seconds, click to the new token on the page
    page_errors: list[str] = field(default_factory=list)
    exception_boxes: int = 0
    step_cpu_s: float | None = None  # the app servers' CPU seconds while the sessions stepped (`cpu_clock`)

    def percentiles_ms(self) -> tuple[float, float]:
        return statistics.median(self.latencies) * 1000, statistics.quantiles(self.latencies, n=20)[18] * 1000


def generated_ids(page) -> list[int]:
    ids = page.locator(".token-box").get_attribute("data-generated-ids")
    return [int(i) for i in ids.split(",")] if ids else []


def page_state(page) -> str:
    """The tokens a page shows and its alert and exception texts, for a failure message."""
    alerts = page.locator('[data-testid="stAlert"], ' + EXCEPTION_BOX).all_inner_texts()
    return f"{len(generated_ids(page))} tokens shown; alerts: {[a[:200] for a in alerts]}"


def step_interleaved(pages: list, steps: list[int], timeout_ms: float = 120_000, shown: list[int] | None = None):
    """Press Step `steps[i]` times on page i, round-robin: each round clicks every page still going, then waits for
    each to show its new token count (`shown[i]`, default 0, plus the round: a reconnected page shows its old
    session's tokens until its first rerun), then lets every page finish its rerun (untimed). Returns the latencies in
    seconds, click to token seen (pages are waited on in order: a later one's can include the wait for an earlier)."""
    shown, latencies = shown or [0] * len(pages), []
    for step in range(1, max(steps, default=0) + 1):
        active, started = [i for i, wanted in enumerate(steps) if wanted >= step], {}
        for i in active:
            pages[i].get_by_role("button", name="Step", exact=True).click()
            started[i] = now()
        for i in active:
            try:
                pages[i].wait_for_function(f"{CHIPS} === {shown[i] + step}", timeout=timeout_ms)
            except Exception as error:  # say what the stuck page shows, not only that it timed out
                raise AssertionError(f"session {i}, step {step}: no new token; {page_state(pages[i])}") from error
            latencies.append(ms_since(started[i]) / 1000)
        for i in active:
            wait_idle(pages[i], timeout_ms)
    return latencies


def run_sessions(browser, urls: list[str], steps: list[int], cpu_clock=None, timeout_ms: float = 240_000) -> LoadRun:
    """A session (its own browser context) per URL, all loading at once; step them interleaved, then read each one's
    tokens and exception boxes. `cpu_clock()`: the app servers' CPU seconds, read around the Steps."""
    run, pages = LoadRun(), []
    for url in urls:
        page = browser.new_context(viewport={"width": 1000, "height": 800}).new_page()
        page.on("pageerror", lambda e: run.page_errors.append(str(e)))
        page.goto(url, wait_until="commit", timeout=timeout_ms)
        pages.append(page)
    for page in pages:
        page.wait_for_selector('[data-testid="stMain"] h1', timeout=timeout_ms)  # idle alone can come before the run
        page.wait_for_selector(IDLE, timeout=timeout_ms)
    cpu_start = cpu_clock() if cpu_clock else None
    run.latencies = step_interleaved(pages, steps)
    run.step_cpu_s = cpu_clock() - cpu_start if cpu_clock else None
    for page in pages:
        wait_idle(page)
        run.tokens.append(generated_ids(page))
        run.exception_boxes += page.locator(EXCEPTION_BOX).count()
        page.context.close()
    return run
