"""Every HTTP request to a serving engine: one `EngineClient` speaking llama-server's `/completion` (`n_probs` up to
the whole vocabulary) or vLLM's `/v1/completions` (top 20 `logprobs` unless started with `--max-logprobs`), and one
`EngineError`, one sentence a page shows as it is. Answers are parsed, never trusted: token ids are checked."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx
import torch

from inference.core.measuring import ms_since, now

LLAMACPP, VLLM = "llama.cpp", "vLLM"
MAX_RESPONSE_BYTES = 32 * 2**20  # a whole 4k vocabulary is ~350 KB of JSON; a 150k one would be ~13 MB
VLLM_DEFAULT_MAX_LOGPROBS = 20  # vLLM refuses more unless started with --max-logprobs
# temperature 0 keeps only the most likely token. Never empty: llama-server appends a random draw to every chain.
GREEDY_CHAIN = ["temperature"]


class EngineError(Exception):
    """One sentence for the page; `status` is the HTTP status when the server answered with an error."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def _number(value, kind=float):
    return kind(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


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
        ok = self.predicted_ms and self.predicted_tokens > 0
        return self.predicted_tokens / self.predicted_ms * 1000 if ok else None

    @classmethod
    def of_llamacpp(cls, raw, round_trip_ms: float) -> ServerTimings:
        get = (raw if isinstance(raw, dict) else {}).get
        counts = (_number(get(key), int) or 0 for key in ("prompt_n", "cache_n", "predicted_n"))
        return cls(*counts, _number(get("prompt_ms")), _number(get("predicted_ms")), round_trip_ms)


@dataclass(frozen=True)
class NextTokenDistribution:
    """A next-token distribution as the server returned it, most likely first; only from valid ids, each once."""

    token_ids: torch.Tensor  # [n] long
    logprobs: torch.Tensor  # [n] float64: log-softmax over the whole vocabulary, before any sampler
    vocab_size: int
    timings: ServerTimings
    chosen_by_server: int | None = None  # the token the server itself picked (greedy)
    endpoint: str = "the engine"

    def __post_init__(self):
        ids, where = self.token_ids.tolist(), f"The engine's answer from {self.endpoint} names"
        if outside := [i for i in ids if not 0 <= i < self.vocab_size]:
            raise EngineError(f"{where} token id {outside[0]:,}, outside the {self.vocab_size:,}-token vocabulary.")
        if len(set(ids)) < len(ids):
            raise EngineError(f"{where} a token id more than once in one distribution.")

    @property
    def complete(self) -> bool:
        """Every token of the vocabulary came back: the distribution is exact."""
        return len(self.token_ids) >= self.vocab_size

    @property
    def returned_mass(self) -> float:
        return float(self.logprobs.exp().sum())

    def logits(self) -> torch.Tensor:
        """[vocab] float32: the log-probabilities where returned, -inf elsewhere (a top N renormalises)."""
        out = torch.full((self.vocab_size,), float("-inf"), dtype=torch.float32)
        out[self.token_ids] = self.logprobs.float()
        return out


@dataclass(frozen=True)
class Completion:
    token_ids: list[int]
    text: str
    timings: ServerTimings
    arrival_ms: list[float] = field(default_factory=list)  # per token (one may come without its id), ms since sent
    stop_reason: str = ""


@dataclass(frozen=True)
class ServedModel:
    name: str
    vocab_size: int | None
    context: int | None
    parameters: int | None
    size_bytes: int | None


class EngineClient:
    """One server: `dialect` None is read from `/v1/models` when first needed; `model` is the name vLLM requests send
    (default: the served model's). Making one sends nothing; httpx's client is thread-safe."""

    def __init__(self, base_url: str, dialect=None, timeout: float = 30.0, model: str | None = None, transport=None):
        if dialect not in (None, LLAMACPP, VLLM):
            raise EngineError(f"Unknown engine dialect '{dialect}'; expected {LLAMACPP} or {VLLM}.")
        self.base_url, self.timeout, self.model = (base_url or "").strip().rstrip("/"), timeout, model
        parts = urlsplit(self.base_url)
        extra = parts.query or parts.fragment or "@" in parts.netloc  # only http(s), a host, a port and a path
        if parts.scheme not in ("http", "https") or not parts.hostname or extra:
            raise EngineError(f"'{self.base_url[:80]}' is not an engine address like http://127.0.0.1:8080.")
        self._dialect, self._served = dialect, None
        timeouts = httpx.Timeout(timeout, connect=min(timeout, 5.0))
        self._http = httpx.Client(base_url=self.base_url, timeout=timeouts, trust_env=False, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @contextmanager
    def _errors(self, path: str, late: str):
        """httpx's failures as one sentence each; `late` is what the engine did not do in time."""
        if self._http.is_closed:
            raise EngineError(f"The client for the engine at {self.base_url} was closed; connect again.")
        where = f"the engine at {self.base_url}"
        try:
            yield
        except httpx.TimeoutException:
            raise EngineError(f"The engine at {self.base_url} {late} {self.timeout:g} s.") from None
        except httpx.ConnectError:
            raise EngineError(
                f"Cannot connect to {where}: connection refused or unknown host; is it running?"
            ) from None
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
            raise EngineError(f"The connection to {where} broke off during {path}: the server stopped.") from None
        except httpx.HTTPError as err:
            raise EngineError(f"The request to {where} for {path} failed: {type(err).__name__}.") from None

    def _refuse_error(self, response: httpx.Response, path: str, body: bytes | None = None) -> None:
        if response.status_code >= 400:
            message = _error_message(response.read() if body is None else body)
            where = f"The engine at {self.base_url} answered {path} with HTTP {response.status_code}"
            raise EngineError(f"{where}: {message}", status=response.status_code)

    def request(self, method: str, path: str, payload: dict | None = None) -> bytes:
        with self._errors(path, f"did not answer {path} within"), self._http.stream(method, path, json=payload) as r:
            body = bytearray()
            for chunk in r.iter_bytes():
                body += chunk
                if len(body) > MAX_RESPONSE_BYTES:
                    raise EngineError(f"The engine's answer to {path} is larger than {MAX_RESPONSE_BYTES >> 20} MB.")
            self._refuse_error(r, path, body)
            return body

    def json(self, method: str, path: str, payload: dict | None = None):
        return _json(self.request(method, path, payload), f"The engine's answer to {path}")

    def stream_events(self, path: str, payload: dict, on_open=None) -> Iterator[tuple[float, dict]]:
        """A streamed POST's events, each with its arrival in ms; `on_open(response)` lets a caller cut it off."""
        start, size = now(), 0
        with (
            self._errors(path, f"stopped streaming {path} for"),
            # llama-server drops the connection after a stream: a pooled one would break the next request
            self._http.stream("POST", path, json=payload, headers={"Connection": "close"}) as response,
        ):
            if on_open is not None:
                on_open(response)
            self._refuse_error(response, path)
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
                    reason = _error_message(line[5:].encode())
                    raise EngineError(f"The engine at {self.base_url} stopped streaming {path} with an error: {reason}")
                yield ms_since(start), event

    def _post(self, path: str, payload: dict) -> tuple[object, float]:
        start = now()
        return self.json("POST", path, payload), ms_since(start)

    @property
    def dialect(self) -> str:
        """llama-server says `owned_by: llamacpp` and sends a `meta` block; vLLM says `owned_by: vllm`."""
        if self._dialect is None:
            first = self._first_model()
            owner = str(first.get("owned_by", "")).lower()
            if owner not in ("llamacpp", "vllm") and "meta" not in first:
                raise EngineError(f"The server at {self.base_url} is neither llama.cpp's nor vLLM's.")
            self._dialect = VLLM if owner == "vllm" else LLAMACPP
        return self._dialect

    def _first_model(self) -> dict:
        if self._served is None:
            with _shape("/v1/models", "model"):
                self._served = dict(self.json("GET", "/v1/models")["data"][0])
        return self._served

    def served_model(self) -> ServedModel:
        first, llama = self._first_model(), self.dialect == LLAMACPP
        meta = first.get("meta") if isinstance(first.get("meta"), dict) else {}
        context = meta.get("n_ctx_train") if llama else first.get("max_model_len")
        numbers = (_number(v, int) for v in (meta.get("n_vocab"), context, meta.get("n_params"), meta.get("size")))
        return ServedModel(str(first.get("id", "?"))[:200], *numbers)

    def model_name(self) -> str:
        return self.model or self.served_model().name

    def health(self) -> bool:
        """True when the server answers `/health` with 200 (llama.cpp and vLLM both have it)."""
        with suppress(EngineError):
            return self.request("GET", "/health") is not None
        return False

    def tokenize(self, text: str, add_special: bool = False) -> list[int]:
        if self.dialect == LLAMACPP:
            payload = {"content": text, "add_special": add_special}
        else:
            payload = {"model": self.model_name(), "prompt": text, "add_special_tokens": add_special}
        with _shape("/tokenize", "token ids"):
            return _ints(self.json("POST", "/tokenize", payload)["tokens"], "/tokenize")

    def detokenize(self, token_ids: list[int]) -> str:
        llama = self.dialect == LLAMACPP
        payload = {"tokens": list(token_ids)} | ({} if llama else {"model": self.model_name()})
        with _shape("/detokenize", "text"):
            return str(self.json("POST", "/detokenize", payload)["content" if llama else "prompt"])

    def tokenizer_mismatch(self, tokenizer, text: str = 'Once upon a time, a robot said: "Hello, world!" 123') -> str:
        """ "" when the server and `tokenizer` give the same ids for `text`, else the sentence saying how they differ."""
        ours, theirs = list(tokenizer(text, add_special_tokens=False)["input_ids"]), self.tokenize(text)
        if ours == theirs:
            return ""
        return (
            f"The engine at {self.base_url} tokenizes a test sentence as {len(theirs)} tokens starting {theirs[:4]}, "
            f"the app's tokenizer as {len(ours)} starting {ours[:4]}: it serves another model."
        )

    def _greedy(self, prompt_ids: list[int], max_tokens: int) -> tuple[str, dict]:
        """The path and fields of a greedy request in this server's dialect."""
        if self.dialect == LLAMACPP:
            fields = {"n_predict": max_tokens, "samplers": GREEDY_CHAIN, "return_tokens": True}
            return "/completion", fields | {"prompt": list(prompt_ids), "temperature": 0}
        fields = {"model": self.model_name(), "max_tokens": max_tokens, "return_tokens_as_token_ids": True}
        return "/v1/completions", fields | {"prompt": list(prompt_ids), "temperature": 0}

    def next_token(self, prompt_ids: list[int], n_probs: int, vocab_size: int) -> NextTokenDistribution:
        """The raw next-token distribution (log-softmax before any sampler): the whole vocabulary when `n_probs >=
        vocab_size`, else the top `n_probs`. The prompt cache makes a prompt extending the last one cost one token."""
        if not prompt_ids:
            raise EngineError("The prompt has no tokens.")
        wanted, (path, payload) = min(n_probs, vocab_size), self._greedy(prompt_ids, 1)
        if path == "/completion":
            answer, ms = self._post(path, payload | {"n_probs": wanted, "cache_prompt": True})
            with _shape(path, "completion_probabilities"):
                first = answer["completion_probabilities"][0]
                pairs = [(item["id"], item["logprob"]) for item in first["top_logprobs"]]
                timings, chosen = ServerTimings.of_llamacpp(answer.get("timings"), ms), _number(first.get("id"), int)
        else:
            answer, ms = self._post(path, payload | {"logprobs": wanted})
            with _shape(path, "top_logprobs"):
                top = answer["choices"][0]["logprobs"]["top_logprobs"][0]
                pairs = [(_vllm_id(key), value) for key, value in top.items()]
                prompt_tokens = _number((answer.get("usage") or {}).get("prompt_tokens"), int) or len(prompt_ids)
                timings, chosen = ServerTimings(prompt_tokens=prompt_tokens, round_trip_ms=ms), None
        ids, logprobs = _ints([i for i, _ in pairs], path), [_number(lp) for _, lp in pairs]
        if any(lp is None or math.isnan(lp) for lp in logprobs):
            raise EngineError(f"The engine's answer to {path} has a log-probability that is not a number.")
        order = sorted(range(len(ids)), key=lambda i: -logprobs[i])  # vLLM adds its sampled token when not in the top N
        dist = NextTokenDistribution(
            torch.tensor([ids[i] for i in order], dtype=torch.long),
            torch.tensor([logprobs[i] for i in order], dtype=torch.float64),
            vocab_size,
            timings,
            chosen,
            endpoint=self.base_url + path,
        )
        if len(ids) >= wanted:
            return dist
        hint = "" if path == "/completion" else f" (vLLM allows {VLLM_DEFAULT_MAX_LOGPROBS} without --max-logprobs)"
        where = f"The engine at {self.base_url} returned {len(ids)} token probabilities from {path}"
        raise EngineError(f"{where}, {wanted} were asked for{hint}.")

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
        """The server's greedy continuation: `max_tokens` unless it stops at an end token (`ignore_eos=False`) or the
        context ends; `fields` are more request fields (`json_schema`, `grammar`). A stream times each token here."""
        path, payload = self._greedy(prompt_ids, max_tokens)
        llama = path == "/completion"
        payload |= {"cache_prompt": cache_prompt} if llama else {"logprobs": 0}
        payload |= {"ignore_eos": ignore_eos, "stream": stream} | (fields or {})
        events = self.stream_events(path, payload, on_stream_open) if stream else [self._post(path, payload)[::-1]]
        tokens, texts, arrivals, stop, raw_timings, last_ms = [], [], [], "", None, 0.0
        for last_ms, event in events:
            with _shape(path, "token ids"):
                if llama:
                    new, text = event.get("tokens", []) if stream else event["tokens"], event.get("content", "")
                    if event.get("stop") or not stream:
                        stop, raw_timings = event.get("stop_type") or "", event.get("timings")
                else:
                    choice = event["choices"][0]
                    new = [_vllm_id(t) for t in (choice.get("logprobs") or {}).get("tokens") or []]
                    text, stop = choice.get("text", ""), choice.get("finish_reason") or stop
                new = _ints(new, path)
            # llama-server holds back a token that ends part-way through a UTF-8 character: it arrives, without its id,
            # with the next event, whose `tokens_predicted` counts it
            arrivals += [last_ms] * max(len(new), (_number(event.get("tokens_predicted"), int) or 0) - len(arrivals))
            tokens += new
            texts.append(str(text))
        raw_timings = raw_timings if llama else {"predicted_n": len(tokens)}  # vLLM times nothing per request
        return Completion(tokens, "".join(texts), ServerTimings.of_llamacpp(raw_timings, last_ms), arrivals, str(stop))

    def metrics(self) -> dict[str, float]:
        """`/metrics`' Prometheus text as {name{labels}: value} (llama-server needs `--metrics`)."""
        out = {}
        for line in self.request("GET", "/metrics").decode("utf-8", errors="replace").splitlines():
            name, _, value = line.rpartition(" ")
            with suppress(ValueError):
                out |= {name.strip(): float(value)} if name and not line.startswith("#") else {}
        return out

    def slots(self) -> list[dict]:
        """llama.cpp's slots: context size and whether each is busy (vLLM has no /slots: an HTTP 404 sentence)."""
        with _shape("/slots", "list of slots"):
            return [slot for slot in self.json("GET", "/slots") if isinstance(slot, dict)]


@contextmanager
def _shape(path: str, what: str):
    """An answer missing what is read from it (a key, an item, the right type) is one sentence."""
    try:
        yield
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        raise EngineError(f"The engine's answer to {path} has no {what}.") from None


def _ints(values, path: str) -> list[int]:
    if not isinstance(values, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise EngineError(f"The engine's answer to {path} has no token ids.")
    return values


def _json(body: bytes, what: str):
    try:
        return json.loads(body)
    except ValueError:
        raise EngineError(f"{what} is not JSON.") from None


def _vllm_id(key) -> int:
    """vLLM names a token "token_id:123" when asked `return_tokens_as_token_ids`."""
    text = str(key)
    if text.startswith("token_id:") and text[9:].lstrip("-").isdigit():
        return int(text[9:])
    raise EngineError("The engine named a token by text, not by id (is it vLLM with return_tokens_as_token_ids?).")


def _error_message(body: bytes) -> str:
    """The server's own error text, short: from JSON `{"error": {"message": ...}}` or plain text."""
    try:
        error = json.loads(body)
    except ValueError:
        error = bytes(body[:2000]).decode("utf-8", errors="replace")
    error = error.get("error", error) if isinstance(error, dict) else error
    text = " ".join(str(error.get("message", error) if isinstance(error, dict) else error).split())[:200]
    return (text or "no message") + ("" if text.endswith(".") else ".")
