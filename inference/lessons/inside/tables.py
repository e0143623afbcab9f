"""Tables for the Inside page: the lens by layer, the KV heads, and every part of the pass."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from inference.lessons.inside.forward_pass import Inside

PART_COLUMNS = {
    "name": "part",
    "flops": "decode FLOPs",
    "prefill_flops": "prefill FLOPs",
    "bytes": "weight bytes",
    "read_bytes": "bytes a decode reads",
    "decode_ms": "decode ms",
    "prefill_ms": "prefill ms",
}


def lens_table(inside: Inside, name: Callable[[int], str], top: int = 3) -> pd.DataFrame:
    """One row per layer (0 = embeddings): its top tokens with their probabilities, and the followed token's."""
    rows = []
    followed = inside.followed_probs()
    for layer in range(inside.layers + 1):
        ids, probs = inside.lens_top(layer, top)
        row = {"layer": layer}
        row.update({f"#{i + 1}": f"{name(t)}  {p:.0%}" for i, (t, p) in enumerate(zip(ids, probs))})
        row["followed"] = followed[layer]
        rows.append(row)
    return pd.DataFrame(rows)


def kv_table(inside: Inside, layer: int) -> pd.DataFrame:
    """Per K/V head of `layer`: the query heads that read it and the bytes of its cached keys and values."""
    per_head = inside.cache_bytes_per_layer[layer] // len(inside.kv_groups)
    return pd.DataFrame(
        {
            "K/V head": list(range(len(inside.kv_groups))),
            "read by query heads": [", ".join(map(str, g)) for g in inside.kv_groups],
            "cached tokens": inside.context,
            "K and V bytes": per_head,
        }
    )


def parts_table(parts: pd.DataFrame) -> pd.DataFrame:
    return parts[list(PART_COLUMNS)].rename(columns=PART_COLUMNS)
