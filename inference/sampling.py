"""The sampling pipeline: pure functions from next-token logits to a draw.

Stages, in the order transformers applies them in `generate`:
    repetition penalty -> temperature -> top-k -> top-p (nucleus) -> min-p -> renormalise -> draw

Every stage takes logits of shape [..., vocab] (one step, or a batch of steps) and returns a
NEW tensor; removed tokens get -inf, so the softmax of a stage's output is the
distribution after that stage. Everything runs over the full vocabulary; trimming to the top
N happens only for display (see `StepView.table`).

The draw is inverse-CDF sampling: one uniform number u in [0, 1) from a caller-owned
generator; the chosen token is where u falls on the cumulative distribution of the final
probabilities, in display order (most likely first). Temperature 0 means greedy (argmax).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

STAGES = ("raw", "penalty", "temperature", "top_k", "top_p", "min_p")
NEG_INF = float("-inf")
ALTERNATIVES = 5  # how many top tokens a step keeps for "what else could it have said"


@dataclass(frozen=True)
class SamplingSettings:
    """One set of sampling knobs. Neutral values switch a stage off:
    repetition_penalty 1, top_k 0, top_p 1, min_p 0. Temperature 0 means greedy."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0

    def __post_init__(self):
        check_temperature(self.temperature)
        check_top_k(self.top_k)
        check_top_p(self.top_p)
        check_min_p(self.min_p)
        check_repetition_penalty(self.repetition_penalty)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


# -- argument checks: each names the argument and the value it got -------------------------

def _number(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"`{name}` has to be a finite number, but is {value!r}")
    return float(value)


def check_temperature(t) -> None:
    if _number("temperature", t) < 0:
        raise ValueError(f"`temperature` has to be >= 0 (0 means greedy), but is {t}")


def check_top_k(k) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"`top_k` has to be an integer >= 0 (0 switches it off), but is {k!r}")


def check_top_p(p) -> None:
    if not 0 < _number("top_p", p) <= 1:
        raise ValueError(f"`top_p` has to be a float > 0 and <= 1 (1 switches it off), but is {p}")


def check_min_p(p) -> None:
    if not 0 <= _number("min_p", p) <= 1:
        raise ValueError(f"`min_p` has to be a float >= 0 and <= 1 (0 switches it off), but is {p}")


def check_repetition_penalty(r) -> None:
    if _number("repetition_penalty", r) <= 0:
        raise ValueError(f"`repetition_penalty` has to be a float > 0 (1 switches it off), but is {r}")


# -- the stages ------------------------------------------------------------------------

def seen_mask(histories: list[list[int]] | list[int], vocab_size: int) -> torch.Tensor:
    """Boolean [batch, vocab] (or [vocab]) marking tokens already in each history."""
    single = len(histories) == 0 or isinstance(histories[0], int)
    rows = [histories] if single else histories
    mask = torch.zeros(len(rows), vocab_size, dtype=torch.bool)
    for row, ids in enumerate(rows):
        if ids:
            mask[row, torch.as_tensor(ids, dtype=torch.long)] = True
    return mask[0] if single else mask


def apply_repetition_penalty(logits: torch.Tensor, seen: torch.Tensor, penalty: float) -> torch.Tensor:
    """CTRL-style penalty on tokens already seen: positive logits are divided by the
    penalty, negative ones multiplied, so a penalty > 1 always makes them less likely."""
    check_repetition_penalty(penalty)
    if penalty == 1.0:
        return logits.clone()
    penalised = torch.where(logits < 0, logits * penalty, logits / penalty)
    return torch.where(seen, penalised, logits)


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Divide logits by T: T < 1 sharpens, T > 1 flattens. T = 0 is the limit: only the
    argmax survives (greedy), computed without dividing by zero."""
    check_temperature(temperature)
    if temperature == 0:
        best = logits.argmax(dim=-1, keepdim=True)
        keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, best, True)
        return logits.masked_fill(~keep, NEG_INF)
    return logits / temperature


def apply_top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k highest logits (ties with the k-th are kept too); 0 keeps all."""
    check_top_k(k)
    if k == 0 or k >= logits.shape[-1]:
        return logits.clone()
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, NEG_INF)


def apply_top_p(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose probability reaches p.

    Same arithmetic as transformers' TopPLogitsWarper: sort ascending, drop tokens whose
    cumulative probability from the bottom is <= 1 - p, always keep the top token."""
    check_top_p(p)
    if p >= 1.0:
        return logits.clone()
    finite = int(torch.isfinite(logits).sum(dim=-1).max())
    if finite < logits.shape[-1] // 2:
        # Top-k already removed most tokens: sort only the survivors (the -inf ones add 0 to
        # every sum and are removed anyway). Same arithmetic, far less sorting.
        top_logits, top_index = torch.topk(logits, finite, dim=-1)
        kept = apply_top_p(top_logits, p)
        return torch.full_like(logits, NEG_INF).scatter(-1, top_index, kept)
    sorted_logits, sorted_index = torch.sort(logits, dim=-1, descending=False)
    cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    remove_sorted = cumulative <= (1 - p)
    remove_sorted[..., -1:] = False
    remove = remove_sorted.scatter(-1, sorted_index, remove_sorted)
    return logits.masked_fill(remove, NEG_INF)


def apply_min_p(logits: torch.Tensor, min_p: float) -> torch.Tensor:
    """Drop tokens less likely than min_p times the most likely token's probability."""
    check_min_p(min_p)
    if min_p == 0:
        return logits.clone()
    probs = logits.softmax(dim=-1)
    remove = probs < min_p * probs.amax(dim=-1, keepdim=True)
    return logits.masked_fill(remove, NEG_INF)


def stage_logits(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor) -> dict[str, torch.Tensor]:
    """Logits after each stage, in pipeline order, keyed by `STAGES`."""
    out = {"raw": logits}
    out["penalty"] = apply_repetition_penalty(logits, seen, settings.repetition_penalty)
    out["temperature"] = apply_temperature(out["penalty"], settings.temperature)
    out["top_k"] = apply_top_k(out["temperature"], settings.top_k)
    out["top_p"] = apply_top_p(out["top_k"], settings.top_p)
    out["min_p"] = apply_min_p(out["top_p"], settings.min_p)
    return out


def entropy_bits(probs: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in bits over the last axis; zero-probability tokens add nothing."""
    logs = torch.where(probs > 0, probs.log2(), torch.zeros_like(probs))
    return -(probs * logs).sum(dim=-1)


def inverse_cdf_index(sorted_probs: torch.Tensor, u: torch.Tensor | float) -> torch.Tensor:
    """Rank (in `sorted_probs` order) where u falls on the cumulative distribution.

    The first rank whose cumulative probability exceeds u; rounding can leave the total a
    hair under 1, so the result is clamped to the last token with probability > 0."""
    cumulative = sorted_probs.cumsum(dim=-1)
    u = torch.as_tensor(u, dtype=cumulative.dtype).reshape(*cumulative.shape[:-1], 1)
    rank = torch.searchsorted(cumulative, u, right=True).squeeze(-1)
    last_kept = (sorted_probs > 0).sum(dim=-1) - 1
    return torch.minimum(rank, last_kept)


@dataclass(frozen=True)
class Draw:
    token_id: int
    rank: int  # 0-based position in display order
    prob: float  # its probability in the final distribution
    u: float
    alternatives: list[tuple[int, float, float]]  # top 5 in display order: (id, raw prob, final prob)
    entropy_bits: float  # of the final distribution
    kept: int  # tokens with probability > 0 in it


def display_order(penalised_logits: torch.Tensor) -> torch.Tensor:
    """Token ids most likely first, by the logits after the repetition penalty (temperature
    does not change the order). Stable, so ties keep id order and greedy picks the same
    token as argmax. Every filter keeps a prefix of this order."""
    return torch.sort(penalised_logits, dim=-1, descending=True, stable=True).indices


def draw(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor, u: float) -> Draw:
    """The fast path the engine uses every step: final distribution, then inverse CDF."""
    stages = stage_logits(logits, settings, seen)
    order = display_order(stages["penalty"])
    sorted_final = stages["min_p"].double().softmax(dim=-1)[order]
    rank = 0 if settings.greedy else int(inverse_cdf_index(sorted_final, u))
    top = order[:ALTERNATIVES].tolist()
    raw_top = logits.double().softmax(dim=-1)[order[:ALTERNATIVES]].tolist()
    alternatives = list(zip(top, raw_top, sorted_final[:ALTERNATIVES].tolist()))
    return Draw(
        token_id=int(order[rank]), rank=rank, prob=float(sorted_final[rank]), u=u, alternatives=alternatives,
        entropy_bits=float(entropy_bits(sorted_final)), kept=int((sorted_final > 0).sum()),
    )
