"""A class on one server, then a class that outgrows it: 6 browser sessions press Step 8 times at once on the
Generate page, on one app process running the model, then on two app processes sharing one llama-server (8 slots).

In-process every session samples with its own prompt and seed: its tokens equal its solo run (sessions never share
random numbers) and the app's memory stays bounded. On the engine every session is greedy: batched requests move the
engine's logits by ~1e-5 (measured), which could flip a seeded draw at a boundary, while a greedy token only changes
at a near-tie (the smallest top-two gap over 300 such steps is 0.003); each session's tokens equal its prompt's solo
greedy run, and the engine served every Step. No page errors, no exception boxes; p50/p95 Step latency and the app
server's CPU per Step are printed, never asserted. Takes minutes: `python -m pytest -m load` (run by .ci/run).
"""

from __future__ import annotations

from contextlib import ExitStack
from urllib.parse import urlencode

import psutil
import pytest

from inference.core.loader import encode_prompt
from inference.core.run import GREEDY, new_trace
from inference.engines.client import EngineClient
from inference.sampling.pipeline import SamplingSettings
from tests.browser import SKIP_REASON, chromium_available, launch, open_page, streamlit_server
from tests.load_sessions import PROMPTS as ALL_PROMPTS
from tests.load_sessions import run_sessions
from tests.test_engines import start_server_or_skip

pytestmark = [pytest.mark.load, pytest.mark.skipif(not chromium_available(), reason=SKIP_REASON)]
PROMPTS = ALL_PROMPTS[:6]  # enough sessions to overlap on 2 app processes and share the engine's slots
STEPS, APP_PROCESSES, ENGINE_SLOTS = 8, 2, 8
MAX_NEW_TOKENS = 20  # more than STEPS: the run never ends at the cap
SAMPLED = SamplingSettings(temperature=0.9, top_p=0.95)  # the in-process sessions, seed = session number
MEMORY_GROWTH_LIMIT = 500 * 2**20  # bytes the in-process app may grow by for these sessions


def app_processes(port_url: str) -> list[psutil.Process]:
    """The streamlit process serving `port_url` and its children."""
    port = port_url.rsplit(":", 1)[1]
    app = next(c for c in psutil.Process().children() if port in " ".join(c.cmdline()))
    return [app, *app.children(recursive=True)]


def app_cpu_s(port_urls: list[str]) -> float:
    """CPU seconds (user + system) the app processes serving these URLs have used: without the browsers' share."""
    return sum(sum(p.cpu_times()[:2]) for url in port_urls for p in app_processes(url))


def session_url(base: str, prompt: str, **query) -> str:
    return f"{base}/?{urlencode({'prompt': prompt, 'max': MAX_NEW_TOKENS, **query})}"


def app_rss(url: str) -> int:
    return sum(process.memory_info().rss for process in app_processes(url))


def solo_tokens(bundled, prompt: str, settings: SamplingSettings, seed: int = 0) -> list[int]:
    """The session's run alone on our in-process engine (may stop early at end-of-text)."""
    ids = encode_prompt(bundled.tokenizer, prompt)
    solo = new_trace(bundled.model, bundled.tokenizer, ids, MAX_NEW_TOKENS, seed)
    return [r.token_id for r in solo.run(settings, max_steps=STEPS)]


def test_sessions_in_process_then_on_two_apps_sharing_one_llama_server_each_get_their_solo_tokens(
    bundled, tmp_path_factory, capsys
):
    """One app process, each session its own seed: tokens equal the solo seeded run, memory bounded; two app
    processes sharing one llama-server (--parallel 8): every session's greedy tokens equal its solo run."""
    from playwright.sync_api import sync_playwright

    sampled = [solo_tokens(bundled, prompt, SAMPLED, seed) for seed, prompt in enumerate(PROMPTS)]
    greedy = [solo_tokens(bundled, prompt, GREEDY) for prompt in PROMPTS]
    server = start_server_or_skip(tmp_path_factory, parallel=ENGINE_SLOTS)  # fails in CI when not built
    with server, sync_playwright() as p:
        browser = launch(p)
        try:
            with streamlit_server() as url:
                warm_up = browser.new_page()  # the first visit loads the model: memory is counted from after it
                open_page(warm_up, url)
                warm_up.close()
                rss_start = app_rss(url)
                sampling = {"t": SAMPLED.temperature, "p": SAMPLED.top_p}
                urls = [session_url(url, prompt, seed=seed, **sampling) for seed, prompt in enumerate(PROMPTS)]
                in_process = run_sessions(browser, urls, [len(t) for t in sampled], cpu_clock=lambda: app_cpu_s([url]))
                rss_end = app_rss(url)
            client = EngineClient(server.url)
            before = client.metrics()
            with ExitStack() as apps:
                env = {"INFERENCE_LAB_ENGINES": f"llama.cpp={server.url}"}
                bases = [apps.enter_context(streamlit_server(env)) for _ in range(APP_PROCESSES)]
                urls = [
                    session_url(bases[i % APP_PROCESSES], prompt, t=0, engine="llama.cpp")
                    for i, prompt in enumerate(PROMPTS)
                ]
                on_engine = run_sessions(browser, urls, [len(t) for t in greedy], cpu_clock=lambda: app_cpu_s(bases))
            after = client.metrics()
            client.close()
        finally:
            browser.close()

    for name, run, expected in (("in-process", in_process, sampled), ("engine", on_engine, greedy)):
        assert not run.page_errors, f"{name}: {run.page_errors[:3]}"
        assert run.exception_boxes == 0, f"{name}: {run.exception_boxes} exception boxes"
        for prompt, tokens, solo in zip(PROMPTS, run.tokens, expected, strict=True):
            assert tokens == solo, f"{name}: the session with prompt {prompt!r} differs from its solo run"
    assert rss_end < rss_start + MEMORY_GROWTH_LIMIT, "the app grew by more than 500 MB for these sessions"
    evaluated = after["llamacpp:prompt_tokens_total"] - before["llamacpp:prompt_tokens_total"]
    assert evaluated >= sum(len(t) for t in greedy), "the engine evaluated fewer tokens than the sessions stepped"
    busy = after["llamacpp:n_busy_slots_per_decode"]  # the server is ours: its average since start
    with capsys.disabled():  # reported in every run's output, never asserted
        for name, run in (
            ("in-process, seeded", in_process),
            (f"{APP_PROCESSES} apps + llama-server, greedy", on_engine),
        ):
            (p50, p95), steps = run.percentiles_ms(), len(run.latencies)
            print(
                f"\n[load {name}] {len(PROMPTS)} sessions x {STEPS} steps: Step latency p50 {p50:.0f} ms, p95 {p95:.0f}"
                f" ms; app server CPU {run.step_cpu_s * 1000 / steps:.0f} ms per Step (browsers and engine left out)"
            )
        print(
            f"[load engine] {evaluated:.0f} tokens evaluated; {busy:.2f} sessions shared each forward pass on average"
        )
        print(f"[load in-process] app memory {rss_start / 2**20:.0f} MB -> {rss_end / 2**20:.0f} MB")
