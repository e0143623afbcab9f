"""The Quantization page's tables as plain frames, each column with its dataframe format and hover help: bytes at
each width, the torch copies' cost and drift, the KV cache's number types, and will it fit (public models on public
cards, keeping a stated runtime reserve free on every card: a model whose weights fill a card does not run)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd
from torch import nn

from inference.core import real_model
from inference.core.calculator import DEFAULT_BITS, GB, Accelerator, cards_needed, fit_table, smallest_card
from inference.lessons import glossary
from inference.lessons.engine_internals import kv_precision

WIDTHS = {"float32": 4.0, "bfloat16": 2.0, "int8": 1.0, "int4": 0.5}  # bytes per weight; scales are extra
RUNTIME_RESERVE_BYTES = 1 * GB  # an assumption, stated on the page: not a measurement of any one framework
RUNTIME_RESERVE_WHAT = "the CUDA context, activations and the kernels' workspaces"
KV_POSITIONS = 192  # positions scored: the Inside the engine page's default, so the two share one result
KV_TYPES = ("f32", "f16", "q8_0", "q4_0")


def text_format(spec: str) -> str:
    """A dataframe column format as Python's: "%.2f×" -> "{:,.2f}×", "localized" -> "{:,.0f}", "percent" -> "{:.0%}"."""
    named = {"localized": "{:,.0f}", "percent": "{:.0%}"}
    return named.get(spec) or re.sub(
        r"%(\.\d+)?([fe])", lambda m: f"{{:{',' if m[2] == 'f' else ''}{m[1] or ''}{m[2]}}}", spec
    )


def text_formats(columns: dict) -> dict[str, str]:
    return {c: text_format(f) for c, (f, _) in columns.items() if f != "text"}


# -- bytes at each width ---------------------------------------------------------------------------------

BYTES_COLUMNS = {"bytes per weight": ("%.2f", None), "weight bytes": ("localized", None), "vs float32": ("%.2f×", None)}


def parameters(model: nn.Module) -> int:
    """The model's parameters, each counted once (a head tied to the embeddings is the same tensor)."""
    return sum(p.numel() for p in model.parameters())


def bytes_table(model: nn.Module, model_name: str) -> pd.DataFrame:
    """One row per width, every parameter at that width; on SmolLM2 with its wheel, the wheel's Q4_1 file too."""
    count = parameters(model)
    rows = [(name, width, round(count * width)) for name, width in WIDTHS.items()]
    path = real_model.gguf_path() if model_name == real_model.REAL_MODEL_NAME else None
    if path is not None:
        rows.append(("Q4_1 GGUF (the wheel's file)", path.stat().st_size / count, path.stat().st_size))
    frame = pd.DataFrame(rows, columns=["stored as", "bytes per weight", "weight bytes"])
    frame["vs float32"] = frame["weight bytes"] / frame.loc[0, "weight bytes"]
    return frame


# -- the torch copies ------------------------------------------------------------------------------------

COST_COLUMNS = {
    "weight bytes": ("localized", "Summed from the real tensors, quantized parts (integers, scales, zeros) included"),
    "size vs float32": ("%.2f×", None),
    "time to quantize": ("text", "Time to copy and convert; float32 is the loaded model itself"),
    "decode tokens/s": ("%.0f", None),
    "speed vs float32": ("%.2f×", "Median of the rounds' ratios"),
    "range over rounds": ("text", "Smallest and largest ratio of a single round"),
}
QUALITY_COLUMNS = {
    "mean KL from float32 (nats)": (
        "%.1e",
        "Average over the steps of KL(float32 ‖ this precision): how far this copy's next-token distribution is from "
        f"float32's (0 means identical). {glossary.help_for('nats')}",
    ),
    "top-1 agreement": ("percent", "Share of steps where the most likely token is float32's"),
    "mean p(float32's token)": ("percent", "Average probability this precision gives the token float32 chose"),
    "own greedy text departs at": ("text", "First step where this precision's own greedy text differs from float32's"),
}


def cost_table(summary: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "precision": summary["precision"],
            "weight bytes": summary["weight_bytes"],
            "size vs float32": summary["size_vs_float32"],
            "time to quantize": summary["quantize_s"].map(lambda s: "reference" if pd.isna(s) else f"{s:.2f} s"),
            "decode tokens/s": summary["decode_tokens_per_s"],
            "speed vs float32": summary["speed_vs_float32"],
            "range over rounds": [f"{lo:.2f}–{hi:.2f}×" for lo, hi in zip(summary["speed_low"], summary["speed_high"])],
        }
    )


def quality_table(summary: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "precision": summary["precision"],
            "mean KL from float32 (nats)": summary["mean_kl_nats"],
            "top-1 agreement": summary["top1_agreement"],
            "mean p(float32's token)": summary["mean_p_float32_token"],
            "own greedy text departs at": summary["first_departure"].map(
                lambda s: "never" if pd.isna(s) else f"step {int(s)}"
            ),
        }
    )


# -- the KV cache's number types ---------------------------------------------------------------------------

KV_COLUMNS = {
    "bits per number": ("%.1f", None),
    "bytes per token": ("localized", None),
    "MiB for the full context": ("%.2f", None),
    "size vs f16": ("%.2f×", None),
    "mean KL vs f32 cache": ("%.1e", None),
    "top-1 agreement": ("percent", None),
    "decode tokens/s": ("%.0f", None),
}
KV_MEASURED = {  # kv_precision's column -> this table's
    "mean_kl_vs_f32": "mean KL vs f32 cache",
    "top1_agreement_vs_f32": "top-1 agreement",
    "decode_tokens_per_s": "decode tokens/s",
}


def kv_types_table(layers: int, kv_width: int, context: int, measured: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per cache type: bits per number, bytes per token and for `context` tokens, size against f16 (none
    when its blocks of 32 do not divide `kv_width`); with `measured` (kv_precision's table), KL from the f32 cache,
    top-1 agreement and decode speed, from the row with flash attention on where both ran."""
    whole = kv_width % 32 == 0
    rows = []
    for ggml_type in KV_TYPES:
        per_token = (
            kv_precision.kv_bytes_per_token(layers, kv_width, ggml_type) if whole or ggml_type.startswith("f") else None
        )
        rows.append(
            {
                "cache type": ggml_type,
                "bits per number": kv_precision.bytes_per_value(ggml_type) * 8,
                "bytes per token": per_token,
            }
        )
    frame = pd.DataFrame(rows)
    frame["MiB for the full context"] = frame["bytes per token"] * context / 2**20
    frame["size vs f16"] = frame["bytes per token"] / frame.loc[1, "bytes per token"]
    if measured is not None:
        same = measured[measured["type_k"] == measured["type_v"]].sort_values("flash_attention", ascending=False)
        found = (
            same.drop_duplicates("type_k").set_index("type_k").rename(columns=KV_MEASURED)[list(KV_MEASURED.values())]
        )
        frame = frame.join(found, on="cache type")
    return frame


# -- will it fit -------------------------------------------------------------------------------------------

FIT_HEADERS = {  # calculator.fit_table's columns -> the page's headers (model, bits and parameters as they are)
    "weight_gb": "weight GB",
    "fits_on": "smallest card that holds it",
    "left_gb": "GB left for the KV cache",
    "largest": "largest card",
    "largest_needed": "largest cards needed",
}
FIT_COLUMNS = {
    "parameters": ("localized", None),
    "weight GB": ("%.1f", None),
    "GB left for the KV cache": ("%.1f", None),
}


def after_reserve(cards: Sequence[Accelerator]) -> list[Accelerator]:
    """The cards with the runtime reserve taken off: what weights and KV cache may use."""
    return [replace(card, usable_bytes=card.usable_bytes - RUNTIME_RESERVE_BYTES) for card in cards]


def reserved_fit_table(models: Sequence[Mapping[str, Any]], cards: Sequence[Accelerator]) -> pd.DataFrame:
    """`calculator.fit_table` on the cards after the reserve: `left_gb` is what remains for the KV cache."""
    return fit_table(models, DEFAULT_BITS, after_reserve(cards))


def smallest_card_after_reserve(n_bytes: int, cards: Sequence[Accelerator]) -> tuple[Accelerator | None, int]:
    """The calculator under the table's rule: the smallest card holding `n_bytes` beside the reserve (or None),
    and how many of the largest card the weights need."""
    reduced = after_reserve(cards)
    return smallest_card(n_bytes, reduced), cards_needed(n_bytes, reduced[-1])


def fit_display(fit: pd.DataFrame) -> pd.DataFrame:
    """The fit table with readable headers, GB rounded to 0.1 (what the heatmap's cells say)."""
    shown = fit[["model", "bits", "parameters", *FIT_HEADERS]].rename(columns=FIT_HEADERS)
    return shown.round({"weight GB": 1, "GB left for the KV cache": 1})
