"""Bench keys for constrained decoding (`python -m inference.bench`), the JSON-schema preset, greedy: llguidance's
median mask time, a masked step over a plain one (medians of each part, the forward pass pooled over both runs: it is
the same work), the two strategies replayed (strategies.py), and the format's compile. A warm-up run pays the compile.
"""

from __future__ import annotations

import statistics

from inference.lessons.constrained.formats import PRESETS
from inference.lessons.constrained.run import ConstrainedRun, unconstrained_twin
from inference.lessons.constrained.strategies import compare_strategies
from inference.sampling.pipeline import SamplingSettings

BENCH_FORMAT = "JSON: a name and an age"
GREEDY = SamplingSettings(temperature=0)


def constrained_figures(model, tokenizer, prompt_ids: list[int], max_new_tokens: int = 60, repeats: int = 3) -> dict:
    fmt = PRESETS[BENCH_FORMAT][0]
    forward_ms, masked_extra_ms, masked_sample_ms, plain_sample_ms, mask_us = [], [], [], [], []
    for i in range(repeats + 1):
        run = ConstrainedRun(model, tokenizer, prompt_ids, fmt, max_new_tokens)
        run.run(GREEDY)
        twin = unconstrained_twin(run, GREEDY)
        if i == 0:
            continue  # warm-up: the compile and the first allocations
        mask_us += [s.mask_us for s in run.steps]
        masked_extra_ms += [(s.mask_us + s.advance_us) / 1000 for s in run.steps]
        masked_sample_ms += [r.sample_ms for r in run.records]
        plain_sample_ms += [r.sample_ms for r in twin.records]
        forward_ms += [r.forward_ms for r in run.records + twin.records]
    forward = statistics.median(forward_ms)
    masked = forward + statistics.median(masked_sample_ms) + statistics.median(masked_extra_ms)
    plain = forward + statistics.median(plain_sample_ms)
    cost = compare_strategies(run)
    return {
        "constrained_mask_us_p50": round(statistics.median(mask_us), 1),
        "constrained_step_overhead": round(masked / plain, 3),
        "constrained_first_sample_valid": round(sum(cost.first_valid) / cost.steps, 3),
        "constrained_mask_all_us_p50": round(cost.mask_all_us_p50, 1),
        "constrained_sample_first_us_p50": round(cost.sample_first_us_p50, 1),
        "constrained_compile_ms": round(fmt.compile_ms(tokenizer, run.trace.vocab_size), 2),
        "constrained_tokens": len(run.records),
    }
