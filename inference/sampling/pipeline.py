"""The sampling pipeline: the settings, the stages they switch on in the order they name, the ranking a chart
shows, and the one draw.

Every stage is a row of `inference.sampling.stages.STAGES` (one module holds them all). Stages run in an order that
is itself a setting (`SamplingSettings.order`). Two presets:
    transformers (its `generate`):  repetition penalty -> temperature -> top-k -> top-p -> min-p -> typical-p
    llama.cpp default (common/common.h `samplers`):
        penalties -> DRY -> top-nσ -> top-k -> typical-p -> top-p -> min-p -> XTC -> temperature
Stages one tool lacks sit where the other puts them (DRY after the penalty; top-nσ, XTC and
mirostat after transformers' own); mirostat v2 runs last in both.

Constrained decoding adds one more stage, the format mask ("mask"): it removes every token a
format (JSON schema, regex, choices) does not allow at this step. Its allowed set changes every
step, so it travels in the step's settings (`SamplingSettings.allowed_tokens`, packed bits);
without one the stage does not exist and every other step runs exactly as before. It runs first
unless `order` names it elsewhere (vLLM masks the logits before its sampler; llama.cpp, when it
resamples, applies the grammar before its chain): after a filter it can leave nothing.

Everything runs over the full vocabulary; trimming to the top N happens only for display (see
`StepView.table`).

The draw is inverse-CDF sampling, as llama2.c's `sample_mult(probabilities, n, coin)`: one uniform number u in
[0, 1) from a caller-owned generator; the chosen token is where u falls on the cumulative distribution of the
final probabilities, in display order (most likely first). `inverse_cdf_index` is that draw, and every sampled
choice goes through it (`draw` for a step, `sample_token` for any distribution). Temperature 0 means greedy: the
temperature stage keeps only the argmax, so every u lands on it.
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
    fast_top_p,
    finite_count,
    mirostat_mu_for,
    mirostat_next_mu,
)

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
STAGE_NAMES = {MASK: STAGES[MASK].label, "raw": "raw (T=1)"} | {name: stage.label for name, stage in STAGES.items()}


def check_order(order) -> tuple[str, ...]:
    """The full stage order: the stages given, in that order, then any left out in the
    transformers preset's order. Unknown or repeated names are refused."""
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
        object.__setattr__(self, "_plan", _order_plan(self))
        stages = [STAGES[n] for n in pipeline]
        last_reweighting = max((i for i, s in enumerate(stages) if s.reweights), default=-1)
        object.__setattr__(
            self,
            "_filters_keep_prefix",
            all(s.reweights or (s.keeps_top and i > last_reweighting) for i, s in enumerate(stages)),
        )

    def switched_on(self) -> set[str]:
        """The stages beyond the classic five that these settings switch on."""
        return {name for name, stage in STAGES.items() if not stage.classic and not stage.off(self, math.inf)}

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


# -- running the stages -----------------------------------------------------------------------


def apply_stage(
    name: str,
    logits: torch.Tensor,
    settings: SamplingSettings,
    seen: torch.Tensor,
    context: StepContext | list[StepContext] | None = None,
) -> torch.Tensor:
    """One named stage under these settings. `context` is one StepContext, or one per row
    of a batch; only DRY, XTC and mirostat read it."""
    if name not in STAGES:
        raise ValueError(f"Unknown stage {name!r}")
    return STAGES[name].apply(logits, settings, seen, context)


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
        current = STAGES[name].apply(current, settings, seen, context)
        out[name] = current
    return out


def final_stage(settings: SamplingSettings) -> str:
    """The stage whose output the draw samples from."""
    return settings.pipeline[-1]


def stages_switched_off(settings: SamplingSettings, vocab: int) -> set[str]:
    """Stages of the pipeline whose output equals their input under these settings (x / 1.0 == x exactly)."""
    return {name for name in settings.pipeline if STAGES[name].off(settings, vocab)}


# -- display order: the ranking a chart shows, and the draw walks -----------------------------


def _order_plan(settings: SamplingSettings) -> tuple[tuple[str, ...], str | None]:
    """Which stages shape the display order, and the pipeline stage whose output already
    holds them (None: they have to be applied to the raw logits apart).

    Display order ranks tokens by the logits after the reweighting stages alone (penalty,
    DRY; temperature too when DRY comes after it, since l/T - d does not rank like l - d,
    while the penalty's l/T/r and l/T·r do rank like l/r and l·r).
    Filters only set -inf, so every stage's kept tokens rank in this order as in its own."""
    names = settings.pipeline
    active = [n for n in names if STAGES[n].reweights and not STAGES[n].off(settings, math.inf)]
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
        STAGES[n].reweights or (n == "temperature" and settings.temperature > 0) for n in names[: last + 1]
    )
    return shaping, (shaping[-1] if prefix_only_reweights else None)


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
        logits = STAGES[name].apply(logits, settings, seen, context)
    return logits


# Sorting the whole vocabulary costs more than the rest of a step, and a chart never shows more than the top 50 rows
# and a 200-rank curve: when every token the draw can pick is near the top, only the top is sorted.
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
            current = fast_top_p(current, settings.top_p, descending_order=order)
        else:
            current = STAGES[name].apply(current, settings, seen, context)
        out[name] = current
        if name == holder:
            order_logits = current
    if order_logits is None:  # a reweighting runs after a filter: rank by the reweightings alone
        order_logits = logits
        for name in shaping:
            order_logits = STAGES[name].apply(order_logits, settings, seen, context)
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


# -- the draw -------------------------------------------------------------------------------


def entropy_bits(probs: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in bits over the last axis; zero-probability tokens add nothing
    (xlogy(0, 0) = 0). Never below zero: a certain distribution's sum is -0.0, which printed "-0.00 bits"."""
    return (-torch.special.xlogy(probs, probs).sum(dim=-1) / math.log(2)).clamp_min(0.0) + 0.0


def inverse_cdf_index(sorted_probs: torch.Tensor, u: torch.Tensor | float) -> torch.Tensor:
    """Rank (in `sorted_probs` order) where u falls on the cumulative distribution: the one draw.

    The first rank whose cumulative probability exceeds u; rounding can leave the total a
    hair under 1, so the result is clamped to the last token with probability > 0. Batches
    too: sorted_probs [..., n] and one u per row."""
    cumulative = sorted_probs.cumsum(dim=-1)
    u = torch.as_tensor(u, dtype=cumulative.dtype).reshape(*cumulative.shape[:-1], 1)
    rank = torch.searchsorted(cumulative, u, right=True).squeeze(-1)
    positive = sorted_probs > 0  # typical-p and XTC can remove tokens above kept ones: find the last
    last_kept = positive.shape[-1] - 1 - positive.flip(-1).int().argmax(dim=-1)
    return torch.minimum(rank, last_kept)


def sample_token(probs: torch.Tensor, u: float) -> int:
    """The one draw, as llama2.c's `sample_mult(probabilities, n, coin)`: the token where the coin u in [0, 1) falls
    on the cumulative distribution of [vocab] `probs` in display order (most likely first, ties by id). Every
    sampled choice in the project goes through `inverse_cdf_index`, here or in `draw`."""
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
    draw is the same to the last bit either way. Greedy needs no case of its own: temperature 0 leaves one token
    with probability 1, and every u in [0, 1) lands on it."""
    if ranked is None or not ranked.full_sort or ranked.token_rank is not None:
        ranked = ranked_stages(logits, settings, seen, min_sorted=ALTERNATIVES, context=context)
    order = ranked.order[: ranked.sorted_prefix]  # holds every token the draw can pick
    sorted_final = probs_in_order(ranked.final, order)
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
