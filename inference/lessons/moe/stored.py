"""What the MoE page reads from the files stored beside a bundled model (routing_stats.json from
`python -m inference.training.moe_stats`, the trainer's expert_load_log.json and training_meta.json): nothing here
runs a model."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from inference.core.paths import BUNDLED_MODEL_DIR

IDLE_SHARE = 0.01  # an expert with less than this share of a layer's picks is counted as idle


def model_folder(source: str) -> Path | None:
    """The folder of the model loaded from `source` ("" = the bundled model); None for a hub model."""
    folder = Path(source) if source else BUNDLED_MODEL_DIR
    return folder if folder.is_dir() else None


def read(folder: Path | None, name: str):
    """A stored JSON file of the model's folder, or None."""
    path = folder / name if folder else None
    return json.loads(path.read_text()) if path and path.exists() else None


def training_stats(folder: Path | None) -> dict | None:
    """The trainer's final figures (training_meta.json's "stats")."""
    meta = read(folder, "training_meta.json")
    return meta["stats"] if meta else None


def balance(load_log: list[dict], layers: int, experts: int) -> dict:
    """The load log at its first and last evaluation: the busiest expert's share and the idle experts (the
    `balance` sentence's fields)."""
    first, last = load_log[0], load_log[-1]

    def busiest(row):
        return max(max(r) for r in row["fractions"])

    def idle(row):
        return sum(f < IDLE_SHARE for r in row["fractions"] for f in r)

    return dict(
        first_step=first["step"],
        last_step=last["step"],
        busiest_first=busiest(first),
        busiest_last=busiest(last),
        idle_first=idle(first),
        idle_last=idle(last),
        experts=layers * experts,
        idle_share=IDLE_SHARE,
        even=1 / experts,
    )


def top_tokens_table(stats: dict, layer: int, expert: int) -> pd.DataFrame:
    """The tokens most often routed to `expert` in `layer`, with how many of their occurrences went there."""
    rows = pd.DataFrame(stats["top_tokens"][layer][expert], columns=["token", "count", "occurrences"])
    return pd.DataFrame(
        {
            "token": rows["token"].map(repr),
            "times routed here": rows["count"],
            "times in the text": rows["occurrences"],
            "share sent here": rows["count"] / rows["occurrences"],
        }
    )


def word_information(stats: dict, layer: int) -> dict:
    """How much knowing the token tells about its first-choice expert (the `word_verdict` sentence's fields)."""
    row = stats["information"][layer]
    share = row["mutual_information_bits"] / max(row["expert_entropy_bits"], 1e-9)
    return dict(entropy=row["expert_entropy_bits"], information=row["mutual_information_bits"], share=share)


@dataclass(frozen=True)
class TrainedPair:
    """The MoE and the dense model as trained: held-out score and memorisation gap. (The decode times stored with
    the model were taken while a model trained on the same cores: the page measures decode speed itself.)"""

    moe_heldout: float
    dense_heldout: float
    moe_gap: float  # validation minus training bits per byte
    dense_gap: float
    tokens_seen: int
    parameters: int  # the MoE's
    corpus_bytes: float  # the training text, from the trainer's token count and its bits per byte


def trained_pair(moe_meta: dict | None, dense_meta: dict | None) -> TrainedPair | None:
    """None without both models' figures. Bytes per token from the trainer's two scores of the same text: bits per
    byte = nats per token ÷ (ln 2 × bytes per token)."""
    if not (moe_meta and dense_meta):
        return None
    bytes_per_token = moe_meta["train_nats_per_token"] / (math.log(2) * moe_meta["train_bits_per_byte"])
    return TrainedPair(
        moe_heldout=moe_meta["heldout_bits_per_byte"],
        dense_heldout=dense_meta["heldout_bits_per_byte"],
        moe_gap=moe_meta["val_bits_per_byte"] - moe_meta["train_bits_per_byte"],
        dense_gap=dense_meta["val_bits_per_byte"] - dense_meta["train_bits_per_byte"],
        tokens_seen=moe_meta["tokens_seen"],
        parameters=moe_meta["parameters"],
        corpus_bytes=moe_meta["train_tokens_in_corpus"] * bytes_per_token,
    )


def sparsity_rows(pair: TrainedPair, moe_name: str, dense_name: str, moe_budget, dense_budget) -> pd.DataFrame:
    """The two models side by side for the sparsity chart: parameters held and used, quality."""
    return pd.DataFrame(
        [
            (f"{moe_name} (MoE)", moe_budget.total_parameters, moe_budget.active_parameters, pair.moe_heldout),
            (
                f"{dense_name} (dense)",
                dense_budget.total_parameters,
                dense_budget.active_parameters,
                pair.dense_heldout,
            ),
        ],
        columns=["model", "total", "active", "bits_per_byte"],
    )


def experiments_table(stats: dict) -> pd.DataFrame:
    """The stored router experiments (as trained, top-1, one expert off): validation score."""
    frame = pd.DataFrame(stats["experiments"])
    return frame[["name", "k", "val_bits_per_byte"]].rename(columns={"val_bits_per_byte": "bits_per_byte"})
