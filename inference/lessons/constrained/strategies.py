"""Two ways to apply a format, timed part by part at the recorded run's own states (logits, masks, u): mask the whole
vocabulary then draw (vLLM, SGLang, our run), or draw first, check that one token and mask and redraw only when it is
not allowed (llama.cpp since PR #4306; here the redraw reuses the step's u)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from inference.core.measuring import Stopwatch
from inference.lessons.constrained.run import ConstrainedRun
from inference.sampling.pipeline import draw


@dataclass(frozen=True)
class StrategyCost:
    """Per step, in µs: the mask, the masked draw, the plain draw, the one-token check; and whether the plain draw was
    already allowed and both picked the same token."""

    mask_us: list[float]
    masked_draw_us: list[float]
    draw_us: list[float]
    check_us: list[float]
    first_valid: list[bool]
    same_token: list[bool]

    @property
    def steps(self) -> int:
        return len(self.first_valid)

    @property
    def mask_all_us(self) -> list[float]:
        return [m + d for m, d in zip(self.mask_us, self.masked_draw_us)]

    @property
    def sample_first_us(self) -> list[float]:
        redo = [0.0 if ok else m for ok, m in zip(self.first_valid, self.mask_all_us)]
        return [d + c + r for d, c, r in zip(self.draw_us, self.check_us, redo)]

    @property
    def mask_all_us_p50(self) -> float:
        return statistics.median(self.mask_all_us)

    @property
    def sample_first_us_p50(self) -> float:
        return statistics.median(self.sample_first_us)


def compare_strategies(run: ConstrainedRun) -> StrategyCost:
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
