"""Memory arithmetic for serving a model: weights, KV cache, and how many accelerators they need.

    python -m inference.core.calculator Llama-3.1-70B --tokens 8192 --batch 4 --dtype bfloat16 --json

The KV Cache and Quantization pages call the same functions (`estimate`, `kv_table`, `fit_table`). GB = 10**9
bytes; accelerators hold the bytes nvidia-smi reports (`assets/accelerators.json`), not their label; the KV cache
is the one formula of `inference.core.model_config`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from inference.core import model_config
from inference.core.model_config import positive_int
from inference.core.paths import ACCELERATORS_FILE, PUBLIC_MODELS_FILE

GB = 10**9  # one gigabyte (decimal): every `*_gb` column
MIB = 2**20

BYTES_PER_ELEMENT: dict[str, float] = {
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "float8": 1,
    "int8": 1,
    "int4": 0.5,
}
CLI_DTYPES = ("bfloat16", "float16", "float32", "int8", "int4")
DEFAULT_BITS = (32, 16, 8, 4)

INT4_GROUP_SIZE = 128  # int4 weights: one bf16 scale and one bf16 zero point per group (as on the Quantization page)
INT4_GROUP_EXTRA_BYTES = 2 + 2

MAX_TOKENS = 10**8  # beyond any published context: larger numbers are typing mistakes
MAX_BATCH = 10**6


def weight_bytes(parameters: int, bits: float) -> int:
    """Bytes of `parameters` weights at `bits` bits each, rounded up to a whole byte (exact: no float rounding)."""
    return math.ceil(parameters * Fraction(bits) / 8)


def int4_scale_bytes(parameters: int) -> int:
    """Scales and zero points of int4 weights: one bf16 scale and zero per group of INT4_GROUP_SIZE weights."""
    return math.ceil(parameters / INT4_GROUP_SIZE) * INT4_GROUP_EXTRA_BYTES


@dataclass(frozen=True)
class Accelerator:
    label: str  # the marketing name, e.g. "H200 141 GB"
    usable_bytes: int  # what nvidia-smi reports as memory.total
    source: str


def load_accelerators(path: str | Path | None = None) -> list[Accelerator]:
    """The accelerators of `assets/accelerators.json`, smallest memory first."""
    data = json.loads(Path(path or ACCELERATORS_FILE).read_text(encoding="utf-8"))
    cards = [Accelerator(e["label"], e["nvidia_smi_mib"] * MIB, e["source"]) for e in data["accelerators"]]
    return sorted(cards, key=lambda card: card.usable_bytes)


def smallest_card(n_bytes: int, cards: Sequence[Accelerator]) -> Accelerator | None:
    """The first of `cards` (smallest memory first, as `load_accelerators` lists them) whose nvidia-smi
    memory holds `n_bytes`, or None when none does."""
    return next((card for card in cards if n_bytes <= card.usable_bytes), None)


def cards_needed(n_bytes: int, accelerator: Accelerator) -> int:
    """How many of these cards hold `n_bytes` (split evenly, nothing else on them)."""
    return max(1, math.ceil(n_bytes / accelerator.usable_bytes))


def load_public_models(path: str | Path | None = None) -> list[dict[str, Any]]:
    """The public model list (`assets/public_models.json`; its entries are checked by tests/test_calculator.py)."""
    return json.loads(Path(path or PUBLIC_MODELS_FILE).read_text(encoding="utf-8"))


def model_entry_from_hf_config(
    config: Any, name: str, parameters: int, hub_id: str = "", notes: str = ""
) -> dict[str, Any]:
    """A dense-model entry (same fields as public_models.json) from a transformers config or a config.json dict,
    read by `inference.core.model_config`, with the parameters counted elsewhere (loaded weights or a meta model)."""
    shape = model_config.from_config(config)
    pattern = list(shape.layer_types) if shape.sliding_layers else None
    return {
        "name": name,
        "hub_id": hub_id,
        "parameters": parameters,
        "active_parameters": parameters,
        "layers": shape.layers,
        "attention_heads": shape.attention_heads,
        "kv_heads": shape.kv_heads,
        "head_dim": shape.head_dim,
        "hidden_size": shape.hidden_size,
        "context": shape.context,
        "vocab_size": shape.vocab_size,
        "experts": None,
        "experts_per_token": None,
        "attention": shape.attention,
        "sliding_window": shape.sliding_window,
        "layer_types_pattern": pattern,
        "mla": asdict(shape.mla) if shape.mla else None,
        "source": {"config_json": "its own config.json", "parameter_count": "counted from the model's weights"},
        "notes": notes,
    }


def count_parameters(config: Any) -> int:
    """Parameters of the model a config.json dict describes, counted on a model built on the meta device (no memory,
    no download, no code shipped with the model). Tied weights count once."""
    kwargs = {k: v for k, v in config.items() if k != "model_type"}
    config = AutoConfig.for_model(config.get("model_type", ""), **kwargs)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def find_model(name: str, models: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """A public model by name (or hub id), or an entry built from a local config.json path."""
    models = load_public_models() if models is None else models
    for entry in models:
        if name in (entry["name"], entry["hub_id"]):
            return dict(entry)
    if Path(name).exists():  # a local config.json, or a folder holding one
        file = Path(name) / "config.json" if Path(name).is_dir() else Path(name)
        config = json.loads(file.read_text(encoding="utf-8"))
        return model_entry_from_hf_config(config, file.parent.name or str(file), count_parameters(config))
    raise ValueError(
        f"unknown model {name!r}: use a name from assets/public_models.json "
        f"({', '.join(m['name'] for m in models)}) or a path to a config.json"
    )


@dataclass(frozen=True)
class Estimate:
    """Memory to serve `batch` sequences of `tokens` tokens with one model, and the cards it takes."""

    model: str
    tokens: int
    batch: int
    dtype: str  # weights
    kv_dtype: str  # cache
    kv_bytes_per_token: int  # one more token of one sequence, below every sliding window
    kv_bytes: int  # the whole cache: sliding layers hold min(tokens, window)
    kv_bytes_if_kv_heads_equal_heads: int  # MHA (MLA: the uncompressed per-head cache it avoids)
    weight_bytes: int  # parameters x width (MoE: every expert)
    scale_bytes: int  # int4: scales and zero points per group; 0 otherwise
    total_bytes: int
    cards: dict[str, int]  # accelerator label -> cards needed for weights + scales + KV
    left_on_one_card: dict[str, int]  # accelerator label -> bytes left when one card holds it all (negative: short)
    exceeds_context: bool
    attention: str
    sliding_layers: int
    notes: str


def estimate(
    model: Mapping[str, Any],
    tokens: int,
    batch: int = 1,
    dtype: str = "bfloat16",
    kv_dtype: str | None = None,
    accelerators: Sequence[Accelerator] | None = None,
) -> Estimate:
    """Weights, KV cache and cards for one model entry. Raises ValueError naming a bad value."""
    tokens = positive_int("tokens", tokens)
    batch = positive_int("batch", batch)
    if tokens > MAX_TOKENS:
        raise ValueError(f"tokens must be at most {MAX_TOKENS:,}, got {tokens}")
    if batch > MAX_BATCH:
        raise ValueError(f"batch must be at most {MAX_BATCH:,}, got {batch}")
    kv_dtype = kv_dtype or dtype
    width, kv_width = BYTES_PER_ELEMENT[dtype], BYTES_PER_ELEMENT[kv_dtype]
    shape = model_config.from_public_entry(model)
    kv = model_config.kv_cache_bytes(shape, tokens, batch, kv_width)
    weights = weight_bytes(model["parameters"], width * 8)
    scales = int4_scale_bytes(model["parameters"]) if dtype == "int4" else 0
    total = weights + scales + kv
    cards = accelerators if accelerators is not None else load_accelerators()
    return Estimate(
        model=model["name"],
        tokens=tokens,
        batch=batch,
        dtype=dtype,
        kv_dtype=kv_dtype,
        kv_bytes_per_token=model_config.kv_bytes_per_token(shape, kv_width),
        kv_bytes=kv,
        kv_bytes_if_kv_heads_equal_heads=model_config.kv_cache_bytes(
            shape, tokens, batch, kv_width, one_kv_head_per_query_head=True
        ),
        weight_bytes=weights,
        scale_bytes=scales,
        total_bytes=total,
        cards={card.label: cards_needed(total, card) for card in cards},
        left_on_one_card={card.label: card.usable_bytes - total for card in cards},
        exceeds_context=tokens > shape.context,
        attention=shape.attention,
        sliding_layers=shape.sliding_layers,
        notes=model["notes"],
    )


def kv_table(
    models: Sequence[Mapping[str, Any]], context: int, batch: int = 1, precision: str = "bfloat16"
) -> pd.DataFrame:
    """KV cache and weight memory per model at `context` tokens x `batch` sequences, both at `precision`:
    `kv_gb_without_gqa` is one K/V head per query head (MLA: the uncompressed cache), `gqa_saving` their ratio."""
    rows = []
    for model in models:
        result = estimate(model, context, batch, precision, accelerators=())
        rows.append(
            {
                "model": result.model,
                "attention": result.attention,
                "attention_heads": model["attention_heads"],
                "kv_heads": model["kv_heads"],
                "sliding_layers": result.sliding_layers,
                "kv_gb": result.kv_bytes / GB,
                "kv_gb_without_gqa": result.kv_bytes_if_kv_heads_equal_heads / GB,
                "gqa_saving": result.kv_bytes_if_kv_heads_equal_heads / result.kv_bytes,
                "weight_gb": result.weight_bytes / GB,
                "kv_per_token_mb": result.kv_bytes_per_token / 10**6,
                "exceeds_context": result.exceeds_context,
                "notes": result.notes,
            }
        )
    return pd.DataFrame(rows)


def fit_table(
    models: Sequence[Mapping[str, Any]],
    bits_list: Sequence[float] = DEFAULT_BITS,
    accelerators: Sequence[Accelerator] | None = None,
) -> pd.DataFrame:
    """Weights only, every parameter at each width: `fits_on` the smallest listed card whose nvidia-smi memory holds
    them (or None), `left_gb` what it has left for the KV cache, `largest_needed` how many of the largest they take."""
    cards = load_accelerators() if accelerators is None else sorted(accelerators, key=lambda c: c.usable_bytes)
    rows = []
    for model in models:
        for bits in bits_list:
            n_bytes = weight_bytes(model["parameters"], bits)
            fits = smallest_card(n_bytes, cards)
            rows.append(
                {
                    "model": model["name"],
                    "bits": bits,
                    "parameters": model["parameters"],
                    "weight_gb": n_bytes / GB,
                    "fits_on": fits.label if fits else None,
                    "left_gb": (fits.usable_bytes - n_bytes) / GB if fits else None,
                    "largest": cards[-1].label,
                    "largest_needed": cards_needed(n_bytes, cards[-1]),
                }
            )
    return pd.DataFrame(rows)


def _human(n_bytes: int) -> str:
    return f"{n_bytes / GB:,.2f} GB" if n_bytes >= 10**8 else f"{n_bytes / 10**6:,.2f} MB"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m inference.core.calculator",
        description="Weights, KV cache and accelerators needed to serve a model.",
    )
    parser.error = lambda message: parser.exit(2, f"error: {message}\n")  # one line, argparse's exit code 2
    parser.add_argument("model", help="a name from assets/public_models.json, or a path to a config.json")
    parser.add_argument("--tokens", type=int, required=True, help="tokens per sequence (prompt + reply)")
    parser.add_argument("--batch", type=int, default=1, help="sequences served at once")
    parser.add_argument("--dtype", choices=CLI_DTYPES, default="bfloat16", help="weights (and, by default, the cache)")
    parser.add_argument("--kv-dtype", choices=CLI_DTYPES, default=None, help="cache precision, if not --dtype")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    try:
        result = estimate(find_model(args.model), args.tokens, args.batch, args.dtype, args.kv_dtype)
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(asdict(result)))
        return 0
    scales = f" + {_human(result.scale_bytes)} int4 scales and zeros" if result.scale_bytes else ""
    windows = (
        f"; {result.sliding_layers} sliding-window layers hold at most their window" if result.sliding_layers else ""
    )
    print(
        f"{result.model}: {result.tokens:,} tokens x batch {result.batch}, weights {result.dtype}, cache {result.kv_dtype}"
    )
    print(f"  weights   {_human(result.weight_bytes)}{scales}")
    print(f"  KV cache  {_human(result.kv_bytes)} ({result.kv_bytes_per_token:,} bytes per token{windows})")
    if result.exceeds_context:
        print(f"  note: {result.tokens:,} tokens is beyond this model's context")
    for label, count in result.cards.items():
        left = f" ({_human(result.left_on_one_card[label])} left)" if count == 1 else ""
        print(f"  {label}: {count} card{'s' if count > 1 else ''}{left}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
