"""One HTTP client for OpenAI-compatible serving engines: one transport and the two dialects the pages need.

`EngineClient` sends every request through one `HttpTransport` (httpx, size-capped reads, one sentence per
failure) and asks its dialect what to send and how to read the answer:

- `LlamaCppDialect`, llama.cpp's `llama-server`: `/completion` with `n_probs` and token-id prompts (the whole vocabulary
  can come back), `/tokenize`, `/detokenize`, `timings` in every answer, `/metrics`, `/slots`.
- `VllmDialect`, vLLM: `/v1/completions` with `logprobs` (top N only, 20 unless the server raised `--max-logprobs`) and
  `prompt_logprobs`, `/tokenize`, `/detokenize`, `/metrics`.

Every failure is an `EngineError` whose message is one sentence a page can show as it is: the server
refused the connection, did not answer in time, answered 4xx/5xx, sent something too large or not shaped
like its dialect, named a token outside the vocabulary (or one token twice), returned fewer probabilities
than asked, or tokenizes differently from the app. Responses are read with a size cap and parsed
defensively (never trusted to have a field, nor its token ids to be indices). Making a client sends
nothing: the dialect, when not given, is asked of the server (`/v1/models`) at the first request.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx
import torch

LLAMACPP = "llama.cpp"
VLLM = "vLLM"
DIALECTS = (LLAMACPP, VLLM)
DEFAULT_TIMEOUT_S = 30.0
# A whole-vocabulary answer for a 4k vocabulary is ~350 KB; a 150k one would be ~13 MB.
MAX_RESPONSE_BYTES = 32 * 2**20
# Ask for the whole distribution only up to this vocabulary: beyond it the answer grows past a few MB
# per step, and the top tokens hold all but a sliver of the mass anyway.
FULL_VOCABULARY_LIMIT = 32_768
TOP_N_FALLBACK = 1_000
VLLM_DEFAULT_MAX_LOGPROBS = 20  # vLLM refuses more unless started with --max-logprobs
# llama-server's sampler chain for our requests: temperature 0 keeps only the most likely token. Never an empty
# list: the server always appends a random draw from the distribution, so an empty chain samples at T = 1.
GREEDY_CHAIN = ["temperature"]
TOKENIZER_PROBE = 'Once upon a time, a little robot said: "Hello, world!" 123'


class EngineError(Exception):
    """A serving engine could not do what was asked; the message is one sentence for the page."""


class EngineUnreachable(EngineError):
    """Connection refused, broken off, or the address does not resolve."""


class EngineTimeout(EngineError):
    """No answer within the timeout."""


class EngineHTTPError(EngineError):
    """The server answered with a 4xx or 5xx status."""


class EngineResponseError(EngineError):
    """The answer is too large, not JSON, or not shaped like this dialect's answers."""


class IncompleteDistribution(EngineError):
    """The server returned fewer token probabilities than were asked for."""


class TokenizerMismatch(EngineError):
    """The server's tokenizer gives other ids than the app's for the same text."""


def check_base_url(url: str) -> str:
    """An http(s) URL with a host and nothing after the path, without a trailing slash."""
    text = (url or "").strip().rstrip("/")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EngineError(f"'{text[:80]}' is not an engine address like http://127.0.0.1:8080.")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise EngineError(f"'{text[:80]}' has a query, fragment or password; give just scheme, host, port and path.")
    return text


@dataclass(frozen=True)
class ServerTimings:
    """The server's own timings of one request (llama.cpp's `timings`; vLLM reports none per request)."""

    prompt_tokens: int = 0  # tokens the server evaluated for the prompt (after its prompt cache)
    cached_tokens: int = 0  # prompt tokens it reused from its cache
    prompt_ms: float | None = None
    predicted_tokens: int = 0
    predicted_ms: float | None = None
    round_trip_ms: float = 0.0  # measured here: request sent to answer parsed

    @property
    def decode_tokens_per_s(self) -> float | None:
        if not self.predicted_ms or self.predicted_tokens < 1:
            return None
        return self.predicted_tokens / self.predicted_ms * 1000


@dataclass(frozen=True)
class NextTokenDistribution:
    """One next-token distribution as the server returned it, most likely first. Made only from ids that are
    indices of the vocabulary, each once: anything else raises `EngineResponseError` naming the endpoint."""

    token_ids: torch.Tensor  # [n] long
    logprobs: torch.Tensor  # [n] float64: log-softmax over the whole vocabulary, before any sampler
    vocab_size: int
    timings: ServerTimings
    chosen_by_server: int | None = None  # the token the server itself sampled (greedy here)
    endpoint: str = "the engine"  # where the answer came from, for the error sentences

    def __post_init__(self):
        if len(self.token_ids) == 0:
            return
        lowest, highest = int(self.token_ids.min()), int(self.token_ids.max())
        if lowest < 0:
            raise EngineResponseError(
                f"The engine's answer from {self.endpoint} names token id {lowest}: ids are never negative."
            )
        if highest >= self.vocab_size:
            raise EngineResponseError(
                f"The engine's answer from {self.endpoint} names token id {highest:,}, outside the model's "
                f"{self.vocab_size:,}-token vocabulary (ids 0 to {self.vocab_size - 1:,})."
            )
        distinct, counts = torch.unique(self.token_ids, return_counts=True)
        if len(distinct) < len(self.token_ids):
            raise EngineResponseError(
                f"The engine's answer from {self.endpoint} names token id {int(distinct[counts > 1][0]):,} "
                "more than once in one distribution."
            )

    @property
    def complete(self) -> bool:
        """Every token of the vocabulary came back, so the distribution is exact."""
        return len(self.token_ids) >= self.vocab_size

    @property
    def returned_mass(self) -> float:
        return float(self.logprobs.exp().sum())

    @property
    def other_mass(self) -> float:
        """Probability of the tokens the server did not return ("other, not returned by the server")."""
        return 0.0 if self.complete else max(0.0, 1.0 - self.returned_mass)

    def logits(self) -> torch.Tensor:
        """[vocab] float32 logits for the app's pipeline: the log-probabilities where returned, -inf
        elsewhere (each id was checked to be a row of the vocabulary, once). Complete: softmax of these is the
        server's distribution. Truncated: the pipeline (and the draw) can only see the returned tokens,
        renormalised over them."""
        out = torch.full((self.vocab_size,), float("-inf"), dtype=torch.float32)
        out[self.token_ids] = self.logprobs.float()
        return out


@dataclass(frozen=True)
class Completion:
    token_ids: list[int]
    text: str
    timings: ServerTimings
    arrival_ms: list[float] = field(default_factory=list)  # per decoded token, since the request was sent
    stop_reason: str = ""
    # tokens whose ids the stream did not carry (llama-server holds back a token ending mid-way through a UTF-8
    # character): then `arrival_ms` has this many more entries than `token_ids`
    unstreamed_ids: int = 0


@dataclass(frozen=True)
class ServedModel:
    name: str
    vocab_size: int | None
    context: int | None
    parameters: int | None
    size_bytes: int | None


def _number(value, name: str, where: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (isinstance(value, float) and math.isnan(value))
    ):
        raise EngineResponseError(f"The engine's answer to {where} has no number in '{name}'.")
    return value


class HttpTransport:
    """Requests to one server over one httpx client: bodies read up to a size cap, every failure an `EngineError`
    with one sentence. Making it sends nothing (httpx connects at the first request)."""

    def __init__(
        self,
        base_url: str,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        transport: httpx.BaseTransport | None = None,
    ):
        self.base_url = check_base_url(base_url)
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        self._http = httpx.Client(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
            trust_env=False,
            follow_redirects=False,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    @property
    def closed(self) -> bool:
        return self._http.is_closed

    @contextmanager
    def _transport_errors(self, path: str, timed_out: str):
        """Every transport failure of a request to `path` as an EngineError with one sentence; `timed_out` is what
        the engine did not do in time ("did not answer /completion within")."""
        if self._http.is_closed:
            raise EngineError(f"The client for the engine at {self.base_url} was closed; connect again.")
        try:
            yield
        except httpx.TimeoutException:
            raise EngineTimeout(f"The engine at {self.base_url} {timed_out} {self.timeout:g} s.") from None
        except httpx.ConnectError:
            raise EngineUnreachable(
                f"Cannot connect to the engine at {self.base_url}: the connection was refused or the host is "
                "unknown; is the server running?"
            ) from None
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
            raise EngineUnreachable(
                f"The connection to the engine at {self.base_url} broke off during {path}: "
                "the server stopped or crashed."
            ) from None
        except httpx.HTTPError as err:
            raise EngineError(
                f"The request to the engine at {self.base_url}{path} failed: {type(err).__name__}."
            ) from None

    def _check_status(self, response: httpx.Response, path: str, body: bytes) -> None:
        if response.status_code >= 400:
            raise EngineHTTPError(
                f"The engine at {self.base_url} answered {path} with HTTP {response.status_code}: "
                f"{_error_message(body)}"
            )

    def request(self, method: str, path: str, payload: dict | None = None) -> bytes:
        """The body of one request, read up to the size cap; every transport failure as an EngineError."""
        with (
            self._transport_errors(path, f"did not answer {path} within"),
            self._http.stream(method, path, json=payload) as response,
        ):
            body = self._read_capped(response, path)
            self._check_status(response, path, body)
            return body

    def _read_capped(self, response: httpx.Response, path: str) -> bytes:
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self.max_response_bytes:
                raise EngineResponseError(
                    f"The engine's answer to {path} is larger than {self.max_response_bytes / 2**20:.0f} MB; "
                    "it was not read further."
                )
            chunks.append(chunk)
        return b"".join(chunks)

    def json(self, method: str, path: str, payload: dict | None = None):
        body = self.request(method, path, payload)
        try:
            return json.loads(body)
        except ValueError:
            raise EngineResponseError(f"The engine's answer to {path} is not JSON.") from None

    def timed_json(self, method: str, path: str, payload: dict | None = None) -> tuple[object, float]:
        """`json`, and the round trip in ms measured here (request sent to answer parsed)."""
        start = time.perf_counter()
        answer = self.json(method, path, payload)
        return answer, (time.perf_counter() - start) * 1000

    def stream_events(self, path: str, payload: dict, on_open=None) -> Iterator[tuple[float, dict]]:
        """Server-sent events of a streamed request, each with its arrival time in ms since sending. `on_open`, if
        given, gets the httpx response as soon as its headers arrive (the serving replay keeps it to cut the stream
        off when a run is cancelled)."""
        start = time.perf_counter()
        size = 0
        # "Connection: close": llama-server drops the connection after a stream, and a pooled
        # connection it has dropped would break the next request ("server disconnected").
        with (
            self._transport_errors(path, f"stopped streaming {path} for"),
            self._http.stream("POST", path, json=payload, headers={"Connection": "close"}) as response,
        ):
            if on_open is not None:
                on_open(response)
            if response.status_code >= 400:
                self._check_status(response, path, self._read_capped(response, path))
            for line in response.iter_lines():
                size += len(line)
                if size > self.max_response_bytes:
                    raise EngineResponseError(
                        f"The engine's streamed answer to {path} passed "
                        f"{self.max_response_bytes / 2**20:.0f} MB; it was not read further."
                    )
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                try:
                    event = json.loads(data)
                except ValueError:
                    raise EngineResponseError(f"The engine streamed an event from {path} that is not JSON.") from None
                if not isinstance(event, dict):
                    raise EngineResponseError(f"The engine streamed an event from {path} that is not an object.")
                if "error" in event:  # an engine failing mid-stream sends its error as the last event
                    raise EngineHTTPError(
                        f"The engine at {self.base_url} stopped streaming {path} with an error: "
                        f"{_error_message(json.dumps(event).encode())}"
                    )
                yield (time.perf_counter() - start) * 1000, event


class Dialect:
    """What one engine's API looks like: the payload of each request and the shape of each answer. The requests
    go through the client's transport; what only one engine offers raises `EngineError` on the other."""

    name = ""
    completion_path = ""
    detokenized_key = ""  # where /detokenize's answer holds the text

    def __init__(self, client: EngineClient):
        self.client = client
        self.http = client.transport

    def served_model(self, first: dict) -> ServedModel:
        raise NotImplementedError

    def tokenize_payload(self, text: str, add_special: bool) -> dict:
        raise NotImplementedError

    def detokenize_payload(self, token_ids: list[int]) -> dict:
        raise NotImplementedError

    def next_token(self, prompt_ids: list[int], wanted: int, vocab_size: int) -> NextTokenDistribution:
        raise NotImplementedError

    def complete(self, prompt_ids, max_tokens, stream, ignore_eos, cache_prompt, on_open) -> Completion:
        raise NotImplementedError

    def prompt_logprobs(self, prompt_ids: list[int], n: int) -> list[dict[int, float]]:
        raise EngineError("prompt_logprobs is a vLLM feature; with llama.cpp ask next_token for each prefix.")

    def slots(self) -> list[dict]:
        raise EngineError("/slots is a llama.cpp endpoint.")

    def count_hint(self) -> str:
        """What to add when fewer probabilities came back than were asked for."""
        return ""

    def distribution(self, ids, logprobs, vocab_size, wanted, timings, chosen=None) -> NextTokenDistribution:
        """The checked distribution of one answer: ids within the vocabulary and each once, then as many as asked."""
        dist = NextTokenDistribution(
            token_ids=torch.tensor(ids, dtype=torch.long),
            logprobs=torch.tensor(logprobs, dtype=torch.float64),
            vocab_size=vocab_size,
            timings=timings,
            chosen_by_server=chosen,
            endpoint=f"{self.http.base_url}{self.completion_path}",
        )
        if len(ids) < wanted:
            raise IncompleteDistribution(
                f"The engine at {self.http.base_url} returned {len(ids)} token probabilities from "
                f"{self.completion_path}, {wanted} were asked for{self.count_hint()}."
            )
        return dist


class LlamaCppDialect(Dialect):
    """llama.cpp's `llama-server`: `/completion` with `n_probs` (the whole vocabulary can come back), `timings` in
    every answer, `/slots`."""

    name = LLAMACPP
    completion_path = "/completion"
    detokenized_key = "content"

    def served_model(self, first: dict) -> ServedModel:
        meta = first.get("meta") if isinstance(first.get("meta"), dict) else {}
        return ServedModel(
            name=str(first.get("id", "?"))[:200],
            vocab_size=_int_or_none(meta.get("n_vocab")),
            context=_int_or_none(meta.get("n_ctx_train")),
            parameters=_int_or_none(meta.get("n_params")),
            size_bytes=_int_or_none(meta.get("size")),
        )

    def tokenize_payload(self, text: str, add_special: bool) -> dict:
        return {"content": text, "add_special": add_special}

    def detokenize_payload(self, token_ids: list[int]) -> dict:
        return {"tokens": list(token_ids)}

    def next_token(self, prompt_ids: list[int], wanted: int, vocab_size: int) -> NextTokenDistribution:
        payload = {
            "prompt": list(prompt_ids),
            "n_predict": 1,
            "n_probs": wanted,
            "cache_prompt": True,
            "temperature": 0,
            "samplers": GREEDY_CHAIN,
            "return_tokens": True,
        }
        answer, round_trip_ms = self.http.timed_json("POST", "/completion", payload)
        probs = answer.get("completion_probabilities") if isinstance(answer, dict) else None
        if not isinstance(probs, list) or not probs or not isinstance(probs[0], dict):
            raise EngineResponseError("The engine's /completion answer has no completion_probabilities.")
        top = probs[0].get("top_logprobs")
        if not isinstance(top, list):
            raise EngineResponseError("The engine's /completion answer has no top_logprobs list.")
        ids, logprobs = [], []
        for item in top:
            if not isinstance(item, dict):
                raise EngineResponseError("The engine's top_logprobs list holds something that is not an object.")
            ids.append(int(_number(item.get("id"), "id", "/completion")))
            logprobs.append(float(_number(item.get("logprob"), "logprob", "/completion")))
        chosen = probs[0].get("id")
        timings = _llamacpp_timings(answer.get("timings"), round_trip_ms)
        return self.distribution(
            ids, logprobs, vocab_size, wanted, timings, chosen if isinstance(chosen, int) else None
        )

    def complete(self, prompt_ids, max_tokens, stream, ignore_eos, cache_prompt, on_open) -> Completion:
        payload = {
            "prompt": list(prompt_ids),
            "n_predict": max_tokens,
            "temperature": 0,
            "samplers": GREEDY_CHAIN,
            "ignore_eos": ignore_eos,
            "cache_prompt": cache_prompt,
            "return_tokens": True,
            "stream": stream,
        }
        if stream:
            return self._stream(payload, on_open)
        answer, round_trip_ms = self.http.timed_json("POST", "/completion", payload)
        tokens = answer.get("tokens") if isinstance(answer, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise EngineResponseError("The engine's /completion answer has no token ids.")
        return Completion(
            token_ids=tokens,
            text=str(answer.get("content", "")),
            timings=_llamacpp_timings(answer.get("timings"), round_trip_ms),
            stop_reason=str(answer.get("stop_type", "")),
        )

    def _stream(self, payload, on_open=None) -> Completion:
        """Every decoded token with its arrival time. llama-server streams one event per token, except that a token
        ending part-way through a UTF-8 character is held back: its bytes come with the event of the token that
        completes the character (or with none, at the end), and only that token's id is sent. Each event says how
        many tokens were decoded so far (`tokens_predicted`), so held-back tokens are counted as arriving with the
        event that brought their text; their ids are not streamed (`unstreamed_ids`)."""
        tokens, texts, arrivals, final, unstreamed = [], [], [], {}, 0
        for arrival_ms, event in self.http.stream_events("/completion", payload, on_open):
            new = [t for t in event.get("tokens") or [] if isinstance(t, int) and not isinstance(t, bool)]
            decoded = _int_or_none(event.get("tokens_predicted"))
            held_back = max(0, decoded - len(arrivals) - len(new)) if decoded is not None else 0
            unstreamed += held_back
            arrivals.extend([arrival_ms] * (held_back + len(new)))
            tokens.extend(new)
            texts.append(str(event.get("content", "")))
            if event.get("stop"):
                final = event
        timings = _llamacpp_timings(final.get("timings"), arrivals[-1] if arrivals else 0.0)
        return Completion(
            token_ids=tokens,
            text="".join(texts),
            timings=timings,
            arrival_ms=arrivals,
            stop_reason=str(final.get("stop_type", "")),
            unstreamed_ids=unstreamed,
        )

    def slots(self) -> list[dict]:
        answer = self.http.json("GET", "/slots")
        if not isinstance(answer, list):
            raise EngineResponseError("The engine's /slots answer is not a list.")
        return [s for s in answer if isinstance(s, dict)]


class VllmDialect(Dialect):
    """vLLM: `/v1/completions` with `logprobs` (top N only, 20 unless the server raised `--max-logprobs`) and
    `prompt_logprobs`; every request names the served model."""

    name = VLLM
    completion_path = "/v1/completions"
    detokenized_key = "prompt"

    def served_model(self, first: dict) -> ServedModel:
        return ServedModel(
            name=str(first.get("id", "?"))[:200],
            vocab_size=None,
            context=_int_or_none(first.get("max_model_len")),
            parameters=None,
            size_bytes=None,
        )

    def tokenize_payload(self, text: str, add_special: bool) -> dict:
        return {"model": self.client.model_name(), "prompt": text, "add_special_tokens": add_special}

    def detokenize_payload(self, token_ids: list[int]) -> dict:
        return {"model": self.client.model_name(), "tokens": list(token_ids)}

    def count_hint(self) -> str:
        return f" (vLLM allows {VLLM_DEFAULT_MAX_LOGPROBS} unless started with --max-logprobs)"

    def next_token(self, prompt_ids: list[int], wanted: int, vocab_size: int) -> NextTokenDistribution:
        payload = {
            "model": self.client.model_name(),
            "prompt": list(prompt_ids),
            "max_tokens": 1,
            "logprobs": wanted,
            "temperature": 0,
            "return_tokens_as_token_ids": True,
        }
        answer, round_trip_ms = self.http.timed_json("POST", "/v1/completions", payload)
        choice = _first_choice(answer, "/v1/completions")
        logprobs = choice.get("logprobs") if isinstance(choice.get("logprobs"), dict) else {}
        top = logprobs.get("top_logprobs")
        if not isinstance(top, list) or not top or not isinstance(top[0], dict):
            raise EngineResponseError("The engine's /v1/completions answer has no top_logprobs.")
        ids, values = [], []
        for key, value in top[0].items():
            ids.append(_token_id_from_vllm(key))
            values.append(float(_number(value, "logprob", "/v1/completions")))
        # vLLM adds the sampled token to the top N when it is not among them: N + 1 distinct ids then.
        order = sorted(range(len(ids)), key=lambda i: -values[i])
        usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else {}
        timings = ServerTimings(
            prompt_tokens=_int_or_none(usage.get("prompt_tokens")) or len(prompt_ids), round_trip_ms=round_trip_ms
        )
        return self.distribution([ids[i] for i in order], [values[i] for i in order], vocab_size, wanted, timings)

    def complete(self, prompt_ids, max_tokens, stream, ignore_eos, cache_prompt, on_open) -> Completion:
        payload = {
            "model": self.client.model_name(),
            "prompt": list(prompt_ids),
            "max_tokens": max_tokens,
            "temperature": 0,
            "ignore_eos": ignore_eos,
            "logprobs": 0,
            "return_tokens_as_token_ids": True,
            "stream": stream,
        }
        if stream:
            return self._stream(payload, on_open)
        answer, round_trip_ms = self.http.timed_json("POST", "/v1/completions", payload)
        choice = _first_choice(answer, "/v1/completions")
        tokens = _vllm_tokens(choice)
        return Completion(
            token_ids=tokens,
            text=str(choice.get("text", "")),
            timings=ServerTimings(predicted_tokens=len(tokens), round_trip_ms=round_trip_ms),
            stop_reason=str(choice.get("finish_reason", "")),
        )

    def _stream(self, payload, on_open=None) -> Completion:
        tokens, texts, arrivals, reason = [], [], [], ""
        for arrival_ms, event in self.http.stream_events("/v1/completions", payload, on_open):
            choice = _first_choice(event, "/v1/completions")
            for token in _vllm_tokens(choice):
                tokens.append(token)
                arrivals.append(arrival_ms)
            texts.append(str(choice.get("text", "")))
            reason = str(choice.get("finish_reason") or reason)
        return Completion(
            token_ids=tokens,
            text="".join(texts),
            arrival_ms=arrivals,
            stop_reason=reason,
            timings=ServerTimings(predicted_tokens=len(tokens), round_trip_ms=arrivals[-1] if arrivals else 0.0),
        )

    def prompt_logprobs(self, prompt_ids: list[int], n: int) -> list[dict[int, float]]:
        payload = {
            "model": self.client.model_name(),
            "prompt": list(prompt_ids),
            "max_tokens": 1,
            "temperature": 0,
            "prompt_logprobs": n,
            "return_tokens_as_token_ids": True,
        }
        choice = _first_choice(self.http.json("POST", "/v1/completions", payload), "/v1/completions")
        rows = choice.get("prompt_logprobs")
        if not isinstance(rows, list) or len(rows) != len(prompt_ids):
            raise EngineResponseError("The engine's answer has no prompt_logprobs for every prompt token.")
        out = []
        for row in rows:
            entry = {}
            for key, value in (row or {}).items():
                logprob = value.get("logprob") if isinstance(value, dict) else value
                entry[int(key)] = float(_number(logprob, "logprob", "prompt_logprobs"))
            out.append(entry)
        return out


DIALECT_CLASSES = {LLAMACPP: LlamaCppDialect, VLLM: VllmDialect}


class EngineClient:
    """A client for one server. `dialect` is `LLAMACPP` or `VLLM`; None asks the server (`/v1/models`) at the first
    request that needs it. Making a client sends nothing."""

    def __init__(
        self,
        base_url: str,
        dialect: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        model: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ):
        if dialect is not None and dialect not in DIALECTS:
            raise EngineError(f"Unknown engine dialect '{dialect}'; expected one of {', '.join(DIALECTS)}.")
        self.transport = HttpTransport(base_url, timeout, max_response_bytes, transport)
        self.base_url, self.timeout, self.max_response_bytes = self.transport.base_url, timeout, max_response_bytes
        self.model = model
        self._models: list[dict] | None = None
        self._dialect: Dialect | None = DIALECT_CLASSES[dialect](self) if dialect else None

    def close(self) -> None:
        self.transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- what is served -------------------------------------------------------------------------

    @property
    def api(self) -> Dialect:
        """This server's dialect, asked of it the first time (a failed answer closes this client's connections)."""
        if self._dialect is None:
            try:
                name = self.detect_dialect()
            except BaseException:
                self.close()
                raise
            self._dialect = DIALECT_CLASSES[name](self)
        return self._dialect

    @property
    def dialect(self) -> str:
        return self.api.name

    def models(self) -> list[dict]:
        if self._models is None:
            answer = self.transport.json("GET", "/v1/models")
            data = answer.get("data") if isinstance(answer, dict) else None
            if not isinstance(data, list) or not data or not all(isinstance(m, dict) for m in data):
                raise EngineResponseError("The engine's /v1/models answer lists no model.")
            self._models = data
        return self._models

    def detect_dialect(self) -> str:
        """llama-server says `owned_by: llamacpp` and carries a `meta` block; vLLM says `owned_by: vllm`."""
        first = self.models()[0]
        owner = str(first.get("owned_by", "")).lower()
        if owner == "llamacpp" or "meta" in first:
            return LLAMACPP
        if owner == "vllm":
            return VLLM
        raise EngineError(f"The server at {self.base_url} is neither llama.cpp's nor vLLM's (owned_by '{owner[:40]}').")

    def served_model(self) -> ServedModel:
        return self.api.served_model(self.models()[0])

    def model_name(self) -> str:
        """The served model's name, as requests that name it send it."""
        return self.model or self.served_model().name

    def health(self) -> bool:
        """True when the server answers `/health` with 200 (llama.cpp and vLLM both have it)."""
        try:
            self.transport.request("GET", "/health")
            return True
        except EngineError:
            return False

    # -- tokenizer -------------------------------------------------------------------------------

    def tokenize(self, text: str, add_special: bool = False) -> list[int]:
        answer = self.transport.json("POST", "/tokenize", self.api.tokenize_payload(text, add_special))
        tokens = answer.get("tokens") if isinstance(answer, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
            raise EngineResponseError("The engine's /tokenize answer has no list of token ids.")
        return tokens

    def detokenize(self, token_ids: list[int]) -> str:
        dialect = self.api
        answer = self.transport.json("POST", "/detokenize", dialect.detokenize_payload(token_ids))
        text = answer.get(dialect.detokenized_key) if isinstance(answer, dict) else None
        if not isinstance(text, str):
            raise EngineResponseError("The engine's /detokenize answer has no text.")
        return text

    def check_tokenizer(self, tokenizer, text: str = TOKENIZER_PROBE) -> None:
        """Raise `TokenizerMismatch` unless the server and `tokenizer` give the same ids for `text`."""
        ours = tokenizer(text, add_special_tokens=False)["input_ids"]
        theirs = self.tokenize(text, add_special=False)
        if list(ours) != list(theirs):
            raise TokenizerMismatch(
                f"The engine at {self.base_url} tokenizes a test sentence as {len(theirs)} tokens starting "
                f"{theirs[:4]}, the app's tokenizer as {len(ours)} starting {list(ours)[:4]}: it serves another model."
            )

    # -- one token's distribution, whole completions ----------------------------------------------

    def next_token(self, prompt_ids: list[int], n_probs: int, vocab_size: int) -> NextTokenDistribution:
        """The next-token distribution after `prompt_ids` (the whole vocabulary when `n_probs >= vocab_size`,
        else the top `n_probs`), raw: log-softmax of the logits before any sampler. The server's prompt
        cache makes a prompt that extends the previous one cost one token."""
        if not prompt_ids:
            raise EngineError("The prompt has no tokens.")
        return self.api.next_token(prompt_ids, min(n_probs, vocab_size), vocab_size)

    def complete(
        self,
        prompt_ids: list[int],
        max_tokens: int,
        stream: bool = False,
        ignore_eos: bool = True,
        cache_prompt: bool = False,
        on_stream_open=None,
    ) -> Completion:
        """Greedy continuation of `prompt_ids` (exactly `max_tokens` unless the context ends). Streaming
        records each token's arrival time here, next to the server's own timings."""
        return self.api.complete(prompt_ids, max_tokens, stream, ignore_eos, cache_prompt, on_stream_open)

    def prompt_logprobs(self, prompt_ids: list[int], n: int) -> list[dict[int, float]]:
        """vLLM: for every prompt position after the first, the top `n` log-probabilities of the token there
        (teacher forcing in one request). Position 0 has nothing before it and gives an empty dict."""
        return self.api.prompt_logprobs(prompt_ids, n)

    # -- monitoring ---------------------------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """The Prometheus text of `/metrics` as {name{labels}: value} (llama-server needs `--metrics`)."""
        text = self.transport.request("GET", "/metrics").decode("utf-8", errors="replace")
        out = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            name, _, value = line.rpartition(" ")
            try:
                out[name.strip()] = float(value)
            except ValueError:
                continue
        return out

    def slots(self) -> list[dict]:
        """llama.cpp's slots: context size and whether each is busy."""
        return self.api.slots()


def _vllm_tokens(choice: dict) -> list[int]:
    """The generated tokens' ids of one vLLM choice (asked with `logprobs` and `return_tokens_as_token_ids`)."""
    logprobs = choice.get("logprobs") if isinstance(choice.get("logprobs"), dict) else {}
    return [_token_id_from_vllm(t) for t in logprobs.get("tokens") or []]


def _int_or_none(value) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _float_or_none(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _llamacpp_timings(raw, round_trip_ms: float) -> ServerTimings:
    raw = raw if isinstance(raw, dict) else {}
    return ServerTimings(
        prompt_tokens=_int_or_none(raw.get("prompt_n")) or 0,
        cached_tokens=_int_or_none(raw.get("cache_n")) or 0,
        prompt_ms=_float_or_none(raw.get("prompt_ms")),
        predicted_tokens=_int_or_none(raw.get("predicted_n")) or 0,
        predicted_ms=_float_or_none(raw.get("predicted_ms")),
        round_trip_ms=round_trip_ms,
    )


def _first_choice(answer, path: str) -> dict:
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise EngineResponseError(f"The engine's answer to {path} has no choices.")
    return choices[0]


def _token_id_from_vllm(key) -> int:
    """vLLM names tokens as "token_id:123" when asked `return_tokens_as_token_ids`."""
    text = str(key)
    if text.startswith("token_id:") and text[9:].lstrip("-").isdigit():
        return int(text[9:])
    raise EngineResponseError(
        "The engine named a token by text, not by id (is it vLLM with return_tokens_as_token_ids?)."
    )


def _error_message(body: bytes) -> str:
    """The server's own error text, short, from JSON `{"error": {"message": ...}}` or plain text."""
    text = body[:2000].decode("utf-8", errors="replace")
    try:
        answer = json.loads(body)
        error = answer.get("error", answer) if isinstance(answer, dict) else answer
        text = str(error.get("message", error) if isinstance(error, dict) else error)
    except ValueError:
        pass
    text = " ".join(text.split())[:200]
    return (text or "no message") + ("" if text.endswith(".") else ".")
