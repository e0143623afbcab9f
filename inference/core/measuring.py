"""What every timed experiment shares: greedy settings, the progress callback, prompts of
filler tokens, one timed forward pass and the timed decode loop, and a greedy run to the end.

Times are wall clock (`time.perf_counter`) around the forward pass only. Greedy decoding
makes a run repeatable, so two runs differ only in how long they took.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from inference.core.run import Trace, new_trace
from inference.sampling.pipeline import SamplingSettings

GREEDY = SamplingSettings(temperature=0)

# A long measurement reports where it is: (steps done, steps in all, what is running now).
Progress = Callable[[int, int, str], None]


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
    start = time.perf_counter()
    out = model(input_ids=input_ids, cache=cache, use_cache=cache is not None, logits_to_keep=1)
    return out.logits[:, -1], (time.perf_counter() - start) * 1000


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


def run_greedy(model, tokenizer, prompt_ids: list[int], new_tokens: int, stop_at_eos: bool = True) -> Trace:
    """A greedy generation with the step engine, run to its end (the end-of-text token, unless
    `stop_at_eos` is off, or `new_tokens`); its trace holds every step's record."""
    trace = new_trace(model, tokenizer, prompt_ids, new_tokens, stop_at_eos=stop_at_eos)
    for _ in trace.run(GREEDY):
        pass
    return trace
