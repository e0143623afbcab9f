"""The sampling pipeline: pure functions from next-token logits to a draw.

Stages run in an order that is itself a setting (`SamplingSettings.order`). Two presets:
    transformers (its `generate`):  repetition penalty -> temperature -> top-k -> top-p -> min-p -> typical-p
    llama.cpp default (common/common.h `samplers`):
        penalties -> DRY -> top-nσ -> top-k -> typical-p -> top-p -> min-p -> XTC -> temperature
Stages one tool lacks sit where the other puts them (DRY after the penalty; top-nσ, XTC and
mirostat after transformers' own); mirostat v2 runs last in both. The newer samplers
(typical-p, top-nσ, XTC, DRY, mirostat) are defined in `inference.sampling.samplers`.

Constrained decoding adds one more stage, the format mask ("mask"): it removes every token a
format (JSON schema, regex, choices) does not allow at this step. Its allowed set changes every
step, so it travels in the step's settings (`SamplingSettings.allowed_tokens`, packed bits);
without one the stage does not exist and every other step runs exactly as before. It runs first
unless `order` names it elsewhere (vLLM masks the logits before its sampler; llama.cpp, when it
resamples, applies the grammar before its chain): after a filter it can leave nothing.

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
from dataclasses import dataclass, field

import torch

from inference.sampling.samplers import (
    LLAMA_CPP_DRY_BREAKERS,
    apply_dry,
    apply_mirostat,
    apply_top_n_sigma,
    apply_typical_p,
    apply_xtc,
    check_dry,
    check_mirostat,
    check_top_n_sigma,
    check_typical_p,
    check_xtc,
    finite_number,
    mirostat_next_mu,
    mirostat_start,
)

STAGES = ("raw", "penalty", "temperature", "top_k", "top_p", "min_p")  # the classic five, always shown
NEG_INF = float("-inf")
ALTERNATIVES = 5  # how many top tokens a step keeps for "what else could it have said"

TRANSFORMERS_ORDER = (
    "penalty",
    "dry",
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "typical_p",
    "top_n_sigma",
    "xtc",
    "mirostat",
)
LLAMA_CPP_ORDER = (
    "penalty",
    "dry",
    "top_n_sigma",
    "top_k",
    "typical_p",
    "top_p",
    "min_p",
    "xtc",
    "temperature",
    "mirostat",
)
ORDER_PRESETS = {"transformers": TRANSFORMERS_ORDER, "llama.cpp default": LLAMA_CPP_ORDER}
MASK = "mask"  # the format mask: a stage only in steps whose settings carry an allowed set
STAGE_NAMES = {
    MASK: "format mask",
    "raw": "raw (T=1)",
    "penalty": "repetition penalty",
    "dry": "DRY",
    "temperature": "temperature",
    "top_k": "top-k",
    "top_p": "top-p",
    "min_p": "min-p",
    "typical_p": "typical-p",
    "top_n_sigma": "top-nσ",
    "xtc": "XTC",
    "mirostat": "mirostat v2",
}
# Stages that change which token is more likely than which (the others only remove tokens,
# and temperature divides every logit by the same T > 0).
_REWEIGHTING = ("penalty", "dry")
# Filters whose kept tokens are always the most likely ones (a prefix of display order).
_PREFIX_FILTERS = ("temperature", "top_k", "top_p", "min_p", "top_n_sigma", "mirostat")


def check_order(order) -> tuple[str, ...]:
    """The full stage order: the stages given, in that order, then any left out in the
    transformers preset's order. Unknown or repeated names are refused."""
    order = tuple(order)
    unknown = [name for name in order if name not in TRANSFORMERS_ORDER and name != MASK]
    if unknown:
        known = ", ".join((*TRANSFORMERS_ORDER, MASK))
        raise ValueError(f"`order` has unknown stages {unknown}; known: {known}")
    if len(set(order)) != len(order):
        raise ValueError(f"`order` names a stage twice: {list(order)}")
    return order + tuple(name for name in TRANSFORMERS_ORDER if name not in order)


@dataclass(frozen=True)
class SamplingSettings:
    """One set of sampling knobs. Neutral values switch a stage off:
    repetition_penalty 1, top_k 0, top_p 1, min_p 0, typical_p 1, top_n_sigma 0,
    xtc_probability 0, dry_multiplier 0, mirostat False. Temperature 0 means greedy.
    `order` is the order the stages run in (see `ORDER_PRESETS`); stages left out follow in
    the transformers order, and the format mask, when not named, runs first.
    `allowed_tokens` (None: no format) is one step's format mask: bit i (byte i // 8, bit
    i % 8, llguidance's little-endian int32 words) set when token i is allowed."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    typical_p: float = 1.0
    top_n_sigma: float = 0.0
    xtc_probability: float = 0.0
    xtc_threshold: float = 0.1
    dry_multiplier: float = 0.0
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    dry_sequence_breakers: tuple[str, ...] = LLAMA_CPP_DRY_BREAKERS
    mirostat: bool = False
    mirostat_tau: float = 5.0
    mirostat_eta: float = 0.1
    order: tuple[str, ...] = TRANSFORMERS_ORDER
    allowed_tokens: bytes | None = field(default=None, repr=False)
    pipeline: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _allowed_bits: torch.Tensor | None = field(init=False, repr=False, compare=False)  # [8 x bytes] bool
    # Worked out once here, read every step: see `_order_plan` and `_kept_extent`.
    _plan: tuple = field(init=False, repr=False, compare=False)
    _filters_keep_prefix: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        check_temperature(self.temperature)
        check_top_k(self.top_k)
        check_top_p(self.top_p)
        check_min_p(self.min_p)
        check_repetition_penalty(self.repetition_penalty)
        check_typical_p(self.typical_p)
        check_top_n_sigma(self.top_n_sigma)
        check_xtc(self.xtc_probability, self.xtc_threshold)
        check_dry(self.dry_multiplier, self.dry_base, self.dry_allowed_length)
        if not isinstance(self.mirostat, bool):
            raise ValueError(f"`mirostat` has to be True or False, but is {self.mirostat!r}")
        check_mirostat(self.mirostat_tau, self.mirostat_eta)
        object.__setattr__(self, "dry_sequence_breakers", tuple(self.dry_sequence_breakers))
        object.__setattr__(self, "order", check_order(self.order))
        object.__setattr__(self, "_allowed_bits", unpack_allowed(self.allowed_tokens))
        on = self.switched_on()
        # The stages a step runs: the classic five always (as before), a newer one when on.
        pipeline = tuple(n for n in self.order if n in STAGES or n in on)
        if MASK in on and MASK not in pipeline:
            pipeline = (MASK, *pipeline)
        object.__setattr__(self, "pipeline", pipeline)
        object.__setattr__(self, "_plan", _order_plan(self))
        names = self.pipeline
        last_shaping = max((i for i, n in enumerate(names) if n in _REWEIGHTING), default=-1)
        object.__setattr__(
            self,
            "_filters_keep_prefix",
            all(n in _REWEIGHTING or (n in _PREFIX_FILTERS and i > last_shaping) for i, n in enumerate(names)),
        )

    def switched_on(self) -> set[str]:
        """The newer stages these settings switch on."""
        flags = {
            "typical_p": self.typical_p < 1,
            "top_n_sigma": self.top_n_sigma > 0,
            "xtc": self.xtc_probability > 0,
            "dry": self.dry_multiplier > 0,
            "mirostat": self.mirostat,
            MASK: self.allowed_tokens is not None,
        }
        return {name for name, on in flags.items() if on}

    def allowed_mask(self, vocab: int) -> torch.Tensor:
        """[vocab] bool: the tokens this step's format allows (bits past the vocabulary are ignored)."""
        bits = self._allowed_bits
        if bits is None:
            raise ValueError("These settings carry no format mask (`allowed_tokens` is None)")
        if len(bits) >= vocab:
            return bits[:vocab]
        return torch.cat([bits, torch.zeros(vocab - len(bits), dtype=torch.bool)])

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def needs_context(self) -> bool:
        """DRY reads the history, XTC its own uniform, mirostat its running target."""
        return bool(self.switched_on() & {"dry", "xtc", "mirostat"})


@dataclass(frozen=True)
class StepContext:
    """What a step's stateful stages read beyond the logits: the ids so far (DRY), the DRY
    breakers as token ids, the step's XTC uniform, and mirostat's running target mu
    (None: the start, 2·tau)."""

    history: tuple[int, ...] = ()
    breaker_ids: frozenset[int] = frozenset()
    xtc_u: float | None = None
    mirostat_mu: float | None = None


def mirostat_mu_for(settings: SamplingSettings, context: StepContext | None) -> float:
    mu = None if context is None else context.mirostat_mu
    return mirostat_start(settings.mirostat_tau) if mu is None else mu


# -- argument checks: each names the argument and the value it got -------------------------


def check_temperature(t) -> None:
    if finite_number("temperature", t) < 0:
        raise ValueError(f"`temperature` has to be >= 0 (0 means greedy), but is {t}")


def check_top_k(k) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"`top_k` has to be an integer >= 0 (0 switches it off), but is {k!r}")


def check_top_p(p) -> None:
    if not 0 < finite_number("top_p", p) <= 1:
        raise ValueError(f"`top_p` has to be a float > 0 and <= 1 (1 switches it off), but is {p}")


def check_min_p(p) -> None:
    if not 0 <= finite_number("min_p", p) <= 1:
        raise ValueError(f"`min_p` has to be a float >= 0 and <= 1 (0 switches it off), but is {p}")


def check_repetition_penalty(r) -> None:
    if finite_number("repetition_penalty", r) <= 0:
        raise ValueError(f"`repetition_penalty` has to be a float > 0 (1 switches it off), but is {r}")


def unpack_allowed(packed: bytes | None) -> torch.Tensor | None:
    """Packed little-endian bits -> bool [8 x len(packed)]; None stays None."""
    if packed is None:
        return None
    if not isinstance(packed, bytes):
        raise ValueError(f"`allowed_tokens` has to be bytes (packed bits) or None, but is {type(packed).__name__}")
    data = torch.frombuffer(bytearray(packed), dtype=torch.uint8)
    return ((data.unsqueeze(-1) >> torch.arange(8, dtype=torch.uint8)) & 1).bool().flatten()


def pack_allowed(allowed: torch.Tensor) -> bytes:
    """bool [vocab] -> packed little-endian bits (the inverse of `unpack_allowed`)."""
    padded = torch.zeros((len(allowed) + 7) // 8 * 8, dtype=torch.uint8)
    padded[: len(allowed)] = allowed.to(torch.uint8)
    weights = 2 ** torch.arange(8, dtype=torch.int32)
    return bytes((padded.view(-1, 8).int() * weights).sum(-1).to(torch.uint8).tolist())


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


def apply_format_mask(logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Remove every token the format does not allow at this step (allowed: [vocab] bool). A
    step where nothing the format allows is left (the stages before it removed them all, or no
    token of this tokenizer can continue the format) cannot be drawn from: refused, with why."""
    masked = logits.masked_fill(~allowed, NEG_INF)
    if not bool(torch.isfinite(masked).any(dim=-1).all()):
        if not bool(allowed.any()):
            raise ValueError("No token of this tokenizer can continue the format here")
        raise ValueError("No token the format allows was left by the stages before the format mask")
    return masked


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


# Stages that read only the logits and the one setting named like the stage (`settings.top_p` for "top_p").
# top-p runs its survivor-sort path here, proven equal to `apply_top_p` by the tests.
_ONE_SETTING_STAGES = {
    "temperature": apply_temperature,
    "top_k": apply_top_k,
    "top_p": _top_p_fast,
    "min_p": apply_min_p,
    "typical_p": apply_typical_p,
    "top_n_sigma": apply_top_n_sigma,
}


def apply_stage(
    name: str,
    logits: torch.Tensor,
    settings: SamplingSettings,
    seen: torch.Tensor,
    context: StepContext | list[StepContext] | None = None,
) -> torch.Tensor:
    """One named stage under these settings. `context` is one StepContext, or one per row
    of a batch; only DRY, XTC and mirostat read it."""
    if name == "penalty":
        return apply_repetition_penalty(logits, seen, settings.repetition_penalty)
    if name == MASK:
        return apply_format_mask(logits, settings.allowed_mask(logits.shape[-1]))
    if name in _ONE_SETTING_STAGES:
        return _ONE_SETTING_STAGES[name](logits, getattr(settings, name))
    rows = context if isinstance(context, list) else [context]
    if any(c is None for c in rows):
        raise ValueError(f"The {STAGE_NAMES[name]} stage needs the step's context (history, uniform, mu)")
    if name == "dry":
        args = (settings.dry_multiplier, settings.dry_base, settings.dry_allowed_length)
        if logits.dim() == 1:
            return apply_dry(logits, list(rows[0].history), *args, rows[0].breaker_ids)
        return torch.stack([apply_dry(row, list(c.history), *args, c.breaker_ids) for row, c in zip(logits, rows)])
    if name == "xtc":
        if any(c.xtc_u is None for c in rows):
            raise ValueError("The XTC stage needs the step's recorded uniform (`xtc_u`)")
        u = rows[0].xtc_u if logits.dim() == 1 else torch.tensor([c.xtc_u for c in rows], dtype=torch.float64)
        return apply_xtc(logits, settings.xtc_probability, settings.xtc_threshold, u)
    if name == "mirostat":
        mu = [mirostat_mu_for(settings, c) for c in rows]
        return apply_mirostat(logits, mu[0] if logits.dim() == 1 else torch.tensor(mu, dtype=torch.float64))
    raise ValueError(f"Unknown stage {name!r}")


def stage_logits(
    logits: torch.Tensor,
    settings: SamplingSettings,
    seen: torch.Tensor,
    context: StepContext | list[StepContext] | None = None,
) -> dict[str, torch.Tensor]:
    """Logits after each stage, "raw" first, then `settings.pipeline` in order; the last is
    the final distribution's."""
    out = {"raw": logits}
    current = logits
    for name in settings.pipeline:
        current = apply_stage(name, current, settings, seen, context)
        out[name] = current
    return out


def final_stage(settings: SamplingSettings) -> str:
    """The stage whose output the draw samples from."""
    return settings.pipeline[-1]


def _order_plan(settings: SamplingSettings) -> tuple[tuple[str, ...], str | None]:
    """Which stages shape the display order, and the pipeline stage whose output already
    holds them (None: they have to be applied to the raw logits apart).

    Display order ranks tokens by the logits after the reweighting stages alone (penalty,
    DRY; temperature too when DRY comes after it, since l/T - d does not rank like l - d).
    Filters only set -inf, so every stage's kept tokens rank in this order as in its own."""
    names = settings.pipeline
    active = [n for n in names if (n == "penalty" and settings.repetition_penalty != 1.0) or n == "dry"]
    if not active:
        return (), "raw"
    last_dry = max((i for i, n in enumerate(names) if n == "dry"), default=-1)
    shaping = tuple(
        n
        for i, n in enumerate(names)
        if n in active or (n == "temperature" and settings.temperature > 0 and i < last_dry)
    )
    last = names.index(shaping[-1])
    prefix_only_reweights = all(
        n in _REWEIGHTING or (n == "temperature" and settings.temperature > 0) for n in names[: last + 1]
    )
    return shaping, (shaping[-1] if prefix_only_reweights else None)


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
    positive = sorted_probs > 0  # typical-p and XTC can remove tokens above kept ones: find the last
    last_kept = positive.shape[-1] - 1 - positive.flip(-1).int().argmax(dim=-1)
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
    mirostat_mu_next: float | None = None  # mirostat's running target after this draw (None: mirostat off)


# Sorting is the expensive part of a step (~4 ms for a 50k vocabulary on this CPU, 0.2 ms
# for its top few hundred), and a chart never shows more than the top 50 rows and a
# 200-rank curve: when every token the draw can pick is near the top, only the top is sorted.
MIN_SORTED = 256


def display_order(penalised_logits: torch.Tensor) -> torch.Tensor:
    """Token ids most likely first, by the logits after the reweighting stages (repetition
    penalty, DRY; temperature does not change the order). Stable, so ties keep id order and
    greedy picks the same token as argmax. Most filters keep a prefix of this order; typical-p
    and XTC may keep tokens further down and drop the top."""
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


def ranking_logits(
    logits: torch.Tensor,
    settings: SamplingSettings,
    seen: torch.Tensor,
    context: StepContext | list[StepContext] | None = None,
    stages: dict[str, torch.Tensor] | None = None,
) -> torch.Tensor:
    """The logits display order ranks by (see `_order_plan`); `stages` (from `stage_logits`)
    saves recomputing them when a pipeline stage already holds them."""
    shaping, holder = settings._plan
    if holder == "raw":
        return logits
    if holder is not None and stages is not None:
        return stages[holder]
    for name in shaping:
        logits = apply_stage(name, logits, settings, seen, context)
    return logits


@dataclass(frozen=True)
class RankedStages:
    """One step's logits after every stage, and its display order."""

    logits: dict[str, torch.Tensor]  # stage -> [V] logits after it: "raw", then settings.pipeline
    order: torch.Tensor  # [V] token ids; the first `sorted_prefix` in display order
    sorted_prefix: int  # every token the final distribution keeps is inside it
    token_rank: int | None = None  # display rank of `include_token`, inside the sorted prefix
    full_sort: bool = False  # top-p sorted the whole vocabulary: the same whatever `min_sorted` asked for

    @property
    def final(self) -> torch.Tensor:
        return self.logits[next(reversed(self.logits))]


def ranked_stages(
    logits: torch.Tensor,
    settings: SamplingSettings,
    seen: torch.Tensor,
    min_sorted: int = 0,
    include_token: int | None = None,
    context: StepContext | None = None,
) -> RankedStages:
    """`stage_logits` for one step, plus the display order, sorting the vocabulary at most
    once: top-p reuses the full sort when it needs one; otherwise only the top is sorted,
    enough to hold `min_sorted` tokens, every token kept, and `include_token`."""
    vocab = logits.shape[-1]
    shaping, holder = settings._plan
    out = {"raw": logits}
    order_logits = logits if holder == "raw" else None
    current, order = logits, None
    for name in settings.pipeline:
        if name == "top_p" and settings.top_p < 1 and order_logits is not None and finite_count(current) >= vocab // 2:
            order = display_order(order_logits)  # top-p has to sort everything: share that sort
            current = _top_p_fast(current, settings.top_p, descending_order=order)
        else:
            current = apply_stage(name, current, settings, seen, context)
        out[name] = current
        if name == holder:
            order_logits = current
    if order_logits is None:  # a reweighting runs after a filter: rank by the reweightings alone
        order_logits = logits
        for name in shaping:
            order_logits = apply_stage(name, order_logits, settings, seen, context)
    token_rank = None if include_token is None else display_rank(order_logits, include_token)
    if order is not None:
        return RankedStages(out, order, vocab, token_rank, full_sort=True)
    needed = max(min_sorted, (token_rank or 0) + 1, _kept_extent(current, order_logits, settings))
    order, sorted_prefix = partial_display_order(order_logits, needed)
    return RankedStages(out, order, sorted_prefix, token_rank)


def _kept_extent(final_logits: torch.Tensor, order_logits: torch.Tensor, settings: SamplingSettings) -> int:
    """How long a display-order prefix must be to hold every token the final stage keeps."""
    if settings._filters_keep_prefix:
        return finite_count(final_logits)  # every filter kept the most likely tokens
    kept = torch.isfinite(final_logits)
    return int((order_logits >= order_logits[kept].min()).sum())


def draw(
    logits: torch.Tensor,
    settings: SamplingSettings,
    seen: torch.Tensor,
    u: float,
    context: StepContext | None = None,
    ranked: RankedStages | None = None,
) -> Draw:
    """The fast path the engine uses every step: final distribution, then inverse CDF. `ranked` may hand in
    `ranked_stages` of these same arguments (a page's view of the step already ranked them); it is used only when
    top-p sorted the whole vocabulary, where the ranking does not depend on how much was asked to be sorted, so the
    draw is the same to the last bit either way."""
    if ranked is None or not ranked.full_sort or ranked.token_rank is not None:
        ranked = ranked_stages(logits, settings, seen, min_sorted=ALTERNATIVES, context=context)
    order = ranked.order[: ranked.sorted_prefix]  # holds every token the draw can pick
    sorted_final = probs_in_order(ranked.final, order)
    if settings.greedy:  # the one token left; the most likely unless XTC removed it first
        rank = 0 if sorted_final[0] > 0 else int((sorted_final > 0).nonzero()[0, 0])
    else:
        rank = int(inverse_cdf_index(sorted_final, u))
    top = order[:ALTERNATIVES]
    raw_top = logits.double().softmax(dim=-1)[top].tolist()
    alternatives = list(zip(top.tolist(), raw_top, sorted_final[:ALTERNATIVES].tolist()))
    prob = float(sorted_final[rank])
    mu_next = None
    if settings.mirostat:
        mu_next = mirostat_next_mu(
            mirostat_mu_for(settings, context), settings.mirostat_tau, settings.mirostat_eta, prob
        )
    return Draw(
        token_id=int(order[rank]),
        rank=rank,
        prob=prob,
        u=u,
        alternatives=alternatives,
        entropy_bits=float(entropy_bits(sorted_final)),
        kept=int((sorted_final > 0).sum()),
        mirostat_mu_next=mu_next,
    )
