"""A class that outgrows one server: 10 browser sessions on two app processes (5 each), all pointed at one
llama-server with 8 parallel slots, press Step 30 times at once on the Generate page; the same 10 sessions on
one in-process app run first, for the figure to compare with.

Every session is greedy with its own prompt: the engine's logits move by up to ~1e-5 between a request alone
and the same request batched with others (measured), so a seeded draw could in rare cases land on the other
side of a boundary, while a greedy token only changes at a near-tie (the smallest gap between the top two
logits in these 300 steps is 0.003, measured: 150 times the engine's difference from transformers).
Checks, for both set-ups: no page errors, no exception boxes, each session's tokens equal its prompt's solo
greedy run on our in-process engine, and the engine served every Step. Prints p50/p95 Step latency of both
runs (reported, never asserted).

Takes a few minutes, so it carries the `load` marker: `python -m pytest -m load` (run by .ci/run).
"""

from __future__ import annotations

from contextlib import ExitStack
from urllib.parse import urlencode

import pytest

from inference.engine import new_trace
from inference.engines.client import EngineClient
from inference.loader import encode_prompt
from inference.measuring import GREEDY
from tests.browser import SKIP_REASON, chromium_available, launch, streamlit_server
from tests.load_sessions import run_sessions
from tests.test_engines import start_server_or_skip

pytestmark = [pytest.mark.load, pytest.mark.skipif(not chromium_available(), reason=SKIP_REASON)]
STEPS, APP_PROCESSES, ENGINE_SLOTS = 30, 2, 8
PROMPTS = [
    "Once upon a time",
    "The little dog wanted to",
    "Lily and her mom went to the park. They saw a big",
    "Tom had a red ball. He",
    "One day, a girl named Sue found a",
    "The sun was hot and the cat",
    "Ben liked to build towers with his blocks.",
    "In a small house by the sea lived an old man",
    "The bird could not fly, so it",
    "Mia was sad because her toy",
]
MAX_NEW_TOKENS = 60  # more than STEPS: the run never ends at the cap


def session_url(base: str, prompt: str, engine: str | None = None) -> str:
    query = {"prompt": prompt, "t": 0, "max": MAX_NEW_TOKENS, **({"engine": engine} if engine else {})}
    return f"{base}/?{urlencode(query)}"


def test_ten_greedy_sessions_on_two_app_processes_and_one_llama_server_get_their_solo_tokens(
    bundled, tmp_path_factory, capsys
):
    """Two app processes sharing one llama-server (--parallel 8): every session's greedy tokens equal its solo run."""
    from playwright.sync_api import sync_playwright

    expected = []
    for prompt in PROMPTS:
        solo = new_trace(bundled.model, bundled.tokenizer, encode_prompt(bundled.tokenizer, prompt), MAX_NEW_TOKENS)
        expected.append([r.token_id for r in solo.run(GREEDY, max_steps=STEPS)])  # may stop early at EOS
    steps = [len(tokens) for tokens in expected]
    server = start_server_or_skip(tmp_path_factory, parallel=ENGINE_SLOTS)  # fails in CI when not built
    with server, sync_playwright() as p:
        browser = launch(p)
        try:
            with streamlit_server() as url:
                in_process = run_sessions(browser, [session_url(url, prompt) for prompt in PROMPTS], steps)
            client = EngineClient(server.url)
            before = client.metrics()
            with ExitStack() as apps:
                env = {"INFERENCE_LAB_ENGINES": f"llama.cpp={server.url}"}
                bases = [apps.enter_context(streamlit_server(env)) for _ in range(APP_PROCESSES)]
                urls = [session_url(bases[i % APP_PROCESSES], prompt, "llama.cpp") for i, prompt in enumerate(PROMPTS)]
                on_engine = run_sessions(browser, urls, steps)
            after = client.metrics()
            client.close()
        finally:
            browser.close()

    for name, run in (("in-process", in_process), ("engine", on_engine)):
        assert not run.page_errors, f"{name}: {run.page_errors[:3]}"
        assert run.exception_boxes == 0, f"{name}: {run.exception_boxes} exception boxes"
        for prompt, tokens, solo in zip(PROMPTS, run.tokens, expected, strict=True):
            assert tokens == solo, f"{name}: the session with prompt {prompt!r} differs from its solo run"
    evaluated = after["llamacpp:prompt_tokens_total"] - before["llamacpp:prompt_tokens_total"]
    assert evaluated >= sum(steps), "the engine evaluated fewer tokens than the sessions stepped"
    busy_per_decode = after["llamacpp:n_busy_slots_per_decode"]  # the server is ours: its average since start
    with capsys.disabled():  # reported in every run's output, never asserted
        for name, run, where in (
            ("in-process", in_process, "1 app process, the model in it"),
            ("engine", on_engine, f"{APP_PROCESSES} app processes + llama-server --parallel {ENGINE_SLOTS}"),
        ):
            p50, p95 = run.percentiles_ms()
            print(
                f"\n[load {name}] {len(PROMPTS)} sessions x {STEPS} steps ({where}): "
                f"Step latency p50 {p50:.0f} ms, p95 {p95:.0f} ms"
            )
        print(
            f"[load engine] llama-server evaluated {evaluated:.0f} tokens; on average {busy_per_decode:.2f} slots "
            "(sessions) shared each of its forward passes"
        )
