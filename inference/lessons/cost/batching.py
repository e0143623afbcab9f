"""Batching, measured: several replies decoded together share every read of the weights.

A decode pass for one sequence reads every weight once to make one token; B sequences in the same pass still read
them once, now for B tokens. What grows with B is arithmetic and the KV cache (one per sequence), so the gain
flattens once the pass becomes compute-bound or the cache no longer fits: why a server answering many users at once
charges far less per token than one user alone would cost.
"""

from __future__ import annotations

from statistics import median

import pandas as pd
import torch

from inference.core import kv_cache
from inference.core.measuring import Progress, filler_batch, timed_decode, timed_pass

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
PROMPT_TOKENS, STEPS, ROUNDS = 32, 8, 3  # per sequence; timed passes per round; rounds over all sizes
WORK_BUDGET = 2e9  # parameters x batch per pass: keeps a hub model's measurement to seconds, not minutes


def batch_sizes_for(parameters: int) -> list[int]:
    """All of `BATCH_SIZES` for the bundled model, fewer as models grow (at least 1, 2 and 4)."""
    return [b for b in BATCH_SIZES if b <= 4 or parameters * b <= WORK_BUDGET]


@torch.inference_mode()
def measure_batches(
    model,
    batch_sizes=BATCH_SIZES,
    prompt_tokens: int = PROMPT_TOKENS,
    steps: int = STEPS,
    rounds: int = ROUNDS,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """One row per batch size: `ms_per_pass` (median decode pass), `pass_ms` (every timed pass), `tokens_per_s` (all
    sequences together), `ms_per_token` (pass time / batch) and the cache measured at the end (`kv_cache_bytes`,
    `tokens_per_sequence`). Each batch is prefilled once and decoded one untimed pass; then `rounds` rounds time
    `steps` passes of every size in turn, so a busy spell on the shared machine lands on several sizes a little."""
    total, progress = len(batch_sizes) * (rounds + 1), progress or (lambda *_: None)
    runs, times = {}, {batch: [] for batch in batch_sizes}  # batch -> [logits, cache], its timed passes
    for i, batch in enumerate(batch_sizes):
        progress(i, total, f"reading the prompts of a batch of {batch}")
        cache = kv_cache.new_cache(model.config)
        ids = filler_batch(model.config.vocab_size, batch, prompt_tokens, seed=1000 + prompt_tokens)
        logits, _ = timed_pass(model, ids, cache)
        runs[batch] = [timed_decode(model, logits, cache, 1)[0], cache]  # the warm-up pass
    for r in range(rounds):
        for i, batch in enumerate(batch_sizes):
            progress(len(batch_sizes) * (r + 1) + i, total, f"round {r + 1} of {rounds}, batch of {batch}")
            runs[batch][0], passes = timed_decode(model, runs[batch][0], runs[batch][1], steps)
            times[batch] += passes
    progress(total, total, "done")
    frame = pd.DataFrame({"batch": list(batch_sizes), "ms_per_pass": [median(times[b]) for b in batch_sizes]})
    frame["pass_ms"] = [tuple(times[b]) for b in batch_sizes]  # for a comparison with its spread
    frame["tokens_per_s"] = frame.batch / frame.ms_per_pass * 1000
    frame["ms_per_token"] = frame.ms_per_pass / frame.batch
    frame["kv_cache_bytes"] = [kv_cache.measured_bytes(runs[b][1]) for b in batch_sizes]
    frame["tokens_per_sequence"] = [kv_cache.cache_length(runs[b][1]) for b in batch_sizes]
    return frame
