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

    Written as transformers' TopPLogitsWarper is: sort ascending, drop every token whose
    cumulative probability from the bottom is <= 1 - p, always keep the top token. The
    pipeline runs the same arithmetic on fewer tokens (`_top_p_fast`); tests prove both equal."""
    check_top_p(p)
    if p >= 1.0:
        return logits.clone()
    sorted_logits, sorted_index = torch.sort(logits, dim=-1, descending=False)
    cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    remove_sorted = cumulative <= (1 - p)
    remove_sorted[..., -1:] = False  # the most likely token always stays
    remove = remove_sorted.scatter(-1, sorted_index, remove_sorted)
    return logits.masked_fill(remove, NEG_INF)


def _top_p_fast(logits: torch.Tensor, p: float, descending_order: torch.Tensor | None = None) -> torch.Tensor:
    """`apply_top_p` without sorting what does not need sorting.

    `descending_order` (optional, one step) is a full most-likely-first order of these
    logits the caller already has, so the vocabulary is not sorted twice. Tied logits have
    equal probabilities, so any order of ties gives the same cumulative sums. Without it,
    when an earlier stage removed most tokens, only the survivors are sorted: the -inf
    ones add 0 to every sum and are removed anyway."""
    check_top_p(p)
    if p >= 1.0:
        return logits.clone()
    if descending_order is not None:
        ascending = descending_order.flip(-1)
        kept = _top_p_sorted(logits.gather(-1, ascending), p)
        return torch.full_like(logits, NEG_INF).scatter(-1, ascending, kept)
    finite = finite_count(logits)
    if finite < logits.shape[-1] // 2:
        if logits.dim() == 1:
            survivors = torch.isfinite(logits).nonzero().squeeze(-1)
            return torch.full_like(logits, NEG_INF).index_put((survivors,), _top_p_fast(logits[survivors], p))
        top_logits, top_index = torch.topk(logits, finite, dim=-1)  # rows keep different counts
        kept = _top_p_fast(top_logits, p)
        return torch.full_like(logits, NEG_INF).scatter(-1, top_index, kept)
    sorted_logits, sorted_index = torch.sort(logits, dim=-1, descending=False)
    return torch.full_like(logits, NEG_INF).scatter(-1, sorted_index, _top_p_sorted(sorted_logits, p))


def _top_p_sorted(ascending_logits: torch.Tensor, p: float) -> torch.Tensor:
    """Top-p on logits already sorted ascending; returns them in the same order."""
    cumulative = ascending_logits.softmax(dim=-1).cumsum(dim=-1)
    remove = cumulative <= (1 - p)
    remove[..., -1:] = False
    return ascending_logits.masked_fill(remove, NEG_INF)


def finite_count(logits: torch.Tensor) -> int:
    """Most tokens any row still keeps (removed tokens are -inf)."""
    finite = torch.isfinite(logits).sum(dim=-1)
    return int(finite if logits.dim() == 1 else finite.max())


def apply_min_p(logits: torch.Tensor, min_p: float) -> torch.Tensor:
    """Drop tokens less likely than min_p times the most likely token's probability."""
    check_min_p(min_p)
    if min_p == 0:
        return logits.clone()
    probs = logits.softmax(dim=-1)
    remove = probs < min_p * probs.amax(dim=-1, keepdim=True)
    return logits.masked_fill(remove, NEG_INF)


def stages_switched_off(settings: SamplingSettings, vocab: int) -> set[str]:
    """Stages whose output equals their input under these settings (x / 1.0 == x exactly)."""
    off = {
        "penalty": settings.repetition_penalty == 1.0,
        "temperature": settings.temperature == 1.0,
        "top_k": settings.top_k == 0 or settings.top_k >= vocab,
        "top_p": settings.top_p >= 1.0,
        "min_p": settings.min_p == 0,
    }
    return {name for name, is_off in off.items() if is_off}


def stage_logits(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor) -> dict[str, torch.Tensor]:
    """Logits after each stage, in pipeline order, keyed by `STAGES`."""
    return _stages_from_top_p(_stages_to_top_k(logits, settings, seen), settings)


def _stages_to_top_k(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor) -> dict[str, torch.Tensor]:
    out = {"raw": logits}
    out["penalty"] = apply_repetition_penalty(logits, seen, settings.repetition_penalty)
    out["temperature"] = apply_temperature(out["penalty"], settings.temperature)
    out["top_k"] = apply_top_k(out["temperature"], settings.top_k)
    return out


def _stages_from_top_p(out: dict[str, torch.Tensor], settings: SamplingSettings,
                       descending_order: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    out["top_p"] = _top_p_fast(out["top_k"], settings.top_p, descending_order=descending_order)
    out["min_p"] = apply_min_p(out["top_p"], settings.min_p)
    return out


def entropy_bits(probs: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in bits over the last axis; zero-probability tokens add nothing
    (xlogy(0, 0) = 0)."""
    return -torch.special.xlogy(probs, probs).sum(dim=-1) / math.log(2)


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


# Sorting is the expensive part of a step (~4 ms for a 50k vocabulary on this CPU, 0.2 ms
# for its top few hundred), and a chart never shows more than the top 50 rows and a
# 200-rank curve: when every token the draw can pick is near the top, only the top is sorted.
MIN_SORTED = 256


def display_order(penalised_logits: torch.Tensor) -> torch.Tensor:
    """Token ids most likely first, by the logits after the repetition penalty (temperature
    does not change the order). Stable, so ties keep id order and greedy picks the same
    token as argmax. Every filter keeps a prefix of this order."""
    return torch.sort(penalised_logits, dim=-1, descending=True, stable=True).indices


def partial_display_order(penalised_logits: torch.Tensor, at_least: int) -> tuple[torch.Tensor, int]:
    """`display_order` of one step where only the top `at_least` ids have to be in order.

    Returns (order, sorted): order[:sorted] equals `display_order` (sorted >= at_least;
    more when ties straddle the cut), the rest follow in id order."""
    vocab = penalised_logits.shape[-1]
    if at_least * 4 >= vocab:
        return display_order(penalised_logits), vocab
    threshold = torch.topk(penalised_logits, max(at_least, 1)).values[-1]
    in_head = penalised_logits >= threshold
    head = in_head.nonzero().squeeze(-1)  # id order, so the stable sort breaks ties by id
    head = head[torch.sort(penalised_logits[head], descending=True, stable=True).indices]
    return torch.cat([head, (~in_head).nonzero().squeeze(-1)]), len(head)


def display_rank(penalised_logits: torch.Tensor, token_id: int) -> int:
    """0-based place of one token in display order, counted without sorting."""
    value = penalised_logits[token_id]
    return int((penalised_logits > value).sum() + (penalised_logits[:token_id] == value).sum())


def probs_in_order(stage_logits: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """float64 probabilities of the tokens in `order`, in that order, when `order` holds
    every token the stage kept (removed ones are -inf and get exactly 0). The softmax runs
    over the kept tokens alone, so the engine's draw and a view (whose orders differ only in
    how many removed tokens follow) get the same numbers to the last bit."""
    values = stage_logits[order]
    kept = torch.isfinite(values)
    probs = torch.zeros(len(values), dtype=torch.float64)
    probs[kept] = values[kept].double().softmax(dim=-1)
    return probs


@dataclass(frozen=True)
class RankedStages:
    """One step's logits after every stage, and its display order."""

    logits: dict[str, torch.Tensor]  # stage -> [V] logits after it, keyed by `STAGES`
    order: torch.Tensor  # [V] token ids; the first `sorted_prefix` in display order
    sorted_prefix: int  # every token the final distribution keeps is inside it
    token_rank: int | None = None  # display rank of `include_token`, inside the sorted prefix


def ranked_stages(
    logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor, min_sorted: int = 0,
    include_token: int | None = None,
) -> RankedStages:
    """`stage_logits` for one step, plus the display order, sorting the vocabulary at most
    once: top-p reuses the full sort when it needs one; otherwise only the top is sorted,
    enough to hold `min_sorted` tokens, every token kept, and `include_token`."""
    vocab = logits.shape[-1]
    out = _stages_to_top_k(logits, settings, seen)
    token_rank = None if include_token is None else display_rank(out["penalty"], include_token)
    if settings.top_p < 1 and finite_count(out["top_k"]) >= vocab // 2:
        order = display_order(out["penalty"])  # top-p has to sort everything: share that sort
        return RankedStages(_stages_from_top_p(out, settings, order), order, vocab, token_rank)
    out = _stages_from_top_p(out, settings)
    needed = max(min_sorted, (token_rank or 0) + 1, finite_count(out["min_p"]))
    order, sorted_prefix = partial_display_order(out["penalty"], needed)
    return RankedStages(out, order, sorted_prefix, token_rank)


def draw(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor, u: float) -> Draw:
    """The fast path the engine uses every step: final distribution, then inverse CDF."""
    ranked = ranked_stages(logits, settings, seen, min_sorted=ALTERNATIVES)
    order = ranked.order[:ranked.sorted_prefix]  # holds every token the draw can pick
    sorted_final = probs_in_order(ranked.logits["min_p"], order)
    rank = 0 if settings.greedy else int(inverse_cdf_index(sorted_final, u))
    top = order[:ALTERNATIVES]
    raw_top = logits.double().softmax(dim=-1)[top].tolist()
    alternatives = list(zip(top.tolist(), raw_top, sorted_final[:ALTERNATIVES].tolist()))
    return Draw(
        token_id=int(order[rank]), rank=rank, prob=float(sorted_final[rank]), u=u, alternatives=alternatives,
        entropy_bits=float(entropy_bits(sorted_final)), kept=int((sorted_final > 0).sum()),
    )
