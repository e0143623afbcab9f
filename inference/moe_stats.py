"""Routing statistics and experiments of a trained MoE model, stored next to its weights.

    python -m inference.moe_stats [FOLDER]      # default: assets/models/storyteller-moe-16m

The app cannot read the corpus at run time, so everything that needs the validation stories
is computed here, once, and written to FOLDER/routing_stats.json:

- load: over the trainer's own validation split (`corpus.split_train_validation(stories,
  validation_fraction, seed)` with the settings in training_meta.json, never trained on), the
  (token, slot) picks each expert received in every layer, and each layer's first choices;
- top tokens: per layer and expert, the tokens most often routed to it, with counts;
- experiments: bits per byte on the same stories with the model as trained (top-2), with one
  expert per token (top-1), and with one expert switched off (each index in turn, in every
  layer), next to the dense model; decode time per token of each, measured on this machine.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path
from statistics import median

import torch

from inference import corpus as corpus_io
from inference import routing
from inference.evaluate import score_stream
from inference.loader import encode_prompt, load_model
from inference.paths import BUNDLED_MODEL_DIR, DEFAULT_CORPUS_DIR, MODELS_DIR

MOE_MODEL_DIR = MODELS_DIR / "storyteller-moe-16m"
TIMING_PROMPT = "Once upon a time, there was a little girl named Lily. She loved to"
TIMING_STEPS = 48
TIMING_REPEATS = 5


def validation_stories(folder: Path, corpus_dir: Path) -> list[str]:
    """The stories the trainer held back for this model (its own split settings)."""
    settings = json.loads((folder / "training_meta.json").read_text())["settings"]
    stories = corpus_io.read_stories(corpus_dir)
    _, validation = corpus_io.split_train_validation(stories, settings["validation_fraction"], settings["seed"])
    return validation


def timings(models: dict[str, object], prompt_ids: list[int], repeats: int = TIMING_REPEATS,
            steps: int = TIMING_STEPS) -> dict[str, float]:
    """Median decode ms per token of each model, runs interleaved so a busy spell hits all alike."""
    runs = {name: [] for name in models}
    for model in models.values():
        routing.decode_ms_per_token(model, prompt_ids, 4)  # warm-up
    for _ in range(repeats):
        for name, model in models.items():
            runs[name].append(routing.decode_ms_per_token(model, prompt_ids, steps))
    return {name: median(values) for name, values in runs.items()}


def compute(folder: Path, corpus_dir: Path = DEFAULT_CORPUS_DIR, dense_folder: Path = BUNDLED_MODEL_DIR,
            switch_off: list[int] | None = None, log=print) -> dict:
    started = time.time()
    torch.set_num_threads(1)  # as the app runs (Limits.torch_threads)
    moe = load_model(str(folder.resolve()))
    dense = load_model(str(dense_folder.resolve()))
    model, tokenizer = moe.model, moe.tokenizer
    shape = routing.ExpertShape.of(model)
    stories = validation_stories(folder, corpus_dir)
    ids = corpus_io.stories_to_stream(tokenizer(stories, add_special_tokens=False)["input_ids"], tokenizer.eos_token_id)
    n_bytes = corpus_io.utf8_bytes(stories)
    log(f"{len(stories)} validation stories, {len(ids):,} tokens, {n_bytes:,} bytes")

    recorded = routing.route(model, ids)
    stats = {
        "model": folder.name,
        "source": {
            "text": "the trainer's validation split (corpus.split_train_validation with the model's settings), "
                    "never trained on",
            "stories": len(stories), "tokens": len(ids), "bytes": n_bytes, "window": 512,
        },
        "shape": asdict(shape),
        "load": routing.load_stats(recorded),
        "top_tokens": routing.expert_top_tokens(recorded, tokenizer),
        "information": routing.token_expert_information(recorded),
        "budget": {"moe": asdict(routing.budget(model)), "dense": asdict(routing.budget(dense.model)),
                   "dtype": "float32 (as the app loads them)"},
    }
    log(f"routing done ({time.time() - started:.0f} s)")

    switch_off = list(range(shape.experts)) if switch_off is None else switch_off
    variants = {"top-2 (as trained)": (shape.k, ())}
    if shape.k > 1:
        variants["top-1"] = (1, ())
    for e in switch_off:
        variants[f"expert {e} off"] = (shape.k, (e,))
    experiments = []
    for name, (k, off) in variants.items():
        twin = routing.variant(model, k=k, off=off)
        report = score_stream(twin, ids, n_bytes)
        experiments.append({"name": name, "k": k, "off": list(off), "val_bits_per_byte": report.bits_per_byte,
                            "val_nats_per_token": report.nats_per_token})
        log(f"{name}: {report.bits_per_byte:.4f} bits/byte ({time.time() - started:.0f} s)")
    dense_report = score_stream(dense.model, ids, n_bytes)
    stats["experiments"] = experiments
    stats["dense"] = {"model": dense_folder.name, "val_bits_per_byte": dense_report.bits_per_byte,
                      "val_nats_per_token": dense_report.nats_per_token}

    prompt = encode_prompt(tokenizer, TIMING_PROMPT)
    timed = {"dense": dense.model, "top-2 (as trained)": model}
    if shape.k > 1:
        timed["top-1"] = routing.variant(model, k=1)
    if switch_off:
        timed[f"expert {switch_off[0]} off"] = routing.variant(model, off=(switch_off[0],))
    ms = timings(timed, prompt)
    stats["decode_ms_per_token"] = ms
    stats["timing"] = {
        "how": f"median of {TIMING_REPEATS} interleaved runs of {TIMING_STEPS} greedy decode steps through "
               f"transformers' forward with a KV cache, {len(prompt)}-token prompt, one torch thread, float32",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}",
        "conditions": "measured while a model trained and other jobs ran on the same 2 cores: "
                      "ratios between models are steadier than the times themselves",
    }
    stats["elapsed_s"] = round(time.time() - started, 1)
    return stats


def write(folder: Path, stats: dict) -> Path:
    path = folder / routing.STATS_FILE
    path.write_text(json.dumps(stats, indent=1) + "\n")
    return path


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0]) if args else MOE_MODEL_DIR
    print(write(folder, compute(folder)))


if __name__ == "__main__":
    main()
