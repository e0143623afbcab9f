"""llama.cpp's llama-server, built here and serving the bundled model, agrees with our engine: the same
distribution over the whole vocabulary, the same greedy tokens, the same sampled tokens through the remote
Step; a server killed mid-run gives one sentence and keeps the run. vLLM's tests are tests/test_vllm.py."""

import os

import pytest
import torch

from inference.core.loader import encode_prompt
from inference.core.remote import RemoteForward, connect
from inference.core.run import new_trace
from inference.engines import llamacpp
from inference.engines.client import LLAMACPP, VLLM, EngineClient, EngineError, EngineUnreachable
from inference.sampling.pipeline import SamplingSettings
from tests.engine_oracles import assert_server_greedy_equals_the_engine, assert_whole_distribution_equals_our_softmax

pytestmark = pytest.mark.engine

PROMPTS = [
    "Once upon a time",
    "The little dog wanted to",
    "Lily and her mom went to the park. They saw a big",
    "Tom had a red ball. He",
]
IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def require_llama_server() -> None:
    """Skip (saying how to build it) when the llama-server build is missing, only outside CI; in CI (CI=true)
    a missing build fails."""
    if not llamacpp.is_built():
        reason = (
            "llama-server is not built here: run `python -m inference.engines llamacpp build` "
            f"(about 5 minutes; cache {llamacpp.cache_dir()})"
        )
        if IN_CI:
            pytest.fail("CI must build llama-server before the tests: " + reason)
        pytest.skip(reason)


def start_server_or_skip(tmp_path_factory, **kwargs) -> llamacpp.LlamaServer:
    """A llama-server for the bundled model's f32 GGUF on a free loopback port (see `require_llama_server`
    for when a missing build skips or fails; a failed start fails)."""
    require_llama_server()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    return llamacpp.serve(None, log_path=log, **kwargs)


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    server = start_server_or_skip(tmp_path_factory)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def remote(llama_server):
    loaded = connect(llama_server.url)
    yield loaded
    loaded.model.client.close()


def test_llama_server_distribution_equals_our_softmax_on_the_whole_vocabulary(bundled, remote):
    """max |p_server - p_engine| < 1e-4 over all tokens, four prompts (f32 GGUF, f32 KV cache, no flash attention)."""
    assert_whole_distribution_equals_our_softmax(bundled, remote, PROMPTS)


def test_llama_server_greedy_tokens_equal_the_engine_for_four_prompts_of_100_tokens(bundled, remote):
    """Greedy decoding on the server (its own sampler, temperature 0) writes the engine's tokens."""
    assert_server_greedy_equals_the_engine(bundled, remote, PROMPTS)


def test_the_remote_step_draws_the_engines_tokens_with_the_same_seed(bundled, remote):
    """Same prompt, settings and seed: the remote Step (server distribution, our pipeline, recorded u) picks
    the tokens the local engine picks, and asks the server to evaluate only the new token each time."""
    ids = encode_prompt(bundled.tokenizer, PROMPTS[0])
    settings = SamplingSettings(temperature=0.9, top_k=50, top_p=0.95, min_p=0.02)
    local = new_trace(bundled.model, bundled.tokenizer, ids, 30, seed=7, stop_at_eos=False)
    far = new_trace(remote.model, remote.tokenizer, ids, 30, seed=7, stop_at_eos=False)
    assert isinstance(far.forward, RemoteForward)
    ours = [r.token_id for r in local.run(settings)]
    theirs = list(far.run(settings))
    assert [r.token_id for r in theirs] == ours
    assert [r.u for r in theirs] == [r.u for r in local.records]
    assert [s.evaluated_tokens for s in far.server_steps[1:]] == [1] * 29  # the prompt cache did the rest
    assert far.server_steps[0].complete and far.to_frame()["server_ms"].notna().all()


def test_a_remote_fork_redraws_from_the_stored_distribution_without_a_request(bundled, remote):
    ids = encode_prompt(bundled.tokenizer, PROMPTS[1])
    trace = new_trace(remote.model, remote.tokenizer, ids, 10, seed=3)
    list(trace.run(SamplingSettings(temperature=1.0)))
    logits = trace.records[4].logits
    trace.rewind(4)
    record = trace.step(SamplingSettings(temperature=0))
    assert record.reused_forward and torch.equal(record.logits, logits) and record.token_id == int(logits.argmax())
    assert len(trace.server_steps) == len(trace.records) == 5


def test_a_killed_server_mid_run_gives_one_sentence_and_keeps_the_run(bundled, tmp_path_factory):
    server = start_server_or_skip(tmp_path_factory)
    try:
        loaded = connect(server.url, timeout=10)
        trace = new_trace(loaded.model, loaded.tokenizer, encode_prompt(bundled.tokenizer, PROMPTS[2]), 20)
        settings = SamplingSettings(temperature=0.8)
        list(trace.run(settings, max_steps=3))
        kept = [r.token_id for r in trace.records]
        server.process.kill()
        server.process.wait(10)
        with pytest.raises(EngineUnreachable) as err:
            trace.step(settings)
        message = str(err.value)
        assert server.url in message and "\n" not in message and message.endswith(("?", "."))
        assert [r.token_id for r in trace.records] == kept and len(trace.server_steps) == 3
        assert not trace.finished
    finally:
        server.stop()


def test_tokenize_and_detokenize_agree_with_the_local_tokenizer(bundled, remote):
    client, tokenizer = remote.model.client, bundled.tokenizer
    text = PROMPTS[2]
    assert client.tokenize(text) == tokenizer(text, add_special_tokens=False)["input_ids"]
    ids = encode_prompt(tokenizer, text)
    assert client.detokenize(ids) == tokenizer.decode(ids)


def test_streamed_completion_has_every_token_its_arrival_and_the_servers_timings(bundled, remote):
    ids = encode_prompt(bundled.tokenizer, PROMPTS[0])
    streamed = remote.model.client.complete(ids, 24, stream=True)
    assert len(streamed.token_ids) == len(streamed.arrival_ms) == 24
    assert streamed.arrival_ms == sorted(streamed.arrival_ms)
    assert streamed.timings.predicted_tokens == 24 and streamed.timings.decode_tokens_per_s > 0
    assert streamed.token_ids == remote.model.client.complete(ids, 24).token_ids


def test_metrics_and_slots_are_read(remote):
    client = remote.model.client
    assert client.metrics().get("llamacpp:tokens_predicted_total", -1) >= 0
    slots = client.slots()
    assert slots and slots[0]["n_ctx"] == remote.info.context


def test_an_invalid_token_id_is_the_servers_http_error_in_one_sentence(remote):
    with pytest.raises(EngineError) as err:
        remote.model.client.next_token([0, 10**6], 8, remote.model.vocab_size)
    assert "HTTP 4" in str(err.value) or "HTTP 5" in str(err.value)


def test_the_client_never_imports_vllm():
    import sys

    assert "vllm" not in sys.modules
    assert EngineClient.__module__ == "inference.engines.client" and LLAMACPP != VLLM


def test_bench_reports_llamacpp_speed_its_ratio_to_the_engine_and_the_remote_step(bundled, llama_server, monkeypatch):
    from inference.bench.llamacpp import engine_figures

    monkeypatch.setenv("INFERENCE_LAB_BENCH_LLAMACPP_URL", llama_server.url)
    figures = engine_figures(bundled.model, bundled.tokenizer, encode_prompt(bundled.tokenizer, PROMPTS[2]), 16)
    assert set(figures) == {"llamacpp_decode_tokens_per_s", "llamacpp_vs_engine", "remote_step_ms"}
    assert all(value > 0 for value in figures.values())


def test_prefill_decode_page_times_the_engine_with_its_own_timings(llama_server, monkeypatch):
    """The timeline's first block is the server's prefill (timings.prompt_ms); no exception on the page."""
    import streamlit as st

    from tests.conftest import run_app

    monkeypatch.setenv("INFERENCE_LAB_ENGINES", f"llama.cpp={llama_server.url}")
    st.cache_resource.clear()
    try:
        at = run_app({"engine": "llama.cpp"})
        at.switch_page("app_pages/prefill-decode.py").run()
        assert not at.exception
        run_key, timing, server_timings = at.session_state["pd_timing"]
        assert server_timings is not None and timing.prefill_ms == server_timings.prompt_ms
        assert any("engine's own prefill time" in c.value for c in at.caption)
    finally:
        st.cache_resource.clear()


def test_browser_generate_on_llama_server_does_five_steps_without_an_exception(llama_server):
    from tests.browser import SKIP_REASON, chromium_available, launch, open_page, streamlit_server, wait_idle

    if not chromium_available():
        pytest.skip(SKIP_REASON)
    from playwright.sync_api import sync_playwright

    with streamlit_server({"INFERENCE_LAB_ENGINES": f"llama.cpp={llama_server.url}"}) as url, sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            open_page(page, url + "/?engine=llama.cpp&t=0.8")
            step = page.get_by_role("button", name="Step", exact=True)
            for i in range(5):
                step.click()
                page.wait_for_function(f"document.querySelectorAll('.token-chip[tabindex]').length >= {i + 1}")
                wait_idle(page)
            assert page.locator(".token-chip[tabindex]").count() == 5
            assert page.locator('[data-testid="stException"]').count() == 0 and not errors
            assert "returned all 4,096 token probabilities" in page.locator('[data-testid="stMain"]').inner_text()
            from tests.browser import keep_screenshot

            keep_screenshot(page, "generate_llamacpp_1280x900")
        finally:
            browser.close()
