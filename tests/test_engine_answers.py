"""A serving engine's answers are never trusted as indices: a stand-in llama.cpp server (tests/fake_engine.py) sends
a negative token id, one beyond the vocabulary, or one id twice, and the remote Step refuses each with one sentence
naming the endpoint, the run kept. Making a client sends nothing; a failed dialect detection closes what it opened;
a truncated distribution is not captioned as computed exactly."""

import httpx
import pytest

from inference.core.loader import encode_prompt
from inference.core.remote import connect, distribution_note, logits_note
from inference.core.run import new_trace
from inference.engines.client import VLLM, EngineClient, EngineError
from inference.sampling.pipeline import SamplingSettings
from tests.fake_engine import FakeLlamaServer

pytestmark = pytest.mark.unit

SETTINGS = SamplingSettings(temperature=0.9)


def with_last_id(new_id):
    """A /completion answer whose last returned token is named `new_id` (a function of the first one's id)."""

    def tamper(answer: dict) -> dict:
        top = answer["completion_probabilities"][0]["top_logprobs"]
        top[-1]["id"] = new_id(top[0]["id"], len(top))
        return answer

    return tamper


@pytest.mark.parametrize(
    "new_id, words",
    [
        (lambda first, n: -3, "names token id -3: ids are never negative"),
        (lambda first, n: n, "outside the model's"),
        (lambda first, n: first, "more than once in one distribution"),
    ],
    ids=["negative", "beyond the vocabulary", "duplicate"],
)
def test_a_bad_token_id_in_an_answer_is_refused_naming_the_endpoint_and_the_run_stays(bundled, new_id, words):
    """Before, a negative id landed in another row silently, an id >= vocabulary raised IndexError, and a
    duplicate counted toward the probabilities asked for."""
    server = FakeLlamaServer(bundled, tamper={"/completion": with_last_id(new_id)})
    try:
        loaded = connect(server.url)
        trace = new_trace(loaded.model, loaded.tokenizer, encode_prompt(bundled.tokenizer, "Once upon a time"), 4)
        with pytest.raises(EngineError) as err:
            trace.step(SETTINGS)
        text = str(err.value)
        assert words in text and f"{server.url}/completion" in text, text
        assert text.endswith(".") and "\n" not in text
        assert trace.records == [] and not trace.finished
        loaded.model.client.close()
    finally:
        server.stop()


def test_a_vllm_token_named_with_a_negative_id_is_refused():
    """vLLM names tokens "token_id:N"; "token_id:-5" was read as row -5 of the logits."""
    answer = {
        "choices": [{"text": "a", "logprobs": {"top_logprobs": [{"token_id:4": -0.5, "token_id:-5": -1.5}]}}],
        "usage": {"prompt_tokens": 3},
    }
    client = EngineClient(
        "http://engine.test:8000",
        dialect=VLLM,
        model="m",
        transport=httpx.MockTransport(lambda request: httpx.Response(200, json=answer)),
    )
    with pytest.raises(EngineError) as err:
        client.next_token([0, 1, 2], n_probs=2, vocab_size=50)
    assert "token id -5" in str(err.value) and "http://engine.test:8000/v1/completions" in str(err.value)


def test_making_a_client_sends_nothing_and_the_dialect_is_asked_at_first_use():
    sent = []

    def handler(request):
        sent.append(request.url.path)
        return httpx.Response(200, json={"data": [{"id": "m", "owned_by": "vllm", "max_model_len": 64}]})

    client = EngineClient("http://engine.test:8000", transport=httpx.MockTransport(handler))
    assert sent == []
    assert client.dialect == VLLM and sent == ["/v1/models"]


def test_a_failed_dialect_detection_closes_the_http_client_it_opened(bundled, monkeypatch):
    """A server that is neither llama.cpp nor vLLM: `connect` says so in one sentence and leaves no open client."""
    opened = []

    class Recorded(httpx.Client):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            opened.append(self)

    monkeypatch.setattr("inference.engines.client.httpx.Client", Recorded)
    server = FakeLlamaServer(
        bundled, tamper={"/v1/models": lambda answer: {"data": [{"id": "x", "owned_by": "openai"}]}}
    )
    try:
        with pytest.raises(EngineError) as err:
            connect(server.url)
        assert "neither llama.cpp's nor vLLM's" in str(err.value)
        assert len(opened) == 1 and opened[0].is_closed
    finally:
        server.stop()


def test_a_truncated_remote_distribution_is_not_captioned_computed_exactly(bundled):
    server = FakeLlamaServer(bundled, n_probs_cap=50)
    try:
        loaded = connect(server.url, n_probs=50)
        trace = new_trace(loaded.model, loaded.tokenizer, encode_prompt(bundled.tokenizer, "Once upon a time"), 2)
        record = trace.step(SETTINGS)
        for kind, text in (
            distribution_note(loaded.model, trace.server_steps[0]),
            logits_note(loaded.model, record.logits),
            distribution_note(loaded.model, None),
        ):
            assert kind != "exact", text
        loaded.model.client.close()
    finally:
        server.stop()
