"""The sampling pipeline: the settings, their stages in the order they name (a setting, with transformers' and
llama.cpp's default orders as presets; the format mask first unless placed elsewhere, mirostat last), the display
order a chart shows and the draw walks, and the one draw: llama2.c's `sample_mult`, where one uniform u falls on the
cumulative final distribution, most likely first (temperature 0 keeps only the argmax)."""

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
    """One set of knobs; a neutral value switches its stage off. `allowed_tokens`: a step's format mask, bit i of
    byte i // 8 set when token i is allowed (as llguidance packs it); None: no format."""

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
        return {name for name, stage in STAGES.items() if not stage.classic and not stage.off(self)}

    def allowed_mask(self, vocab: int) -> torch.Tensor:
        bits = self._allowed_bits
        if bits is None:
            raise ValueError("These settings carry no format mask (`allowed_tokens` is None)")
        return torch.cat([bits[:vocab], torch.zeros(max(0, vocab - len(bits)), dtype=torch.bool)])

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def needs_context(self) -> bool:
        return any(STAGES[name].stateful for name in self.switched_on())


def unpack_allowed(packed: bytes | None) -> torch.Tensor | None:
    if packed is None:
        return None
    if not isinstance(packed, bytes):
        raise ValueError(f"`allowed_tokens` has to be bytes (packed bits) or None, but is {type(packed).__name__}")
    data = torch.frombuffer(bytearray(packed), dtype=torch.uint8)
    return ((data.unsqueeze(-1) >> torch.arange(8, dtype=torch.uint8)) & 1).bool().flatten()


def pack_allowed(allowed: torch.Tensor) -> bytes:
    padded = torch.zeros((len(allowed) + 7) // 8 * 8, dtype=torch.uint8)
    padded[: len(allowed)] = allowed.to(torch.uint8)
    weights = 2 ** torch.arange(8, dtype=torch.int32)
    return bytes((padded.view(-1, 8).int() * weights).sum(-1).to(torch.uint8).tolist())


def seen_mask(histories: list[list[int]] | list[int], vocab_size: int) -> torch.Tensor:
    single = len(histories) == 0 or isinstance(histories[0], int)
    rows = [histories] if single else histories
    mask = torch.zeros(len(rows), vocab_size, dtype=torch.bool)
    for row, ids in enumerate(rows):
        if ids:
            mask[row, torch.as_tensor(ids, dtype=torch.long)] = True
    return mask[0] if single else mask


def stage_logits(logits, settings: SamplingSettings, seen, context: StepContext | list[StepContext] | None = None):
    """Logits after each stage: "raw", then `settings.pipeline` (`context`: one StepContext, or one per row)."""
    out = {"raw": logits}
    for name in settings.pipeline:
        out[name] = logits = STAGES[name].apply(logits, settings, seen, context)
    return out


def ranking_logits(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor, context=None) -> torch.Tensor:
    """What display order ranks by: the raw logits after the reweighting stages that are on, and temperature where a
    DRY runs after it (l/T - d ranks unlike l - d); filters only set -inf, so every stage ranks alike."""
    names = settings.pipeline
    last_dry = names.index("dry") if "dry" in names else -1
    for i, name in enumerate(names):
        reweights = STAGES[name].reweights and not STAGES[name].off(settings)
        if reweights or (name == "temperature" and settings.temperature > 0 and i < last_dry):
            logits = STAGES[name].apply(logits, settings, seen, context)
    return logits


def display_order(ranking: torch.Tensor) -> torch.Tensor:
    # stable: ties keep id order, so greedy picks the argmax
    return torch.sort(ranking, dim=-1, descending=True, stable=True).indices


def partial_display_order(ranking: torch.Tensor, at_least: int) -> tuple[torch.Tensor, int]:
    """`display_order` exact only for its first `sorted` ids (ties at the cut included), the rest in id order:
    sorting a 49k vocabulary costs more than the rest of a step."""
    if at_least * 4 >= ranking.shape[-1]:
        return display_order(ranking), ranking.shape[-1]
    in_head = ranking >= torch.topk(ranking, max(at_least, 1)).values[-1]
    head = in_head.nonzero().squeeze(-1)  # id order, so the stable sort breaks ties by id
    head = head[torch.sort(ranking[head], descending=True, stable=True).indices]
    return torch.cat([head, (~in_head).nonzero().squeeze(-1)]), len(head)


def display_rank(ranking: torch.Tensor, token_id: int) -> int:
    value = ranking[token_id]
    return int((ranking > value).sum() + (ranking[:token_id] == value).sum())


def probs_in_order(stage_logits: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """float64 softmax over the kept tokens in `order` alone: a draw and a view get the same bits."""
    values = stage_logits[order]
    kept = torch.isfinite(values)
    probs = torch.zeros(len(values), dtype=torch.float64)
    probs[kept] = values[kept].double().softmax(dim=-1)
    return probs


# A chart shows at most 50 rows and a 200-rank curve: a view sorts this many at least.
MIN_SORTED = 256


@dataclass(frozen=True)
class RankedStages:
    logits: dict[str, torch.Tensor]  # stage -> [V] logits after it: "raw", then settings.pipeline
    order: torch.Tensor  # [V] token ids; the first `sorted_prefix` in display order
    sorted_prefix: int  # every token the final distribution keeps is inside it
    token_rank: int | None = None  # display rank of `include_token`

    @property
    def final(self) -> torch.Tensor:
        return self.logits[next(reversed(self.logits))]


def ranked_stages(logits, settings, seen, min_sorted: int = 0, include_token: int | None = None, context=None):
    """`stage_logits` and display order, sorted to hold `min_sorted`, every kept token and `include_token`."""
    stages = stage_logits(logits, settings, seen, context)
    ranking = ranking_logits(logits, settings, seen, context)
    token_rank = None if include_token is None else display_rank(ranking, include_token)
    kept = torch.isfinite(stages[settings.pipeline[-1]])
    needed = max(min_sorted, (token_rank or 0) + 1, int((ranking >= ranking[kept].min()).sum()))
    order, sorted_prefix = partial_display_order(ranking, needed)
    return RankedStages(stages, order, sorted_prefix, token_rank)


def entropy_bits(probs: torch.Tensor) -> torch.Tensor:
    return (-torch.special.xlogy(probs, probs).sum(dim=-1) / math.log(2)).clamp_min(0.0) + 0.0


def inverse_cdf_index(sorted_probs: torch.Tensor, u) -> torch.Tensor:
    """The one draw: the first rank whose cumulative probability exceeds u, clamped to the last kept token."""
    cumulative = sorted_probs.cumsum(dim=-1)
    u = torch.as_tensor(u, dtype=cumulative.dtype).reshape(*cumulative.shape[:-1], 1)
    rank = torch.searchsorted(cumulative, u, right=True).squeeze(-1)
    positive = sorted_probs > 0  # typical-p and XTC can remove tokens above kept ones
    return torch.minimum(rank, positive.shape[-1] - 1 - positive.flip(-1).int().argmax(dim=-1))


def sample_token(probs: torch.Tensor, u: float) -> int:
    """llama2.c's `sample_mult`: the token where u falls on `probs` [vocab] in display order."""
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
    """The final distribution in display order, then the inverse CDF at u (`ranked`: a view's ranking of these
    arguments, the same to the last bit). Greedy needs no case: temperature 0 leaves one token."""
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
