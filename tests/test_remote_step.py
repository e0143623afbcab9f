"""The remote Step on a stand-in llama.cpp server (tests/fake_engine.py) whose distributions come from the bundled
model: the same records as the local engine, truncation made visible, a bad answer or a stopped server keeps the run."""

import pytest
import torch

from inference.core.forward import ServerStep
from inference.core.loader import encode_prompt
from inference.core.remote import RemoteForward, connect, distribution_note, is_remote, logits_note, step_timing_note
from inference.core.run import new_trace
from inference.engines.client import EngineError
from inference.sampling.pipeline import SamplingSettings
from tests.fake_engine import FakeLlamaServer

pytestmark = pytest.mark.unit

# every stage, DRY's history and XTC's own uniform included
SETTINGS = SamplingSettings(
    temperature=0.9, top_k=40, top_p=0.95, min_p=0.01, dry_multiplier=0.8, xtc_probability=0.5, xtc_threshold=0.1
)


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


def a_trace(loaded, bundled, steps: int = 5, prompt: str = "Once upon a time", **kwargs):
    return new_trace(loaded.model, loaded.tokenizer, encode_prompt(bundled.tokenizer, prompt), steps, **kwargs)


def test_remote_steps_equal_local_steps_with_the_same_seed_and_send_the_whole_text(remote, bundled, fake):
    """Connect pairs a matching tokenizer; whole-vocabulary answers, our pipeline and the recorded u give the same
    tokens, u and probabilities; each request sends the whole text and asks for the prompt cache."""
    assert is_remote(remote) and remote.model.exact and remote.info.vocab_size == bundled.info.vocab_size
    assert remote.info.context == bundled.info.context and remote.info.source == "engine"
    ids = encode_prompt(bundled.tokenizer, "The little dog wanted to")
    local = new_trace(bundled.model, bundled.tokenizer, ids, 12, seed=11, stop_at_eos=False)
    far = new_trace(remote.model, remote.tokenizer, ids, 12, seed=11, stop_at_eos=False)
    assert isinstance(far.forward, RemoteForward)
    before = len(fake.requests)
    ours, theirs = list(local.run(SETTINGS)), list(far.run(SETTINGS))
    assert [(r.token_id, r.u, r.xtc_u) for r in theirs] == [(r.token_id, r.u, r.xtc_u) for r in ours]
    assert ours[0].xtc_u is not None and max(abs(a.prob - b.prob) for a, b in zip(ours, theirs)) < 1e-5
    assert len(far.server_steps) == 12 and all(s.complete for s in far.server_steps)
    sent = [payload for path, payload in fake.requests[before:] if path == "/completion"]
    assert [p["prompt"] for p in sent] == [ids + far.generated_ids[:n] for n in range(12)]
    assert all(p["cache_prompt"] and p["n_probs"] == remote.model.vocab_size for p in sent)
    with pytest.raises(EngineError):  # the KV cache lives in the server
        far.cache_layer_bytes()


def test_rewind_and_back_reuse_the_stored_distribution(remote, bundled, fake):
    trace = a_trace(remote, bundled, 4, seed=5)
    list(trace.run(SETTINGS))
    before = len(fake.requests)
    trace.back()
    record = trace.step(SamplingSettings(temperature=0))
    assert record.reused_forward and len(fake.requests) == before
    assert [s.returned for s in trace.server_steps] == [remote.model.vocab_size] * len(trace.records)


def test_a_truncating_server_leaves_the_rest_undrawable_and_no_caption_says_exact(bundled):
    server = FakeLlamaServer(bundled, n_probs_cap=50)
    try:
        loaded = connect(server.url, n_probs=50)
        trace = a_trace(loaded, bundled)
        records, step = list(trace.run(SamplingSettings(temperature=1.5))), trace.server_steps[0]
        assert all(torch.isfinite(r.logits).sum() == 50 for r in records)
        assert not step.complete and step.returned == 50 and 0 < step.returned_mass < 1
        notes = [distribution_note(loaded.model, step), logits_note(loaded.model, records[0].logits)]
        notes.append(distribution_note(loaded.model, None))
        assert all(kind == "measured" for kind, _ in notes) and "other, not returned by the server" in notes[0][1]
        loaded.model.client.close()
    finally:
        server.stop()


def with_last_id(new_id):
    def tamper(answer: dict) -> dict:
        top = answer["completion_probabilities"][0]["top_logprobs"]
        top[-1]["id"] = new_id(top[0]["id"])
        return answer

    return {"/completion": tamper}


@pytest.mark.parametrize(
    "server_args, words",
    [
        (dict(n_probs_cap=50), "returned 50 token probabilities"),  # the app asks for the whole vocabulary
        (dict(tamper=with_last_id(lambda first: first)), "more than once in one distribution"),
        ({}, "Cannot connect"),  # the server stops after two steps
    ],
    ids=["too few", "an id twice", "stopped"],
)
def test_a_bad_answer_or_a_stopped_server_fails_the_step_in_one_sentence_and_keeps_the_run(bundled, server_args, words):
    server = FakeLlamaServer(bundled, **server_args)
    try:
        loaded = connect(server.url, timeout=5)
        trace = a_trace(loaded, bundled, 10, seed=2)
        if not server_args:
            list(trace.run(SETTINGS, max_steps=2))
            server.stop()
        with pytest.raises(EngineError) as err:
            trace.step(SETTINGS)
        assert words in str(err.value) and len(trace.records) == (0 if server_args else 2) and not trace.finished
        loaded.model.client.close()
    finally:
        server.stop()


@pytest.mark.parametrize(
    "models, words",
    [(None, "serves another model"), ({"data": [{"id": "x", "owned_by": "openai"}]}, "neither llama.cpp's nor vLLM's")],
    ids=["another tokenizer", "another server"],
)
def test_connect_refuses_a_server_it_cannot_pair_in_one_sentence(bundled, models, words):
    tamper = {"/tokenize": lambda answer: {"tokens": [1]}} if models is None else {"/v1/models": lambda _: models}
    server = FakeLlamaServer(bundled, tamper=tamper)
    try:
        with pytest.raises(EngineError) as err:
            connect(server.url)
        assert words in str(err.value)
    finally:
        server.stop()


def test_a_complete_step_says_where_its_time_went_from_the_servers_own_timing(remote):
    """The note splits a step into the server's pass and the rest; vLLM times nothing per request: no split there."""
    vocab = remote.model.vocab_size
    timed = ServerStep(vocab, 1.0, True, server_ms=33.2, round_trip_ms=161.8, evaluated_tokens=1, cached_tokens=50)
    assert distribution_note(remote.model, timed)[0] == "exact"
    assert "forward pass took 33 ms of a 162 ms round trip; the other 129 ms" in step_timing_note(timed)
    assert step_timing_note(ServerStep(vocab, 1.0, True, None, 161.8, 1, 50)) == ""
