"""Speculative sampling's rule, as pure functions of p, q and uniform numbers.

After a drafter proposed x_1..x_n from its distributions q_1..q_n and the target's one verify pass gave p_1..p_{n+1}
(Leviathan, Kalman & Matias 2023; Chen et al. 2023):

    in order, x_i is kept when u_i <= p_i(x_i) / q_i(x_i) for a recorded uniform u_i; at the first rejection the
    target's token is drawn from normalise(max(0, p_i - q_i)) and the round ends; if every draft is kept, p_{n+1}
    gives one bonus token.

Why the text's distribution is exactly the target's: a token x comes out either as an accepted draft, probability
q(x) min(1, p(x)/q(x)) = min(p, q)(x), or from the residual, probability (1 - sum min(p, q)) (p - q)+(x) / sum (p - q)+
= p(x) - min(p, q)(x); together p(x). At temperature 0 p and q are one-hot on their argmax, so the rule is "keep while
the argmax agrees" and the output is plain greedy decoding's, token for token (no uniform is needed).

p and q are the app's own pipeline (`inference.sampling.pipeline`: penalty, temperature, top-k, top-p, min-p) on each
model's logits, and every sampled token comes from `sample_token`, the one inverse-CDF draw of the project.
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
    """Speculative sampling needs p and q to be fixed functions of the text so far. Samplers with their own running
    state (a per-step random cut, a target that moves with each choice) are not."""
    if getattr(settings, "needs_context", False):
        raise SpeculationError(
            "Speculative sampling here runs the penalty, temperature, top-k, top-p, min-p and the other "
            "stateless filters; switch off DRY, XTC and mirostat (they carry state from step to step)."
        )


# -- p and q: the app's pipeline on each model's logits ---------------------------------------------------------------


def final_logits(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor | None) -> torch.Tensor:
    """Logits after the app's whole pipeline ([..., vocab]; removed tokens -inf): the last stage `stage_logits`
    returns is the one the draw samples from."""
    stages = stage_logits(logits, settings, seen)
    return stages[next(reversed(stages))]


def final_probs(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor | None) -> torch.Tensor:
    """The distribution the app samples from, float64 over the full vocabulary ([..., vocab])."""
    return final_logits(logits, settings, seen).double().softmax(dim=-1)


def greedy_tokens(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor | None) -> list[int]:
    """Temperature 0: each row's token is the argmax of its final logits (the first of tied maxima), one per row of
    [rows, vocab] logits."""
    return final_logits(logits, settings, seen).argmax(dim=-1).tolist()


def choose_token(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor | None, u: float) -> int:
    """One [vocab] row's token under the app's pipeline: its argmax when greedy, else `sample_token` with this u."""
    if settings.greedy:
        return greedy_tokens(logits.unsqueeze(0), settings, seen)[0]
    return sample_token(final_probs(logits, settings, seen), u)


def running_seen(base: torch.Tensor, tokens: list[int], settings: SamplingSettings) -> torch.Tensor:
    """[len(tokens) + 1, vocab]: what the repetition penalty sees at each position of a round: the text so far, plus
    the drafted tokens before that position. At penalty 1 (off) no stage reads it: `base` itself ([vocab]) then."""
    if settings.repetition_penalty == 1.0:
        return base
    rows = base.unsqueeze(0).repeat(len(tokens) + 1, 1)
    for i, token in enumerate(tokens):
        rows[i + 1 :, token] = True
    return rows


# -- the accept / reject rule ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    accepted: int  # drafted tokens kept, from the first
    token_id: int  # the target's own token after them (from the residual, or the bonus)
    kind: str  # "residual" (a draft was rejected), "bonus" (all kept) or "target" (nothing was drafted)
    ratios: list[float]  # p/q of each token checked
    uniforms: list[float]  # u of each token checked
    final_u: float | None  # the uniform of the residual or bonus draw (None for greedy)
    residual: torch.Tensor | None  # [vocab] normalise(max(0, p - q)) at the rejection


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """normalise(max(0, p - q)): what is left of p once the draft's accepted share is taken."""
    residual = (p - q).clamp(min=0)
    total = residual.sum()
    return residual / total if total > 0 else p  # total is 0 only if p == q, where no rejection happens


def verify_sampled(
    p_rows: torch.Tensor, q_rows: torch.Tensor, drafted: list[int], uniform: Callable[[], float]
) -> Verdict:
    """The accept/reject rule. p_rows: [n + 1, vocab] target distributions, q_rows: [n, vocab] the distributions the
    n drafted tokens were drawn from; `uniform()` gives the run's next uniform number in [0, 1)."""
    ratios, uniforms = [], []
    for i, token in enumerate(drafted):
        p, q = float(p_rows[i, token]), float(q_rows[i, token])
        ratio = p / q if q > 0 else math.inf  # q > 0 always: the draft drew this token from q
        u = uniform()
        ratios.append(ratio)
        uniforms.append(u)
        if u > ratio:  # rejected: the target's token comes from what p has beyond q
            final_u = uniform()
            residual = residual_distribution(p_rows[i], q_rows[i])
            return Verdict(i, sample_token(residual, final_u), "residual", ratios, uniforms, final_u, residual)
    final_u = uniform()
    kind = "bonus" if drafted else "target"
    return Verdict(len(drafted), sample_token(p_rows[len(drafted)], final_u), kind, ratios, uniforms, final_u, None)


def verify_greedy(target_choices: list[int], drafted: list[int]) -> Verdict:
    """Temperature 0: keep while the draft's token is the target's argmax; at the first disagreement (or after all)
    the target's argmax is the next token."""
    accepted = 0
    while accepted < len(drafted) and drafted[accepted] == target_choices[accepted]:
        accepted += 1
    kind = "residual" if accepted < len(drafted) else ("bonus" if drafted else "target")
    ratios = [1.0] * accepted + ([0.0] if accepted < len(drafted) else [])
    return Verdict(accepted, target_choices[accepted], kind, ratios, [], None, None)
