"""Speculative sampling's rule, as pure functions of p, q and uniform numbers (Leviathan et al. 2023; Chen et al. 2023).

In order, a drafted x_i is kept when u_i <= p_i(x_i) / q_i(x_i); at the first rejection the target's token is drawn
from normalise(max(0, p_i - q_i)); if every draft is kept, p_{n+1} gives a bonus token. A token comes out as a kept
draft with probability min(p, q)(x), or from the residual with p(x) - min(p, q)(x): together p(x), the target's own.
At temperature 0 p and q are one-hot, so the rule is "keep while the argmax agrees": plain greedy's tokens.
p and q are the app's own pipeline on each model's logits; every draw is `sample_token`, the project's one draw.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from inference.sampling.pipeline import SamplingSettings, sample_token, stage_logits


class SpeculationError(ValueError):
    """A speculative run cannot start with these inputs; the message says why."""


def check_settings(settings: SamplingSettings) -> None:
    """p and q must be fixed functions of the text so far: samplers carrying state from step to step are not."""
    if getattr(settings, "needs_context", False):
        raise SpeculationError(
            "Speculative sampling here runs the penalty, temperature, top-k, top-p, min-p and the other "
            "stateless filters; switch off DRY, XTC and mirostat (they carry state from step to step)."
        )


def final_logits(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor | None) -> torch.Tensor:
    """[..., vocab] logits after the app's whole pipeline (removed tokens -inf): the stage the draw samples from."""
    stages = stage_logits(logits, settings, seen)
    return stages[next(reversed(stages))]


def final_probs(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor | None) -> torch.Tensor:
    return final_logits(logits, settings, seen).double().softmax(dim=-1)


def greedy_tokens(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor | None) -> list[int]:
    return final_logits(logits, settings, seen).argmax(dim=-1).tolist()


def choose_token(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor | None, u: float) -> int:
    """One [vocab] row's token: its argmax when greedy, else `sample_token` with this u."""
    if settings.greedy:
        return greedy_tokens(logits.unsqueeze(0), settings, seen)[0]
    return sample_token(final_probs(logits, settings, seen), u)


def running_seen(base: torch.Tensor, tokens: list[int], settings: SamplingSettings) -> torch.Tensor:
    """[len(tokens) + 1, vocab]: what the repetition penalty sees at each position of a round (the text, plus the
    drafts before it); `base` itself when the penalty is off and no stage reads it."""
    if settings.repetition_penalty == 1.0:
        return base
    rows = base.unsqueeze(0).repeat(len(tokens) + 1, 1)
    for i, token in enumerate(tokens):
        rows[i + 1 :, token] = True
    return rows


@dataclass(frozen=True)
class Verdict:
    accepted: int  # drafted tokens kept, from the first
    token_id: int  # the target's own token after them
    kind: str  # "residual" (a draft was rejected), "bonus" (all kept) or "target" (nothing was drafted)
    ratios: list[float]  # p/q of each token checked
    uniforms: list[float]  # u of each token checked (none when greedy)
    final_u: float | None  # the uniform of the residual or bonus draw
    residual: torch.Tensor | None  # [vocab] normalise(max(0, p - q)) at the rejection


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    residual = (p - q).clamp(min=0)
    total = residual.sum()
    return residual / total if total > 0 else p  # 0 only if p == q, where no rejection happens


def verify_sampled(
    p_rows: torch.Tensor, q_rows: torch.Tensor, drafted: list[int], uniform: Callable[[], float]
) -> Verdict:
    """p_rows [n + 1, vocab] of the target, q_rows [n, vocab] the drafts were drawn from, `uniform()` the next u."""
    ratios, uniforms = [], []
    for i, token in enumerate(drafted):
        p, q = float(p_rows[i, token]), float(q_rows[i, token])
        ratios.append(p / q if q > 0 else math.inf)  # q > 0: the draft drew this token from q
        uniforms.append(uniform())
        if uniforms[-1] > ratios[-1]:  # rejected: the target's token comes from what p has beyond q
            final_u, residual = uniform(), residual_distribution(p_rows[i], q_rows[i])
            return Verdict(i, sample_token(residual, final_u), "residual", ratios, uniforms, final_u, residual)
    final_u = uniform()
    kind = "bonus" if drafted else "target"
    return Verdict(len(drafted), sample_token(p_rows[len(drafted)], final_u), kind, ratios, uniforms, final_u, None)


def verify_greedy(target_choices: list[int], drafted: list[int]) -> Verdict:
    """Temperature 0: keep while the draft is the target's argmax; then the target's argmax is the next token."""
    accepted = 0
    while accepted < len(drafted) and drafted[accepted] == target_choices[accepted]:
        accepted += 1
    kind = "residual" if accepted < len(drafted) else ("bonus" if drafted else "target")
    ratios = [1.0] * accepted + ([0.0] if accepted < len(drafted) else [])
    return Verdict(accepted, target_choices[accepted], kind, ratios, [], None, None)
