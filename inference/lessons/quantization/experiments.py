"""One model at four precisions, side by side: bytes, decode speed, greedy text and how far each next-token
distribution drifts from float32's. Quality is teacher-forced on one sequence, the prompt plus float32's greedy
continuation: every precision reads the same tokens, so step t compares like with like even after a precision's
own greedy text has gone another way."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from transformers.pytorch_utils import Conv1D

from inference.core.flops import FlopCount
from inference.core.quantize import (
    INT4_GROUP_SIZES,
    PRECISIONS,
    QuantizationOverhead,
    QuantizedModel,
    SkippedLayer,
    compare_to_reference,
    quantization_overhead,
    quantized_copy,
    teacher_forced_logits,
    weight_bytes_by_kind,
)
from inference.core.run import run_greedy
from inference.core.tokens import readable_tokens

REFERENCE = "float32"
WARMUP_TOKENS = 4  # the first calls allocate buffers and pick kernels: keep them out of the timing
# Timed rounds per comparison. "Best of 2" moved the ratios ~15% between runs on this shared 2-core machine; the
# median of 5 interleaved rounds, each precision taking every place in the order, is what the page shows.
SPEED_ROUNDS = 5


@dataclass(frozen=True)
class PrecisionResult:
    precision: str
    bytes_by_kind: dict[str, int]  # measured from the tensors: embeddings, lm_head, linear, other
    quantize_seconds: float | None  # None for the float32 reference: no copy is made
    decode_tokens_per_s: float  # median of the timed rounds; nan when no decode step ran
    greedy_ids: list[int]  # this precision's own greedy continuation of the prompt
    greedy_tokens: list[str]  # their text, exactly as decoded
    first_departure: int | None  # first step whose greedy token differs from float32's
    quantized_layers: int
    skipped_layers: list[SkippedLayer]
    overhead: QuantizationOverhead = QuantizationOverhead(0, 0)  # integers vs scales and zero points, from the copy
    round_rates: tuple[float, ...] = ()  # decode tokens/s of each timed round, in round order

    @property
    def weight_bytes(self) -> int:
        return sum(self.bytes_by_kind.values())


@dataclass(frozen=True)
class PrecisionComparison:
    prompt_ids: list[int]
    prompt_text: str
    reference_ids: list[int]  # float32's greedy tokens: the sequence every precision is scored on
    reference_tokens: list[str]  # readable labels for those tokens (whitespace made visible)
    results: dict[str, PrecisionResult]  # in PRECISIONS order
    steps: pd.DataFrame  # precision, step, kl_from_reference, top1_agrees, p_reference_token
    step_tops: pd.DataFrame  # step, precision, rank, token, prob: float32's top tokens, then "other"
    int4_group_size: int
    conv1d_layers: int  # GPT-2 Conv1D layers in the original model (converted before quantizing)
    rounds: int = 1
    decode_flops: int = 0  # one decode pass's arithmetic at the prompt's end (FlopCount): the same in every engine
    leaf_modules: int = 0  # modules without children: roughly the operations torch dispatches per token


# ---------------------------------------------------------------------------- copies


def _conv1d_layers(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if isinstance(m, Conv1D)]


def int4_group_size(model: nn.Module) -> int:
    """The largest group size torchao's CPU int4 accepts that divides the input width of
    every linear layer, so no layer is skipped for its width (SmolLM2's 576 needs 64)."""
    widths = {m.in_features for m in model.modules() if isinstance(m, nn.Linear)}
    widths |= {m.weight.shape[0] for m in _conv1d_layers(model)}  # Conv1D stores [in, out]
    for size in sorted(INT4_GROUP_SIZES, reverse=True):
        if all(width % size == 0 for width in widths):
            return size
    return min(INT4_GROUP_SIZES)  # some layers will be skipped, and listed as skipped


def precision_copy(model: nn.Module, precision: str) -> QuantizedModel:
    """The model at `precision`. float32 is the original itself (it is only ever called,
    never changed, and a copy would double the memory); the others are new copies.
    GPT-2's Conv1D layers are converted to nn.Linear first, so torchao can quantize them."""
    if precision == REFERENCE:
        return QuantizedModel(model, REFERENCE, 0.0, 0, [])
    return quantized_copy(model, precision, group_size=int4_group_size(model), convert_conv1d=True)


def leaf_modules(model: nn.Module) -> int:
    """Modules with no children (linear layers, norms, activations, embeddings): each is at least one operation
    that eager PyTorch dispatches from Python for every token."""
    return sum(1 for module in model.modules() if next(module.children(), None) is None)


def quantize_all(model: nn.Module, precisions=PRECISIONS) -> dict[str, QuantizedModel]:
    return {precision: precision_copy(model, precision) for precision in precisions}


# ---------------------------------------------------------------------------- measuring


def decode_tokens_per_s(records) -> float:
    """Decode tokens per second from the median decode step's forward-pass time. The median, not the sum: a
    burst of other work on this shared machine stretches a few steps, and a sum would carry them into the
    figure. The prefill step is left out: it reads the whole prompt at once, a different kind of work (see the
    Prefill vs decode page)."""
    decode_ms = [r.forward_ms for r in records if r.phase == "decode"]
    if not decode_ms:
        return math.nan
    return 1000 / statistics.median(decode_ms)


def round_order(precisions: list[str], round_index: int) -> list[str]:
    """The order precisions run in during one round: rotated by one each round, so none is always first
    (the first run after another model's can find colder caches) and a burst of background load is spread."""
    shift = round_index % len(precisions)
    return precisions[shift:] + precisions[:shift]


def _measure_decode(models: Mapping[str, nn.Module], tokenizer, prompt_ids, max_new_tokens, rounds, progress=None):
    """Every timed round's decode speed per precision, and its greedy records. Precisions take turns within
    each round, so a burst of background load slows them all alike instead of one of them."""
    for model in models.values():
        run_greedy(model, tokenizer, prompt_ids, min(WARMUP_TOKENS, max_new_tokens))
    rates = {precision: [] for precision in models}
    records = {}
    for index in range(rounds):
        for precision in round_order(list(models), index):
            if progress:
                progress(index, rounds, f"Timing round {index + 1} of {rounds}: {precision}")
            records[precision] = run_greedy(models[precision], tokenizer, prompt_ids, max_new_tokens).records
            rates[precision].append(decode_tokens_per_s(records[precision]))
    return rates, records


def median_rate(rates) -> float:
    """The median of the rounds' rates that are numbers; nan when none is."""
    numbers = [r for r in rates if not math.isnan(r)]
    return statistics.median(numbers) if numbers else math.nan


def round_ratios(result: PrecisionResult, reference: PrecisionResult) -> list[float]:
    """This precision's speed over float32's, round by round: each pair ran in the same round, so the machine's load
    at that moment mostly cancels. Their median is the page's speed ratio (table, chart and sentences)."""
    ratios = [
        r / b for r, b in zip(result.round_rates, reference.round_rates) if math.isfinite(r / b if b else math.nan)
    ]
    return ratios or [result.decode_tokens_per_s / reference.decode_tokens_per_s]


def first_departure(ids: list[int], reference_ids: list[int]) -> int | None:
    """First step where `ids` differs from the reference (a run that stops earlier or later
    departs where the shorter one ends); None when they are identical."""
    for step, (token, reference) in enumerate(zip(ids, reference_ids)):
        if token != reference:
            return step
    return None if len(ids) == len(reference_ids) else min(len(ids), len(reference_ids))


def _step_tops(
    reference_logits: torch.Tensor, logits: Mapping[str, torch.Tensor], tokenizer, top_n: int
) -> pd.DataFrame:
    """For every step, float32's top-n tokens and the probability each precision gives them,
    plus the rest of the vocabulary as "other" (softmax over the full vocabulary first)."""
    probs = {precision: F.softmax(rows.double(), dim=-1) for precision, rows in logits.items()}
    top_ids = F.softmax(reference_logits.double(), dim=-1).topk(top_n, dim=-1).indices  # [T, top_n]
    rows = []
    for step, ids in enumerate(top_ids.tolist()):
        names = readable_tokens(tokenizer, ids)
        for precision, p in probs.items():
            shown = p[step, ids].tolist()
            for rank, (token_id, name, prob) in enumerate(zip(ids, names, shown), start=1):
                rows.append((step, precision, rank, token_id, name, prob))
            rows.append((step, precision, top_n + 1, -1, "other", max(0.0, 1.0 - sum(shown))))
    return pd.DataFrame(rows, columns=["step", "precision", "rank", "token_id", "token", "prob"])


def compare_precisions(
    copies: Mapping[str, QuantizedModel],
    tokenizer,
    prompt_ids: list[int],
    max_new_tokens: int = 48,
    rounds: int = SPEED_ROUNDS,
    top_n: int = 15,
    progress: Callable[[int, int, str], None] | None = None,
) -> PrecisionComparison:
    """Measure every precision in `copies` (which must hold the float32 reference), calling `progress(done, total,
    what)` before each timed run. Nothing is changed on any model: they are only called."""
    if REFERENCE not in copies:
        raise ValueError(f"`copies` must include the {REFERENCE!r} reference, but has {sorted(copies)}")
    if rounds < 1:
        raise ValueError(f"`rounds` has to be at least 1, but is {rounds}")
    ordered = [p for p in PRECISIONS if p in copies]
    models = {p: copies[p].model for p in ordered}
    prompt_ids = list(prompt_ids)

    # 1. speed and greedy text: the step engine, same prompt, temperature 0
    rates, records = _measure_decode(models, tokenizer, prompt_ids, max_new_tokens, rounds, progress)
    if progress:
        progress(rounds, rounds, "Scoring every precision against float32")
    greedy = {p: [r.token_id for r in records[p]] for p in ordered}
    reference_ids = greedy[REFERENCE]

    # 2. quality: one forward pass per precision over prompt + float32's greedy tokens.
    #    Row t of the kept logits predicts reference token t.
    sequence = prompt_ids + reference_ids
    first_row = len(prompt_ids) - 1
    logits = {
        p: teacher_forced_logits(m, sequence)[first_row : first_row + len(reference_ids)] for p, m in models.items()
    }  # each [T, vocab]
    tables = []
    for p in ordered:
        table = compare_to_reference(logits[REFERENCE], logits[p], reference_ids)
        tables.append(table.drop(columns="reference_token").assign(precision=p))
    steps = pd.concat(tables, ignore_index=True)

    results = {
        p: PrecisionResult(
            precision=p,
            bytes_by_kind=weight_bytes_by_kind(models[p]),
            quantize_seconds=None if p == REFERENCE else copies[p].seconds,
            decode_tokens_per_s=median_rate(rates[p]),
            greedy_ids=greedy[p],
            greedy_tokens=[r.token_text for r in records[p]],
            first_departure=first_departure(greedy[p], reference_ids),
            quantized_layers=copies[p].quantized_linear_layers,
            skipped_layers=list(copies[p].skipped_layers),
            overhead=quantization_overhead(models[p]),
            round_rates=tuple(rates[p]),
        )
        for p in ordered
    }
    return PrecisionComparison(
        prompt_ids=prompt_ids,
        prompt_text=tokenizer.decode(prompt_ids, skip_special_tokens=True),
        reference_ids=reference_ids,
        reference_tokens=readable_tokens(tokenizer, reference_ids),
        results=results,
        steps=steps,
        step_tops=_step_tops(logits[REFERENCE], logits, tokenizer, top_n),
        int4_group_size=int4_group_size(models[REFERENCE]),
        conv1d_layers=len(_conv1d_layers(models[REFERENCE])),
        rounds=rounds,
        decode_flops=FlopCount.of(models[REFERENCE]).decode(len(prompt_ids)),
        leaf_modules=leaf_modules(models[REFERENCE]),
    )


def measure(
    model: nn.Module, tokenizer, prompt_ids, max_new_tokens: int, progress=None, shown_prompt: str | None = None
) -> PrecisionComparison:
    """The page's background measurement: the bfloat16, int8 and int4 copies of `model` (made here, freed after;
    `model` itself is only called), then `compare_precisions`. No Streamlit: it runs in a server thread.
    `shown_prompt`: the text the page shows before each copy's output (the user's words, not the chat template)."""
    copies = {}
    for done, precision in enumerate(PRECISIONS):
        if progress:
            progress(done, len(PRECISIONS), f"Making the {precision} copy")
        copies[precision] = precision_copy(model, precision)
    comparison = compare_precisions(copies, tokenizer, list(prompt_ids), max_new_tokens, progress=progress)
    return replace(comparison, prompt_text=shown_prompt) if shown_prompt is not None else comparison


# ---------------------------------------------------------------------------- reading


def summary_table(comparison: PrecisionComparison) -> pd.DataFrame:
    """One row per precision: what it costs, how fast it decodes, how far it drifts. `speed_vs_float32` is the
    median of the round-by-round ratios (`round_ratios`), `speed_low` and `speed_high` their smallest and largest."""
    reference = comparison.results[REFERENCE]
    rows = []
    for precision, result in comparison.results.items():
        ratios = round_ratios(result, reference)
        steps = comparison.steps[comparison.steps["precision"] == precision]
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
                "rate_low": min(result.round_rates, default=result.decode_tokens_per_s),
                "rate_high": max(result.round_rates, default=result.decode_tokens_per_s),
                "mean_kl_nats": float(steps["kl_from_reference"].mean()),
                "top1_agreement": float(steps["top1_agrees"].mean()),
                "mean_p_float32_token": float(steps["p_reference_token"].mean()),
                "first_departure": result.first_departure,
            }
        )
    table = pd.DataFrame(rows)
    table["first_departure"] = table["first_departure"].astype("Int64")  # <NA>: never departs
    return table


def benchmark_rows(
    model: nn.Module, tokenizer, prompt_ids: list[int], max_new_tokens: int = 48, rounds: int = SPEED_ROUNDS
) -> list[dict]:
    """Per precision: measured weight bytes and decode tokens/s, for `python -m inference.bench`."""
    comparison = compare_precisions(quantize_all(model), tokenizer, prompt_ids, max_new_tokens, rounds)
    columns = [
        "precision",
        "weight_bytes",
        "size_vs_float32",
        "decode_tokens_per_s",
        "speed_vs_float32",
        "mean_kl_nats",
        "top1_agreement",
    ]
    return summary_table(comparison)[columns].to_dict("records")
