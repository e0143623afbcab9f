"""One model at four precisions, side by side: bytes, decode speed, greedy text and the drift of every next-token
distribution from float32's. Quality is teacher-forced on the prompt plus float32's greedy text, so every precision
reads the same tokens and step t compares like with like even after its own greedy text went another way."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import pandas as pd
import torch
import torch.nn.functional as F
from transformers.pytorch_utils import Conv1D

from inference.core.flops import FlopCount
from inference.core.quantize import (
    PRECISIONS,
    QuantizationOverhead,
    SkippedLayer,
    compare_to_reference,
    int4_group_size,
    quantization_overhead,
    quantized_copy,
    teacher_forced_logits,
    weight_bytes_by_kind,
)
from inference.core.run import run_greedy
from inference.core.tokens import readable_tokens

REFERENCE = "float32"
WARMUP_TOKENS = 4  # the first calls allocate buffers and pick kernels: keep them out of the timing
# "Best of 2" moved the ratios ~15% between runs on this shared 2-core machine: the median of 5 interleaved rounds.
SPEED_ROUNDS = 5
TOP_N = 15  # float32's top tokens shown at a step


@dataclass(frozen=True)
class PrecisionResult:
    precision: str
    bytes_by_kind: dict[str, int]  # from the tensors: embeddings, lm_head, linear, other
    quantize_seconds: float | None  # None for the float32 reference: no copy is made
    round_rates: tuple[float, ...]  # decode tokens/s of each timed round (1 ÷ the median decode step)
    greedy_tokens: list[str]  # this precision's own greedy continuation, as decoded
    first_departure: int | None  # first step whose greedy token differs from float32's
    quantized_layers: int = 0
    skipped_layers: list[SkippedLayer] = field(default_factory=list)
    overhead: QuantizationOverhead = QuantizationOverhead(0, 0)

    @property
    def weight_bytes(self) -> int:
        return sum(self.bytes_by_kind.values())

    @property
    def decode_tokens_per_s(self) -> float:
        return statistics.median(self.round_rates)


@dataclass(frozen=True)
class PrecisionComparison:
    prompt_ids: list[int]
    prompt_text: str
    reference_ids: list[int]  # float32's greedy tokens: the sequence every precision is scored on
    reference_tokens: list[str]  # readable labels for those tokens
    results: dict[str, PrecisionResult]  # in PRECISIONS order
    steps: pd.DataFrame  # precision, step, kl_from_reference, top1_agrees, p_reference_token
    step_tops: pd.DataFrame  # step, precision, rank, token_id, token, prob: float32's top tokens, then "other"
    int4_group_size: int
    conv1d_layers: int  # GPT-2 Conv1D layers in the original (converted to nn.Linear before quantizing)
    rounds: int
    decode_flops: int = 0  # one decode pass's arithmetic at the prompt's end: the same in every engine
    leaf_modules: int = 0  # modules without children: roughly the operations torch dispatches per token


def first_departure(ids: list[int], reference_ids: list[int]) -> int | None:
    """First step where `ids` differs from the reference (a shorter run departs where it ends); None if equal."""
    for step, (token, reference) in enumerate(zip(ids, reference_ids)):
        if token != reference:
            return step
    return None if len(ids) == len(reference_ids) else min(len(ids), len(reference_ids))


def leaf_modules(model) -> int:
    return sum(1 for module in model.modules() if next(module.children(), None) is None)


def _step_tops(logits: dict[str, torch.Tensor], tokenizer) -> pd.DataFrame:
    """Per step, float32's top tokens and the probability each precision gives them, the rest as "other"."""
    probs = {precision: F.softmax(rows.double(), dim=-1) for precision, rows in logits.items()}
    rows = []
    for step, ids in enumerate(probs[REFERENCE].topk(TOP_N, dim=-1).indices.tolist()):
        names = readable_tokens(tokenizer, ids)
        for precision, p in probs.items():
            shown = p[step, ids].tolist()
            rows += [
                (step, precision, rank, *token, prob)
                for rank, (token, prob) in enumerate(zip(zip(ids, names), shown), 1)
            ]
            rows.append((step, precision, TOP_N + 1, -1, "other", max(0.0, 1.0 - sum(shown))))
    return pd.DataFrame(rows, columns=["step", "precision", "rank", "token_id", "token", "prob"])


def measure(model, tokenizer, prompt_ids, max_new_tokens: int, progress=None, shown_prompt=None, rounds=SPEED_ROUNDS):
    """The page's background measurement: bfloat16, int8 and int4 copies of `model` (which is only called), timed
    in interleaved rounds, then scored against float32. `shown_prompt`: the user's words, not the chat template."""
    copies = {}
    for done, precision in enumerate(PRECISIONS):
        if progress:
            progress(done, len(PRECISIONS), f"Making the {precision} copy")
        copies[precision] = quantized_copy(model, precision)
    models, prompt_ids = {p: c.model for p, c in copies.items()}, list(prompt_ids)

    # 1. speed and greedy text. Precisions take turns in each round, the order rotated every round, so a burst of
    #    other work slows them all alike and none is always first after another's run.
    for m in models.values():
        run_greedy(m, tokenizer, prompt_ids, min(WARMUP_TOKENS, max_new_tokens))
    rates, records = {p: [] for p in models}, {}
    for index in range(rounds):
        for precision in PRECISIONS[index % 4 :] + PRECISIONS[: index % 4]:
            if progress:
                progress(index, rounds, f"Timing round {index + 1} of {rounds}: {precision}")
            records[precision] = run_greedy(models[precision], tokenizer, prompt_ids, max_new_tokens).records
            decode_ms = [r.forward_ms for r in records[precision] if r.phase == "decode"]
            rates[precision].append(1000 / statistics.median(decode_ms) if decode_ms else float("nan"))
    if progress:
        progress(rounds, rounds, "Scoring every precision against float32")
    greedy = {p: [r.token_id for r in records[p]] for p in models}
    reference_ids = greedy[REFERENCE]

    # 2. quality: one pass per precision over prompt + float32's greedy tokens; row t predicts reference token t
    first = len(prompt_ids) - 1
    logits = {
        p: teacher_forced_logits(m, prompt_ids + reference_ids)[first : first + len(reference_ids)]
        for p, m in models.items()
    }
    steps = pd.concat(
        [compare_to_reference(logits[REFERENCE], logits[p], reference_ids).assign(precision=p) for p in models],
        ignore_index=True,
    )
    results = {
        p: PrecisionResult(
            p,
            weight_bytes_by_kind(models[p]),
            None if p == REFERENCE else copies[p].seconds,
            tuple(rates[p]),
            [r.token_text for r in records[p]],
            first_departure(greedy[p], reference_ids),
            copies[p].quantized_linear_layers,
            list(copies[p].skipped_layers),
            quantization_overhead(models[p]),
        )
        for p in models
    }
    return PrecisionComparison(
        prompt_ids,
        tokenizer.decode(prompt_ids, skip_special_tokens=True) if shown_prompt is None else shown_prompt,
        reference_ids,
        readable_tokens(tokenizer, reference_ids),
        results,
        steps,
        _step_tops(logits, tokenizer),
        int4_group_size(model),
        sum(isinstance(m, Conv1D) for m in model.modules()),
        rounds,
        FlopCount.of(model).decode(len(prompt_ids)),
        leaf_modules(model),
    )


def summary_table(comparison: PrecisionComparison) -> pd.DataFrame:
    """One row per precision: cost, speed, drift. The speed ratio is the median of the rounds' own ratios (each pair
    ran in the same round, so the machine's load mostly cancels); low and high are their extremes."""
    reference = comparison.results[REFERENCE]
    drift = comparison.steps.groupby("precision", sort=False)[["kl_from_reference", "top1_agrees", "p_reference_token"]]
    drift = drift.mean().astype(float)
    rows = []
    for precision, result in comparison.results.items():
        ratios = [r / b for r, b in zip(result.round_rates, reference.round_rates)]
        rows.append(
            {
                "precision": precision,
                "weight_bytes": result.weight_bytes,
                "size_vs_float32": result.weight_bytes / reference.weight_bytes,
                "linear_bytes": result.bytes_by_kind["linear"],
                "quantize_s": result.quantize_seconds,
                "decode_tokens_per_s": result.decode_tokens_per_s,
                "speed_vs_float32": statistics.median(ratios),
                "speed_low": min(ratios),
                "speed_high": max(ratios),
                "rate_low": min(result.round_rates),
                "rate_high": max(result.round_rates),
                "mean_kl_nats": drift.at[precision, "kl_from_reference"],
                "top1_agreement": drift.at[precision, "top1_agrees"],
                "mean_p_float32_token": drift.at[precision, "p_reference_token"],
                "first_departure": result.first_departure,
            }
        )
    return pd.DataFrame(rows).astype({"first_departure": "Int64"})  # <NA>: never departs


def benchmark_rows(model, tokenizer, prompt_ids: list[int], max_new_tokens: int = 48) -> list[dict]:
    """Per precision: weight bytes, decode tokens/s and drift, for `python -m inference.bench`."""
    columns = ["precision", "weight_bytes", "size_vs_float32", "decode_tokens_per_s", "speed_vs_float32"]
    table = summary_table(measure(model, tokenizer, prompt_ids, max_new_tokens))
    return table[[*columns, "mean_kl_nats", "top1_agreement"]].to_dict("records")
