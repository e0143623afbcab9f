"""Two ways to apply a format, measured on the states of a recorded run.

    mask the whole vocabulary: every step the matcher computes the allowed set over all tokens,
        the mask removes the rest, then the draw (vLLM, SGLang, our run);
    sample first, check, resample only if invalid: draw without the mask, ask the matcher about
        that one token; only when it is not allowed compute the whole mask and draw again (llama.cpp's
        common sampler since PR #4306).

Both replay the run's own steps (its raw logits, repetition masks and u), the matcher advancing
by the recorded token, so they are timed at exactly the states the run went through. With
greedy settings both pick the same token (the argmax, when allowed, is the masked argmax). With
sampling they can differ: the first draw lands on the unmasked curve; the resample reuses the
step's u here (llama.cpp draws a new number).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace

from inference.lessons.constrained.run import ConstrainedRun
from inference.sampling.pipeline import draw


@dataclass(frozen=True)
class StrategyCost:
    steps: int
    mask_all_us: list[float]  # per step: whole mask, then the draw
    sample_first_us: list[float]  # per step: a draw, a one-token check, and (if invalid) mask and redraw
    first_valid: list[bool]  # per step: the unmasked draw was already allowed
    same_token: list[bool]  # per step: both strategies picked the same token
    reproduced: list[bool]  # per step: masking the whole vocabulary drew the recorded token again

    @property
    def first_valid_share(self) -> float:
        return sum(self.first_valid) / self.steps if self.steps else 0.0

    @property
    def mask_all_us_p50(self) -> float:
        return statistics.median(self.mask_all_us) if self.steps else 0.0

    @property
    def sample_first_us_p50(self) -> float:
        return statistics.median(self.sample_first_us) if self.steps else 0.0


def _mask_whole_vocabulary(matcher, logits, plain, seen, u, context) -> int:
    masked = replace(plain, allowed_tokens=matcher.compute_bitmask())
    return draw(logits, masked, seen, u, context).token_id


def _sample_first(matcher, logits, plain, seen, u, context) -> tuple[int, bool]:
    token = draw(logits, plain, seen, u, context).token_id
    if matcher.validate_tokens([token]) == 1:
        return token, True
    return _mask_whole_vocabulary(matcher, logits, plain, seen, u, context), False


def compare_strategies(run: ConstrainedRun) -> StrategyCost:
    """Time both strategies at every recorded step of a constrained run (see the module doc)."""
    if run.format is None:
        raise ValueError("A plain run has no format to compare strategies on")
    trace = run.trace
    matcher = run.format.matcher(run.tokenizer, trace.vocab_size)
    seen = trace.seen_masks()
    mask_all, sample_first, first_valid, same, reproduced = [], [], [], [], []
    for i, record in enumerate(trace.records):
        plain = replace(record.settings, allowed_tokens=None)
        args = (
            matcher,
            record.logits,
            plain,
            seen[i],
            record.u,
            trace.step_context(i, plain) if plain.needs_context else None,
        )
        # Alternate which goes first, so a warm cache or a busy spell favours neither.
        timed = {}
        for name, fn in (("mask", _mask_whole_vocabulary), ("first", _sample_first))[:: 1 if i % 2 == 0 else -1]:
            start = time.perf_counter()
            timed[name] = (fn(*args), (time.perf_counter() - start) * 1e6)
        (token_a, us_a), ((token_b, valid), us_b) = timed["mask"], timed["first"]
        mask_all.append(us_a)
        sample_first.append(us_b)
        first_valid.append(valid)
        same.append(token_a == token_b)
        reproduced.append(token_a == record.token_id)
        if not matcher.consume_token(record.token_id):
            raise RuntimeError(f"The replay's matcher refused recorded token {record.token_id}")
    return StrategyCost(len(trace.records), mask_all, sample_first, first_valid, same, reproduced)
