"""The remote Step on a stand-in llama.cpp server (tests/fake_engine.py) whose distributions come from the bundled
model: the same records as the local engine, truncation made visible, failures keep the run."""

import pytest
import torch

from inference.core.forward import ServerStep
from inference.core.loader import encode_prompt
from inference.core.remote import RemoteForward, connect, distribution_note, is_remote, step_timing_note
from inference.core.run import new_trace
from inference.engines.client import EngineError, TokenizerMismatch
from inference.sampling.pipeline import SamplingSettings
from tests.fake_engine import FakeLlamaServer

pytestmark = pytest.mark.unit

SETTINGS = SamplingSettings(temperature=0.9, top_k=40, top_p=0.95, min_p=0.01)


@pytest.fixture(scope="module")
def fake(bundled):
    server = FakeLlamaServer(bundled)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def remote(fake):
    loaded = connect(fake.url)
    yield loaded
    loaded.model.client.close()


def test_connect_pairs_the_engine_with_a_tokenizer_that_matches_it(remote, bundled):
    assert is_remote(remote) and remote.model.exact and remote.info.vocab_size == bundled.info.vocab_size
    assert remote.info.context == bundled.info.context and remote.info.source == "engine"
    assert remote.tokenizer("Once upon")["input_ids"] == bundled.tokenizer("Once upon")["input_ids"]


def test_remote_steps_equal_local_steps_with_the_same_seed(remote, bundled):
    """Whole-vocabulary answers, our pipeline, the recorded u: the same tokens, u and final probabilities."""
    ids = encode_prompt(bundled.tokenizer, "The little dog wanted to")
    local = new_trace(bundled.model, bundled.tokenizer, ids, 12, seed=11, stop_at_eos=False)
    far = new_trace(remote.model, remote.tokenizer, ids, 12, seed=11, stop_at_eos=False)
    assert isinstance(far.forward, RemoteForward)
    ours, theirs = list(local.run(SETTINGS)), list(far.run(SETTINGS))
    assert [r.token_id for r in theirs] == [r.token_id for r in ours]
    assert [r.u for r in theirs] == [r.u for r in ours]
    assert max(abs(a.prob - b.prob) for a, b in zip(ours, theirs)) < 1e-5
    assert len(far.server_steps) == 12 and all(s.complete for s in far.server_steps)


def test_remote_steps_with_dry_and_xtc_equal_local_steps(remote, bundled):
    """The stages that read the step's context (DRY's history and breakers, XTC's own uniform) run on a remote
    model too, and pick the local engine's tokens with the same seed."""
    settings = SamplingSettings(temperature=0.9, dry_multiplier=0.8, xtc_probability=0.5, xtc_threshold=0.1)
    ids = encode_prompt(bundled.tokenizer, "The little dog wanted to")
    local = new_trace(bundled.model, bundled.tokenizer, ids, 12, seed=5, stop_at_eos=False)
    far = new_trace(remote.model, remote.tokenizer, ids, 12, seed=5, stop_at_eos=False)
    ours, theirs = list(local.run(settings)), list(far.run(settings))
    assert [r.token_id for r in theirs] == [r.token_id for r in ours]
    assert [r.xtc_u for r in theirs] == [r.xtc_u for r in ours] and ours[0].xtc_u is not None


def test_each_request_sends_the_whole_text_with_the_chosen_token_and_asks_for_the_prompt_cache(fake, remote, bundled):
    ids = encode_prompt(bundled.tokenizer, "Tom had a red ball.")
    trace = new_trace(remote.model, remote.tokenizer, ids, 3, seed=1)
    before = len(fake.requests)
    list(trace.run(SETTINGS))
    sent = [payload for path, payload in fake.requests[before:] if path == "/completion"]
    assert [p["prompt"] for p in sent] == [ids, ids + trace.generated_ids[:1], ids + trace.generated_ids[:2]]
    assert all(p["cache_prompt"] and p["n_probs"] == remote.model.vocab_size for p in sent)


def test_a_truncating_server_leaves_the_rest_undrawable_and_the_note_says_so(bundled):
    server = FakeLlamaServer(bundled, n_probs_cap=50)
    try:
        loaded = connect(server.url, n_probs=50)
        trace = new_trace(loaded.model, loaded.tokenizer, encode_prompt(bundled.tokenizer, "Once upon a time"), 5)
        records = list(trace.run(SamplingSettings(temperature=1.5)))
        assert all(torch.isfinite(r.logits).sum() == 50 for r in records)
        step = trace.server_steps[0]
        assert not step.complete and step.returned == 50 and 0 < step.returned_mass < 1
        kind, text = distribution_note(loaded.model, step)
        assert "Truncated" in text and "other, not returned by the server" in text
    finally:
        server.stop()


def test_a_server_that_asks_fewer_probabilities_than_the_app_wants_fails_in_one_sentence(bundled):
    server = FakeLlamaServer(bundled, n_probs_cap=50)
    try:
        loaded = connect(server.url)  # asks for the whole vocabulary, gets 50
        trace = new_trace(loaded.model, loaded.tokenizer, encode_prompt(bundled.tokenizer, "Once upon a time"), 5)
        with pytest.raises(EngineError) as err:
            trace.step(SETTINGS)
        assert "returned 50 token probabilities" in str(err.value) and trace.records == []
    finally:
        server.stop()


def test_a_stopped_server_keeps_the_run_and_the_next_step_works_when_it_is_back(bundled):
    server = FakeLlamaServer(bundled)
    loaded = connect(server.url, timeout=5)
    trace = new_trace(loaded.model, loaded.tokenizer, encode_prompt(bundled.tokenizer, "Lily saw a cat."), 10, seed=2)
    list(trace.run(SETTINGS, max_steps=2))
    server.stop()
    with pytest.raises(EngineError) as err:
        trace.step(SETTINGS)
    assert "Cannot connect" in str(err.value) and len(trace.records) == 2 and not trace.finished


def test_rewind_and_back_reuse_the_stored_distribution(remote, bundled, fake):
    trace = new_trace(remote.model, remote.tokenizer, encode_prompt(bundled.tokenizer, "Once upon a time"), 8, seed=5)
    list(trace.run(SETTINGS))
    before = len(fake.requests)
    trace.back()
    record = trace.step(SamplingSettings(temperature=0))
    assert record.reused_forward and len(fake.requests) == before
    assert [s.returned for s in trace.server_steps] == [remote.model.vocab_size] * len(trace.records)


def test_a_tokenizer_that_differs_from_the_servers_is_refused(bundled, monkeypatch):
    server = FakeLlamaServer(bundled)
    try:
        monkeypatch.setattr("inference.engines.client.EngineClient.tokenize", lambda self, text, add_special=False: [1])
        with pytest.raises(TokenizerMismatch):
            connect(server.url)
    finally:
        server.stop()


def test_the_kv_cache_of_a_remote_model_is_not_readable_here(remote, bundled):
    trace = new_trace(remote.model, remote.tokenizer, encode_prompt(bundled.tokenizer, "Once"), 2)
    with pytest.raises(EngineError):
        trace.cache_layer_bytes()


def test_a_complete_step_says_where_its_time_went_from_the_servers_own_timing(remote):
    """The page runs slower than the engine's own rate: the note splits a step into the server's pass and the
    rest (the whole vocabulary as JSON), from that step's figures; vLLM times nothing per request, so no split."""
    vocab = remote.model.vocab_size
    timed = ServerStep(vocab, 1.0, True, server_ms=33.2, round_trip_ms=161.8, evaluated_tokens=1, cached_tokens=50)
    kind, text = distribution_note(remote.model, timed)[0], step_timing_note(timed)
    assert kind == "exact" and "forward pass took 33 ms of a 162 ms round trip; the other 129 ms" in text
    untimed = ServerStep(vocab, 1.0, True, server_ms=None, round_trip_ms=161.8, evaluated_tokens=1, cached_tokens=50)
    assert "round trip" not in step_timing_note(untimed)
