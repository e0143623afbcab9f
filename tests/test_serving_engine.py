"""Serving against the real llama-server (built by `python -m inference.engines llamacpp build`; skipped without it)."""

import pytest

from inference.engines import llamacpp
from inference.engines.client import LLAMACPP, EngineClient
from inference.lessons.serving.experiments import (
    BATCH_REPLY_TOKENS,
    decode_at_batch,
    greedy_equals_solo,
    model_on_engine,
)
from inference.lessons.serving.random_model import DEFAULT_PUBLIC_MODEL
from inference.lessons.serving.replay import EngineTarget, replay
from inference.lessons.serving.request_trace import SHAPES, Request, Trace, poisson_trace
from inference.lessons.serving.stats import RequestRecord
from inference.lessons.serving.text import incomplete_batch_sentence

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(
        not llamacpp.is_built(), reason="llama-server is not built: run python -m inference.engines llamacpp build"
    ),
]
SLOTS = 4


@pytest.fixture(scope="module")
def engine():
    """The bundled model on a llama-server with 4 batched slots, on a free loopback port, stopped afterwards."""
    with llamacpp.serve(None, parallel=SLOTS) as server:
        yield EngineTarget(server.url, LLAMACPP, "bundled", SLOTS)


def test_replayed_requests_are_complete_and_greedy_equals_their_solo_runs(engine):
    """8 requests arriving together into 4 slots: every reply has all its tokens, its streamed text is the
    server's detokenization of those tokens, and each equals the same request run alone."""
    trace = poisson_trace("short chat", rate_per_s=200.0, requests=8, seed=3, vocab_size=4096)
    result = replay(trace, engine)
    assert not result.cancelled and len(result.records) == 8
    with EngineClient(engine.url, dialect=LLAMACPP) as client:
        for record, request in zip(result.records, trace.requests):
            assert record.error is None and record.complete, record.error
            assert len(record.token_ids) == request.reply_tokens
            assert record.text == client.detokenize(list(record.token_ids))
            assert record.server_prompt_ms is not None and record.ttft_s > 0
        busy_per_pass = client.metrics()["llamacpp:n_busy_slots_per_decode"]
    assert greedy_equals_solo(result) == []
    assert busy_per_pass > 1  # the burst really shared decode passes
    assert len(result.engine_states) >= 1 and result.poller_error is None


def test_cancelled_replay_keeps_what_arrived_and_leaves_the_engine_healthy(engine):
    """Stopping after the first check: unsent requests are dropped, streams closed, the engine still answers."""
    trace = poisson_trace("short chat", rate_per_s=2.0, requests=6, seed=1, vocab_size=4096)
    checks = []

    def stop_soon():
        checks.append(1)
        return len(checks) > 3

    result = replay(trace, engine, should_stop=stop_soon)
    assert result.cancelled and len(result.records) < 6
    with EngineClient(engine.url, dialect=LLAMACPP) as client:
        assert client.health()


def test_eight_requests_at_once_on_random_weights_record_every_token():
    """SmolLM2-135M's shape with random weights (its greedy text is full of byte tokens that end mid-way through
    a UTF-8 character, which llama-server holds back from the stream): 8 requests sent at once into 8 slots, every
    request records an arrival for each of its tokens, and decode at batch 8 is measured (it raised before)."""
    model = model_on_engine(DEFAULT_PUBLIC_MODEL)
    with llamacpp.serve(model.gguf, parallel=8) as server:
        target = EngineTarget(server.url, LLAMACPP, model.label, 8)
        requests = tuple(Request(i, 0.0, (0, *range(100 + 15 * i, 115 + 15 * i)), BATCH_REPLY_TOKENS) for i in range(8))
        trace = Trace(shape=SHAPES["short chat"], rate_per_s=float("inf"), seed=0, requests=requests)
        result = replay(trace, target)
        assert len(result.records) == 8
        for record in result.records:
            assert record.error is None and record.complete, (record.index, record.tokens, record.error)
            assert list(record.token_times_s) == sorted(record.token_times_s)
        assert decode_at_batch(target, 8).tokens_per_s > 0


def test_a_batch_that_did_not_complete_names_the_failing_request():
    records = [
        RequestRecord(0, 0.0, (0.1, 0.2), asked_tokens=2),
        RequestRecord(1, 0.0, (0.1,), asked_tokens=2),
        RequestRecord(2, 0.0, (), asked_tokens=2, error="The engine at x broke off."),
    ]
    sentence = incomplete_batch_sentence(records, 3)
    assert sentence == (
        "Only 1 of 3 requests sent together completed: request 2 failed (it received 1 of its 2 tokens)."
    )
