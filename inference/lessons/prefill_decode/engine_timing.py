"""Prefill vs decode on a serving engine, in the shapes `inference.lessons.prefill_decode.timing` gives for a local model.

The engine's own `timings` are the source: `prompt_ms` is its prefill pass, `predicted_ms` its decode passes.
The timeline's decode blocks are the gaps between streamed tokens arriving here (each includes a loopback
HTTP chunk); the metrics come from the server's figures. The prompt cache is switched off for these requests,
so every prefill reads the whole prompt.
"""

from __future__ import annotations

import pandas as pd

from inference.core.measuring import Progress, filler_prompt
from inference.core.run import STOP_EOS, STOP_MAX_NEW_TOKENS
from inference.engines.client import EngineError, ServerTimings
from inference.lessons.prefill_decode.timing import GenerationTiming, Sweep, laid_end_to_end, run_sweep


def remote_generation_timing(
    engine, tokenizer, prompt_ids: list[int], new_tokens: int, runs: int = 3
) -> tuple[GenerationTiming, ServerTimings]:
    """Greedy streamed generations (the fastest of `runs` is kept): step 0 is the server's prefill
    (`timings.prompt_ms`), later steps the measured gaps between streamed tokens. Also returns the kept
    run's own server timings."""
    client = engine.client
    client.complete(list(prompt_ids), 2, stream=False)  # warm-up, untimed
    completions = [client.complete(list(prompt_ids), new_tokens, stream=True) for _ in range(runs)]
    if any(not c.token_ids or c.timings.prompt_ms is None for c in completions):
        raise EngineError("The engine streamed no tokens or no timings for the timed generation.")
    totals = [c.arrival_ms[-1] for c in completions]
    completion = completions[totals.index(min(totals))]
    prefill_ms = float(completion.timings.prompt_ms)
    gaps = [b - a for a, b in zip(completion.arrival_ms, completion.arrival_ms[1:])]
    n = len(completion.token_ids)
    steps = pd.DataFrame(
        {
            "step": range(n),
            "phase": ["prefill"] + ["decode"] * (n - 1),
            "tokens_in_forward": [completion.timings.prompt_tokens or len(prompt_ids)] + [1] * (n - 1),
            "forward_ms": [prefill_ms] + gaps,
            "sample_ms": 0.0,
        }
    )
    stop = STOP_MAX_NEW_TOKENS if n >= new_tokens else STOP_EOS
    steps = laid_end_to_end(steps, tokenizer, completion.token_ids)
    timing = GenerationTiming(steps, len(prompt_ids), stop, tuple(totals))
    return timing, completion.timings


def remote_sweep(
    engine, prompt_lengths: list[int], repeats: int = 5, decode_tokens: int = 8, progress: Progress | None = None
) -> Sweep:
    """The local sweep's measures from the server's timings: prefill ms (`prompt_ms`, prompt cache off) and
    decode ms per token (`predicted_ms / predicted_n`), a warm-up round then `repeats` rounds."""
    prompts = {n: filler_prompt(engine.vocab_size, n) for n in prompt_lengths}

    def one_run(n: int) -> tuple[float, float]:
        timings = engine.client.complete(prompts[n], decode_tokens + 1).timings
        if timings.prompt_ms is None or not timings.predicted_ms or timings.predicted_tokens < 1:
            raise EngineError("The engine's answer has no prefill or decode timings, so it cannot be swept.")
        return timings.prompt_ms, timings.predicted_ms / timings.predicted_tokens

    longest = engine.context - decode_tokens - 1
    return run_sweep(prompt_lengths, longest, repeats, decode_tokens, one_run, progress, "prompt on the engine")
