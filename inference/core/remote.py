"""A model served by an engine, that the pages treat like a local `LoadedModel`, and its Step.

A remote step asks the server for ONE token's distribution (the whole vocabulary where the server allows
it, as llama-server does; else the top N), runs the app's own sampling pipeline on it and draws with the
recorded u, exactly as a local step does (a `Trace` whose `Forward` is a `RemoteForward`: each forward pass is
a request). The next request sends the whole text again as token ids, chosen token included;
the server's prompt cache sees the shared prefix and evaluates only the new token.

Two differences from a local step, said on the pages:
- llama.cpp returns log-probabilities, not raw logits. Softmax, temperature, top-k, top-p and min-p give
  the same result on either (they differ by a constant per step), but the repetition penalty divides
  positive logits and multiplies negative ones, and log-probabilities are all negative.
- A server that returns only the top N (vLLM: 20 unless raised) leaves the rest of the mass unknown: the
  pipeline and the draw see the N returned tokens, renormalised, and the page shows what was left out.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoConfig, AutoTokenizer

from inference.core.forward import Forward, ForwardPass, ServerStep, context_limit
from inference.core.kv_cache import KVShape
from inference.core.limits import Limits
from inference.core.loader import HUB_ID, ModelInfo
from inference.core.paths import BUNDLED_MODEL_DIR
from inference.engines.client import (
    FULL_VOCABULARY_LIMIT,
    LLAMACPP,
    TOP_N_FALLBACK,
    VLLM_DEFAULT_MAX_LOGPROBS,
    EngineClient,
    EngineError,
    EngineHTTPError,
    TokenizerMismatch,
)


@dataclass(frozen=True)
class RemoteEngine:
    """The `model` of a remote `LoadedModel`: where to ask and what it serves. Shared by every session (httpx's
    client is thread-safe); per-run state lives in a run's `RemoteForward`."""

    client: EngineClient
    name: str
    vocab_size: int
    context: int
    n_probs: int  # token probabilities asked for per step
    eos_ids: frozenset[int]
    kv_bytes_per_token: int | None = None  # known when the served model's config is here
    is_remote = True  # what `inference.core.run.forward_for` dispatches on

    @property
    def dialect(self) -> str:
        return self.client.dialect

    @property
    def exact(self) -> bool:
        """The server returns the whole vocabulary each step: nothing is truncated."""
        return self.n_probs >= self.vocab_size


@dataclass(frozen=True)
class RemoteModel:
    """Looks like `inference.core.loader.LoadedModel` (model, tokenizer, info) to the pages."""

    model: RemoteEngine
    tokenizer: object
    info: ModelInfo
    url: str
    is_remote = True


def is_remote(loaded) -> bool:
    return bool(getattr(loaded, "is_remote", False))


def _tokenizer_candidates(served_name: str) -> list[tuple[str, Path | str]]:
    """Where the served model's tokenizer may be found here, most specific first: the model folder a GGUF of
    ours was made from (its `.json` says), a local folder the server names, a hub id it names (vLLM), then the
    bundled model."""
    candidates = []
    sidecar = Path(served_name).with_suffix(".json")
    try:
        if served_name.endswith(".gguf") and sidecar.is_file():
            candidates.append(("converted from", Path(json.loads(sidecar.read_text())["source"])))
        elif Path(served_name).is_dir():
            candidates.append(("served folder", Path(served_name)))
    except (OSError, ValueError, KeyError):
        pass
    if HUB_ID.match(served_name) and Limits.from_env().allow_hub:  # vLLM names a hub model by its id
        candidates.append(("hub", served_name))
    candidates.append(("bundled", BUNDLED_MODEL_DIR))
    return candidates


def connect(url: str, dialect: str | None = None, timeout: float = 30.0, n_probs: int | None = None) -> RemoteModel:
    """Connect to an engine and pair it with a local tokenizer that tokenizes exactly as the server does
    (checked on a test sentence). Raises `EngineError` with one sentence when it cannot."""
    client = EngineClient(url, dialect=dialect, timeout=timeout)
    try:
        served = client.served_model()
        mismatch = None
        for _, folder in _tokenizer_candidates(served.name):
            try:
                tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
            except (OSError, ValueError):
                continue
            try:
                client.check_tokenizer(tokenizer)
                break
            except TokenizerMismatch as err:
                mismatch = err
        else:
            raise mismatch or TokenizerMismatch(f"No local tokenizer matches the model the engine at {url} serves.")
        config = None
        with contextlib.suppress(OSError, ValueError):  # a tokenizer-only folder: no layer counts then
            config = AutoConfig.from_pretrained(folder, trust_remote_code=False)
        vocab = served.vocab_size or (config.vocab_size if config is not None else len(tokenizer))
        context = served.context or (context_limit(config) if config is not None else 2048)
        if n_probs is None:
            if client.dialect == LLAMACPP:
                n_probs = vocab if vocab <= FULL_VOCABULARY_LIMIT else TOP_N_FALLBACK
            else:
                n_probs = _vllm_logprobs_allowed(client, tokenizer, vocab)
        kv_bytes = None
        shape = None
        if config is not None and client.dialect == LLAMACPP:
            shape = KVShape.from_config(config, torch.float32)  # served with -ctk f32 -ctv f32
            kv_bytes = shape.bytes_per_token()
        eos = {int(tokenizer.eos_token_id)} if tokenizer.eos_token_id is not None else set()
        name = Path(served.name).name if client.dialect == LLAMACPP else served.name
        engine = RemoteEngine(
            client=client,
            name=name,
            vocab_size=vocab,
            context=context,
            n_probs=n_probs,
            eos_ids=frozenset(eos),
            kv_bytes_per_token=kv_bytes,
        )
        info = ModelInfo(
            name=f"{name} on {client.dialect} at {client.base_url}",
            source="engine",
            architecture=f"{client.dialect} server",
            parameters=served.parameters or 0,
            layers=shape.layers if shape else 0,
            heads=int(getattr(config, "num_attention_heads", 0) or 0),
            kv_heads=shape.kv_heads if shape else 0,
            head_dim=shape.head_dim if shape else 0,
            context=context,
            vocab_size=vocab,
            weight_bytes=served.size_bytes or 0,
            dtype=_weights_type(served.name),
            has_chat_template=bool(getattr(tokenizer, "chat_template", None)),
        )
        return RemoteModel(model=engine, tokenizer=tokenizer, info=info, url=client.base_url)
    except BaseException:
        client.close()
        raise


def _vllm_logprobs_allowed(client: EngineClient, tokenizer, vocab: int) -> int:
    """The whole vocabulary when the vLLM server was started with --max-logprobs >= vocab (one trial request),
    else vLLM's default top 20."""
    probe = tokenizer("Once", add_special_tokens=True)["input_ids"] or [0]
    try:
        client.next_token(probe, vocab, vocab)
        return vocab
    except EngineHTTPError:
        return VLLM_DEFAULT_MAX_LOGPROBS


def _weights_type(served_name: str) -> str:
    stem = Path(served_name).stem.lower()
    for kind in ("q4_k_m", "q8_0", "f16", "f32"):
        if stem.endswith(kind):
            return f"GGUF {kind.replace('_k_m', '_K_M')}"
    return "served"


class RemoteForward(Forward):
    """Each forward pass is one request to the engine: the whole text so far as ids (the server's prompt cache
    evaluates only what is new). The KV cache lives in the server; `cached_tokens` is what its prompt cache holds
    of this run's text, as far as this run knows."""

    def __init__(self, engine: RemoteEngine):
        self.engine = engine
        self.context, self.eos_ids, self.vocab_size = engine.context, set(engine.eos_ids), engine.vocab_size
        self._cached = 0

    @property
    def cached_tokens(self) -> int:
        return self._cached

    def next_pass(self, text_ids: list[int], phase: str) -> ForwardPass:
        engine = self.engine
        dist = engine.client.next_token(text_ids, engine.n_probs, engine.vocab_size)  # EngineError: nothing changed
        new_tokens = len(text_ids) - self._cached
        self._cached = len(text_ids)
        t = dist.timings
        return ForwardPass(
            logits=dist.logits(),
            forward_ms=t.prompt_ms if t.prompt_ms is not None else t.round_trip_ms,
            phase=phase,
            tokens_in_forward=t.prompt_tokens or new_tokens,
            cache_tokens=len(text_ids),
            cache_bytes=(engine.kv_bytes_per_token or 0) * len(text_ids),
            server_step=ServerStep(
                returned=len(dist.token_ids),
                returned_mass=dist.returned_mass,
                complete=dist.complete,
                server_ms=t.prompt_ms,
                round_trip_ms=t.round_trip_ms,
                evaluated_tokens=t.prompt_tokens,
                cached_tokens=t.cached_tokens,
                server_choice=dist.chosen_by_server,
            ),
        )

    def crop_to(self, length: int) -> None:
        self._cached = min(self._cached, length)  # the server keeps its cache; the next request re-sends the text

    def cache_layer_bytes(self) -> list[int]:
        raise EngineError(
            "The KV cache of a remote model lives in the engine's memory: its tensors cannot be read here."
        )


def distribution_note(engine: RemoteEngine, server: ServerStep | None) -> tuple[str, str]:
    """(caption kind, sentence) saying what on a chart is exact and what is truncated: "exact" only for a whole
    vocabulary; the engine's top N, renormalised, is what was read from it ("measured")."""
    if server is None:
        return "exact" if engine.exact else "measured", (
            f"The engine ({engine.dialect}) is asked for {engine.n_probs:,} token probabilities per step."
        )
    return _note(engine, server.returned, server.returned_mass)


def step_timing_note(server: ServerStep | None) -> str:
    """Where this step's time went, when the server timed its own pass: the rest of the round trip is the
    probabilities travelling as JSON and parsed here, plus any wait for a core on a busy machine (SmolLM2's top
    1,000 are 83 KB; its whole 49,152-token vocabulary would be 4.7 MB, a round trip of 162 ms against a 33 ms pass,
    measured on its f32 GGUF). Measured, so the page shows it under its own label, not the distribution's."""
    if server is None or server.server_ms is None or server.round_trip_ms <= 0:
        return ""
    rest = max(server.round_trip_ms - server.server_ms, 0.0)
    return (
        f"This step: the server's forward pass took {server.server_ms:,.0f} ms of a {server.round_trip_ms:,.0f} ms "
        f"round trip; the other {rest:,.0f} ms went outside the pass: {server.returned:,} probabilities sent as JSON and "
        "parsed here, and any wait for a free core."
    )


def logits_note(engine: RemoteEngine, logits) -> tuple[str, str]:
    """`distribution_note` for a stored [vocab] row of a remote step (log-probabilities, -inf where not returned)."""
    return _note(engine, *returned_probability(logits))


def returned_probability(logits: torch.Tensor) -> tuple[int, float]:
    """(tokens returned, their total probability) of a [vocab] row: an engine's top N are log-probabilities with -inf
    for the rest; a whole row (the app's own logits, or an engine's whole vocabulary) holds all of it."""
    returned = torch.isfinite(logits)
    count = int(returned.sum())
    return count, 1.0 if count == logits.numel() else float(logits[returned].double().exp().sum())


def _note(engine: RemoteEngine, returned: int, mass: float) -> tuple[str, str]:
    if returned >= engine.vocab_size:
        return "exact", (
            f"The engine ({engine.dialect}) returned all {returned:,} token probabilities: the "
            "distribution is complete and every stage is computed exactly from it. The repetition penalty "
            "acts on the server's log-probabilities, not on raw logits."
        )
    return "measured", (
        f"Truncated: the engine ({engine.dialect}) returned its top {returned:,} tokens, holding "
        f"{mass:.2%} of the probability; the other {1 - mass:.2%} (other, not returned by the "
        "server) cannot be drawn, and the shares shown are renormalised over the returned tokens."
    )
