"""What the MoE page reads from the statistics stored with a bundled model: the load per layer, the balance over
training, each expert's top tokens, how much the word decides the expert, and the MoE against the dense model.

Inputs are the files `python -m inference.training.moe_stats` and the trainer write beside the weights
(routing_stats.json, expert_load_log.json, training_meta.json); nothing here runs a model."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from inference.core.paths import BUNDLED_MODEL_DIR

IDLE_SHARE = 0.01  # an expert with less than this share of a layer's picks is counted as idle


def model_folder(source: str) -> Path | None:
    """The folder of the model loaded from `source` ("" = the bundled model), where its stored statistics live;
    None for a hub model."""
    folder = Path(source) if source else BUNDLED_MODEL_DIR
    return folder if folder.is_dir() else None


def training_stats(folder: Path | None) -> dict | None:
    """The trainer's final figures (training_meta.json's "stats"), or None when the folder has none."""
    meta_file = folder / "training_meta.json" if folder else None
    if meta_file and meta_file.exists():
        return json.loads(meta_file.read_text())["stats"]
    return None


@dataclass(frozen=True)
class Balance:
    """The trainer's load log at its first and last evaluation: how unevenly the experts were used."""

    first_step: int
    last_step: int
    busiest: tuple[float, float]  # the largest share of any expert in any layer, first and last
    idle: tuple[int, int]  # experts under IDLE_SHARE of their layer's picks, first and last
    experts_in_all: int  # layers x experts
    even_share: float  # 1 / experts


def balance(load_log: list[dict], layers: int, experts: int) -> Balance:
    first, last = load_log[0], load_log[-1]
    return Balance(
        first_step=first["step"],
        last_step=last["step"],
        busiest=tuple(max(max(r) for r in row["fractions"]) for row in (first, last)),
        idle=tuple(sum(f < IDLE_SHARE for r in row["fractions"] for f in r) for row in (first, last)),
        experts_in_all=layers * experts,
        even_share=1 / experts,
    )


def top_tokens_table(stats: dict, layer: int, expert: int) -> pd.DataFrame:
    """The tokens most often routed to `expert` in `layer`, with how many of their occurrences went there."""
    return pd.DataFrame(
        [
            {
                "token": repr(r["token"]),
                "times routed here": r["count"],
                "times in the text": r["occurrences"],
                "share sent here": r["count"] / r["occurrences"],
            }
            for r in stats["top_tokens"][layer][expert]
        ]
    )


@dataclass(frozen=True)
class WordInformation:
    """How much knowing the token tells about its first-choice expert, in one layer."""

    expert_entropy_bits: float
    mutual_information_bits: float

    @property
    def share(self) -> float:
        return self.mutual_information_bits / max(self.expert_entropy_bits, 1e-9)

    @property
    def word_decides(self) -> bool:
        return self.share >= 0.5


def word_information(stats: dict, layer: int) -> WordInformation:
    row = stats["information"][layer]
    return WordInformation(row["expert_entropy_bits"], row["mutual_information_bits"])


@dataclass(frozen=True)
class StoredLoad:
    """One layer's expert shares over the held-back stories, and the trainer's first count (pale bars)."""

    final: list[float]
    early: list[float] | None
    early_step: int | None
    tokens: int
    stories: int

    @property
    def source_label(self) -> str:
        return f"validation stories ({self.tokens:,} tokens)"


def stored_load(stats: dict, load_log: list[dict] | None, layer: int) -> StoredLoad:
    early = load_log[0] if load_log else None
    return StoredLoad(
        final=stats["load"]["fractions"][layer],
        early=early["fractions"][layer] if early else None,
        early_step=early["step"] if early else None,
        tokens=stats["source"]["tokens"],
        stories=stats["source"]["stories"],
    )


@dataclass(frozen=True)
class TrainedPair:
    """The MoE and the dense model as trained: held-out score and memorisation gap. (The decode times stored with
    the model are not shown: they were taken while a model trained on the same cores, one thread, and did not
    match a measurement made on the page; the page measures decode speed itself.)"""

    moe_heldout: float
    dense_heldout: float
    moe_gap: float  # validation minus training bits per byte
    dense_gap: float
    tokens_seen: int
    parameters: int  # the MoE's
    corpus_bytes: float  # the training text, from the trainer's token count and its bits per byte

    @property
    def moe_better(self) -> bool:
        return self.moe_heldout < self.dense_heldout

    @property
    def moe_memorises_more(self) -> bool:
        return self.moe_gap > self.dense_gap


def trained_pair(stats: dict, moe_meta: dict, dense_meta: dict) -> TrainedPair:
    return TrainedPair(
        moe_heldout=moe_meta["heldout_bits_per_byte"],
        dense_heldout=dense_meta["heldout_bits_per_byte"],
        moe_gap=moe_meta["val_bits_per_byte"] - moe_meta["train_bits_per_byte"],
        dense_gap=dense_meta["val_bits_per_byte"] - dense_meta["train_bits_per_byte"],
        tokens_seen=moe_meta["tokens_seen"],
        parameters=moe_meta["parameters"],
        corpus_bytes=moe_meta["train_tokens_in_corpus"] * bytes_per_token(moe_meta),
    )


def bundled_pair(moe_folder: Path) -> TrainedPair | None:
    """The bundled MoE against the bundled dense model, as trained (None without both models' figures)."""
    moe_meta, dense_meta = (
        training_stats(moe_folder if moe_folder.is_dir() else None),
        training_stats(BUNDLED_MODEL_DIR),
    )
    return trained_pair({}, moe_meta, dense_meta) if moe_meta and dense_meta else None


def bytes_per_token(meta: dict) -> float:
    """Bytes of text per token, read off the trainer's two scores of the same text: bits per byte = nats per token ÷
    (ln 2 × bytes per token)."""
    return meta["train_nats_per_token"] / (math.log(2) * meta["train_bits_per_byte"])


def sparsity_rows(pair: TrainedPair, moe_name: str, dense_name: str, moe_budget, dense_budget) -> pd.DataFrame:
    """The two models side by side for the sparsity chart: parameters held and used, quality."""
    return pd.DataFrame(
        [
            {
                "model": f"{moe_name} (MoE)",
                "total": moe_budget.total_parameters,
                "active": moe_budget.active_parameters,
                "bits_per_byte": pair.moe_heldout,
            },
            {
                "model": f"{dense_name} (dense)",
                "total": dense_budget.total_parameters,
                "active": dense_budget.active_parameters,
                "bits_per_byte": pair.dense_heldout,
            },
        ]
    )


def experiments_table(stats: dict) -> pd.DataFrame:
    """The stored router experiments (as trained, top-1, one expert off): validation score."""
    return pd.DataFrame(
        [{"name": e["name"], "k": e["k"], "bits_per_byte": e["val_bits_per_byte"]} for e in stats["experiments"]]
    )
