"""Every HTTP request to a serving engine (llama.cpp's `llama-server`, vLLM) goes through this module, and every
failure is ONE error type, `EngineError`, whose message is one sentence a page shows as it is.

`HttpTransport` is the wire: httpx, answers read up to a size cap, server-sent events for streams. `EngineClient`
speaks the two dialects: llama-server's `/completion` (`n_probs` up to the whole vocabulary, `timings` in every
answer, `/slots`) and vLLM's `/v1/completions` (`logprobs`: the top 20 unless it was started with
`--max-logprobs`). Answers are parsed, never trusted: a token id is checked to be an index of the vocabulary,
once, before it is used as one. Making a client sends nothing; the dialect, when not given, is read from
`/v1/models` at the first request that needs it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx
import torch

from inference.core.measuring import ms_since, now

LLAMACPP, VLLM = "llama.cpp", "vLLM"
MAX_RESPONSE_BYTES = 32 * 2**20  # a whole 4k vocabulary is ~350 KB of JSON; a 150k one would be ~13 MB
VLLM_DEFAULT_MAX_LOGPROBS = 20  # vLLM refuses more unless started with --max-logprobs
# llama-server's sampler chain for our requests: temperature 0 keeps only the most likely token. Never empty: the
# server appends a random draw to every chain, so an empty one samples at T = 1.
GREEDY_CHAIN = ["temperature"]
TOKENIZER_PROBE = 'Once upon a time, a little robot said: "Hello, world!" 123'


class EngineError(Exception):
    """A serving engine could not do what was asked; the message is one sentence for the page. `status` is the
    HTTP status when the server answered with an error, else None."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


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
    predicted_tokens: int = 0
    prompt_ms: float | None = None
    predicted_ms: float | None = None
    round_trip_ms: float = 0.0  # measured here: request sent to answer read

    @property
    def decode_tokens_per_s(self) -> float | None:
        if not self.predicted_ms or self.predicted_tokens < 1:
            return None
        return self.predicted_tokens / self.predicted_ms * 1000

    @classmethod
    def of_llamacpp(cls, raw, round_trip_ms: float) -> ServerTimings:
        get = (raw if isinstance(raw, dict) else {}).get
        counts = (_int(get(key)) or 0 for key in ("prompt_n", "cache_n", "predicted_n"))
        return cls(*counts, _float(get("prompt_ms")), _float(get("predicted_ms")), round_trip_ms)


@dataclass(frozen=True)
class NextTokenDistribution:
    """One next-token distribution as the server returned it, most likely first; made only from ids that are
    indices of the vocabulary, each once."""

    token_ids: torch.Tensor  # [n] long
    logprobs: torch.Tensor  # [n] float64: log-softmax over the whole vocabulary, before any sampler
    vocab_size: int
    timings: ServerTimings
    chosen_by_server: int | None = None  # the token the server itself picked (greedy)
    endpoint: str = "the engine"

    def __post_init__(self):
        if len(self.token_ids) == 0:
            return
        low, high = int(self.token_ids.min()), int(self.token_ids.max())
        distinct, counts = torch.unique(self.token_ids, return_counts=True)
        if low < 0:
            problem = f"token id {low}: ids are never negative"
        elif high >= self.vocab_size:
            problem = (
                f"token id {high:,}, outside the model's {self.vocab_size:,}-token vocabulary "
                f"(ids 0 to {self.vocab_size - 1:,})"
            )
        elif len(distinct) < len(self.token_ids):
            problem = f"token id {int(distinct[counts > 1][0]):,} more than once in one distribution"
        else:
            return
        raise EngineError(f"The engine's answer from {self.endpoint} names {problem}.")

    @property
    def complete(self) -> bool:
        """Every token of the vocabulary came back: the distribution is exact."""
        return len(self.token_ids) >= self.vocab_size

    @property
    def returned_mass(self) -> float:
        return float(self.logprobs.exp().sum())

    @property
    def other_mass(self) -> float:
        """Probability of the tokens the server did not return ("other, not returned by the server")."""
        return 0.0 if self.complete else max(0.0, 1.0 - self.returned_mass)

    def logits(self) -> torch.Tensor:
        """[vocab] float32: the log-probabilities where returned, -inf elsewhere. Softmax of a complete one is the
        server's distribution; of a truncated one, the returned tokens renormalised."""
        out = torch.full((self.vocab_size,), float("-inf"), dtype=torch.float32)
        out[self.token_ids] = self.logprobs.float()
        return out


@dataclass(frozen=True)
class Completion:
    token_ids: list[int]
    text: str
    timings: ServerTimings
    # per decoded token, ms since the request was sent; llama-server streams a token that ends part-way through a
    # UTF-8 character without its id, so this list can be longer than `token_ids`
    arrival_ms: list[float] = field(default_factory=list)
    stop_reason: str = ""


@dataclass(frozen=True)
class ServedModel:
    name: str
    vocab_size: int | None
    context: int | None
    parameters: int | None
    size_bytes: int | None


class HttpTransport:
    """Requests to one server over one httpx client: answers read up to a size cap, every failure an `EngineError`.
    Making it sends nothing (httpx connects at the first request)."""

    def __init__(self, base_url: str, timeout: float = 30.0, transport: httpx.BaseTransport | None = None):
        self.base_url, self.timeout = check_base_url(base_url), timeout
        self._http = httpx.Client(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
            trust_env=False,
            follow_redirects=False,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @contextmanager
    def _errors(self, path: str, late: str):
        """httpx's failures during a request to `path` as one sentence each; `late` is what the engine did not do in
        time ("did not answer /completion within")."""
        if self._http.is_closed:
            raise EngineError(f"The client for the engine at {self.base_url} was closed; connect again.")
        try:
            yield
        except httpx.TimeoutException:
            raise EngineError(f"The engine at {self.base_url} {late} {self.timeout:g} s.") from None
        except httpx.ConnectError:
            raise EngineError(
                f"Cannot connect to the engine at {self.base_url}: the connection was refused or the host is "
                "unknown; is the server running?"
            ) from None
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
            raise EngineError(
                f"The connection to the engine at {self.base_url} broke off during {path}: the server stopped or crashed."
            ) from None
        except httpx.HTTPError as err:
            raise EngineError(
                f"The request to the engine at {self.base_url}{path} failed: {type(err).__name__}."
            ) from None

    def _body(self, response: httpx.Response, path: str) -> bytes:
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > MAX_RESPONSE_BYTES:
                raise EngineError(
                    f"The engine's answer to {path} is larger than {MAX_RESPONSE_BYTES / 2**20:.0f} MB; "
                    "it was not read further."
                )
            chunks.append(chunk)
        body = b"".join(chunks)
        if response.status_code >= 400:
            raise EngineError(
                f"The engine at {self.base_url} answered {path} with HTTP {response.status_code}: "
                f"{_error_message(body)}",
                status=response.status_code,
            )
        return body

    def request(self, method: str, path: str, payload: dict | None = None) -> bytes:
        with (
            self._errors(path, f"did not answer {path} within"),
            self._http.stream(method, path, json=payload) as response,
        ):
            return self._body(response, path)

    def json(self, method: str, path: str, payload: dict | None = None):
        return _json(self.request(method, path, payload), f"The engine's answer to {path}")

    def stream_events(self, path: str, payload: dict, on_open=None) -> Iterator[tuple[float, dict]]:
        """The server-sent events of a streamed POST, each with its arrival in ms since sending. `on_open` gets the
        httpx response when its headers arrive (the serving replay keeps it to cut a cancelled stream off)."""
        start, size = now(), 0
        # "Connection: close": llama-server drops the connection after a stream; a pooled one it dropped would break
        # the next request ("server disconnected").
        with (
            self._errors(path, f"stopped streaming {path} for"),
            self._http.stream("POST", path, json=payload, headers={"Connection": "close"}) as response,
        ):
            if on_open is not None:
                on_open(response)
            if response.status_code >= 400:
                self._body(response, path)
            for line in response.iter_lines():
                size += len(line)
                if size > MAX_RESPONSE_BYTES:
                    raise EngineError(f"The engine's streamed answer to {path} passed {MAX_RESPONSE_BYTES >> 20} MB.")
                if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                    continue
                event = _json(line[5:].encode(), f"An event the engine streamed from {path}")
                if not isinstance(event, dict):
                    raise EngineError(f"An event the engine streamed from {path} is not an object.")
                if "error" in event:  # an engine failing mid-stream sends its error as the last event
                    raise EngineError(
                        f"The engine at {self.base_url} stopped streaming {path} with an error: "
                        f"{_error_message(line[5:].encode())}"
                    )
                yield ms_since(start), event


class EngineClient(HttpTransport):
    """A client for one server, speaking its dialect. `dialect` is `LLAMACPP` or `VLLM`, or None to ask the server at the first request
    that needs it; `model` is the name vLLM requests send (default: the served model's)."""

    def __init__(
        self,
        base_url: str,
        dialect: str | None = None,
        timeout: float = 30.0,
        model: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ):
        if dialect not in (None, LLAMACPP, VLLM):
            raise EngineError(f"Unknown engine dialect '{dialect}'; expected {LLAMACPP} or {VLLM}.")
        super().__init__(base_url, timeout, transport)
        self.model, self._dialect, self._served = model, dialect, None

    def _first_model(self) -> dict:
        if self._served is None:
            answer = self.json("GET", "/v1/models")
            data = answer.get("data") if isinstance(answer, dict) else None
            if not isinstance(data, list) or not data or not isinstance(data[0], dict):
                raise EngineError("The engine's /v1/models answer lists no model.")
            self._served = data[0]
        return self._served

    @property
    def dialect(self) -> str:
        """llama-server says `owned_by: llamacpp` and sends a `meta` block; vLLM says `owned_by: vllm`. A server that
        is neither, or does not answer, closes this client."""
        if self._dialect is None:
            try:
                first = self._first_model()
                owner = str(first.get("owned_by", "")).lower()
                if owner not in ("llamacpp", "vllm") and "meta" not in first:
                    raise EngineError(
                        f"The server at {self.base_url} is neither llama.cpp's nor vLLM's (owned_by '{owner[:40]}')."
                    )
            except BaseException:
                self.close()
                raise
            self._dialect = VLLM if owner == "vllm" else LLAMACPP
        return self._dialect

    def served_model(self) -> ServedModel:
        first, llama = self._first_model(), self.dialect == LLAMACPP
        meta = first.get("meta") if isinstance(first.get("meta"), dict) else {}
        return ServedModel(
            name=str(first.get("id", "?"))[:200],
            vocab_size=_int(meta.get("n_vocab")),
            context=_int(meta.get("n_ctx_train") if llama else first.get("max_model_len")),
            parameters=_int(meta.get("n_params")),
            size_bytes=_int(meta.get("size")),
        )

    def model_name(self) -> str:
        return self.model or self.served_model().name

    def health(self) -> bool:
        """True when the server answers `/health` with 200 (llama.cpp and vLLM both have it)."""
        try:
            self.request("GET", "/health")
            return True
        except EngineError:
            return False

    def tokenize(self, text: str, add_special: bool = False) -> list[int]:
        if self.dialect == LLAMACPP:
            payload = {"content": text, "add_special": add_special}
        else:
            payload = {"model": self.model_name(), "prompt": text, "add_special_tokens": add_special}
        tokens = _field(self.json("POST", "/tokenize", payload), "tokens")
        if not isinstance(tokens, list) or not all(_is_int(t) for t in tokens):
            raise EngineError("The engine's /tokenize answer has no list of token ids.")
        return tokens

    def detokenize(self, token_ids: list[int]) -> str:
        llama = self.dialect == LLAMACPP
        payload = {"tokens": list(token_ids)} | ({} if llama else {"model": self.model_name()})
        text = _field(self.json("POST", "/detokenize", payload), "content" if llama else "prompt")
        if not isinstance(text, str):
            raise EngineError("The engine's /detokenize answer has no text.")
        return text

    def tokenizer_mismatch(self, tokenizer, text: str = TOKENIZER_PROBE) -> str:
        """ "" when the server and `tokenizer` give the same ids for `text`, else the sentence saying how they differ."""
        ours, theirs = list(tokenizer(text, add_special_tokens=False)["input_ids"]), self.tokenize(text)
        if ours == theirs:
            return ""
        return (
            f"The engine at {self.base_url} tokenizes a test sentence as {len(theirs)} tokens starting {theirs[:4]}, "
            f"the app's tokenizer as {len(ours)} starting {ours[:4]}: it serves another model."
        )

    def _post(self, path: str, payload: dict) -> tuple[object, float]:
        start = now()
        answer = self.json("POST", path, payload)
        return answer, ms_since(start)

    def next_token(self, prompt_ids: list[int], n_probs: int, vocab_size: int) -> NextTokenDistribution:
        """The raw next-token distribution after `prompt_ids` (log-softmax before any sampler): the whole vocabulary
        when `n_probs >= vocab_size`, else the top `n_probs`. The server's prompt cache makes a prompt that extends
        the previous one cost one token."""
        if not prompt_ids:
            raise EngineError("The prompt has no tokens.")
        wanted, prompt = min(n_probs, vocab_size), list(prompt_ids)
        if self.dialect == LLAMACPP:
            path, payload = "/completion", {"n_predict": 1, "n_probs": wanted, "cache_prompt": True, "temperature": 0}
            answer, ms = self._post(path, payload | {"prompt": prompt, "samplers": GREEDY_CHAIN, "return_tokens": True})
            probs = _field(answer, "completion_probabilities")
            first = probs[0] if isinstance(probs, list) and probs and isinstance(probs[0], dict) else {}
            top = first.get("top_logprobs")
            if not isinstance(top, list) or not all(isinstance(item, dict) for item in top):
                raise EngineError("The engine's /completion answer has no completion_probabilities.")
            pairs = [
                (_number(item.get("id"), "id", path), _number(item.get("logprob"), "logprob", path)) for item in top
            ]
            timings, chosen = ServerTimings.of_llamacpp(answer.get("timings"), ms), _int(first.get("id"))
        else:
            path = "/v1/completions"
            payload = {"model": self.model_name(), "prompt": prompt, "max_tokens": 1, "logprobs": wanted}
            answer, ms = self._post(path, payload | {"temperature": 0, "return_tokens_as_token_ids": True})
            top = (_field(_choice(answer, path).get("logprobs"), "top_logprobs") or [None])[0]
            if not isinstance(top, dict):
                raise EngineError("The engine's /v1/completions answer has no top_logprobs.")
            pairs = [(_vllm_id(key), _number(value, "logprob", path)) for key, value in top.items()]
            prompt_tokens = _int(_field(answer.get("usage"), "prompt_tokens")) or len(prompt)
            timings, chosen = ServerTimings(prompt_tokens=prompt_tokens, round_trip_ms=ms), None
        pairs.sort(key=lambda pair: -pair[1])  # vLLM adds its sampled token to the top N when it is not among them
        dist = NextTokenDistribution(
            torch.tensor([int(i) for i, _ in pairs], dtype=torch.long),
            torch.tensor([float(lp) for _, lp in pairs], dtype=torch.float64),
            vocab_size,
            timings,
            chosen,
            endpoint=self.base_url + path,
        )
        if len(pairs) < wanted:
            hint = (
                ""
                if path == "/completion"
                else f" (vLLM allows {VLLM_DEFAULT_MAX_LOGPROBS} unless started with --max-logprobs)"
            )
            raise EngineError(
                f"The engine at {self.base_url} returned {len(pairs)} token probabilities from {path}, "
                f"{wanted} were asked for{hint}."
            )
        return dist

    def complete(
        self,
        prompt_ids: list[int],
        max_tokens: int,
        stream: bool = False,
        ignore_eos: bool = True,
        cache_prompt: bool = False,
        on_stream_open=None,
        fields: dict | None = None,
    ) -> Completion:
        """The server's greedy continuation of `prompt_ids`: `max_tokens` of them unless it stops at an end token
        (`ignore_eos=False`) or the context ends. `fields` are more request fields (llama-server's `json_schema` or
        `grammar`). Streaming records each token's arrival here, beside the server's own timings."""
        llama, prompt = self.dialect == LLAMACPP, list(prompt_ids)
        if llama:
            path = "/completion"
            payload = {
                "n_predict": max_tokens,
                "samplers": GREEDY_CHAIN,
                "cache_prompt": cache_prompt,
                "return_tokens": True,
            }
        else:
            path = "/v1/completions"
            payload = {
                "model": self.model_name(),
                "max_tokens": max_tokens,
                "logprobs": 0,
                "return_tokens_as_token_ids": True,
            }
        payload |= {"prompt": prompt, "temperature": 0, "ignore_eos": ignore_eos, "stream": stream} | (fields or {})
        events = self.stream_events(path, payload, on_stream_open) if stream else [self._post(path, payload)[::-1]]
        tokens, texts, arrivals, final, last_ms = [], [], [], {}, 0.0
        for last_ms, event in events:
            if llama:
                event = event if isinstance(event, dict) else {}
                new = event.get("tokens", [] if stream else None)
                text, final = event.get("content", ""), event if event.get("stop") or not stream else final
            else:
                choice = _choice(event, path)
                new = [_vllm_id(t) for t in _field(choice.get("logprobs"), "tokens") or []]
                text, final = (
                    choice.get("text", ""),
                    {"stop_type": choice.get("finish_reason") or final.get("stop_type")},
                )
            if not isinstance(new, list) or not all(_is_int(t) for t in new):
                raise EngineError(f"The engine's {path} answer has no token ids.")
            # llama-server holds back a token that ends part-way through a UTF-8 character: it arrives, without its id,
            # with the next event, whose `tokens_predicted` counts it
            arrivals += [last_ms] * max(len(new), (_int(event.get("tokens_predicted")) or 0) - len(arrivals))
            tokens += new
            texts.append(str(text))
        if llama:
            timings = ServerTimings.of_llamacpp(final.get("timings"), last_ms)
        else:
            timings = ServerTimings(predicted_tokens=len(tokens), round_trip_ms=last_ms)
        return Completion(tokens, "".join(texts), timings, arrivals, str(final.get("stop_type") or ""))

    def metrics(self) -> dict[str, float]:
        """`/metrics`' Prometheus text as {name{labels}: value} (llama-server needs `--metrics`)."""
        out = {}
        for line in self.request("GET", "/metrics").decode("utf-8", errors="replace").splitlines():
            name, _, value = line.rpartition(" ")
            if line and not line.startswith("#"):
                try:
                    out[name.strip()] = float(value)
                except ValueError:
                    continue
        return out

    def slots(self) -> list[dict]:
        """llama.cpp's slots: context size and whether each is busy (vLLM has no /slots: an HTTP 404 sentence)."""
        answer = self.json("GET", "/slots")
        if not isinstance(answer, list):
            raise EngineError("The engine's /slots answer is not a list.")
        return [slot for slot in answer if isinstance(slot, dict)]


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int(value) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _float(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _number(value, name: str, where: str) -> float:
    if _float(value) is None or math.isnan(value):
        raise EngineError(f"The engine's answer to {where} has no number in '{name}'.")
    return value


def _field(answer, key: str):
    return answer.get(key) if isinstance(answer, dict) else None


def _json(body: bytes, what: str):
    try:
        return json.loads(body)
    except ValueError:
        raise EngineError(f"{what} is not JSON.") from None


def _choice(answer, path: str) -> dict:
    choices = _field(answer, "choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise EngineError(f"The engine's answer to {path} has no choices.")
    return choices[0]


def _vllm_id(key) -> int:
    """vLLM names a token "token_id:123" when asked `return_tokens_as_token_ids`."""
    text = str(key)
    if text.startswith("token_id:") and text[9:].lstrip("-").isdigit():
        return int(text[9:])
    raise EngineError("The engine named a token by text, not by id (is it vLLM with return_tokens_as_token_ids?).")


def _error_message(body: bytes) -> str:
    """The server's own error text, short: from JSON `{"error": {"message": ...}}` or plain text."""
    text = body[:2000].decode("utf-8", errors="replace")
    try:
        answer = json.loads(body)
        error = answer.get("error", answer) if isinstance(answer, dict) else answer
        text = str(error.get("message", error) if isinstance(error, dict) else error)
    except ValueError:
        pass
    text = " ".join(text.split())[:200]
    return (text or "no message") + ("" if text.endswith(".") else ".")
