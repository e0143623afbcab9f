"""A classroom on one server: 10 browser sessions step at once, each with its own seed.

Checks: no errors; each session's tokens equal a solo engine run with its seed; the server's
memory stays bounded. Prints p50/p95 step latency and server RSS (reported, not asserted).
"""

import statistics

import psutil
import pytest

from inference.engine import new_trace
from inference.loader import encode_prompt
from inference.sampling import SamplingSettings
from tests.browser import SKIP_REASON, chromium_available, launch, streamlit_server, wait_idle
from tests.load_sessions import EXCEPTION_BOX, generated_ids, open_sessions, step_interleaved

pytestmark = pytest.mark.skipif(not chromium_available(), reason=SKIP_REASON)
SESSIONS, STEPS = 10, 30
SETTINGS = SamplingSettings(temperature=0.9, top_p=0.95)


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
    results, errors = {}, []
    with streamlit_server() as url, sync_playwright() as p:
        server_pid = next(c.pid for c in psutil.Process().children() if "streamlit" in " ".join(c.cmdline()))
        browser = launch(p)
        pages = open_sessions(browser, [f"{url}/?seed={seed}&t=0.9&p=0.95&max=60" for seed in range(SESSIONS)], errors)
        rss_start = server_rss(server_pid)
        # Every session's Step clicked before any is waited on, so their steps overlap on the server.
        latencies = step_interleaved(pages, [len(expected[seed]) for seed in range(SESSIONS)])
        for seed, page in enumerate(pages):
            wait_idle(page)
            results[seed] = generated_ids(page)
            assert page.locator(EXCEPTION_BOX).count() == 0
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
