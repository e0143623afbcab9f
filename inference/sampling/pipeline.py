"""The sampling pipeline: the settings, the stages they switch on in the order they name, the display order (the
ranking a chart shows and the draw walks) and the one draw.

The order is itself a setting (`SamplingSettings.order`), with two presets:
    transformers (`generate`): penalty -> temperature -> top-k -> top-p -> min-p -> typical-p
    llama.cpp default (common/common.h): penalties -> DRY -> top-nσ -> top-k -> typical-p -> top-p -> min-p -> XTC
        -> temperature
Stages one tool lacks sit where the other puts them; mirostat v2 runs last in both. The format mask of constrained
decoding runs first unless `order` names it elsewhere (vLLM masks before its sampler; llama.cpp applies the grammar
before its chain when it resamples).

The draw is inverse-CDF sampling, as llama2.c's `sample_mult(probabilities, n, coin)`: one uniform u in [0, 1) from
a caller-owned generator picks where u falls on the cumulative final distribution in display order (most likely
first). Temperature 0 keeps only the argmax, so every u lands on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from inference.sampling.stages import (
    LLAMA_CPP_DRY_BREAKERS,
    MASK,
    STAGES,
    StepContext,
    mirostat_mu_for,
    mirostat_next_mu,
)

ALTERNATIVES = 5  # how many top tokens a step keeps for "what else could it have said"

TRANSFORMERS_ORDER = ("penalty", "dry", "temperature", "top_k", "top_p", "min_p", "typical_p", "top_n_sigma", "xtc")
TRANSFORMERS_ORDER += ("mirostat",)
LLAMA_CPP_ORDER = ("penalty", "dry", "top_n_sigma", "top_k", "typical_p", "top_p", "min_p", "xtc", "temperature")
LLAMA_CPP_ORDER += ("mirostat",)
ORDER_PRESETS = {"transformers": TRANSFORMERS_ORDER, "llama.cpp default": LLAMA_CPP_ORDER}
STAGE_NAMES = {MASK: STAGES[MASK].label, "raw": "raw (T=1)"} | {name: stage.label for name, stage in STAGES.items()}


def check_order(order) -> tuple[str, ...]:
    """The stages given, then any left out in the transformers order; unknown or repeated names refused."""
    order = tuple(order)
    unknown = [name for name in order if name not in STAGES]
    if unknown:
        known = ", ".join((*TRANSFORMERS_ORDER, MASK))
        raise ValueError(f"`order` has unknown stages {unknown}; known: {known}")
    if len(set(order)) != len(order):
        raise ValueError(f"`order` names a stage twice: {list(order)}")
    return order + tuple(name for name in TRANSFORMERS_ORDER if name not in order)


@dataclass(frozen=True)
class SamplingSettings:
    """One set of sampling knobs; a neutral value switches its stage off, temperature 0 means greedy.
    `allowed_tokens` (None: no format) is one step's format mask: bit i (byte i // 8, bit i % 8, as llguidance
    packs it) set when token i is allowed."""

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

    def __post_init__(self):
        if not isinstance(self.mirostat, bool):
            raise ValueError(f"`mirostat` has to be True or False, but is {self.mirostat!r}")
        for stage in STAGES.values():
            stage.check(self)
        object.__setattr__(self, "dry_sequence_breakers", tuple(self.dry_sequence_breakers))
        object.__setattr__(self, "order", check_order(self.order))
        object.__setattr__(self, "_allowed_bits", unpack_allowed(self.allowed_tokens))
        on = self.switched_on()
        # The stages a step runs: the classic five always (every chart shows them), another one when on.
        pipeline = tuple(n for n in self.order if STAGES[n].classic or n in on)
        if MASK in on and MASK not in pipeline:
            pipeline = (MASK, *pipeline)
        object.__setattr__(self, "pipeline", pipeline)

    def switched_on(self) -> set[str]:
        """The stages beyond the classic five that these settings switch on."""
        return {name for name, stage in STAGES.items() if not stage.classic and not stage.off(self)}

    def allowed_mask(self, vocab: int) -> torch.Tensor:
        """[vocab] bool: the tokens this step's format allows (bits past the vocabulary are ignored)."""
        bits = self._allowed_bits
        if bits is None:
            raise ValueError("These settings carry no format mask (`allowed_tokens` is None)")
        return torch.cat([bits[:vocab], torch.zeros(max(0, vocab - len(bits)), dtype=torch.bool)])

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def needs_context(self) -> bool:
        """DRY reads the history, XTC its own uniform, mirostat its running target."""
        return any(STAGES[name].stateful for name in self.switched_on())


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


def seen_mask(histories: list[list[int]] | list[int], vocab_size: int) -> torch.Tensor:
    """Boolean [batch, vocab] (or [vocab]) marking tokens already in each history."""
    single = len(histories) == 0 or isinstance(histories[0], int)
    rows = [histories] if single else histories
    mask = torch.zeros(len(rows), vocab_size, dtype=torch.bool)
    for row, ids in enumerate(rows):
        if ids:
            mask[row, torch.as_tensor(ids, dtype=torch.long)] = True
    return mask[0] if single else mask


# -- running the stages, ranking, drawing ------------------------------------------------------


def stage_logits(logits, settings: SamplingSettings, seen, context: StepContext | list[StepContext] | None = None):
    """Logits after each stage: "raw", then `settings.pipeline` in order (the last is the final distribution's).
    `context` is one StepContext, or one per row of a batch; only DRY, XTC and mirostat read it."""
    out = {"raw": logits}
    for name in settings.pipeline:
        out[name] = logits = STAGES[name].apply(logits, settings, seen, context)
    return out


def ranking_logits(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor, context=None) -> torch.Tensor:
    """The logits display order ranks by: the raw ones after the reweighting stages that are on (penalty, DRY), and
    temperature where a DRY runs after it (l/T - d does not rank like l - d; the penalty's l/T/r ranks like l/r).
    Filters only set -inf, so every stage's kept tokens rank in this order as in its own."""
    names = settings.pipeline
    last_dry = names.index("dry") if "dry" in names else -1
    for i, name in enumerate(names):
        reweights = STAGES[name].reweights and not STAGES[name].off(settings)
        if reweights or (name == "temperature" and settings.temperature > 0 and i < last_dry):
            logits = STAGES[name].apply(logits, settings, seen, context)
    return logits


def display_order(ranking: torch.Tensor) -> torch.Tensor:
    """Token ids most likely first by `ranking_logits`; stable, so ties keep id order and greedy picks argmax."""
    return torch.sort(ranking, dim=-1, descending=True, stable=True).indices


def partial_display_order(ranking: torch.Tensor, at_least: int) -> tuple[torch.Tensor, int]:
    """`display_order` of one step where only the top `at_least` ids have to be in order (sorting a 49k vocabulary
    costs more than the rest of a step): (order, sorted), order[:sorted] exact (ties at the cut included), the rest
    in id order."""
    if at_least * 4 >= ranking.shape[-1]:
        return display_order(ranking), ranking.shape[-1]
    in_head = ranking >= torch.topk(ranking, max(at_least, 1)).values[-1]
    head = in_head.nonzero().squeeze(-1)  # id order, so the stable sort breaks ties by id
    head = head[torch.sort(ranking[head], descending=True, stable=True).indices]
    return torch.cat([head, (~in_head).nonzero().squeeze(-1)]), len(head)


def display_rank(ranking: torch.Tensor, token_id: int) -> int:
    """0-based place of one token in display order, counted without sorting."""
    value = ranking[token_id]
    return int((ranking > value).sum() + (ranking[:token_id] == value).sum())


def probs_in_order(stage_logits: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """float64 probabilities of the tokens in `order` (which holds every token the stage kept), softmaxed over the
    kept ones alone, so a draw and a view get the same numbers to the last bit."""
    values = stage_logits[order]
    kept = torch.isfinite(values)
    probs = torch.zeros(len(values), dtype=torch.float64)
    probs[kept] = values[kept].double().softmax(dim=-1)
    return probs


# A chart shows at most 50 rows and a 200-rank curve: a view sorts this many at least.
MIN_SORTED = 256


@dataclass(frozen=True)
class RankedStages:
    """One step's logits after every stage and its display order: ranked once, read by the chart and the draw."""

    logits: dict[str, torch.Tensor]  # stage -> [V] logits after it: "raw", then settings.pipeline
    order: torch.Tensor  # [V] token ids; the first `sorted_prefix` in display order
    sorted_prefix: int  # every token the final distribution keeps is inside it
    token_rank: int | None = None  # display rank of `include_token`

    @property
    def final(self) -> torch.Tensor:
        return self.logits[next(reversed(self.logits))]


def ranked_stages(logits, settings, seen, min_sorted: int = 0, include_token: int | None = None, context=None):
    """`stage_logits` for one step and its display order, sorted far enough to hold `min_sorted` tokens, every
    token the final stage keeps, and `include_token`."""
    stages = stage_logits(logits, settings, seen, context)
    ranking = ranking_logits(logits, settings, seen, context)
    token_rank = None if include_token is None else display_rank(ranking, include_token)
    kept = torch.isfinite(stages[settings.pipeline[-1]])
    needed = max(min_sorted, (token_rank or 0) + 1, int((ranking >= ranking[kept].min()).sum()))
    order, sorted_prefix = partial_display_order(ranking, needed)
    return RankedStages(stages, order, sorted_prefix, token_rank)


def entropy_bits(probs: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in bits over the last axis (0 log 0 = 0), never -0.0."""
    return (-torch.special.xlogy(probs, probs).sum(dim=-1) / math.log(2)).clamp_min(0.0) + 0.0


def inverse_cdf_index(sorted_probs: torch.Tensor, u) -> torch.Tensor:
    """The one draw: the first rank whose cumulative probability exceeds u, clamped to the last token with
    probability > 0 (rounding can leave the total a hair under 1). Batches too: [..., n] and one u per row."""
    cumulative = sorted_probs.cumsum(dim=-1)
    u = torch.as_tensor(u, dtype=cumulative.dtype).reshape(*cumulative.shape[:-1], 1)
    rank = torch.searchsorted(cumulative, u, right=True).squeeze(-1)
    positive = sorted_probs > 0  # typical-p and XTC can remove tokens above kept ones
    return torch.minimum(rank, positive.shape[-1] - 1 - positive.flip(-1).int().argmax(dim=-1))


def sample_token(probs: torch.Tensor, u: float) -> int:
    """llama2.c's `sample_mult`: the token where u falls on the cumulative distribution of `probs` [vocab] in
    display order (most likely first, ties by id)."""
    order = torch.sort(probs, descending=True, stable=True).indices
    return int(order[inverse_cdf_index(probs[order], u)])


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


def draw(logits, settings: SamplingSettings, seen, u: float, context=None, ranked: RankedStages | None = None) -> Draw:
    """The engine's step: the final distribution in display order, then the inverse CDF at u. `ranked` is
    `ranked_stages` of these same arguments when a view of the step already ranked them (the draw is the same to the
    last bit). Greedy needs no case: temperature 0 leaves one token with probability 1."""
    ranked = ranked or ranked_stages(logits, settings, seen, min_sorted=ALTERNATIVES, context=context)
    order = ranked.order[: ranked.sorted_prefix]
    final = probs_in_order(ranked.final, order)
    rank = int(inverse_cdf_index(final, u))
    top = order[:ALTERNATIVES]
    alternatives = list(zip(top.tolist(), logits.double().softmax(dim=-1)[top].tolist(), final[:ALTERNATIVES].tolist()))
    prob = float(final[rank])
    mu_next = None
    if settings.mirostat:
        mu = mirostat_mu_for(settings, context)
        mu_next = mirostat_next_mu(mu, settings.mirostat_tau, settings.mirostat_eta, prob)
    positive = final[final > 0]  # a sum over the kept alone: the same bits however far the order was sorted
    return Draw(int(order[rank]), rank, prob, u, alternatives, float(entropy_bits(positive)), len(positive), mu_next)
