"""Timing the two phases of generation on the real model: one run, and a sweep over prompt lengths.

Prefill reads all P prompt tokens in one pass (each weight read once, used P times: compute-bound for long
prompts); decode feeds one token per pass (each weight read for a single token: bandwidth-bound, or for a model
this small bound by the fixed cost of a few hundred small operations). Times are wall clock (`measuring`) around
the forward pass after an untimed warm-up; every sweep point is the median of several runs, with their quartiles.
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
SATURATION = 0.8  # prefill tokens/s has "stopped growing" once it reaches 80% of its best;
# a looser bar than 90%, because on a shared machine the medians still wobble by ~10%


# -- one generation --------------------------------------------------------------------


@dataclass(frozen=True)
class GenerationTiming:
    """One greedy generation, step by step: `steps` has one row per step with its phase,
    `tokens_in_forward`, `start_ms`, `forward_ms`, `sample_ms`, `step_ms` and the `token`."""

    steps: pd.DataFrame
    prompt_tokens: int
    stop_reason: str | None
    run_totals_ms: tuple[float, ...] = ()  # every timed generation's total; `steps` is the fastest

    @property
    def runs(self) -> int:
        return len(self.run_totals_ms)

    @property
    def prefill_ms(self) -> float:
        return float(self.steps["forward_ms"].iloc[0])

    @property
    def ttft_ms(self) -> float:
        """Time to first token: the prefill pass plus choosing the first token."""
        return float(self.steps["step_ms"].iloc[0])

    @property
    def decode_steps(self) -> pd.DataFrame:
        return self.steps[self.steps["phase"] == "decode"]

    @property
    def tpot_ms(self) -> float | None:
        """Time per output token after the first: the mean decode step (None if there was none)."""
        decode = self.decode_steps
        return float(decode["step_ms"].mean()) if len(decode) else None

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.prompt_tokens / self.prefill_ms * 1000

    @property
    def decode_tokens_per_s(self) -> float | None:
        return 1000 / self.tpot_ms if self.tpot_ms else None


# Generations timed for the timeline; the middle one is shown (other programs can only stretch a run, and the
# median stays comparable with the sweep's medians). No more runs start once TIMING_BUDGET_S has passed.
TIMED_RUNS = 3
TIMING_BUDGET_S = 1.5


def time_generation(
    model, tokenizer, prompt_ids: list[int], new_tokens: int, runs: int = TIMED_RUNS
) -> GenerationTiming:
    """Generate greedily with the step engine up to `runs` times (at least once) after an untimed warm-up, and lay
    the middle run's measured steps end to end (`middle_run`: the median run, comparable with the sweep's medians)."""
    if runs < 1:
        raise ValueError(f"`runs` has to be at least 1, but is {runs}")
    _one_run(model, prompt_ids, decode_tokens=1)  # warm-up, untimed
    frames, stop_reason, started = [], None, now()
    while len(frames) < runs and (not frames or ms_since(started) < TIMING_BUDGET_S * 1000):
        trace = run_greedy(model, tokenizer, prompt_ids, new_tokens)
        frames.append(trace.to_frame())
        stop_reason = trace.stop_reason
    totals = [float((f["forward_ms"] + f["sample_ms"]).sum()) for f in frames]
    frame = frames[middle_run(totals)]
    steps = pd.DataFrame(
        {
            "step": frame["step"],
            "phase": frame["phase"],
            "tokens_in_forward": frame["tokens_in_forward"],
            "forward_ms": frame["forward_ms"],
            "sample_ms": frame["sample_ms"],
            "token": [readable_token(tokenizer, t) for t in frame["token_id"]],
        }
    )
    steps["step_ms"] = steps["forward_ms"] + steps["sample_ms"]
    steps["start_ms"] = steps["step_ms"].cumsum() - steps["step_ms"]
    return GenerationTiming(
        steps=steps, prompt_tokens=len(prompt_ids), stop_reason=stop_reason, run_totals_ms=tuple(totals)
    )


def middle_run(totals: list[float]) -> int:
    """The index of the median run by total time; of two, the faster (there is no middle one)."""
    order = sorted(range(len(totals)), key=totals.__getitem__)
    return order[(len(order) - 1) // 2]


# -- the sweep -------------------------------------------------------------------------


def default_prompt_lengths(context: int) -> list[int]:
    """Powers of two from 8, then one long prompt that leaves room to decode:
    8, 16, ..., 256, 448 for a context of 512."""
    room = min(DECODE_ROOM, context // 8)
    longest = min(context - room, LONGEST_PROMPT_CAP)
    lengths, n = [], SHORTEST_PROMPT
    while n < longest:
        lengths.append(n)
        n *= 2
    return lengths + [longest]


@torch.inference_mode()
def _one_run(model, prompt_ids: list[int], decode_tokens: int) -> tuple[float, float]:
    """(prefill ms, mean decode ms per token) for one prompt: a prefill pass, then
    `decode_tokens` one-token passes on the cache it filled."""
    cache = kv_cache.new_cache(model.config)
    logits, prefill_ms = timed_pass(model, torch.tensor([prompt_ids], dtype=torch.long), cache)
    _, decode_ms = timed_decode(model, logits, cache, decode_tokens)
    return prefill_ms, sum(decode_ms) / len(decode_ms)


@dataclass(frozen=True)
class Sweep:
    """`runs`: one row per measured run (prompt_tokens, run, prefill_ms, prefill_tokens_per_s,
    decode_ms_per_token). `summary`: one row per prompt length with the median of each
    measure, its quartiles and extremes over the runs (`*_q1`, `*_q3`, `*_min`, `*_max`),
    and `runs` counted."""

    runs: pd.DataFrame
    summary: pd.DataFrame
    repeats: int
    decode_tokens: int


MEASURES = ("prefill_ms", "prefill_tokens_per_s", "decode_ms_per_token")


def summarise_runs(runs: pd.DataFrame) -> pd.DataFrame:
    grouped = runs.groupby("prompt_tokens", sort=True)
    summary = pd.DataFrame({"runs": grouped.size()})
    for measure in MEASURES:
        summary[measure] = grouped[measure].agg(lambda s: median(s.tolist()))
        summary[f"{measure}_q1"] = grouped[measure].quantile(0.25)
        summary[f"{measure}_q3"] = grouped[measure].quantile(0.75)
        summary[f"{measure}_min"] = grouped[measure].min()
        summary[f"{measure}_max"] = grouped[measure].max()
    return summary.reset_index()


def measure_sweep(
    model, prompt_lengths: list[int], repeats: int = 5, decode_tokens: int = 8, progress: Progress | None = None
) -> Sweep:
    """Prefill time and decode time per token at each prompt length.

    One warm-up run per length first (new shapes make the math library pick kernels and
    grow its buffers), then `repeats` rounds over all lengths, so a slow moment on the
    shared machine spreads over every length instead of spoiling one."""
    require_repeats(repeats)
    if decode_tokens < 1:
        raise ValueError(f"`decode_tokens` has to be at least 1, but is {decode_tokens}")
    context = context_limit(model.config)
    lengths = sorted(set(prompt_lengths))
    if not lengths or lengths[0] < 1 or lengths[-1] + decode_tokens > context:
        raise ValueError(
            f"`prompt_lengths` have to be from 1 to {context - decode_tokens} (context {context} minus "
            f"{decode_tokens} decode tokens), but are {prompt_lengths}"
        )
    vocab_size = model.get_output_embeddings().weight.shape[0]
    prompts = {n: filler_prompt(vocab_size, n) for n in lengths}
    return run_sweep(
        lengths, repeats, decode_tokens, lambda n: _one_run(model, prompts[n], decode_tokens), progress, "prompt"
    )


def require_repeats(repeats: int) -> None:
    """A sweep's median needs a spread around it: at least three measured runs per length."""
    if repeats < 3:
        raise ValueError(f"`repeats` has to be at least 3 for a median with a spread, but is {repeats}")


def run_sweep(
    lengths: list[int],
    repeats: int,
    decode_tokens: int,
    one_run: Callable[[int], tuple[float, float]],
    progress: Progress | None,
    what: str,
) -> Sweep:
    """The sweep's schedule, the same for a local model and a serving engine: a warm-up round over all lengths
    (not kept), then `repeats` rounds, so a slow moment on the shared machine spreads over every length instead
    of spoiling one. `one_run(n)` times one n-token prompt: (prefill ms, decode ms per token); `what` names the
    run in the progress line ("{n}-token {what}")."""
    total, done = len(lengths) * (repeats + 1), 0
    rows = []
    for round_index in range(repeats + 1):  # round 0 is the warm-up
        for n in lengths:
            if progress:
                label = "warm-up" if round_index == 0 else f"run {round_index} of {repeats}"
                progress(done, total, f"{label}: {n}-token {what}")
            prefill_ms, decode_ms = one_run(n)
            if round_index > 0:
                rows.append(
                    {
                        "prompt_tokens": n,
                        "run": round_index,
                        "prefill_ms": prefill_ms,
                        "prefill_tokens_per_s": n / prefill_ms * 1000,
                        "decode_ms_per_token": decode_ms,
                    }
                )
            done += 1
    if progress:
        progress(total, total, "done")
    runs = pd.DataFrame(rows)
    return Sweep(runs=runs, summary=summarise_runs(runs), repeats=repeats, decode_tokens=decode_tokens)


# -- what the sweep says ---------------------------------------------------------------


@dataclass(frozen=True)
class SweepFindings:
    """Numbers the page's explanation quotes, all read off one sweep."""

    saturation_tokens: int  # shortest prompt whose prefill tokens/s reached SATURATION of the best
    best_prefill_tokens_per_s: float
    decode_ms_per_token: float  # median over all lengths
    decode_tokens_per_s: float
    longest_prompt: int
    longest_prefill_ms: float
    longest_prefill_in_decode_steps: float  # the longest prefill costs this many decode steps
    free_ride_tokens: int | None  # longest prompt whose prefill cost at most two decode steps
    prefill_flops_per_s: float  # best over the prompt lengths, FLOPs counted by `inference.core.flops`
    prefill_flops_prompt: int  # the prompt length where that was reached
    decode_flops_per_s: float  # at the median decode time, with the shortest prompt's context

    @property
    def prefill_gflops(self) -> float:
        return self.prefill_flops_per_s / 1e9

    @property
    def decode_gflops(self) -> float:
        return self.decode_flops_per_s / 1e9


def findings(sweep: Sweep, flop_count=None) -> SweepFindings:
    """`flop_count`: an `inference.core.flops.FlopCount` (or anything with `prefill(n)` and `decode(context)`);
    without one (a model behind a remote engine) the FLOP/s fields are nan."""
    s = sweep.summary
    best = float(s["prefill_tokens_per_s"].max())
    saturated = s[s["prefill_tokens_per_s"] >= SATURATION * best]
    decode_ms = float(median(s["decode_ms_per_token"].tolist()))
    cheap = (s["prefill_ms"] <= 2 * decode_ms).cummin()  # from the shortest prompt up to the first that is not
    longest = s.iloc[-1]
    achieved = [
        flop_count.prefill(int(n)) / (ms / 1000) if flop_count else math.nan
        for n, ms in zip(s["prompt_tokens"], s["prefill_ms"])
    ]
    best_index = max(range(len(achieved)), key=achieved.__getitem__) if flop_count else len(achieved) - 1
    return SweepFindings(
        saturation_tokens=int(saturated["prompt_tokens"].iloc[0]),
        best_prefill_tokens_per_s=best,
        decode_ms_per_token=decode_ms,
        decode_tokens_per_s=1000 / decode_ms,
        longest_prompt=int(longest["prompt_tokens"]),
        longest_prefill_ms=float(longest["prefill_ms"]),
        longest_prefill_in_decode_steps=float(longest["prefill_ms"]) / decode_ms,
        free_ride_tokens=int(s.loc[cheap, "prompt_tokens"].max()) if cheap.any() else None,
        prefill_flops_per_s=achieved[best_index],
        prefill_flops_prompt=int(s["prompt_tokens"].iloc[best_index]),
        decode_flops_per_s=flop_count.decode(int(s["prompt_tokens"].iloc[0])) / (decode_ms / 1000)
        if flop_count
        else math.nan,
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
    """Read off the sweep's medians: linear between measured prompt lengths, and past the longest along the
    line through the last two (prefill time grows at least linearly with the prompt, so this errs long)."""
    if reply_tokens < 1:
        raise ValueError(f"`reply_tokens` has to be at least 1, but is {reply_tokens}")
    s = sweep.summary
    lengths, prefill = s["prompt_tokens"].astype(float).tolist(), s["prefill_ms"].tolist()
    reply_ms = reply_tokens * float(median(s["decode_ms_per_token"].tolist()))
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
