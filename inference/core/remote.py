"""A model a serving engine runs, treated by the pages like a local `LoadedModel`, and its `Forward`: each pass is
one request for one token's distribution (the whole vocabulary where the server allows it, else its top N, the rest
undrawable), drawn from by the app's own pipeline and recorded u. Every request sends the whole text as ids: the
server's prompt cache evaluates only the new token."""

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
from inference.engines.client import LLAMACPP, VLLM_DEFAULT_MAX_LOGPROBS, EngineClient, EngineError

# The whole distribution only up to this vocabulary: beyond, an answer passes a few MB for a sliver of the mass.
FULL_VOCABULARY_LIMIT = 32_768
TOP_N = 1_000

TEXT = {
    "asked": "The engine ({dialect}) is asked for {n:,} token probabilities per step.",
    "exact": (
        "The engine ({dialect}) returned all {returned:,} token probabilities: the distribution is complete and every "
        "stage is computed exactly from it. The repetition penalty acts on the server's log-probabilities, not on raw "
        "logits."
    ),
    "truncated": (
        "Truncated: the engine ({dialect}) returned its top {returned:,} tokens, holding {mass:.2%} of the "
        "probability; the other {rest:.2%} (other, not returned by the server) cannot be drawn, and the shares shown "
        "are renormalised over the returned tokens."
    ),
    # SmolLM2's top 1,000 are 83 KB of JSON; its whole 49,152-token vocabulary 4.7 MB, a round trip of 162 ms against
    # a 33 ms pass (measured on its f32 GGUF)
    "step_time": (
        "This step: the server's forward pass took {server:,.0f} ms of a {trip:,.0f} ms round trip; the other "
        "{rest:,.0f} ms went outside the pass: {returned:,} probabilities sent as JSON and parsed here, and any wait "
        "for a free core."
    ),
}


@dataclass(frozen=True)
class RemoteEngine:
    """The `model` of a remote `LoadedModel`, shared by every session; a run's own state lives in its `RemoteForward`."""

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


def _tokenizer_folders(served_name: str) -> list[Path | str]:
    """Where the served model's tokenizer may be, most specific first: the folder our GGUF was made from (its `.json`
    says), a local folder the server names, a hub id it names (vLLM), then the bundled model."""
    folders, path = [], Path(served_name)
    with contextlib.suppress(OSError, ValueError, KeyError):
        if served_name.endswith(".gguf") and path.with_suffix(".json").is_file():
            folders.append(Path(json.loads(path.with_suffix(".json").read_text())["source"]))
        elif path.is_dir():
            folders.append(path)
    if HUB_ID.match(served_name) and Limits.from_env().allow_hub:
        folders.append(served_name)
    return [*folders, BUNDLED_MODEL_DIR]


def connect(url: str, dialect: str | None = None, timeout: float = 30.0, n_probs: int | None = None) -> RemoteModel:
    """Connect to an engine and pair it with a local tokenizer that tokenizes exactly as the server does (checked on
    a test sentence); an `EngineError` sentence when it cannot."""
    client = EngineClient(url, dialect=dialect, timeout=timeout)
    try:
        served, mismatch = client.served_model(), ""
        for folder in _tokenizer_folders(served.name):
            try:
                tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
            except (OSError, ValueError):
                continue
            if not (mismatch := client.tokenizer_mismatch(tokenizer)):
                break
        else:
            raise EngineError(mismatch or f"No local tokenizer matches the model the engine at {url} serves.")
        config = None
        with contextlib.suppress(OSError, ValueError):  # a tokenizer-only folder: no layer counts then
            config = AutoConfig.from_pretrained(folder, trust_remote_code=False)
        llama = client.dialect == LLAMACPP
        vocab = served.vocab_size or (config.vocab_size if config is not None else len(tokenizer))
        context = served.context or (context_limit(config) if config is not None else 2048)
        if n_probs is None:
            n_probs = _vllm_allows(client, vocab) if not llama else vocab if vocab <= FULL_VOCABULARY_LIMIT else TOP_N
        shape = KVShape.from_config(config, torch.float32) if config is not None and llama else None  # -ctk f32
        name = Path(served.name).name if llama else served.name
        eos = frozenset({int(tokenizer.eos_token_id)} if tokenizer.eos_token_id is not None else ())
        engine = RemoteEngine(client, name, vocab, context, n_probs, eos, shape.bytes_per_token() if shape else None)
        kind = next(
            (k for k in ("q4_K_M", "q8_0", "f16", "f32") if Path(served.name).stem.lower().endswith(k.lower())), None
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
            dtype=f"GGUF {kind}" if kind else "served",
            has_chat_template=bool(getattr(tokenizer, "chat_template", None)),
        )
        return RemoteModel(model=engine, tokenizer=tokenizer, info=info, url=client.base_url)
    except BaseException:
        client.close()
        raise


def _vllm_allows(client: EngineClient, vocab: int) -> int:
    """The whole vocabulary when vLLM was started with --max-logprobs >= vocab (one trial request), else its top 20."""
    try:
        client.next_token([0], vocab, vocab)
        return vocab
    except EngineError as err:
        if err.status is None:  # not the server refusing the request: unreachable, or a broken answer
            raise
        return VLLM_DEFAULT_MAX_LOGPROBS


class RemoteForward(Forward):
    """Each pass is one request with the whole text; `cached_tokens` is what the server's prompt cache holds of this
    run's text, as far as this run knows."""

    cached_tokens = 0  # a plain attribute in place of `Forward`'s abstract property

    def __init__(self, engine: RemoteEngine):
        self.engine = engine
        self.context, self.eos_ids, self.vocab_size = engine.context, set(engine.eos_ids), engine.vocab_size

    def next_pass(self, text_ids: list[int], phase: str) -> ForwardPass:
        engine = self.engine
        dist = engine.client.next_token(text_ids, engine.n_probs, engine.vocab_size)  # EngineError: nothing changed
        new_tokens, self.cached_tokens = len(text_ids) - self.cached_tokens, len(text_ids)
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
        self.cached_tokens = min(self.cached_tokens, length)  # the server keeps its cache; the text is sent again

    def cache_layer_bytes(self) -> list[int]:
        raise EngineError(
            "The KV cache of a remote model lives in the engine's memory: its tensors cannot be read here."
        )


def distribution_note(engine: RemoteEngine, server: ServerStep | None) -> tuple[str, str]:
    """(caption kind, sentence) for a chart of a remote step: "exact" only for a whole vocabulary, else "measured"."""
    if server is None:
        return "exact" if engine.exact else "measured", TEXT["asked"].format(dialect=engine.dialect, n=engine.n_probs)
    if server.returned >= engine.vocab_size:
        return "exact", TEXT["exact"].format(dialect=engine.dialect, returned=server.returned)
    mass = server.returned_mass
    return "measured", TEXT["truncated"].format(
        dialect=engine.dialect, returned=server.returned, mass=mass, rest=1 - mass
    )


def logits_note(engine: RemoteEngine, logits: torch.Tensor) -> tuple[str, str]:
    """`distribution_note` for a stored [vocab] row of a remote step."""
    returned, mass = returned_probability(logits)
    return distribution_note(engine, ServerStep(returned, mass, returned >= engine.vocab_size, None, 0.0, 0, 0))


def step_timing_note(server: ServerStep | None) -> str:
    """Where a step's time went, when the server timed its own pass."""
    if server is None or server.server_ms is None or server.round_trip_ms <= 0:
        return ""
    rest = max(server.round_trip_ms - server.server_ms, 0.0)
    return TEXT["step_time"].format(
        server=server.server_ms, trip=server.round_trip_ms, rest=rest, returned=server.returned
    )


def returned_probability(logits: torch.Tensor) -> tuple[int, float]:
    """(tokens returned, their total probability) of a [vocab] row: an engine's top N are log-probabilities with -inf
    for the rest; a whole row holds all of it."""
    returned = torch.isfinite(logits)
    count = int(returned.sum())
    return count, 1.0 if count == logits.numel() else float(logits[returned].double().exp().sum())
