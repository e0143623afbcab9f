"""A classroom on one server: 10 browser sessions step at once, each with its own seed.

Checks: no errors; each session's tokens equal a solo engine run with its seed; the server's
memory stays bounded. Prints p50/p95 step latency and server RSS (reported, not asserted).
"""

import statistics
import time

import psutil
import pytest

from inference.engine import new_trace
from inference.loader import encode_prompt
from inference.sampling import SamplingSettings
from tests.browser import SKIP_REASON, chromium_available, launch, open_page, streamlit_server, wait_idle

pytestmark = pytest.mark.skipif(not chromium_available(), reason=SKIP_REASON)
SESSIONS, STEPS = 10, 30
SETTINGS = SamplingSettings(temperature=0.9, top_p=0.95)


def generated_ids(page):
    ids = page.locator(".token-box").get_attribute("data-generated-ids")
    return [int(i) for i in ids.split(",")] if ids else []


def server_rss(pid):
    process = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [process, *process.children(recursive=True)])


def test_ten_sessions_step_at_once_and_each_gets_its_own_tokens(bundled, capsys):
    from playwright.sync_api import sync_playwright

    model, tokenizer = bundled.model, bundled.tokenizer
    expected = {}
    for seed in range(SESSIONS):
        solo = new_trace(model, tokenizer, encode_prompt(tokenizer, "Once upon a time"), 60, seed)
        expected[seed] = [r.token_id for r in solo.run(SETTINGS, max_steps=STEPS)]  # may stop early at EOS
    latencies, results, errors = [], {}, []
    with streamlit_server() as url, sync_playwright() as p:
        server_pid = next(c.pid for c in psutil.Process().children() if "streamlit" in " ".join(c.cmdline()))
        browser = launch(p)
        pages = []
        for seed in range(SESSIONS):
            context = browser.new_context(viewport={"width": 1000, "height": 800})
            page = context.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            open_page(page, f"{url}/?seed={seed}&t=0.9&p=0.95&max=60")
            pages.append(page)
        rss_start = server_rss(server_pid)

        # Playwright's sync API is single-threaded: interleave the sessions round-robin,
        # clicking all of them before waiting on any, so their steps overlap on the server.
        for step in range(1, STEPS + 1):
            started = {}
            active = [seed for seed in range(SESSIONS) if len(expected[seed]) >= step]
            for seed in active:
                pages[seed].get_by_role("button", name="Step", exact=True).click()
                started[seed] = time.perf_counter()
            for seed in active:
                pages[seed].wait_for_function(
                    f"(document.querySelector('.token-box')?.dataset.generatedIds || '').split(',').filter(Boolean).length >= {step}",
                    timeout=120_000,
                )
                latencies.append(time.perf_counter() - started[seed])
        for seed, page in enumerate(pages):
            wait_idle(page)
            results[seed] = generated_ids(page)
            assert page.locator('[data-testid="stException"]').count() == 0
        rss_end = server_rss(server_pid)
        browser.close()

    assert not errors
    for seed, tokens in results.items():
        assert tokens == expected[seed], f"session with seed {seed} differs from its solo run"
    assert rss_end < rss_start + 500 * 2**20, "server memory grew by more than 500 MB for 10 sessions"
    p50, p95 = statistics.median(latencies), statistics.quantiles(latencies, n=20)[18]
    with capsys.disabled():  # reported in every run's output, never asserted
        print(
            f"\n[load] {SESSIONS} sessions x {STEPS} steps: step latency p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms; "
            f"server RSS {rss_start / 2**20:.0f} MB -> {rss_end / 2**20:.0f} MB"
        )
