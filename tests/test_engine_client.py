"""The engine client parses every answer, trusts no token id, and turns every failure into one `EngineError` sentence
(answers from httpx's MockTransport, a socket that never answers, or a closed port)."""

import json
import math
import socket
import threading

import httpx
import pytest

from inference.engines import client as client_module
from inference.engines.client import LLAMACPP, VLLM, EngineClient, EngineError

pytestmark = pytest.mark.unit


def client_answering(handler, dialect=LLAMACPP, **kwargs) -> EngineClient:
    """A client whose every request is answered by `handler(request)`; a dict or list is sent as JSON."""

    def answer(request):
        out = handler(request)
        return out if isinstance(out, httpx.Response) else httpx.Response(200, json=out)

    return EngineClient("http://engine.test:8080", dialect=dialect, transport=httpx.MockTransport(answer), **kwargs)


def completion_with(top: list[tuple[int, float]]) -> dict:
    items = [{"id": i, "token": "t", "logprob": lp} for i, lp in top]
    return {
        "completion_probabilities": [{"id": top[0][0], "logprob": top[0][1], "top_logprobs": items}],
        "timings": {"cache_n": 3, "prompt_n": 1, "prompt_ms": 0.5, "predicted_n": 1, "predicted_ms": 0.001},
    }


def one_sentence(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert isinstance(err.value, EngineError) and text.endswith((".", "?")) and "\n" not in text, text
    return text


def test_a_whole_vocabulary_answer_is_an_exact_distribution_and_the_request_is_greedy_with_the_prompt_cache():
    probs, sent = [0.5, 0.2, 0.1, 0.1, 0.05, 0.03, 0.015, 0.005], []

    def handler(request):
        sent.append(json.loads(request.content))
        if sent[-1]["n_predict"] == 1:
            return completion_with([(i, math.log(p)) for i, p in enumerate(probs)][::-1])  # any order on the wire
        return {"tokens": [1, 2], "content": "ab", "stop_type": "limit", "timings": {}}

    client = client_answering(handler)
    dist = client.next_token([0, 5, 7], n_probs=100, vocab_size=8)
    assert dist.complete and abs(dist.returned_mass - 1) < 1e-12
    assert dist.logits().softmax(-1).tolist() == pytest.approx(probs, abs=1e-7)
    assert (dist.timings.prompt_tokens, dist.timings.cached_tokens, dist.timings.prompt_ms) == (1, 3, 0.5)
    assert client.complete([0], 2).token_ids == [1, 2]
    assert (sent[0]["prompt"], sent[0]["n_probs"], sent[0]["cache_prompt"]) == ([0, 5, 7], 8, True)
    # llama-server appends a random draw to every sampler chain: an empty one would sample at T = 1
    assert [(p["samplers"], p["temperature"]) for p in sent] == [(["temperature"], 0)] * 2


def tampered(last_id) -> dict:
    return completion_with([(0, -0.1), (1, -2.4), (last_id, -3.0)])


@pytest.mark.parametrize(
    "answer, n_probs, words",
    [
        (completion_with([(0, -0.1), (1, -2.4)]), 8, "returned 2 token probabilities from /completion, 8 were asked"),
        (tampered(-3), 3, "http://engine.test:8080/completion names token id -3, outside the 8-token vocabulary"),
        (tampered(8), 3, "names token id 8, outside"),
        (tampered(1), 3, "names a token id more than once in one distribution"),
        (httpx.Response(200, content=b"<html>busy</html>"), 8, "is not JSON"),
        ([1, 2], 8, "no completion_probabilities"),
        ({"completion_probabilities": [{"top_logprobs": [{"id": "seven", "logprob": -1}]}]}, 8, "no token ids"),
        (httpx.Response(400, json={"error": {"message": "invalid token id 99999"}}), 8, "HTTP 400: invalid token id"),
        (httpx.Response(200, content=b"x" * 5000), 8, "is larger than"),  # the cap is 1000 bytes here
    ],
    ids=["too few", "negative id", "id beyond", "id twice", "html", "a list", "id text", "http", "too large"],
)
def test_a_bad_answer_is_refused_in_one_sentence(answer, n_probs, words, monkeypatch):
    monkeypatch.setattr(client_module, "MAX_RESPONSE_BYTES", 1000)
    with pytest.raises(EngineError) as err:
        client_answering(lambda request: answer).next_token([0], n_probs=n_probs, vocab_size=8)
    assert words in one_sentence(err)


def test_a_refused_connection_and_a_server_that_never_answers_are_one_sentence_each():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(EngineError) as err:
        EngineClient(f"http://127.0.0.1:{port}", dialect=LLAMACPP, timeout=2).next_token([0], 8, 8)
    assert "Cannot connect" in one_sentence(err) and err.value.status is None
    with socket.socket() as listener:  # accepted, held open, never answered
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        accepted = []  # kept, so the connection stays open
        threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True).start()
        silent = EngineClient(f"http://127.0.0.1:{listener.getsockname()[1]}", dialect=LLAMACPP, timeout=0.5)
        with pytest.raises(EngineError) as err:
            silent.next_token([0], 8, 8)
    assert "did not answer /completion within 0.5 s" in one_sentence(err)


def test_making_a_client_sends_nothing_and_the_dialect_is_read_from_v1_models_once():
    sent = []

    def handler(request):
        sent.append(request.url.path)
        return {"data": [{"id": "Qwen/Qwen2.5-0.5B", "owned_by": "vllm", "max_model_len": 32768}]}

    vllm = client_answering(handler, dialect=None)
    assert sent == []
    assert vllm.dialect == VLLM and vllm.served_model().context == 32768 and sent == ["/v1/models"]
    llama_models = {"data": [{"id": "m.gguf", "owned_by": "llamacpp", "meta": {"n_vocab": 8, "n_ctx_train": 512}}]}
    llama = client_answering(lambda request: llama_models, dialect=None)
    assert llama.dialect == LLAMACPP and llama.served_model().vocab_size == 8
    neither = client_answering(lambda request: {"data": [{"id": "x", "owned_by": "openai"}]}, dialect=None)
    with pytest.raises(EngineError) as err:
        neither.served_model()
    assert "neither llama.cpp's nor vLLM's" in one_sentence(err)


def test_vllm_tokens_are_read_by_id_sorted_and_a_negative_one_is_refused():
    def answer(top: dict) -> dict:
        return {"choices": [{"text": "a", "logprobs": {"top_logprobs": [top]}}], "usage": {"prompt_tokens": 3}}

    seen = {}

    def handler(request):
        seen.update(json.loads(request.content))
        return answer({"token_id:4": -0.5, "token_id:2": -1.5, "token_id:7": -0.2})

    dist = client_answering(handler, dialect=VLLM, model="m").next_token([0, 1, 2], n_probs=3, vocab_size=50)
    assert dist.token_ids.tolist() == [7, 4, 2] and not dist.complete
    assert (seen["logprobs"], seen["return_tokens_as_token_ids"], seen["prompt"]) == (3, True, [0, 1, 2])
    negative = client_answering(lambda r: answer({"token_id:4": -0.5, "token_id:-5": -1.5}), dialect=VLLM, model="m")
    with pytest.raises(EngineError) as err:
        negative.next_token([0, 1, 2], n_probs=2, vocab_size=50)
    assert "http://engine.test:8080/v1/completions names token id -5" in one_sentence(err)


def test_a_stream_keeps_each_tokens_arrival_including_one_held_back_mid_character():
    """llama-server holds back a token that ends part-way through a UTF-8 character: it arrives, without its id,
    with the next event, whose `tokens_predicted` counts it."""
    events = [
        {"content": "a", "tokens": [5], "tokens_predicted": 1},
        {"content": "é", "tokens": [7], "tokens_predicted": 3},
        {"content": "", "tokens": [], "stop": True, "stop_type": "limit", "timings": {"predicted_n": 3}},
    ]
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
    done = client_answering(lambda request: httpx.Response(200, content=body)).complete([0], 3, stream=True)
    assert (done.token_ids, done.text, len(done.arrival_ms), done.stop_reason) == ([5, 7], "aé", 3, "limit")
    assert done.timings.predicted_tokens == 3
    failing = b'data: {"error": {"message": "slot died"}}\n\n'
    with pytest.raises(EngineError) as err:
        client_answering(lambda request: httpx.Response(200, content=failing)).complete([0], 3, stream=True)
    assert "stopped streaming /completion with an error: slot died." in one_sentence(err)


def test_prometheus_metrics_are_parsed_to_numbers():
    text = "# HELP x\nllamacpp:tokens_predicted_total 42\nllamacpp:requests_processing 1\nbroken line here\n"
    client = client_answering(lambda request: httpx.Response(200, text=text))
    assert client.metrics() == {"llamacpp:tokens_predicted_total": 42.0, "llamacpp:requests_processing": 1.0}


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://x", "localhost:8080", "http://", "http://a:1/?q=1", "http://user:pw@host:1"]
)
def test_only_plain_http_engine_addresses_are_accepted(url):
    with pytest.raises(EngineError):
        EngineClient(url)
