"""Batching, measured: several replies decoded together share every read of the weights.

A decode pass for one sequence reads every weight once to make one token. Feed B sequences
in the same pass and the weights are still read once, now for B tokens: while moving
weights is what limits the pass (it is, at batch 1), B tokens cost little more than one.
What grows with B is arithmetic (B times as much) and the KV cache (one per sequence), so
the gain flattens once the pass becomes compute-bound or the cache no longer fits. This is
why a server that answers many users at once charges far less per token than one user
alone would cost.
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
    """The batch sizes worth timing for a model this big: all of `BATCH_SIZES` for the
    bundled model (5.8 M parameters), fewer as models grow (at least 1, 2 and 4)."""
    return [b for b in BATCH_SIZES if b <= 4 or parameters * b <= WORK_BUDGET]


class _BatchRun:
    """`batch` sequences decoding together on one cache, prefilled once: every round of
    timing continues them, so the prompt (the slow part for big batches) is read only once."""

    @torch.inference_mode()
    def __init__(self, model, batch: int, prompt_tokens: int):
        self.model, self.batch = model, batch
        self.cache = kv_cache.new_cache(model.config)
        ids = filler_batch(model.config.vocab_size, batch, prompt_tokens, seed=1000 + prompt_tokens)
        self.logits, _ = timed_pass(model, ids, self.cache)

    def decode(self, steps: int) -> list[float]:
        """Time `steps` decode passes (ms each), greedy, one new token per sequence each."""
        self.logits, times = timed_decode(self.model, self.logits, self.cache, steps)
        return times


def measure_batches(
    model,
    batch_sizes=BATCH_SIZES,
    prompt_tokens: int = PROMPT_TOKENS,
    steps: int = STEPS,
    rounds: int = ROUNDS,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """One row per batch size: `ms_per_pass` (median decode pass), `tokens_per_s` (all
    sequences together), `ms_per_token` (pass time / batch: the machine time one token
    costs), `pass_ms` (every timed pass) and `kv_cache_bytes` (measured at the end, whole
    batch, `prompt_tokens` + 1 + rounds x `steps` tokens per sequence).

    Each batch is prefilled once and decoded one untimed pass (warm-up); then `rounds`
    rounds time `steps` passes of every batch size in turn, so a busy spell on the shared
    machine lands on several sizes a little instead of on one size a lot."""
    runs = {}
    total = len(batch_sizes) * (rounds + 1)
    for i, batch in enumerate(batch_sizes):
        if progress:
            progress(i, total, f"reading the prompts of a batch of {batch}")
        runs[batch] = _BatchRun(model, batch, prompt_tokens)
        runs[batch].decode(1)
    times = {batch: [] for batch in batch_sizes}
    for r in range(rounds):
        for i, batch in enumerate(batch_sizes):
            if progress:
                progress(len(batch_sizes) * (r + 1) + i, total, f"round {r + 1} of {rounds}, batch of {batch}")
            times[batch].extend(runs[batch].decode(steps))
    if progress:
        progress(total, total, "done")
    rows = []
    for batch in batch_sizes:
        per_pass = median(times[batch])
        rows.append(
            {
                "batch": batch,
                "ms_per_pass": per_pass,
                "pass_ms": tuple(times[batch]),  # every timed pass, for a comparison with its spread
                "tokens_per_s": batch / per_pass * 1000,
                "ms_per_token": per_pass / batch,
                "kv_cache_bytes": kv_cache.measured_bytes(runs[batch].cache),
                "tokens_per_sequence": kv_cache.cache_length(runs[batch].cache),
            }
        )
    return pd.DataFrame(rows)
