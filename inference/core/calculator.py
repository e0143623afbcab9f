"""Memory to serve a model: weights, KV cache, and how many accelerators they need.

    python -m inference.core.calculator Llama-3.1-70B --tokens 8192 --batch 4 --dtype bfloat16 --json

The KV Cache and Quantization pages call the same functions. GB = 10**9 bytes; a card holds the bytes nvidia-smi
reports (`assets/accelerators.json`), not its label; the KV cache is `model_config`'s one formula. The project's
own JSON files are checked by tests/test_calculator.py, not here.
"""

from __future__ import annotations

import argparse
import json
import math
import numbers
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
from inference.core.paths import ACCELERATORS_FILE, PUBLIC_MODELS_FILE

GB, MIB = 10**9, 2**20
BYTES_PER_ELEMENT = {"float32": 4, "bfloat16": 2, "float16": 2, "float8": 1, "int8": 1, "int4": 0.5}
CLI_DTYPES = ("bfloat16", "float16", "float32", "int8", "int4")
DEFAULT_BITS = (32, 16, 8, 4)
INT4_GROUP_SIZE, INT4_GROUP_EXTRA_BYTES = 128, 2 + 2  # one bf16 scale and zero point per group (Quantization page)
MAX = {"tokens": 10**8, "batch": 10**6}  # beyond any published context or server: a typing mistake


def weight_bytes(parameters: int, bits: float) -> int:
    """Bytes of `parameters` weights at `bits` bits each, rounded up to a whole byte (exact: no float rounding)."""
    return math.ceil(parameters * Fraction(bits) / 8)


@dataclass(frozen=True)
class Accelerator:
    label: str  # the marketing name, e.g. "H200 141 GB"
    usable_bytes: int  # what nvidia-smi reports as memory.total
    source: str


def load_accelerators(path: str | Path | None = None) -> list[Accelerator]:
    """The cards of `assets/accelerators.json`, smallest memory first."""
    data = json.loads(Path(path or ACCELERATORS_FILE).read_text(encoding="utf-8"))
    cards = [Accelerator(e["label"], e["nvidia_smi_mib"] * MIB, e["source"]) for e in data["accelerators"]]
    return sorted(cards, key=lambda card: card.usable_bytes)


def smallest_card(n_bytes: int, cards: Sequence[Accelerator]) -> Accelerator | None:
    """The first of `cards` (smallest first) whose memory holds `n_bytes`, or None."""
    return next((card for card in cards if n_bytes <= card.usable_bytes), None)


def cards_needed(n_bytes: int, accelerator: Accelerator) -> int:
    return max(1, math.ceil(n_bytes / accelerator.usable_bytes))


def load_public_models(path: str | Path | None = None) -> list[dict[str, Any]]:
    return json.loads(Path(path or PUBLIC_MODELS_FILE).read_text(encoding="utf-8"))


def model_entry_from_hf_config(config: Any, name: str, parameters: int) -> dict[str, Any]:
    """A dense-model entry (the fields of public_models.json) from a transformers config or config.json dict."""
    shape = model_config.from_config(config)
    fields = ("layers", "attention_heads", "kv_heads", "head_dim", "hidden_size", "context", "vocab_size")
    return {
        "name": name,
        "hub_id": "",
        "parameters": parameters,
        "active_parameters": parameters,
        **{field: getattr(shape, field) for field in (*fields, "attention", "sliding_window")},
        "experts": None,
        "experts_per_token": None,
        "layer_types_pattern": list(shape.layer_types) if shape.sliding_layers else None,
        "mla": asdict(shape.mla) if shape.mla else None,
        "source": {"config_json": "its own config.json", "parameter_count": "counted from the model's weights"},
        "notes": "",
    }


def count_parameters(config: dict) -> int:
    """Parameters of a config.json's model, counted on the meta device (no memory, no download, no remote code)."""
    config = AutoConfig.for_model(
        config.get("model_type", ""), **{k: v for k, v in config.items() if k != "model_type"}
    )
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())  # tied weights count once


def find_model(name: str, models: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """A public model by name (or hub id), or an entry built from a local config.json (or its folder)."""
    models = load_public_models() if models is None else models
    for entry in models:
        if name in (entry["name"], entry["hub_id"]):
            return dict(entry)
    if Path(name).exists():
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
    left_on_one_card: dict[str, int]  # accelerator label -> bytes left on one card (negative: short)
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
    """Weights, KV cache and cards for one model entry. Raises ValueError naming a bad size."""
    for name, value in (("tokens", tokens), ("batch", batch)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 < value <= MAX[name]:
            raise ValueError(f"{name} must be a whole number from 1 to {MAX[name]:,}, got {value!r}")
    kv_dtype = kv_dtype or dtype
    kv_width = BYTES_PER_ELEMENT[kv_dtype]
    shape = model_config.from_public_entry(model)
    kv = model_config.kv_cache_bytes(shape, tokens, batch, kv_width)
    weights = weight_bytes(model["parameters"], BYTES_PER_ELEMENT[dtype] * 8)
    scales = math.ceil(model["parameters"] / INT4_GROUP_SIZE) * INT4_GROUP_EXTRA_BYTES if dtype == "int4" else 0
    total = weights + scales + kv
    cards = load_accelerators() if accelerators is None else accelerators
    return Estimate(
        model=model["name"],
        tokens=int(tokens),
        batch=int(batch),
        dtype=dtype,
        kv_dtype=kv_dtype,
        kv_bytes_per_token=model_config.kv_bytes_per_token(shape, kv_width),
        kv_bytes=kv,
        kv_bytes_if_kv_heads_equal_heads=model_config.kv_cache_bytes(shape, tokens, batch, kv_width, True),
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
    """KV cache and weights per model at `context` tokens x `batch`, both at `precision`; `kv_gb_without_gqa` is one
    K/V head per query head (MLA: the uncompressed cache), `gqa_saving` their ratio."""
    t = pd.DataFrame([asdict(estimate(m, context, batch, precision, accelerators=())) for m in models])
    t["attention_heads"], t["kv_heads"] = [m["attention_heads"] for m in models], [m["kv_heads"] for m in models]
    t["kv_gb"], t["kv_gb_without_gqa"] = t.kv_bytes / GB, t.kv_bytes_if_kv_heads_equal_heads / GB
    t["gqa_saving"], t["weight_gb"] = t.kv_gb_without_gqa / t.kv_gb, t.weight_bytes / GB
    t["kv_per_token_mb"] = t.kv_bytes_per_token / 10**6
    columns = ["model", "attention", "attention_heads", "kv_heads", "sliding_layers", "kv_gb", "kv_gb_without_gqa"]
    return t[[*columns, "gqa_saving", "weight_gb", "kv_per_token_mb", "exceeds_context", "notes"]]


def fit_table(
    models: Sequence[Mapping[str, Any]],
    bits_list: Sequence[float] = DEFAULT_BITS,
    accelerators: Sequence[Accelerator] | None = None,
) -> pd.DataFrame:
    """Weights only, at each width: `fits_on` the smallest card that holds them (or None), `left_gb` what it has
    left for the KV cache, `largest_needed` how many of the largest card they take."""
    cards = load_accelerators() if accelerators is None else sorted(accelerators, key=lambda c: c.usable_bytes)
    rows = [
        (m["name"], bits, m["parameters"], weight_bytes(m["parameters"], bits)) for m in models for bits in bits_list
    ]
    t = pd.DataFrame(rows, columns=["model", "bits", "parameters", "n_bytes"])
    fits = [smallest_card(n, cards) for n in t.n_bytes]
    t["weight_gb"], t["fits_on"] = t.n_bytes / GB, [f.label if f else None for f in fits]
    t["left_gb"] = [(f.usable_bytes - n) / GB if f else None for f, n in zip(fits, t.n_bytes)]
    t["largest"], t["largest_needed"] = cards[-1].label, [cards_needed(n, cards[-1]) for n in t.n_bytes]
    return t.drop(columns="n_bytes")


def _human(n_bytes: int) -> str:
    return f"{n_bytes / GB:,.2f} GB" if n_bytes >= 10**8 else f"{n_bytes / 10**6:,.2f} MB"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m inference.core.calculator", description="Weights, KV cache and accelerators to serve a model."
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
        r = estimate(find_model(args.model), args.tokens, args.batch, args.dtype, args.kv_dtype)
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(asdict(r)))
        return 0
    scales = f" + {_human(r.scale_bytes)} int4 scales and zeros" if r.scale_bytes else ""
    windows = f"; {r.sliding_layers} sliding-window layers hold at most their window" if r.sliding_layers else ""
    print(f"{r.model}: {r.tokens:,} tokens x batch {r.batch}, weights {r.dtype}, cache {r.kv_dtype}")
    print(f"  weights   {_human(r.weight_bytes)}{scales}")
    print(f"  KV cache  {_human(r.kv_bytes)} ({r.kv_bytes_per_token:,} bytes per token{windows})")
    if r.exceeds_context:
        print(f"  note: {r.tokens:,} tokens is beyond this model's context")
    for label, count in r.cards.items():
        left = f" ({_human(r.left_on_one_card[label])} left)" if count == 1 else ""
        print(f"  {label}: {count} card{'s' if count > 1 else ''}{left}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
