"""KV-cache experiments on the real model: how the cache grows, what it saves, and whether the greedy text loops.

1. growth: a greedy run of the step engine (`run.run_greedy`); each step's cache bytes, read from the real tensors,
   beside the formula 2 x layers x kv_heads x head_dim x tokens x bytes;
2. with vs without: the same greedy tokens decoded twice in lockstep, once feeding one token per pass into the
   cache, once recomputing the whole sequence every pass (a fresh cache). Lockstep, so a slow moment on the shared
   machine hits both.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from inference.core.forward import DECODE, PREFILL, TransformersForward
from inference.core.measuring import Progress, Timing, pass_timing
from inference.core.run import Trace, context_limit

MIN_PHRASE_TOKENS = 6  # shorter repeats ("he said", ", and the") are ordinary language, not a loop
MIN_TIMES = 3  # a phrase said twice can be a story's refrain; three times in one reply is a loop


def cache_growth(trace: Trace) -> pd.DataFrame:
    """One row per step: tokens in the cache after its pass, the bytes measured from the tensors then, the formula's
    bytes for that many tokens, and whether they agree."""
    frame = pd.DataFrame(
        {
            "step": [r.index for r in trace.records],
            "phase": [r.phase for r in trace.records],
            "tokens_fed": [r.tokens_in_forward for r in trace.records],
            "cache_tokens": [r.cache_tokens for r in trace.records],
            "measured_bytes": [r.cache_bytes for r in trace.records],
        }
    )
    frame["formula_bytes"] = [trace.kv_shape.formula_bytes(n) for n in frame.cache_tokens]
    frame["agree"] = frame.measured_bytes == frame.formula_bytes
    return frame


def layer_breakdown(trace: Trace) -> pd.DataFrame:
    """Bytes each layer's keys and values hold after the last step (measured), beside the formula for one layer."""
    measured, shape = trace.cache_layer_bytes(), trace.kv_shape
    per_layer = shape.formula_bytes(trace.records[-1].cache_tokens) // shape.layers
    return pd.DataFrame({"layer": range(len(measured)), "measured_bytes": measured, "formula_bytes": per_layer})


@dataclass(frozen=True)
class CacheComparison:
    """`steps`: one row per generated token: `context_tokens` (tokens the pass attends over), the tokens fed and the
    ms of each pass with and without the cache, both chosen token ids, and cumulative times."""

    steps: pd.DataFrame
    prompt_tokens: int

    @property
    def tokens_with_cache(self) -> list[int]:
        return self.steps.token_with_cache.tolist()

    @property
    def identical(self) -> bool:
        return self.tokens_with_cache == self.steps.token_without_cache.tolist()

    @property
    def speedup(self) -> float:
        """Total time without the cache over total time with it."""
        return float(self.steps.without_cache_cumulative_ms.iloc[-1] / self.steps.with_cache_cumulative_ms.iloc[-1])


def compare_cache(model, prompt_ids: list[int], new_tokens: int, progress: Progress | None = None) -> CacheComparison:
    """Decode `new_tokens` greedily with and without the KV cache, timing every pass. Each decoder keeps its own
    tokens, so if they ever differed the table would show it (the cache holds exactly what a recompute makes)."""
    context = context_limit(model.config)
    if len(prompt_ids) + new_tokens - 1 > context:
        raise ValueError(
            f"{len(prompt_ids)} prompt tokens + {new_tokens} new tokens do not fit this model's context of {context}"
        )
    TransformersForward(model, None).next_pass(list(prompt_ids), PREFILL)  # warm-up: step 0 pays no cold start
    cached = TransformersForward(model, None)  # one cache for the whole run
    with_ids, without_ids, rows = list(prompt_ids), list(prompt_ids), []
    for step in range(new_tokens):
        with_pass = cached.next_pass(with_ids, PREFILL if step == 0 else DECODE)  # the prompt once, then one token
        without_pass = TransformersForward(model, None).next_pass(without_ids, PREFILL)  # the whole sequence, afresh
        rows.append(
            {
                "step": step,
                "context_tokens": len(without_ids),
                "tokens_fed_with_cache": with_pass.tokens_in_forward,
                "tokens_fed_without_cache": len(without_ids),
                "with_cache_ms": with_pass.forward_ms,
                "without_cache_ms": without_pass.forward_ms,
                "token_with_cache": int(with_pass.logits.argmax()),
                "token_without_cache": int(without_pass.logits.argmax()),
            }
        )
        with_ids.append(rows[-1]["token_with_cache"])
        without_ids.append(rows[-1]["token_without_cache"])
        if progress:
            progress(step + 1, new_tokens, f"token {step + 1} of {new_tokens}")
    steps = pd.DataFrame(rows)
    steps["with_cache_cumulative_ms"] = steps.with_cache_ms.cumsum()
    steps["without_cache_cumulative_ms"] = steps.without_cache_ms.cumsum()
    return CacheComparison(steps=steps, prompt_tokens=len(prompt_ids))


def engine_decode_step(trace: Trace) -> Timing | None:
    """Section 1's decode steps (the engine's own step, the context growing) as a `Timing`; None with fewer than 2."""
    times = [r.forward_ms for r in trace.records if r.phase == DECODE]
    if len(times) < 2:
        return None
    first = len(trace.prompt_ids)
    what = f"one decode step of section 1's run (the engine's own step), at {first:,}–{first + len(times) - 1:,} tokens"
    return pass_timing(times, what + " of context")


def with_cache_step(steps: pd.DataFrame) -> Timing:
    """Section 2's decode steps with the cache (step 0, the prompt, left out) as a `Timing`."""
    times = steps.with_cache_ms.iloc[1:]
    what = "one decode step with the cache in section 2, each timed between no-cache passes (transformers' forward)"
    return pass_timing(times if len(times) >= 2 else steps.with_cache_ms, what)


def repeated_phrase(ids: list[int]) -> tuple[tuple[int, ...], int] | None:
    """The loop that takes up most of a greedy text: (phrase, times) for the phrase of at least MIN_PHRASE_TOKENS
    tokens said at least MIN_TIMES times without overlapping whose repeats cover the most tokens (ties: more times,
    then the first). None when nothing loops."""
    best, best_key = None, None
    for n in range(MIN_PHRASE_TOKENS, len(ids) // MIN_TIMES + 1):
        starts: dict[tuple[int, ...], list[int]] = {}
        for start in range(len(ids) - n + 1):
            starts.setdefault(tuple(ids[start : start + n]), []).append(start)
        found = False
        for phrase, where in starts.items():
            times, free_from = 0, -1
            for start in where:  # count occurrences that do not overlap
                if start >= free_from:
                    times, free_from = times + 1, start + n
            if times >= MIN_TIMES:
                found, key = True, (times * n, times, -where[0])
                if best_key is None or key > best_key:
                    best, best_key = (phrase, times), key
        if not found:  # a longer phrase can repeat only if its first n tokens do
            return best
    return best
