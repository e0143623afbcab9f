"""The one reader of model configs, and the one KV-cache formula.

    shape = from_config(model.config)          # a transformers config object, or config.json as a dict
    shape = from_public_entry(entry)           # an entry of assets/public_models.json
    kv_cache_bytes(shape, tokens=4096, batch=1, bytes_per_element=2)

Per layer and sequence, a standard layer caches a key and a value of `head_dim` numbers per KV head for every token;
a sliding-window layer only for the last `window` tokens (Mistral-7B-v0.1: every layer; Gemma-2: every other one);
an MLA layer (DeepSeek-V2/V3) one latent of `kv_lora_rank + qk_rope_head_dim` numbers. transformers keeps
`window - 1` tokens between steps and attends over `window` with the new one; we count `min(tokens, window)`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from transformers import AutoConfig

FULL = "full_attention"
SLIDING = "sliding_attention"  # transformers' names in `config.layer_types`


@dataclass(frozen=True)
class MLARanks:
    """Multi-head Latent Attention sizes (DeepSeek-V2/V3 config keys)."""

    kv_lora_rank: int  # width of the compressed latent that is cached
    qk_rope_head_dim: int  # the RoPE part of each key, cached once per token (shared by heads)
    qk_nope_head_dim: int  # the rest of each head's key, rebuilt from the latent
    v_head_dim: int  # each head's value, rebuilt from the latent


@dataclass(frozen=True)
class ModelShape:
    layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    hidden_size: int
    context: int  # maximum positions
    vocab_size: int
    layer_types: tuple[str, ...]  # FULL or SLIDING, one per layer
    sliding_window: int | None = None  # tokens a SLIDING layer attends to
    mla: MLARanks | None = None

    @property
    def attention(self) -> str:
        """ "MLA", "MHA" (one K/V head per query head) or "GQA" (query heads share K/V heads)."""
        if self.mla is not None:
            return "MLA"
        return "MHA" if self.kv_heads == self.attention_heads else "GQA"

    @property
    def sliding_layers(self) -> int:
        return self.layer_types.count(SLIDING)

    def cached_tokens_per_layer(self, tokens: int) -> list[int]:
        return [min(tokens, self.sliding_window) if kind == SLIDING else tokens for kind in self.layer_types]

    def cached_values_per_token(self, one_kv_head_per_query_head: bool = False) -> int:
        """Numbers one layer caches per token; `one_kv_head_per_query_head`: as plain multi-head attention would
        (for MLA, the uncompressed per-head keys and values)."""
        mla = self.mla
        if mla is not None:
            if one_kv_head_per_query_head:
                return self.attention_heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim + mla.v_head_dim)
            return mla.kv_lora_rank + mla.qk_rope_head_dim
        return 2 * (self.attention_heads if one_kv_head_per_query_head else self.kv_heads) * self.head_dim  # K and V


def kv_cache_bytes(
    shape: ModelShape,
    tokens: int,
    batch: int = 1,
    bytes_per_element: float = 2,
    one_kv_head_per_query_head: bool = False,
) -> int:
    """THE KV-cache formula: bytes for `batch` sequences of `tokens` tokens, rounded up to whole bytes."""
    values = sum(shape.cached_tokens_per_layer(tokens)) * shape.cached_values_per_token(one_kv_head_per_query_head)
    return math.ceil(values * batch * Fraction(bytes_per_element))


def kv_bytes_per_token(shape: ModelShape, bytes_per_element: float = 2) -> int:
    """Bytes one more token adds to one sequence's cache while it is shorter than every window."""
    return kv_cache_bytes(shape, 1, 1, bytes_per_element)


def _lookup(source: Any, *names: str) -> Any:
    """The first of `names` that `source` (a dict or a config object) sets to something other than None."""
    for name in names:
        value = source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)
        if value is not None:
            return value
    return None


def _require(source: Any, *names: str) -> Any:
    value = _lookup(source, *names)
    if value is None:
        raise ValueError(f"The model config has none of {names}")
    return value


def _as_transformers_config(config: Mapping[str, Any]):
    """A config.json dict as transformers' class for its model_type (which fills in what the file leaves implicit,
    e.g. Gemma-2's alternating layers), or the dict itself when transformers does not know it (no remote code)."""
    try:
        return AutoConfig.for_model(config["model_type"], **{k: v for k, v in config.items() if k != "model_type"})
    except (ValueError, KeyError, TypeError):
        return config


def _layer_types(source: Any, layers: int) -> tuple[str, ...]:
    declared = _lookup(source, "layer_types")
    if declared is not None:
        return tuple(SLIDING if kind == SLIDING else FULL for kind in declared)  # chunked, linear...: counted as full
    if _lookup(source, "sliding_window") is not None and _lookup(source, "use_sliding_window") is not False:
        return (SLIDING,) * layers  # Mistral: a window on every layer (as transformers' cache infers)
    return (FULL,) * layers


def from_config(config: Any) -> ModelShape:
    """The shape of a model from its transformers config or config.json dict (Llama-style keys, GPT-2's
    n_layer/n_head/n_embd/n_positions, a multimodal model's text part)."""
    if isinstance(config, Mapping):
        config = _as_transformers_config(config.get("text_config") or config)
    if hasattr(config, "get_text_config"):
        config = config.get_text_config(decoder=True)
    layers = _require(config, "num_hidden_layers", "n_layer", "num_layers")
    heads = _require(config, "num_attention_heads", "n_head")
    hidden = _require(config, "hidden_size", "n_embd", "d_model")
    mla = None
    if _lookup(config, "kv_lora_rank") is not None:
        mla = MLARanks(
            *(_require(config, n) for n in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"))
        )
    types = _layer_types(config, layers)
    return ModelShape(
        layers=layers,
        attention_heads=heads,
        kv_heads=1 if _lookup(config, "multi_query") is True else _lookup(config, "num_key_value_heads") or heads,
        head_dim=_lookup(config, "head_dim") or hidden // heads,
        hidden_size=hidden,
        context=context_length(config),
        vocab_size=_require(config, "vocab_size"),
        layer_types=types,
        sliding_window=_lookup(config, "sliding_window") if SLIDING in types else None,
        mla=mla,
    )


def context_length(config: Any) -> int:
    """Maximum positions a config allows (Llama-style or GPT-2 keys)."""
    if hasattr(config, "get_text_config"):
        config = config.get_text_config(decoder=True)
    value = _lookup(config, "max_position_embeddings", "n_positions", "n_ctx", "seq_length")
    if not value:
        raise ValueError("The model config does not say its context length")
    return int(value)


def from_public_entry(entry: Mapping[str, Any]) -> ModelShape:
    """The shape of an `assets/public_models.json` entry: its `layer_types_pattern` repeats over the layers
    (Gemma-2: sliding, full); without one, a `sliding_window` covers every layer."""
    layers, window, pattern = entry["layers"], entry.get("sliding_window"), entry.get("layer_types_pattern")
    types = (
        tuple(pattern[i % len(pattern)] for i in range(layers)) if pattern else (SLIDING if window else FULL,) * layers
    )
    return ModelShape(
        layers=layers,
        attention_heads=entry["attention_heads"],
        kv_heads=entry["kv_heads"],
        head_dim=entry["head_dim"],
        hidden_size=entry["hidden_size"],
        context=entry["context"],
        vocab_size=entry["vocab_size"],
        layer_types=types,
        sliding_window=window if SLIDING in types else None,
        mla=MLARanks(**entry["mla"]) if entry.get("mla") else None,
    )


def decoder_config_fields(
    vocab: int, hidden: int, layers: int, heads: int, kv_heads: int, context: int, tied_embeddings: bool = True
) -> dict[str, Any]:
    """transformers' config fields for a decoder of this shape (Llama and Mixtral name them alike), for the models
    this project builds: the trainer's, the MoE lesson's and the serving page's random-weight one."""
    return dict(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=context,
        tie_word_embeddings=tied_embeddings,
    )
