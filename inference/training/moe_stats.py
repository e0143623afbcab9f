"""Routing statistics and experiments of a trained MoE, written once beside its weights (the app never reads the
corpus): FOLDER/routing_stats.json holds, over the trainer's own validation split, each expert's load and top tokens
per layer, bits per byte as trained, with one expert per token and with one expert off, beside the dense model, and
the decode time per token of each on this machine.

    python -m inference.training.moe_stats [FOLDER]      # default: assets/models/storyteller-moe-16m
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
from dataclasses import asdict
from pathlib import Path

import torch

from inference.core import routing
from inference.core.forward import PREFILL, TransformersForward
from inference.core.loader import encode_prompt, load_model
from inference.core.measuring import ms_since, now
from inference.core.paths import BUNDLED_MODEL_DIR, DEFAULT_CORPUS_DIR
from inference.training import corpus as corpus_io
from inference.training.evaluate import score_stream

TIMING_PROMPT = "Once upon a time, there was a little girl named Lily. She loved to"
TIMING_STEPS = 48
TIMING_REPEATS = 5
SCORE_WINDOW = 512  # windows without overlap, as the trainer's evaluations: half the work of the card's


def route(model, token_ids: list[int], window: int = SCORE_WINDOW) -> routing.Routing:
    """Routing of every token, from the routers' logits of one forward pass per window (each a fresh context)."""
    chunks = [
        TransformersForward(model, None).next_pass(token_ids[start : start + window], PREFILL).router_logits
        for start in range(0, len(token_ids), window)
    ]
    return routing.Routing(list(token_ids), torch.cat(chunks, dim=1).softmax(-1), model.config.num_experts_per_tok)


def validation_stories(folder: Path, corpus_dir: Path) -> list[str]:
    settings = json.loads((folder / "training_meta.json").read_text())["settings"]
    stories = corpus_io.read_stories(corpus_dir)
    _, validation = corpus_io.split_train_validation(stories, settings["validation_fraction"], settings["seed"])
    return validation


def compute(
    folder: Path,
    corpus_dir: Path = DEFAULT_CORPUS_DIR,
    dense_folder: Path = BUNDLED_MODEL_DIR,
    switch_off: list[int] | None = None,
    log=print,
    timing_repeats: int = TIMING_REPEATS,
    timing_steps: int = TIMING_STEPS,
) -> dict:
    started = now()
    torch.set_num_threads(1)  # as the app runs (Limits.torch_threads)
    moe = load_model(str(folder.resolve()))
    dense = load_model(str(dense_folder.resolve()))
    model, tokenizer = moe.model, moe.tokenizer
    shape = routing.ExpertShape.of(model)
    stories = validation_stories(folder, corpus_dir)
    ids = corpus_io.stories_to_stream(tokenizer(stories, add_special_tokens=False)["input_ids"], tokenizer.eos_token_id)
    n_bytes = corpus_io.utf8_bytes(stories)
    log(f"{len(stories)} validation stories, {len(ids):,} tokens, {n_bytes:,} bytes")

    recorded = route(model, ids)
    stats = {
        "model": folder.name,
        "source": {
            "text": "the trainer's validation split (corpus.split_train_validation with the model's settings), "
            "never trained on",
            "stories": len(stories),
            "tokens": len(ids),
            "bytes": n_bytes,
            "window": SCORE_WINDOW,
            "scoring": f"windows of {SCORE_WINDOW} tokens without overlap (as the trainer's periodic evaluation)",
        },
        "shape": asdict(shape),
        "load": routing.load_stats(recorded),
        "top_tokens": routing.expert_top_tokens(recorded, tokenizer),
        "information": routing.token_expert_information(recorded),
        "budget": {
            "moe": asdict(routing.budget(model)),
            "dense": asdict(routing.budget(dense.model)),
            "dtype": "float32 (as the app loads them)",
        },
    }
    log(f"routing done ({ms_since(started) / 1000:.0f} s)")

    if switch_off is None:  # the busiest expert index over all layers: the one whose loss should cost most
        switch_off = [int(torch.tensor(stats["load"]["fractions"]).mean(dim=0).argmax())]
    as_trained = f"top-{shape.k} (as trained)"
    variants = {as_trained: (shape.k, ()), **({"top-1": (1, ())} if shape.k > 1 else {})}
    variants.update({f"expert {e} off": (shape.k, (e,)) for e in switch_off})
    twins = {name: routing.variant(model, k=k, off=off) for name, (k, off) in variants.items()}
    stats["experiments"] = []
    for name, (k, off) in variants.items():
        report = score_stream(twins[name], ids, n_bytes, window=SCORE_WINDOW, stride=SCORE_WINDOW)
        scores = dict(val_bits_per_byte=report.bits_per_byte, val_nats_per_token=report.nats_per_token)
        stats["experiments"].append({"name": name, "k": k, "off": list(off), **scores})
        log(f"{name}: {report.bits_per_byte:.4f} bits/byte ({ms_since(started) / 1000:.0f} s)")
    dense_report = score_stream(dense.model, ids, n_bytes, window=SCORE_WINDOW, stride=SCORE_WINDOW)
    stats["dense"] = {
        "model": dense_folder.name,
        "val_bits_per_byte": dense_report.bits_per_byte,
        "val_nats_per_token": dense_report.nats_per_token,
    }

    prompt = encode_prompt(tokenizer, TIMING_PROMPT)
    timed = {"dense": dense.model, **{name: twins[name] for name in list(twins)[: 2 + (shape.k > 1)]}}
    runs = routing.decode_timings(timed, prompt, timing_repeats, timing_steps)
    ms = {name: statistics.median(times) for name, times in runs.items()}
    stats["decode_ms_per_token"] = ms
    stats["timing"] = {
        "how": f"median of {timing_repeats} interleaved runs, each the median of {timing_steps} decode steps through "
        f"transformers' forward with a KV cache at {len(prompt)} tokens of context, one torch thread, float32",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}",
        "conditions": "measured while a model trained and other jobs ran on the same 2 cores: "
        "ratios between models are steadier than the times themselves",
    }
    stats["elapsed_s"] = round(ms_since(started) / 1000, 1)
    return stats


def write(folder: Path, stats: dict) -> Path:
    path = folder / routing.STATS_FILE
    path.write_text(json.dumps(stats, indent=1) + "\n")
    return path


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0]) if args else routing.BUNDLED_MOE_DIR
    print(write(folder, compute(folder)))


if __name__ == "__main__":
    main()
