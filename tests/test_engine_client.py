"""The engine client turns every failure into one sentence and parses answers defensively (no server needed:
answers come from httpx's MockTransport, a listening socket that never answers, or a closed port)."""

import json
import socket
import threading

import httpx
import pytest

from inference.core.limits import Limits
from inference.engines.client import (
    LLAMACPP,
    VLLM,
    EngineClient,
    EngineError,
    EngineHTTPError,
    EngineResponseError,
    EngineTimeout,
    EngineUnreachable,
    IncompleteDistribution,
    TokenizerMismatch,
    check_base_url,
)

pytestmark = pytest.mark.unit

LLAMA_MODELS = {
    "object": "list",
    "data": [
        {
            "id": "/cache/model-f32.gguf",
            "object": "model",
            "owned_by": "llamacpp",
            "meta": {"n_vocab": 8, "n_ctx_train": 512, "n_params": 1000, "size": 4000},
        }
    ],
}


def client_answering(handler, dialect=LLAMACPP, **kwargs) -> EngineClient:
    return EngineClient("http://engine.test:8080", dialect=dialect, transport=httpx.MockTransport(handler), **kwargs)


def completion_with(top: list[tuple[int, float]]) -> dict:
    return {
        "content": "x",
        "completion_probabilities": [
            {
                "id": top[0][0],
                "logprob": top[0][1],
                "top_logprobs": [{"id": i, "token": "t", "bytes": [116], "logprob": lp} for i, lp in top],
            }
        ],
        "timings": {"cache_n": 3, "prompt_n": 1, "prompt_ms": 0.5, "predicted_n": 1, "predicted_ms": 0.001},
    }


def assert_one_sentence(err: Exception) -> None:
    text = str(err)
    assert text.endswith((".", "?")) and "\n" not in text and "Traceback" not in text, text


def test_a_whole_vocabulary_answer_becomes_an_exact_distribution_and_its_logits():
    """n_probs = vocab: complete, nothing left over; logits put each log-probability at its id."""
    import math

    probs = [0.5, 0.2, 0.1, 0.1, 0.05, 0.03, 0.015, 0.005]
    top = [(i, math.log(p)) for i, p in enumerate(probs)][::-1]  # any order on the wire
    client = client_answering(lambda request: httpx.Response(200, json=completion_with(top)))
    dist = client.next_token([0, 1, 2], n_probs=8, vocab_size=8)
    assert dist.complete and dist.other_mass == 0 and abs(dist.returned_mass - 1) < 1e-12
    assert dist.logits().softmax(-1).tolist() == pytest.approx(probs, abs=1e-7)
    assert (dist.timings.prompt_tokens, dist.timings.cached_tokens, dist.timings.prompt_ms) == (1, 3, 0.5)


def test_the_request_sends_token_ids_the_probabilities_asked_and_the_prompt_cache():
    seen = {}

    def handler(request):
        seen.update(json.loads(request.content))
        return httpx.Response(200, json=completion_with([(i, -2.0794) for i in range(8)]))

    client_answering(handler).next_token([0, 5, 7], n_probs=100, vocab_size=8)
    assert seen["prompt"] == [0, 5, 7] and seen["n_probs"] == 8 and seen["cache_prompt"] is True
    assert seen["n_predict"] == 1


def test_a_truncated_answer_keeps_the_other_mass_and_leaves_the_rest_undrawable():
    """Top 2 of 8 asked for: complete is False, the rest of the mass is reported, the rest of the logits are -inf."""
    import math

    client = client_answering(
        lambda request: httpx.Response(200, json=completion_with([(3, math.log(0.6)), (1, math.log(0.3))]))
    )
    dist = client.next_token([0], n_probs=2, vocab_size=8)
    assert not dist.complete and dist.other_mass == pytest.approx(0.1)
    logits = dist.logits()
    assert logits.isfinite().nonzero().flatten().tolist() == [1, 3]


def test_fewer_probabilities_than_asked_is_an_error_sentence():
    client = client_answering(lambda request: httpx.Response(200, json=completion_with([(0, -0.1), (1, -2.4)])))
    with pytest.raises(IncompleteDistribution) as err:
        client.next_token([0], n_probs=8, vocab_size=8)
    assert "returned 2 token probabilities" in str(err.value) and "8 were asked for" in str(err.value)
    assert_one_sentence(err.value)


@pytest.mark.parametrize(
    "body, message",
    [
        (b"<html>busy</html>", "not JSON"),
        (json.dumps({"content": "x"}).encode(), "no completion_probabilities"),
        (
            json.dumps({"completion_probabilities": [{"top_logprobs": [{"id": "seven", "logprob": -1}]}]}).encode(),
            "no number in 'id'",
        ),
        (json.dumps([1, 2]).encode(), "no completion_probabilities"),
    ],
)
def test_malformed_answers_are_refused_with_a_sentence(body, message):
    client = client_answering(lambda request: httpx.Response(200, content=body))
    with pytest.raises(EngineResponseError) as err:
        client.next_token([0], n_probs=8, vocab_size=8)
    assert message in str(err.value)
    assert_one_sentence(err.value)


def test_an_answer_over_the_size_cap_is_not_read():
    client = client_answering(lambda request: httpx.Response(200, content=b"x" * 5000), max_response_bytes=1000)
    with pytest.raises(EngineResponseError) as err:
        client.next_token([0], n_probs=8, vocab_size=8)
    assert "larger than" in str(err.value)


def test_http_errors_carry_the_servers_own_message():
    body = {"error": {"code": 400, "message": "invalid token id 99999", "type": "invalid_request_error"}}
    client = client_answering(lambda request: httpx.Response(400, json=body))
    with pytest.raises(EngineHTTPError) as err:
        client.next_token([99999], n_probs=8, vocab_size=8)
    assert "HTTP 400" in str(err.value) and "invalid token id 99999" in str(err.value)
    assert_one_sentence(err.value)


def test_a_refused_connection_is_one_sentence():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(EngineUnreachable) as err:
        EngineClient(f"http://127.0.0.1:{port}", dialect=LLAMACPP, timeout=2).next_token([0], 8, 8)
    assert "Cannot connect" in str(err.value)
    assert_one_sentence(err.value)


def test_a_server_that_never_answers_times_out_with_a_sentence():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted = []
    thread = threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True)
    thread.start()
    try:
        with pytest.raises(EngineTimeout) as err:
            EngineClient(f"http://127.0.0.1:{listener.getsockname()[1]}", dialect=LLAMACPP, timeout=0.5).next_token(
                [0], 8, 8
            )
        assert "did not answer /completion within 0.5 s" in str(err.value)
    finally:
        listener.close()
        for conn, _ in accepted:
            conn.close()


def test_the_dialect_is_read_from_v1_models():
    llama = client_answering(lambda request: httpx.Response(200, json=LLAMA_MODELS), dialect=None)
    assert llama.dialect == LLAMACPP and llama.served_model().vocab_size == 8
    vllm_models = {"data": [{"id": "Qwen/Qwen2.5-0.5B", "owned_by": "vllm", "max_model_len": 32768}]}
    vllm = client_answering(lambda request: httpx.Response(200, json=vllm_models), dialect=None)
    assert vllm.dialect == VLLM and vllm.served_model().context == 32768
    neither = client_answering(
        lambda request: httpx.Response(200, json={"data": [{"id": "x", "owned_by": "openai"}]}), dialect=None
    )
    with pytest.raises(EngineError):
        neither.served_model()


def test_vllm_top_logprobs_are_read_by_token_id_and_sorted():
    answer = {
        "choices": [
            {
                "text": "a",
                "logprobs": {
                    "tokens": ["token_id:4"],
                    "top_logprobs": [{"token_id:4": -0.5, "token_id:2": -1.5, "token_id:7": -0.2}],
                },
            }
        ],
        "usage": {"prompt_tokens": 3},
    }
    seen = {}

    def handler(request):
        seen.update(json.loads(request.content))
        return httpx.Response(200, json=answer)

    dist = client_answering(handler, dialect=VLLM, model="m").next_token([0, 1, 2], n_probs=3, vocab_size=50)
    assert dist.token_ids.tolist() == [7, 4, 2] and not dist.complete
    assert seen["logprobs"] == 3 and seen["return_tokens_as_token_ids"] is True and seen["prompt"] == [0, 1, 2]


def test_a_tokenizer_mismatch_is_named(bundled):
    client = client_answering(lambda request: httpx.Response(200, json={"tokens": [1, 2, 3]}))
    with pytest.raises(TokenizerMismatch) as err:
        client.check_tokenizer(bundled.tokenizer)
    assert "serves another model" in str(err.value)
    assert_one_sentence(err.value)


def test_prometheus_metrics_are_parsed_to_numbers():
    text = "# HELP x\nllamacpp:tokens_predicted_total 42\nllamacpp:requests_processing 1\nbroken line here\n"
    client = client_answering(lambda request: httpx.Response(200, text=text))
    assert client.metrics() == {"llamacpp:tokens_predicted_total": 42.0, "llamacpp:requests_processing": 1.0}


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://x", "localhost:8080", "http://", "http://a:1/?q=1", "http://user:pw@host:1"]
)
def test_only_plain_http_engine_addresses_are_accepted(url):
    with pytest.raises(EngineError):
        check_base_url(url)


def test_engines_a_server_offers_come_from_the_environment_only():
    limits = Limits.from_env({"INFERENCE_LAB_ENGINES": "llama.cpp=http://127.0.0.1:8080, gpu=http://10.0.0.5:8000"})
    assert limits.engine_urls() == {"llama.cpp": "http://127.0.0.1:8080", "gpu": "http://10.0.0.5:8000"}
    assert Limits().engine_urls() == {}


def test_llamacpp_requests_never_send_an_empty_sampler_chain():
    """llama-server appends a random draw to every chain: an empty one would sample at T = 1, not greedily."""
    sent = []

    def handler(request):
        sent.append(json.loads(request.content))
        if len(sent) == 1:
            return httpx.Response(200, json=completion_with([(i, -2.0794) for i in range(8)]))
        return httpx.Response(200, json={"tokens": [1, 2], "content": "ab", "timings": {}})

    client = client_answering(handler)
    client.next_token([0], 8, 8)
    client.complete([0], 2)
    assert [p["samplers"] for p in sent] == [["temperature"], ["temperature"]]
    assert all(p["temperature"] == 0 for p in sent)
