"""What every timed experiment shares: greedy settings, the progress callback, prompts of
filler tokens, one timed forward pass and the timed decode loop, a greedy run to the end, and
the one way a page times something it quotes (`repeat_timing`, `time_decode_step`, `Timing`).

Times are wall clock (`time.perf_counter`) around the forward pass only. Greedy decoding
makes a run repeatable, so two runs differ only in how long they took.

How a page times a pass (#46 item 5): `WARMUPS` untimed runs first (the first passes pay for
setting up kernels and buffers), then `REPEATS` timed runs; the page shows the median and the
middle half (the quartiles: one hiccup of another program on a shared machine moves the min or
max, not the quartiles), and its label names what was timed and how, via `Timing.label()`:
"one decode step at 5 tokens of context: 1.01 ms (middle half 0.95–1.10 ms), median of 20 after
3 warm-ups". Two pages that time different things then say what differs.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from inference.core import kv_cache

# A long measurement reports where it is: (steps done, steps in all, what is running now).
Progress = Callable[[int, int, str], None]


# -- the one clock ----------------------------------------------------------------------------


def now() -> float:
    """Seconds on the monotonic wall clock: the only clock the app reads (a difference of two is a duration)."""
    return time.perf_counter()


def ms_since(start: float) -> float:
    """Milliseconds from `start` (a `now()`) to now."""
    return (now() - start) * 1000


class Stopwatch:
    """`with Stopwatch() as watch: ...` then `watch.ms`; `watch.elapsed_ms()` while it runs."""

    def __enter__(self) -> Stopwatch:
        self.start = now()
        self.ms = 0.0
        return self

    def elapsed_ms(self) -> float:
        return ms_since(self.start)

    def __exit__(self, *exc) -> None:
        self.ms = self.elapsed_ms()


def filler_batch(vocab_size: int, batch: int, length: int, seed: int | None = None) -> torch.Tensor:
    """[batch, length] token ids for a timing prompt. What the tokens say does not change the
    arithmetic, and equal lengths need no padding, so they are fixed pseudo-random ids from a
    private generator (never the global one), seeded with `seed` (default: the length)."""
    gen = torch.Generator().manual_seed(length if seed is None else seed)
    return torch.randint(0, vocab_size, (batch, length), generator=gen)


def filler_prompt(vocab_size: int, length: int, seed: int | None = None) -> list[int]:
    """One timing prompt of `length` filler token ids (the first row of `filler_batch`)."""
    return filler_batch(vocab_size, 1, length, seed)[0].tolist()


@torch.inference_mode()
def timed_pass(model, input_ids: torch.Tensor, cache=None) -> tuple[torch.Tensor, float]:
    """One forward pass over `input_ids` [batch, tokens], timed: (the last position's logits
    [batch, vocab], ms). With a `cache` the pass reads and extends it; without, it computes
    the whole sequence afresh."""
    with Stopwatch() as watch:
        out = model(input_ids=input_ids, cache=cache, use_cache=cache is not None, logits_to_keep=1)
    return out.logits[:, -1], watch.ms


@torch.inference_mode()
def timed_decode(model, logits: torch.Tensor, cache, steps: int) -> tuple[torch.Tensor, list[float]]:
    """`steps` greedy decode passes continuing from `logits` [batch, vocab] on `cache`, each
    timed: (the last logits, ms per pass)."""
    times = []
    for _ in range(steps):
        next_ids = logits.argmax(-1, keepdim=True)  # [batch, 1]
        logits, ms = timed_pass(model, next_ids, cache)
        times.append(ms)
    return logits, times


# -- one way to time what a page quotes ------------------------------------------------

WARMUPS = 3  # untimed runs before the timed ones
REPEATS = 20  # timed runs; the median and the quartiles are shown


@dataclass(frozen=True)
class Timing:
    """Repeated timings of one thing: `times_ms` the timed repeats in order (the `warmups` untimed
    runs before them are not kept), `what` the thing timed ("one decode step at 5 tokens of context")."""

    times_ms: tuple[float, ...]
    warmups: int
    what: str

    @property
    def repeats(self) -> int:
        return len(self.times_ms)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    def _quartiles(self) -> list[float]:
        return statistics.quantiles(self.times_ms, n=4, method="inclusive")

    @property
    def q1_ms(self) -> float:
        return self._quartiles()[0]

    @property
    def q3_ms(self) -> float:
        return self._quartiles()[2]

    @property
    def min_ms(self) -> float:
        return min(self.times_ms)

    @property
    def max_ms(self) -> float:
        return max(self.times_ms)

    @property
    def how(self) -> str:
        """ "median of 20 after 3 warm-ups": how the figure was taken, for a label or caption."""
        if not self.warmups:  # passes of one run: nothing was run untimed before them
            return f"median of {self.repeats}"
        return f"median of {self.repeats} after {self.warmups} warm-up{'' if self.warmups == 1 else 's'}"

    def label(self) -> str:
        """What was timed, the median, the middle half and how: one line a page can show as it is."""
        return f"{self.what}: {self.median_ms:.2f} ms (middle half {self.q1_ms:.2f}–{self.q3_ms:.2f} ms), {self.how}"


def repeat_timing(
    measure_ms: Callable[[], float], repeats: int = REPEATS, warmups: int = WARMUPS, what: str = ""
) -> Timing:
    """Call `measure_ms` `warmups` times (results dropped), then `repeats` times; each call times one run
    itself and returns its ms (so set-up and clean-up around the timed part stay out of the figure)."""
    if repeats < 3:
        raise ValueError(f"`repeats` has to be at least 3 for a median with a spread, but is {repeats}")
    if warmups < 0:
        raise ValueError(f"`warmups` has to be 0 or more, but is {warmups}")
    for _ in range(warmups):
        measure_ms()
    return Timing(tuple(float(measure_ms()) for _ in range(repeats)), warmups, what)


def pass_timing(times_ms, what: str, warmups: int = 0) -> Timing:
    """Passes a page timed one after another in one run (each its own step: the context grows, so `what` says over
    which context) as a `Timing`, so a page quotes their median and middle half with the same label as a repeated
    measurement; `warmups` the untimed runs before that run."""
    times = tuple(float(ms) for ms in times_ms)
    if len(times) < 2:
        raise ValueError(f"a median with a middle half needs at least 2 timed passes, not {len(times)}")
    return Timing(times, warmups, what)


@torch.inference_mode()
def time_decode_step(model, context_tokens: int, repeats: int = REPEATS, warmups: int = WARMUPS) -> Timing:
    """One decode step (a one-token forward pass on the cache) at a fixed `context_tokens` tokens of
    context: the context is prefilled once (filler tokens), and every repeat steps on its own copy of
    that cache (copied outside the timed part; a sliding-window cache cannot be cropped back), so
    every repeat times the same step."""
    if context_tokens < 1:
        raise ValueError(f"`context_tokens` has to be at least 1, but is {context_tokens}")
    vocab_size = model.get_output_embeddings().weight.shape[0]
    cache = kv_cache.new_cache(model.config)
    logits, _ = timed_pass(model, torch.tensor([filler_prompt(vocab_size, context_tokens)]), cache)
    next_ids = logits.argmax(-1, keepdim=True)  # [1, 1]

    def one_step() -> float:
        return timed_pass(model, next_ids, copy.deepcopy(cache))[1]

    return repeat_timing(one_step, repeats, warmups, f"one decode step at {context_tokens} tokens of context")


# -- one way to compare two measurements -------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """`a` against `b` from their repeats: `ratio` = median(a) / median(b); `low`..`high` the ratio's range when
    each side may be anywhere in its middle half (quartiles). When that range holds 1, the two are within this
    machine's noise and no comparison word may be printed."""

    ratio: float
    low: float
    high: float

    @property
    def too_close(self) -> bool:
        return self.low <= 1.0 <= self.high

    def words(self, more: str = "more", less: str = "less", same: str = "about the same") -> str:
        """The words for the ratio: "4.6x less", "1.3x more", "0.8% more" (a ratio that would read "1.0x"), or "about
        the same (within this machine's noise)"."""
        if self.too_close:
            return f"{same} (within this machine's noise)"
        if 1 / 1.05 < self.ratio < 1.05:
            return f"{abs(self.ratio - 1):.1%} {more if self.ratio > 1 else less}"
        if self.ratio >= 1:
            return f"{self.ratio:.1f}x {more}"
        return f"{1 / self.ratio:.1f}x {less}"


def _middle_half(values) -> tuple[float, float, float]:
    values = sorted(float(v) for v in (values if hasattr(values, "__iter__") else [values]))
    if not values:
        raise ValueError("a comparison needs at least one value on each side")
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def compare(a, b) -> Comparison:
    """Compare two measurements, each a number, a list of repeats or a `Timing`; one number is taken as exact."""
    a_q1, a_med, a_q3 = _middle_half(a.times_ms if isinstance(a, Timing) else a)
    b_q1, b_med, b_q3 = _middle_half(b.times_ms if isinstance(b, Timing) else b)
    if min(b_q1, b_med) <= 0:
        raise ValueError("the measurement compared against has to be above 0")
    return Comparison(a_med / b_med, a_q1 / b_q3, a_q3 / b_q1)
