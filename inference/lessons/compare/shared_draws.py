"""Two settings (or models) on the same draws: runs with one seed draw the same u at step i, so any difference in
their text comes from the settings, never luck. `shared_draw_pair` (where two runs part, and why), `order_lesson`
(a step where the two orders keep different tokens), `many_seeds` (over many seeds, batched, with seeded bootstrap
intervals of each statistic's mean: a verdict only where they do not overlap)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch

from inference.core.forward import TransformersForward
from inference.core.measuring import Progress, ms_since, now
from inference.core.run import Trace, eos_token_ids, new_trace, run_uniforms
from inference.core.tokens import readable_tokens
from inference.lessons.compare.text import TEXT
from inference.sampling.pipeline import (
    LLAMA_CPP_ORDER,
    STAGE_NAMES,
    TRANSFORMERS_ORDER,
    SamplingSettings,
    StepContext,
    draw,
    seen_mask,
    stage_logits,
)
from inference.sampling.stages import dry_breaker_ids, xtc_uniforms
from inference.sampling.step_view import StepView, step_view

METRICS = {  # column -> label
    "repetition_rate": "repeated 4-grams (share)",
    "distinct_2": "distinct 2-grams (share)",
    "mean_logprob": "mean log-probability under float32 (nats/token)",
    "length": "tokens to the stop token",
}
BOOTSTRAP_RESAMPLES = 2000


def run_to_end(
    model, tokenizer, prompt_ids: list[int], settings: SamplingSettings, seed: int, max_new_tokens: int
) -> Trace:
    list((trace := new_trace(model, tokenizer, prompt_ids, max_new_tokens, seed)).run(settings))
    return trace


def first_difference(a: list[int], b: list[int]) -> int | None:
    """The first step where two generated id lists differ (one ending earlier counts), or None."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _seen_before(trace: Trace, step: int) -> torch.Tensor:
    return seen_mask(trace.all_ids[: len(trace.prompt_ids) + step], trace.vocab_size)


def _recorded_context(trace: Trace, step: int) -> StepContext | None:
    """The context the recorded step's stages read, with the mirostat mu the run held then."""
    record = trace.records[step]
    context = trace.step_context(step, record.settings) if record.settings.needs_context else None
    if context is not None and record.settings.mirostat:
        context = replace(context, mirostat_mu=record.mirostat_mu)
    return context


def recorded_view(trace: Trace, step: int) -> StepView:
    record = trace.records[step]
    context, seen = _recorded_context(trace, step), _seen_before(trace, step)
    return step_view(record.logits, record.settings, seen, u=record.u, chosen_id=record.token_id, context=context)


def _remover(trace: Trace, step: int, token_id: int) -> str | None:
    record = trace.records[step]
    context, seen = _recorded_context(trace, step), _seen_before(trace, step)
    for name, logits in list(stage_logits(record.logits, record.settings, seen, context).items())[1:]:
        if not math.isfinite(float(logits[token_id])):
            return name
    return None


def _mass_before(view: StepView, token_id: int) -> float:
    where = (view.order[: view.sorted_prefix] == token_id).nonzero()
    rank = int(where[0, 0]) if len(where) else view.sorted_prefix
    return float(view.final[:rank].sum())


@dataclass(frozen=True)
class Parting:
    step: int  # first generated step where A and B chose different tokens
    u: float  # the uniform both runs drew there
    view_a: StepView
    view_b: StepView
    token_a: str
    token_b: str
    reason: str  # one sentence


def explain_parting(trace_a: Trace, trace_b: Trace, step: int) -> Parting:
    view_a, view_b = recorded_view(trace_a, step), recorded_view(trace_b, step)
    id_a, id_b = trace_a.records[step].token_id, trace_b.records[step].token_id
    tok_a, tok_b = (repr(t) for t in readable_tokens(trace_a.tokenizer, [id_a, id_b]))
    u = trace_a.records[step].u
    removed_in_b, removed_in_a = _remover(trace_b, step, id_a), _remover(trace_a, step, id_b)
    fields = {"u": u, "tok_a": tok_a, "tok_b": tok_b}
    if removed_in_b or removed_in_a:
        side, stage = ("B", removed_in_b) if removed_in_b else ("A", removed_in_a)
        removed, other, chosen = (tok_a, "A", tok_b) if removed_in_b else (tok_b, "B", tok_a)
        fields |= {"side": side, "stage": STAGE_NAMES[stage], "removed": removed, "other": other, "chosen": chosen}
        reason = TEXT["removed"].format(**fields)
    else:
        same_logits = torch.equal(trace_a.records[step].logits, trace_b.records[step].logits)
        fields |= {"cause": "B's settings" if same_logits else "B's model"}
        fields |= {"before_a": _mass_before(view_a, id_a), "before_b": _mass_before(view_b, id_a)}
        reason = TEXT["moved"].format(**fields)
    return Parting(step, u, view_a, view_b, tok_a, tok_b, reason)


@dataclass(frozen=True)
class SharedDrawPair:
    trace_a: Trace
    trace_b: Trace
    parting: Parting | None  # None: the texts are the same


def shared_draw_pair(
    model_a,
    model_b,
    tokenizer,
    prompt_ids: list[int],
    settings_a: SamplingSettings,
    settings_b: SamplingSettings,
    seed: int,
    max_new_tokens: int,
) -> SharedDrawPair:
    trace_a = run_to_end(model_a, tokenizer, prompt_ids, settings_a, seed, max_new_tokens)
    trace_b = run_to_end(model_b, tokenizer, prompt_ids, settings_b, seed, max_new_tokens)
    step = first_difference(trace_a.generated_ids, trace_b.generated_ids)
    parting = None
    if step is not None and step < min(len(trace_a.records), len(trace_b.records)):
        parting = explain_parting(trace_a, trace_b, step)
    return SharedDrawPair(trace_a, trace_b, parting)


@dataclass(frozen=True)
class OrderLesson:
    step: int
    transformers: StepView
    llama_cpp: StepView
    only_transformers: int  # tokens kept by the transformers order alone
    only_llama_cpp: int


def order_lesson(trace: Trace, settings: SamplingSettings) -> OrderLesson | None:
    """The first step of `trace` where the settings in transformers' and llama.cpp's orders keep different tokens."""
    transformers, llama_cpp = (replace(settings, order=order) for order in (TRANSFORMERS_ORDER, LLAMA_CPP_ORDER))
    for record in trace.records:
        seen = _seen_before(trace, record.index)
        contexts = [trace.step_context(record.index, s) if s.needs_context else None for s in (transformers, llama_cpp)]
        kept_t, kept_l = (
            torch.isfinite(stage_logits(record.logits, s, seen, c)[s.pipeline[-1]])
            for s, c in zip((transformers, llama_cpp), contexts)
        )
        if not torch.equal(kept_t, kept_l):
            view_t, view_l = (
                step_view(record.logits, s, seen, u=record.u, context=c)
                for s, c in zip((transformers, llama_cpp), contexts)
            )
            only_t, only_l = int((kept_t & ~kept_l).sum()), int((kept_l & ~kept_t).sum())
            return OrderLesson(record.index, view_t, view_l, only_t, only_l)
    return None


def repetition_rate(ids: list[int], n: int = 4) -> float:
    """Share of the n-grams of `ids` that occurred earlier in it (nan if none)."""
    grams = [tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)]
    if not grams:
        return float("nan")
    seen, repeated = set(), 0
    for gram in grams:
        repeated += gram in seen
        seen.add(gram)
    return repeated / len(grams)


def distinct_n(ids: list[int], n: int = 2) -> float:
    """Distinct n-grams over all n-grams (nan if none)."""
    grams = [tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)]
    return len(set(grams)) / len(grams) if grams else float("nan")


@torch.inference_mode()
def batched_runs(
    model,
    tokenizer,
    prompt_ids: list[int],
    settings: SamplingSettings,
    seeds: list[int],
    max_new_tokens: int,
    progress=None,
) -> list[list[int]]:
    """One sampled run per seed as one batch (the same prompt, no padding): row i draws what a single run with that
    seed draws (to float rounding of the logits); each run stops at its stop token."""
    batch, forward = len(seeds), TransformersForward(model, tokenizer)
    eos, vocab = forward.eos_ids, forward.vocab_size
    us = torch.stack([run_uniforms(s, max_new_tokens) for s in seeds])
    xtc = torch.stack([xtc_uniforms(s, max_new_tokens) for s in seeds]) if settings.xtc_probability > 0 else None
    breakers = dry_breaker_ids(tokenizer, settings.dry_sequence_breakers if settings.dry_multiplier > 0 else ())
    logits = forward.batch_logits([prompt_ids] * batch)[:, -1]
    seen = seen_mask(prompt_ids, vocab).repeat(batch, 1)
    generated: list[list[int]] = [[] for _ in seeds]
    done, mu = [False] * batch, [2.0 * settings.mirostat_tau] * batch
    for step in range(max_new_tokens):
        next_ids = []
        for row in range(batch):
            if done[row]:
                next_ids.append(generated[row][-1])
                continue
            context = None
            if settings.needs_context:
                context = StepContext(
                    history=tuple(prompt_ids + generated[row]),
                    breaker_ids=breakers,
                    xtc_u=None if xtc is None else float(xtc[row, step]),
                    mirostat_mu=mu[row],
                )
            choice = draw(logits[row], settings, seen[row], float(us[row, step]), context)
            if choice.mirostat_mu_next is not None:
                mu[row] = choice.mirostat_mu_next
            generated[row].append(choice.token_id)
            seen[row, choice.token_id] = True
            done[row] = choice.token_id in eos
            next_ids.append(choice.token_id)
        if progress:
            progress(step + 1)
        if all(done) or step == max_new_tokens - 1:
            break
        logits = forward.batch_logits([[token] for token in next_ids])[:, -1]
    return generated


@torch.inference_mode()
def mean_logprobs(reference_model, tokenizer, prompt_ids: list[int], runs: list[list[int]], chunk: int = 64):
    """Each run's mean log-probability (nats/token) under the reference model, teacher-forced in chunks (padding
    at the end, which a causal model never reads back)."""
    out = []
    for start in range(0, len(runs), chunk):
        part = runs[start : start + chunk]
        longest = max(len(r) for r in part)
        ids = [prompt_ids + r + [0] * (longest - len(r)) for r in part]
        logits = TransformersForward(reference_model, tokenizer).batch_logits(ids, keep=0)
        logp = torch.log_softmax(logits.double(), dim=-1)
        for row, run in enumerate(part):
            positions = torch.arange(len(prompt_ids) - 1, len(prompt_ids) - 1 + len(run))
            out.append(float(logp[row, positions, torch.tensor(run, dtype=torch.long)].mean()) if run else math.nan)
    return out


def run_statistics(prompt_ids, runs: list[list[int]], eos: set[int], reference_model, tokenizer) -> pd.DataFrame:
    logprobs = mean_logprobs(reference_model, tokenizer, prompt_ids, runs)
    return pd.DataFrame(
        {
            "repetition_rate": [repetition_rate(r) for r in runs],
            "distinct_2": [distinct_n(r) for r in runs],
            "mean_logprob": logprobs,
            "length": [len(r) for r in runs],
            "stopped": [bool(r) and r[-1] in eos for r in runs],
        }
    )


def bootstrap_interval(
    values, seed: int, resamples: int = BOOTSTRAP_RESAMPLES, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean, seeded (nan left out). Not `measuring.compare`: that compares
    medians of positive timings by their quartiles, and these are shares often 0 and negative log-probabilities,
    whose means differ long before the runs' middle halves stop overlapping."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if len(values) == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = rng.choice(values, size=(resamples, len(values)), replace=True).mean(axis=1)
    tail = (1 - level) / 2 * 100
    return float(np.percentile(means, tail)), float(np.percentile(means, 100 - tail))


@dataclass(frozen=True)
class ManySeeds:
    seeds: list[int]
    runs_a: list[list[int]]
    runs_b: list[list[int]]
    stats_a: pd.DataFrame
    stats_b: pd.DataFrame
    summary: pd.DataFrame  # metric, mean/low/high for A and B, differs
    seconds: float

    @property
    def every_run_capped(self) -> bool:
        return not (self.stats_a["stopped"].any() or self.stats_b["stopped"].any())

    @property
    def metrics(self) -> dict[str, str]:
        return {metric: label for metric, label in METRICS.items() if metric in set(self.summary["metric"])}

    def verdicts(self) -> list[str]:
        lines = []
        for row in self.summary[self.summary["differs"]].itertuples():
            (high, higher), (low, lower) = sorted([(row.mean_a, "A"), (row.mean_b, "B")], reverse=True)
            lines.append(TEXT["verdict"].format(higher=higher, lower=lower, label=row.label, high=high, low=low))
        return lines


def summarize(stats_a: pd.DataFrame, stats_b: pd.DataFrame, bootstrap_seed: int = 0) -> pd.DataFrame:
    """Mean and bootstrap interval of each statistic for A and B; no length when no run stopped (each statistic's
    bootstrap seed is its place in METRICS, so leaving it out changes no other)."""
    capped = not (stats_a["stopped"].any() or stats_b["stopped"].any())
    rows = []
    for i, (metric, label) in enumerate(METRICS.items()):
        if capped and metric == "length":
            continue
        row = {"metric": metric, "label": label}
        for side, stats, seed in (("a", stats_a, 2 * i), ("b", stats_b, 2 * i + 1)):
            low, high = bootstrap_interval(stats[metric], bootstrap_seed + seed)
            row |= {f"mean_{side}": float(stats[metric].mean()), f"low_{side}": low, f"high_{side}": high}
        rows.append(row | {"differs": bool(row["high_a"] < row["low_b"] or row["high_b"] < row["low_a"])})
    return pd.DataFrame(rows)


def many_seeds(
    model_a,
    model_b,
    tokenizer,
    reference_model,
    prompt_ids: list[int],
    settings_a: SamplingSettings,
    settings_b: SamplingSettings,
    seeds: list[int],
    max_new_tokens: int,
    progress: Progress | None = None,
    bootstrap_seed: int = 0,
) -> ManySeeds:
    start, total = now(), 2 * max_new_tokens + 3  # each side's decode steps, scoring each side, the intervals
    report = progress or (lambda *_: None)
    runs, stats, eos = {}, {}, eos_token_ids(model_a, tokenizer)
    for i, (side, model, settings) in enumerate((("A", model_a, settings_a), ("B", model_b, settings_b))):
        done = lambda step, i=i, side=side: report(i * max_new_tokens + step, total, side)
        runs[side] = batched_runs(model, tokenizer, prompt_ids, settings, seeds, max_new_tokens, done)
    for i, side in enumerate(runs):
        report(2 * max_new_tokens + i, total, f"scoring {side}'s texts with the float32 model")
        stats[side] = run_statistics(prompt_ids, runs[side], eos, reference_model, tokenizer)
    report(total - 1, total, "bootstrap intervals")
    summary = summarize(stats["A"], stats["B"], bootstrap_seed)
    return ManySeeds(list(seeds), runs["A"], runs["B"], stats["A"], stats["B"], summary, ms_since(start) / 1000)
