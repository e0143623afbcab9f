"""KV-cache experiments on the real model: how the cache grows, and what it saves.

1. growth: a greedy run of the step engine (`run.run_greedy`); each step's cache
   bytes, read from the real tensors, beside the formula 2 x layers x kv_heads x head_dim
   x tokens x bytes;
2. with vs without: the same greedy tokens decoded twice in lockstep, once feeding one
   token per pass into the cache, once recomputing the whole sequence every pass
   (a fresh cache every pass). Lockstep, so a slow moment on the shared machine hits both.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from inference.core.forward import DECODE, PREFILL, TransformersForward
from inference.core.measuring import Progress, Timing, pass_timing
from inference.core.run import Trace, context_limit

# -- 1. growth -------------------------------------------------------------------------


def cache_growth(trace: Trace) -> pd.DataFrame:
    """One row per step: tokens in the cache after its forward pass, the bytes measured from
    the cache tensors then, the formula's bytes for that many tokens, and whether they agree."""
    rows = [
        {
            "step": r.index,
            "phase": r.phase,
            "tokens_fed": r.tokens_in_forward,
            "cache_tokens": r.cache_tokens,
            "measured_bytes": r.cache_bytes,
            "formula_bytes": trace.kv_shape.formula_bytes(r.cache_tokens),
        }
        for r in trace.records
    ]
    frame = pd.DataFrame(
        rows, columns=["step", "phase", "tokens_fed", "cache_tokens", "measured_bytes", "formula_bytes"]
    )
    frame["agree"] = frame["measured_bytes"] == frame["formula_bytes"]
    return frame


def layer_breakdown(trace: Trace) -> pd.DataFrame:
    """Bytes each layer's keys and values hold after the last step (measured), beside the
    formula for one layer."""
    measured = trace.cache_layer_bytes()
    shape = trace.kv_shape
    per_layer = shape.formula_bytes(trace.records[-1].cache_tokens) // shape.layers
    return pd.DataFrame({"layer": range(len(measured)), "measured_bytes": measured, "formula_bytes": per_layer})


# -- 2. with vs without the cache ------------------------------------------------------


@dataclass(frozen=True)
class CacheComparison:
    """`steps`: one row per generated token with `context_tokens` (tokens the pass attends
    over), `with_cache_ms` / `without_cache_ms`, the tokens fed to each pass, both chosen
    token ids, and cumulative times (`*_cumulative_ms`)."""

    steps: pd.DataFrame
    prompt_tokens: int

    @property
    def tokens_with_cache(self) -> list[int]:
        return self.steps["token_with_cache"].tolist()

    @property
    def tokens_without_cache(self) -> list[int]:
        return self.steps["token_without_cache"].tolist()

    @property
    def identical(self) -> bool:
        return self.tokens_with_cache == self.tokens_without_cache

    @property
    def speedup(self) -> float:
        """Total time without the cache over total time with it, for all the tokens."""
        return float(
            self.steps["without_cache_cumulative_ms"].iloc[-1] / self.steps["with_cache_cumulative_ms"].iloc[-1]
        )


def compare_cache(model, prompt_ids: list[int], new_tokens: int, progress: Progress | None = None) -> CacheComparison:
    """Decode `new_tokens` greedily with and without the KV cache, timing every pass.

    Each decoder keeps its own tokens, so if they ever differed the table would show it
    (they should not: the cache holds exactly the keys and values a recompute would make)."""
    if new_tokens < 1:
        raise ValueError(f"`new_tokens` has to be at least 1, but is {new_tokens}")
    context = context_limit(model.config)
    if len(prompt_ids) + new_tokens - 1 > context:
        raise ValueError(
            f"{len(prompt_ids)} prompt tokens + {new_tokens} new tokens do not fit this model's context of {context}"
        )
    TransformersForward(model, None).next_pass(list(prompt_ids), PREFILL)  # warm-up: step 0 pays no cold start
    cached = TransformersForward(model, None)  # one cache for the whole run
    with_ids, without_ids = list(prompt_ids), list(prompt_ids)
    rows = []
    for step in range(new_tokens):
        fed_with = with_ids if step == 0 else with_ids[-1:]  # prefill once, then one token per pass
        with_pass = cached.next_pass(with_ids, PREFILL if step == 0 else DECODE)
        without_pass = TransformersForward(model, None).next_pass(without_ids, PREFILL)  # the whole sequence, afresh
        token_with, with_ms = int(with_pass.logits.argmax()), with_pass.forward_ms
        token_without, without_ms = int(without_pass.logits.argmax()), without_pass.forward_ms
        rows.append(
            {
                "step": step,
                "context_tokens": len(without_ids),
                "tokens_fed_with_cache": len(fed_with),
                "tokens_fed_without_cache": len(without_ids),
                "with_cache_ms": with_ms,
                "without_cache_ms": without_ms,
                "token_with_cache": token_with,
                "token_without_cache": token_without,
            }
        )
        with_ids.append(token_with)
        without_ids.append(token_without)
        if progress:
            progress(step + 1, new_tokens, f"token {step + 1} of {new_tokens}")
    steps = pd.DataFrame(rows)
    steps["with_cache_cumulative_ms"] = steps["with_cache_ms"].cumsum()
    steps["without_cache_cumulative_ms"] = steps["without_cache_ms"].cumsum()
    return CacheComparison(steps=steps, prompt_tokens=len(prompt_ids))


def engine_decode_step(trace: Trace) -> Timing | None:
    """Section 1's run's decode steps (the engine's own step, one after another, the context growing) as a `Timing`:
    the median and middle half the page quotes beside section 2's steps; None with fewer than two."""
    times = [r.forward_ms for r in trace.records if r.phase == "decode"]
    if len(times) < 2:
        return None
    first = len(trace.prompt_ids)
    what = f"one decode step of section 1's run (the engine's own step), at {first:,}–{first + len(times) - 1:,} tokens"
    return pass_timing(times, what + " of context")


def with_cache_step(steps: pd.DataFrame) -> Timing:
    """Section 2's decode steps with the cache (step 0, the prompt, left out) as a `Timing`: each timed between two
    no-cache passes, through transformers' own forward."""
    times = steps.with_cache_ms.iloc[1:]
    what = "one decode step with the cache in section 2, each timed between no-cache passes (transformers' forward)"
    return pass_timing(times if len(times) >= 2 else steps.with_cache_ms, what)
