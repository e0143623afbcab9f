"""Two ways to apply a format, measured on the states of a recorded run.

    mask the whole vocabulary: every step the matcher computes the allowed set over all tokens, the mask removes
        the rest, then the draw (vLLM, SGLang, our run);
    sample first, check, resample only if invalid: draw without the mask, ask the matcher about that one token;
        only when it is not allowed compute the whole mask and draw again (llama.cpp's sampler since PR #4306).

Both replay the run's own steps (its raw logits, repetition masks and u), the matcher advancing by the recorded
token, so they are timed at exactly the states the run went through. Each part is timed on its own (the mask, the
masked draw, an unmasked draw, the one-token check), so the page can say which part costs what. With greedy
settings both pick the same token; with sampling the resample reuses the step's u here (llama.cpp draws anew).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from inference.core.measuring import Stopwatch
from inference.lessons.constrained.run import ConstrainedRun
from inference.sampling.pipeline import draw


@dataclass(frozen=True)
class StrategyCost:
    mask_us: list[float]  # per step: computing the allowed set and handing it to the pipeline
    masked_draw_us: list[float]  # per step: the draw with the mask stage
    draw_us: list[float]  # per step: the draw without it
    check_us: list[float]  # per step: the one-token check of the unmasked draw
    first_valid: list[bool]  # per step: the unmasked draw was already allowed
    same_token: list[bool]  # per step: both strategies picked the same token

    @property
    def steps(self) -> int:
        return len(self.first_valid)

    @property
    def mask_all_us(self) -> list[float]:
        return [m + d for m, d in zip(self.mask_us, self.masked_draw_us)]

    @property
    def sample_first_us(self) -> list[float]:
        return [
            d + c + (0.0 if valid else m + md)
            for d, c, valid, m, md in zip(
                self.draw_us, self.check_us, self.first_valid, self.mask_us, self.masked_draw_us
            )
        ]

    @property
    def mask_all_us_p50(self) -> float:
        return statistics.median(self.mask_all_us)

    @property
    def sample_first_us_p50(self) -> float:
        return statistics.median(self.sample_first_us)


def compare_strategies(run: ConstrainedRun) -> StrategyCost:
    """Time both strategies' parts at every recorded step of a constrained run (see the module doc)."""
    trace = run.trace
    matcher = run.format.matcher(run.tokenizer, trace.vocab_size)
    seen = trace.seen_masks()
    parts = {name: [] for name in ("mask", "masked_draw", "draw", "check")}
    first_valid, same = [], []
    for i, record in enumerate(trace.records):
        plain = replace(record.settings, allowed_tokens=None)
        context = trace.step_context(i, plain) if plain.needs_context else None
        with Stopwatch() as watch:
            masked = replace(plain, allowed_tokens=matcher.compute_bitmask())
        parts["mask"].append(watch.ms * 1000)
        with Stopwatch() as watch:
            token_masked = draw(record.logits, masked, seen[i], record.u, context).token_id
        parts["masked_draw"].append(watch.ms * 1000)
        with Stopwatch() as watch:
            token = draw(record.logits, plain, seen[i], record.u, context).token_id
        parts["draw"].append(watch.ms * 1000)
        with Stopwatch() as watch:
            valid = matcher.validate_tokens([token]) == 1
        parts["check"].append(watch.ms * 1000)
        first_valid.append(valid)
        same.append(not valid or token == token_masked)  # invalid: it resamples with the mask, the same u
        if not matcher.consume_token(record.token_id):
            raise RuntimeError(f"The replay's matcher refused recorded token {record.token_id}")
    return StrategyCost(parts["mask"], parts["masked_draw"], parts["draw"], parts["check"], first_valid, same)
