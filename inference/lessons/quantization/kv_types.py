"""The KV cache's number types beside the weights' (issue #27): what llama-server's `-ctk` / `-ctv` types cost
per token for the loaded model, computed exactly with the Inside-the-engine lesson's block layouts
(`engine_internals.kv_precision`), and, once measured there, what they do to the next-token distribution.

    kv_types_table(layers=6, kv_width=128, context=512)                  # bytes, computed
    kv_types_table(6, 128, 512, measured=kv_precision.compare(...).table)  # plus KL, top-1, decode speed
"""

from __future__ import annotations

import pandas as pd

from inference.lessons.engine_internals import kv_precision

KV_POSITIONS = 192  # positions of text scored: the Inside the engine page's default, so the two share one result
KV_TYPES = ("f32", "f16", "q8_0", "q4_0")  # the cache types the Inside-the-engine lesson measures
MEASURED_COLUMNS = {  # kv_precision's column -> this table's
    "mean_kl_vs_f32": "mean KL vs f32 cache",
    "top1_agreement_vs_f32": "top-1 agreement",
    "decode_tokens_per_s": "decode tokens/s",
}
KV_FORMATS = {  # printf formats for the page's table (a dataframe's column formats)
    "bits per number": "%.1f",
    "bytes per token": "localized",
    "MiB for the full context": "%.2f",
    "size vs f16": "%.2f×",
    "mean KL vs f32 cache": "%.1e",
    "top-1 agreement": "percent",
    "decode tokens/s": "%.0f",
}
KV_TEXT_FORMATS = {  # the same as Python formats, for the HTML table of presenter mode
    "bits per number": "{:.1f}",
    "bytes per token": "{:,.0f}",
    "MiB for the full context": "{:.2f}",
    "size vs f16": "{:.2f}×",
    "mean KL vs f32 cache": "{:.1e}",
    "top-1 agreement": "{:.0%}",
    "decode tokens/s": "{:,.0f}",
}


def _measured_row(measured: pd.DataFrame, ggml_type: str) -> pd.Series | None:
    """The measured row for keys and values both of `ggml_type`: with flash attention on where the lesson ran both
    (a quantized V cache needs it), else the one there is."""
    rows = measured[(measured["type_k"] == ggml_type) & (measured["type_v"] == ggml_type)]
    if rows.empty:
        return None
    with_flash = rows[rows["flash_attention"]]
    return (with_flash if len(with_flash) else rows).iloc[0]


def kv_types_table(layers: int, kv_width: int, context: int, measured: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per cache type: bits per stored number, bytes per token and for a full context of `context` tokens
    (one sequence), and the size against f16; with `measured` (kv_precision's comparison table), its KL from the
    f32 cache, top-1 agreement and decode speed. A type whose blocks do not divide `kv_width` gets no bytes."""
    reference = kv_precision.kv_bytes_per_token(layers, kv_width, "f16")
    rows = []
    for ggml_type in KV_TYPES:
        try:
            per_token = kv_precision.kv_bytes_per_token(layers, kv_width, ggml_type)
        except ValueError:  # a row must hold whole blocks of 32
            per_token = None
        row = {
            "cache type": ggml_type,
            "bits per number": kv_precision.bytes_per_value(ggml_type) * 8,
            "bytes per token": per_token,
            "MiB for the full context": None
            if per_token is None
            else kv_precision.mib(kv_precision.bytes_for_context(per_token, context)),
            "size vs f16": None if per_token is None else per_token / reference,
        }
        if measured is not None:
            found = _measured_row(measured, ggml_type)
            for column, shown in MEASURED_COLUMNS.items():
                row[shown] = None if found is None else found[column]
        rows.append(row)
    return pd.DataFrame(rows)
