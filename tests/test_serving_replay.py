"""The replay against a streaming stand-in for llama-server (the bundled model decoding greedily in this process):
overlapping streams are recorded whole, token by token, and cancelling keeps what finished."""

import threading

import pytest

from inference.engines.client import LLAMACPP
from inference.lessons.serving.experiments import greedy_equals_solo
from inference.lessons.serving.replay import EngineTarget, replay
from inference.lessons.serving.request_trace import poisson_trace
from tests.fake_engine import StreamingStandIn

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def standin(bundled):
    server = StreamingStandIn(bundled)
    yield server, EngineTarget(server.url, LLAMACPP, "stand-in", None)
    server.stop()


def test_overlapping_streams_are_recorded_whole_and_equal_their_solo_runs(standin, bundled):
    """6 requests arriving within milliseconds: each reply has every asked token, timestamps in order after its
    send, text equal to the tokenizer's decoding of its ids, ids equal to the same request run alone."""
    server, target = standin
    trace = poisson_trace("short chat", rate_per_s=500.0, requests=6, seed=4, vocab_size=4096)
    result = replay(trace, target, poll_interval_s=0.02)
    assert len(result.records) == 6 and not result.cancelled
    for record, request in zip(result.records, trace.requests):
        assert record.error is None and record.complete
        assert len(record.token_ids) == request.reply_tokens
        assert record.sent_s >= request.arrival_s
        assert list(record.token_times_s) == sorted(record.token_times_s) and record.token_times_s[0] > record.sent_s
        assert record.text == bundled.tokenizer.decode(list(record.token_ids))
        assert record.server_prompt_ms is not None and record.waiting_s is not None
    assert greedy_equals_solo(result) == []
    assert result.engine_states["running"].max() >= 2  # the stand-in really had several streams open at once
    assert result.summary().throughput_tokens_per_s > 0


def test_cancelling_closes_streams_in_flight_and_keeps_none_half_recorded(bundled):
    """A stop while three replies are mid-stream (the stand-in holds each after its first token): all three are
    recorded as cancelled, none as complete, and the server answers the next replay."""
    hold = threading.Event()
    server = StreamingStandIn(bundled, hold=hold)
    target = EngineTarget(server.url, LLAMACPP, "stand-in", None)
    try:
        trace = poisson_trace("long document", rate_per_s=1000.0, requests=3, seed=0, vocab_size=4096)
        result = replay(trace, target, should_stop=lambda: len(server.active) == 3)
        assert result.cancelled and len(result.records) == 3
        assert all(r.error == "cancelled" and not r.complete for r in result.records)
        hold.set()
        again = replay(poisson_trace("short chat", 1.0, 1, seed=0, vocab_size=4096), target)
        assert again.records[0].complete
    finally:
        hold.set()
        server.stop()
