"""Timing the two phases of generation: one run laid out pass by pass, and a sweep over prompt lengths.

Prefill reads all P prompt tokens in one pass (each weight read once, used P times: compute-bound for long
prompts); decode feeds one token per pass (each weight read for a single token: bandwidth-bound, or for a model
this small bound by the fixed cost of a few hundred small operations). Times are wall clock (`measuring`) around
the forward pass after an untimed warm-up; every sweep point is the median of several runs, with their quartiles.
A serving engine gives the same shapes from its own timings (`engine_timing`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import median

import pandas as pd
import torch

from inference.core import kv_cache
from inference.core.measuring import Progress, filler_prompt, ms_since, now, timed_decode, timed_pass
from inference.core.run import context_limit, run_greedy
from inference.core.tokens import readable_token

SHORTEST_PROMPT = 8
LONGEST_PROMPT_CAP = 1024  # keeps a sweep on a hub model with a 128k context short
DECODE_ROOM = 64  # the longest sweep prompt leaves this much context (at most an eighth) for decoding
SATURATION = 0.8  # prefill tokens/s has "stopped growing" at 80% of its best (the shared machine's medians wobble ~10%)
# Generations timed for the timeline; the middle one is shown (other programs can only stretch a run, and the median
# stays comparable with the sweep's medians). No more runs start once TIMING_BUDGET_S has passed.
TIMED_RUNS = 3
TIMING_BUDGET_S = 1.5


@dataclass(frozen=True)
class GenerationTiming:
    """One greedy generation: `steps` has one row per step with its `phase`, `tokens_in_forward`, `forward_ms`,
    `sample_ms`, `step_ms`, `start_ms` and `token`."""

    steps: pd.DataFrame
    prompt_tokens: int
    stop_reason: str | None
    run_totals_ms: tuple[float, ...] = ()  # every timed generation's total; `steps` is the middle one

    @property
    def runs(self) -> int:
        return len(self.run_totals_ms)

    @property
    def prefill_ms(self) -> float:
        return float(self.steps.forward_ms.iloc[0])

    @property
    def ttft_ms(self) -> float:
        """Time to first token: the prefill pass plus choosing the first token."""
        return float(self.steps.step_ms.iloc[0])

    @property
    def decode_steps(self) -> pd.DataFrame:
        return self.steps[self.steps.phase == "decode"]

    @property
    def tpot_ms(self) -> float | None:
        """Time per output token after the first: the mean decode step (None if there was none)."""
        return float(self.decode_steps.step_ms.mean()) if len(self.decode_steps) else None

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.prompt_tokens / self.prefill_ms * 1000


def laid_end_to_end(steps: pd.DataFrame, tokenizer, token_ids) -> pd.DataFrame:
    """`steps` (phase, tokens_in_forward, forward_ms, sample_ms) with each step's token, time and start."""
    steps = steps.assign(token=[readable_token(tokenizer, t) for t in token_ids])
    steps["step_ms"] = steps.forward_ms + steps.sample_ms
    steps["start_ms"] = steps.step_ms.cumsum() - steps.step_ms
    return steps


def time_generation(model, tokenizer, prompt_ids: list[int], new_tokens: int) -> GenerationTiming:
    """Generate greedily with the step engine up to TIMED_RUNS times after an untimed warm-up, and lay the middle
    run's measured steps end to end (of two runs, the faster)."""
    _one_run(model, prompt_ids, decode_tokens=1)  # warm-up, untimed
    traces, started = [], now()
    while len(traces) < TIMED_RUNS and (not traces or ms_since(started) < TIMING_BUDGET_S * 1000):
        traces.append(run_greedy(model, tokenizer, prompt_ids, new_tokens))
    frames = [t.to_frame() for t in traces]
    totals = [float((f.forward_ms + f.sample_ms).sum()) for f in frames]
    middle = sorted(range(len(totals)), key=totals.__getitem__)[(len(totals) - 1) // 2]
    columns = ["step", "phase", "tokens_in_forward", "forward_ms", "sample_ms"]
    steps = laid_end_to_end(frames[middle][columns], tokenizer, frames[middle].token_id)
    return GenerationTiming(steps, len(prompt_ids), traces[-1].stop_reason, tuple(totals))


def default_prompt_lengths(context: int) -> list[int]:
    """Powers of two from 8, then one long prompt that leaves room to decode: 8, 16, ..., 256, 448 for 512."""
    longest = min(context - min(DECODE_ROOM, context // 8), LONGEST_PROMPT_CAP)
    return [2**k for k in range(3, 20) if SHORTEST_PROMPT <= 2**k < longest] + [longest]


@torch.inference_mode()
def _one_run(model, prompt_ids: list[int], decode_tokens: int) -> tuple[float, float]:
    """(prefill ms, mean decode ms per token): a prefill pass, then `decode_tokens` one-token passes on its cache."""
    cache = kv_cache.new_cache(model.config)
    logits, prefill_ms = timed_pass(model, torch.tensor([prompt_ids], dtype=torch.long), cache)
    _, decode_ms = timed_decode(model, logits, cache, decode_tokens)
    return prefill_ms, sum(decode_ms) / len(decode_ms)


@dataclass(frozen=True)
class Sweep:
    """`runs`: one row per measured run (prompt_tokens, run, prefill_ms, prefill_tokens_per_s, decode_ms_per_token).
    `summary`: one row per prompt length: each measure's median, quartiles and extremes (`_q1`, `_q3`, `_min`,
    `_max`) over the runs, and `runs` counted."""

    runs: pd.DataFrame
    summary: pd.DataFrame
    repeats: int
    decode_tokens: int


def summarise_runs(runs: pd.DataFrame) -> pd.DataFrame:
    grouped = runs.groupby("prompt_tokens", sort=True)
    summary = pd.DataFrame({"runs": grouped.size()})
    for measure in ("prefill_ms", "prefill_tokens_per_s", "decode_ms_per_token"):
        summary[measure] = grouped[measure].median()
        summary[f"{measure}_q1"], summary[f"{measure}_q3"] = (
            grouped[measure].quantile(0.25),
            grouped[measure].quantile(0.75),
        )
        summary[f"{measure}_min"], summary[f"{measure}_max"] = grouped[measure].min(), grouped[measure].max()
    return summary.reset_index()


def measure_sweep(
    model, prompt_lengths: list[int], repeats: int = 5, decode_tokens: int = 8, progress: Progress | None = None
) -> Sweep:
    """Prefill time and decode time per token at each prompt length (filler prompts)."""
    context = context_limit(model.config)
    prompts = {n: filler_prompt(model.get_output_embeddings().weight.shape[0], n) for n in prompt_lengths}
    one_run = lambda n: _one_run(model, prompts[n], decode_tokens)
    return run_sweep(prompt_lengths, context - decode_tokens, repeats, decode_tokens, one_run, progress, "prompt")


def run_sweep(
    prompt_lengths: list[int],
    longest: int,
    repeats: int,
    decode_tokens: int,
    one_run: Callable[[int], tuple[float, float]],
    progress: Progress | None,
    what: str,
) -> Sweep:
    """The sweep's schedule, the same for a local model and a serving engine: a warm-up round over all lengths (new
    shapes make the math library pick kernels and grow buffers; not kept), then `repeats` rounds, so a slow moment
    on the shared machine spreads over every length instead of spoiling one. `one_run(n)` times one n-token
    prompt: (prefill ms, decode ms per token); `what` names it in the progress line ("{n}-token {what}")."""
    lengths = sorted(set(prompt_lengths))
    if repeats < 3:  # a median needs a spread around it
        raise ValueError(f"`repeats` has to be at least 3 for a median with a spread, but is {repeats}")
    if not lengths or lengths[0] < 1 or lengths[-1] > longest:
        raise ValueError(f"`prompt_lengths` have to be from 1 to {longest}, but are {prompt_lengths}")
    total, rows, progress = len(lengths) * (repeats + 1), [], progress or (lambda *_: None)
    for round_index in range(repeats + 1):  # round 0 is the warm-up
        for i, n in enumerate(lengths):
            label = "warm-up" if round_index == 0 else f"run {round_index} of {repeats}"
            progress(round_index * len(lengths) + i, total, f"{label}: {n}-token {what}")
            prefill_ms, decode_ms = one_run(n)
            if round_index > 0:
                rows.append(
                    dict(prompt_tokens=n, run=round_index, prefill_ms=prefill_ms, decode_ms_per_token=decode_ms)
                )
    progress(total, total, "done")
    runs = pd.DataFrame(rows)
    runs.insert(3, "prefill_tokens_per_s", runs.prompt_tokens / runs.prefill_ms * 1000)
    return Sweep(runs=runs, summary=summarise_runs(runs), repeats=repeats, decode_tokens=decode_tokens)


@dataclass(frozen=True)
class SweepFindings:
    """Numbers the page's explanation quotes, all read off one sweep."""

    saturation_tokens: int  # shortest prompt whose prefill tokens/s reached SATURATION of the best
    best_prefill_tokens_per_s: float
    decode_ms_per_token: float  # median over all lengths
    longest_prompt: int
    longest_prefill_ms: float
    free_ride_tokens: int | None  # longest prompt whose prefill cost at most two decode steps
    prefill_gflops: float  # best over the prompt lengths, FLOPs counted by `inference.core.flops`
    prefill_flops_prompt: int  # the prompt length where that was reached
    decode_gflops: float  # at the median decode time, with the shortest prompt's context


def findings(sweep: Sweep, flop_count=None) -> SweepFindings:
    """`flop_count`: an `inference.core.flops.FlopCount` (anything with `prefill(n)` and `decode(context)`);
    without one (a model behind a remote engine) the GFLOP/s are nan."""
    s = sweep.summary
    best = float(s.prefill_tokens_per_s.max())
    decode_ms = float(median(s.decode_ms_per_token))
    cheap = (s.prefill_ms <= 2 * decode_ms).cummin()  # from the shortest prompt up to the first that is not
    achieved = [
        flop_count.prefill(int(n)) / ms / 1e6 if flop_count else math.nan
        for n, ms in zip(s.prompt_tokens, s.prefill_ms)
    ]
    best_index = max(range(len(achieved)), key=achieved.__getitem__) if flop_count else len(achieved) - 1
    return SweepFindings(
        saturation_tokens=int(s[s.prefill_tokens_per_s >= SATURATION * best].prompt_tokens.iloc[0]),
        best_prefill_tokens_per_s=best,
        decode_ms_per_token=decode_ms,
        longest_prompt=int(s.prompt_tokens.iloc[-1]),
        longest_prefill_ms=float(s.prefill_ms.iloc[-1]),
        free_ride_tokens=int(s.prompt_tokens[cheap].max()) if cheap.any() else None,
        prefill_gflops=achieved[best_index],
        prefill_flops_prompt=int(s.prompt_tokens.iloc[best_index]),
        decode_gflops=flop_count.decode(int(s.prompt_tokens.iloc[0])) / decode_ms / 1e6 if flop_count else math.nan,
    )


@dataclass(frozen=True)
class Crossover:
    """The prompt whose prefill takes as long as decoding a reply of `reply_tokens` tokens."""

    reply_tokens: int
    reply_ms: float  # reply_tokens x the median decode step
    prompt_tokens: float
    how: str  # "interpolated" between two measured prompt lengths, "extrapolated" past the longest, "below"

    def beyond(self, context: int) -> bool:
        """True when the crossing prompt is longer than the model's context: no prompt it can read takes as long."""
        return self.prompt_tokens > context


def crossover_prompt_tokens(sweep: Sweep, reply_tokens: int) -> Crossover:
    """Read off the sweep's medians: linear between measured prompt lengths, and past the longest along the line
    through the last two (prefill time grows at least linearly with the prompt, so this errs long)."""
    s = sweep.summary
    lengths, prefill = s.prompt_tokens.astype(float).tolist(), s.prefill_ms.tolist()
    reply_ms = reply_tokens * float(median(s.decode_ms_per_token))
    if reply_ms <= prefill[0]:
        return Crossover(reply_tokens, reply_ms, lengths[0], "below")
    for (n0, p0), (n1, p1) in zip(zip(lengths, prefill), zip(lengths[1:], prefill[1:])):
        if p0 < reply_ms <= p1:
            return Crossover(reply_tokens, reply_ms, n0 + (reply_ms - p0) * (n1 - n0) / (p1 - p0), "interpolated")
    if len(lengths) < 2 or prefill[-1] <= prefill[-2]:
        slope = prefill[-1] / lengths[-1]  # no rising pair to extend: through the origin
    else:
        slope = (prefill[-1] - prefill[-2]) / (lengths[-1] - lengths[-2])
    return Crossover(reply_tokens, reply_ms, lengths[-1] + (reply_ms - prefill[-1]) / slope, "extrapolated")
