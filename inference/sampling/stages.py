"""Every sampling stage, written once, and their table (`STAGES`). A stage maps logits [..., vocab] to a NEW tensor,
a removed token at -inf. Penalty, temperature, top-k, top-p, min-p, typical-p are transformers' LogitsProcessors
(tests hold them equal); top-nσ is llama.cpp's; XTC text-generation-webui PR 6335; DRY koboldcpp PR 982; mirostat v2
Basu et al. 2021; the format mask is constrained decoding's."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

NEG_INF = float("-inf")
MASK = "mask"  # the format mask: a stage only in steps whose settings carry an allowed set
LLAMA_CPP_DRY_BREAKERS = ("\n", ":", '"', "*")  # llama.cpp's default `--dry-sequence-breaker`s
XTC_STREAM_OFFSET = 2**32  # seeds are < 2**32: seed + this is a generator no run's draws use


def finite_number(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"`{name}` has to be a finite number, but is {value!r}")
    return float(value)


KNOBS: dict[str, tuple[Callable[[float], bool], str]] = {  # knob -> (what a value must satisfy, said in words)
    "repetition_penalty": (lambda r: r > 0, "a float > 0 (1 switches it off)"),
    "temperature": (lambda t: t >= 0, ">= 0 (0 means greedy)"),
    "top_k": (lambda k: k >= 0, "an integer >= 0 (0 switches it off)"),
    "top_p": (lambda p: 0 < p <= 1, "a float > 0 and <= 1 (1 switches it off)"),
    "min_p": (lambda p: 0 <= p <= 1, "a float >= 0 and <= 1 (0 switches it off)"),
    "typical_p": (lambda p: 0 < p <= 1, "a float > 0 and <= 1 (1 switches it off)"),
    "top_n_sigma": (lambda n: n >= 0, "a float >= 0 (0 switches it off)"),
    "xtc_probability": (lambda p: 0 <= p <= 1, "a float from 0 to 1 (0 switches it off)"),
    "xtc_threshold": (lambda t: 0 <= t <= 1, "a float from 0 to 1 (above 0.5 it never acts)"),
    "dry_multiplier": (lambda m: m >= 0, "a float >= 0 (0 switches it off)"),
    "dry_base": (lambda b: b >= 1, "a float >= 1"),
    "dry_allowed_length": (lambda n: n >= 1, "an integer >= 1"),
    "mirostat_tau": (lambda t: t > 0, "a float > 0 (target surprise in bits)"),
    "mirostat_eta": (lambda e: 0 < e <= 1, "a float > 0 and <= 1 (learning rate)"),
}


def check_knob(name: str, value) -> None:
    ok, rule = KNOBS[name]
    if "integer" in rule and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"`{name}` has to be {rule}, but is {value!r}")
    if not ok(finite_number(name, value)):
        raise ValueError(f"`{name}` has to be {rule}, but is {value}")


def finite_count(logits: torch.Tensor) -> int:
    return int(torch.isfinite(logits).sum(dim=-1).max())


@dataclass(frozen=True)
class StepContext:
    """What DRY (history, breakers), XTC (its uniform) and mirostat (mu; None: 2·tau) read beyond the logits."""

    history: tuple[int, ...] = ()
    breaker_ids: frozenset[int] = frozenset()
    xtc_u: float | None = None
    mirostat_mu: float | None = None


def step_contexts(label: str, context) -> list[StepContext]:
    rows = context if isinstance(context, list) else [context]
    if any(c is None for c in rows):
        raise ValueError(f"The {label} stage needs the step's context (history, uniform, mu)")
    return rows


def apply_format_mask(logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    masked = logits.masked_fill(~allowed, NEG_INF)
    if not bool(torch.isfinite(masked).any(dim=-1).all()):
        if not bool(allowed.any()):
            raise ValueError("No token of this tokenizer can continue the format here")
        raise ValueError("No token the format allows was left by the stages before the format mask")
    return masked


def apply_repetition_penalty(logits: torch.Tensor, seen: torch.Tensor, penalty: float) -> torch.Tensor:
    """A seen token's positive logit is divided by the penalty, a negative one multiplied: less likely either way."""
    check_knob("repetition_penalty", penalty)
    return torch.where(seen & (penalty != 1.0), torch.where(logits < 0, logits * penalty, logits / penalty), logits)


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Divide by T; T = 0 is the limit, only the argmax survives (greedy), without dividing by zero."""
    check_knob("temperature", temperature)
    if temperature == 0:
        keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, logits.argmax(dim=-1, keepdim=True), True)
        return logits.masked_fill(~keep, NEG_INF)
    return logits / temperature


def apply_top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k highest logits (ties with the k-th too); 0 keeps all."""
    check_knob("top_k", k)
    if k == 0 or k >= logits.shape[-1]:
        return logits.clone()
    return logits.masked_fill(logits < torch.topk(logits, k, dim=-1).values[..., -1:], NEG_INF)


def apply_top_p(logits: torch.Tensor, p: float) -> torch.Tensor:
    """transformers' TopPLogitsWarper: drop tokens whose cumulative probability from the bottom is <= 1 - p; only
    the kept tokens are sorted (the removed add 0 to every sum)."""
    check_knob("top_p", p)
    if p >= 1.0:
        return logits.clone()
    top, index = torch.topk(logits, finite_count(logits), dim=-1)
    ascending = top.flip(-1)
    remove = ascending.softmax(dim=-1).cumsum(dim=-1) <= 1 - p
    remove[..., -1] = False  # the most likely token always stays
    kept = ascending.masked_fill(remove, NEG_INF).flip(-1)
    return torch.full_like(logits, NEG_INF).scatter(-1, index, kept)


def apply_min_p(logits: torch.Tensor, min_p: float) -> torch.Tensor:
    """Drop tokens less likely than min_p times the most likely token's probability."""
    check_knob("min_p", min_p)
    probs = logits.softmax(dim=-1)
    return logits.masked_fill(probs < min_p * probs.amax(dim=-1, keepdim=True), NEG_INF)


def apply_typical_p(logits: torch.Tensor, mass: float) -> torch.Tensor:
    """transformers' TypicalLogitsWarper: tokens whose surprise is closest to the entropy, until they hold `mass`."""
    check_knob("typical_p", mass)
    if mass >= 1.0:
        return logits.clone()
    normalized = torch.log_softmax(logits, dim=-1)
    entropy = -(normalized * normalized.exp()).nansum(-1, keepdim=True)  # removed tokens: -inf * 0 = nan, skipped
    scores, index = torch.sort(torch.abs(-normalized - entropy))
    cumulative = logits.gather(-1, index).softmax(dim=-1).cumsum(dim=-1)
    last = (cumulative < mass).sum(dim=-1, keepdim=True).clamp(max=logits.shape[-1] - 1)
    remove = scores > scores.gather(-1, last)
    remove[..., 0] = False  # the most typical token always stays
    return logits.masked_fill(remove.scatter(-1, index, remove), NEG_INF)


def apply_top_n_sigma(logits: torch.Tensor, n: float) -> torch.Tensor:
    """Keep logits within n population standard deviations (over the kept logits) of the largest."""
    check_knob("top_n_sigma", n)
    if n == 0:
        return logits.clone()
    kept = torch.isfinite(logits)
    values = torch.where(kept, logits, 0).double()
    count = kept.sum(dim=-1, keepdim=True).clamp(min=1)
    mean = values.sum(dim=-1, keepdim=True) / count
    spread = torch.where(kept, (values - mean) ** 2, 0).sum(dim=-1, keepdim=True) / count
    return logits.masked_fill(logits.double() < logits.double().amax(dim=-1, keepdim=True) - n * spread.sqrt(), NEG_INF)


def apply_xtc(logits: torch.Tensor, probability: float, threshold: float, u: float | torch.Tensor) -> torch.Tensor:
    """When u <= `probability` and two or more tokens reach `threshold`, remove all of them but the least likely."""
    check_knob("xtc_probability", probability)
    check_knob("xtc_threshold", threshold)
    probs = logits.double().softmax(dim=-1)
    above = probs >= threshold
    acts = torch.as_tensor(u, dtype=torch.float64).reshape(*logits.shape[:-1], 1) <= probability
    remove = above & (above.sum(dim=-1, keepdim=True) >= 2) & acts
    least = torch.where(above, probs, 2.0).argmin(dim=-1, keepdim=True)
    return logits.masked_fill(remove.scatter(-1, least, False), NEG_INF)


def xtc_uniforms(seed: int, steps: int) -> torch.Tensor:
    """XTC's own uniform per step: a second stream of the seed, so the draws' u stream stays as it was."""
    return torch.rand(steps, generator=torch.Generator().manual_seed(seed + XTC_STREAM_OFFSET), dtype=torch.float64)


def dry_penalties(history: list[int], multiplier: float, base: float, allowed_length: int, breaker_ids=frozenset()):
    """Token id -> what DRY subtracts: the token that followed an earlier occurrence of the last n >= allowed tokens
    (not past the last breaker) loses multiplier · base^(n - allowed), longest n per token."""
    for knob, value in zip(("dry_multiplier", "dry_base", "dry_allowed_length"), (multiplier, base, allowed_length)):
        check_knob(knob, value)
    limit = next((d for d, token in enumerate(reversed(history)) if token in breaker_ids), len(history))
    if multiplier == 0 or len(history) <= allowed_length or limit < allowed_length:
        return {}
    s = history[::-1]  # z[k]: how many tokens ending k back repeat the end of the history (Z-function of s)
    z, left, right = [0] * len(s), 0, 0
    for k in range(1, len(s)):
        if k < right:
            z[k] = min(right - k, z[k - left])
        while k + z[k] < len(s) and s[z[k]] == s[k + z[k]]:
            z[k] += 1
        if k + z[k] > right:
            left, right = k, k + z[k]
    longest: dict[int, int] = {}
    for k in range(1, len(s)):
        if (repeat := min(z[k], limit)) >= allowed_length:
            follower = history[len(history) - k]  # the token that came after that earlier occurrence
            longest[follower] = max(longest.get(follower, 0), repeat)
    # base^n overflows float32 past ~88.7 / ln(base): llama.cpp clamps the exponent the same way
    cap = int(88.7228391 / math.log(base)) if base > 1.000001 else math.inf
    return {t: multiplier * base ** min(n - allowed_length, cap) for t, n in longest.items() if t not in breaker_ids}


def apply_dry(logits, history, multiplier, base, allowed_length, breaker_ids=frozenset()) -> torch.Tensor:
    out = logits.clone()
    if penalties := dry_penalties(history, multiplier, base, allowed_length, breaker_ids):
        ids = torch.tensor(list(penalties), dtype=torch.long)
        out[ids] -= torch.tensor(list(penalties.values()), dtype=logits.dtype)
    return out


def dry_breaker_ids(tokenizer, breakers: tuple[str, ...]) -> frozenset[int]:
    if not breakers:
        return frozenset()
    texts = tokenizer.batch_decode([[i] for i in range(len(tokenizer))])
    return frozenset(i for i, text in enumerate(texts) if any(b in text for b in breakers))


def mirostat_start(tau: float) -> float:
    return 2.0 * tau  # mu before the first step, as llama.cpp and the paper


def mirostat_mu_for(settings, context: StepContext | None) -> float:
    mu = None if context is None else context.mirostat_mu
    return mirostat_start(settings.mirostat_tau) if mu is None else mu


def apply_mirostat(logits: torch.Tensor, mu: float | torch.Tensor) -> torch.Tensor:
    remove = -torch.log_softmax(logits.double(), dim=-1) / math.log(2) > torch.as_tensor(
        mu, dtype=torch.float64
    ).reshape(*logits.shape[:-1], 1)
    return logits.masked_fill(remove.scatter(-1, logits.argmax(dim=-1, keepdim=True), False), NEG_INF)


def mirostat_next_mu(mu: float, tau: float, eta: float, chosen_prob: float) -> float:
    check_knob("mirostat_tau", tau)
    check_knob("mirostat_eta", eta)
    return mu - eta * (-math.log2(chosen_prob) - tau)


def _dry(logits, s, seen, context):
    rows, knobs = step_contexts("DRY", context), (s.dry_multiplier, s.dry_base, s.dry_allowed_length)
    if logits.dim() == 1:
        return apply_dry(logits, list(rows[0].history), *knobs, rows[0].breaker_ids)
    return torch.stack([apply_dry(row, list(c.history), *knobs, c.breaker_ids) for row, c in zip(logits, rows)])


def _xtc(logits, s, seen, context):
    rows = step_contexts("XTC", context)
    if any(c.xtc_u is None for c in rows):
        raise ValueError("The XTC stage needs the step's recorded uniform (`xtc_u`)")
    return apply_xtc(logits, s.xtc_probability, s.xtc_threshold, [c.xtc_u for c in rows])


def _mirostat(logits, s, seen, context):
    return apply_mirostat(logits, [mirostat_mu_for(s, c) for c in step_contexts("mirostat v2", context)])


@dataclass(frozen=True)
class Stage:
    """One row of `STAGES`: `apply(logits, settings, seen, context)`; `off(settings)`: a classic stage then hands
    on its input, any other is left out; `knobs`: the settings it reads, checked as `KNOBS` says."""

    name: str
    label: str  # as charts and sentences name it
    apply: Callable[..., torch.Tensor]
    off: Callable[..., bool]
    knobs: tuple[str, ...] = ()
    classic: bool = False  # one of the classic five: always in the pipeline and on the charts
    reweights: bool = False  # may change which token ranks above which (the others remove tokens or divide by T)
    stateful: bool = False  # reads the step's context (history, its own uniform, a running target)

    def check(self, settings) -> None:
        for knob in self.knobs:
            check_knob(knob, getattr(settings, knob))


def _knob(name: str, label: str, apply: Callable, neutral, classic: bool = False) -> Stage:
    return Stage(
        name, label, lambda x, s, seen, c: apply(x, getattr(s, name)), lambda s: getattr(s, name) == neutral, (name,),
        classic=classic,
    )  # fmt: skip


def _penalty(x, s, seen, c):
    return apply_repetition_penalty(x, seen, s.repetition_penalty)


def _mask(x, s, seen, c):
    return apply_format_mask(x, s.allowed_mask(x.shape[-1]))


STAGES: dict[str, Stage] = {
    stage.name: stage
    for stage in (
        Stage(MASK, "format mask", _mask, lambda s: s.allowed_tokens is None),  # bits checked by the settings
        Stage("penalty", "repetition penalty", _penalty, lambda s: s.repetition_penalty == 1.0,
              ("repetition_penalty",), classic=True, reweights=True),
        Stage("dry", "DRY", _dry, lambda s: s.dry_multiplier == 0,
              ("dry_multiplier", "dry_base", "dry_allowed_length"), reweights=True, stateful=True),
        _knob("temperature", "temperature", apply_temperature, 1.0, classic=True),
        _knob("top_k", "top-k", apply_top_k, 0, classic=True),
        _knob("top_p", "top-p", apply_top_p, 1.0, classic=True),
        _knob("min_p", "min-p", apply_min_p, 0.0, classic=True),
        _knob("typical_p", "typical-p", apply_typical_p, 1.0),
        _knob("top_n_sigma", "top-nσ", apply_top_n_sigma, 0.0),
        Stage("xtc", "XTC", _xtc, lambda s: s.xtc_probability == 0, ("xtc_probability", "xtc_threshold"),
              stateful=True),
        Stage("mirostat", "mirostat v2", _mirostat, lambda s: not s.mirostat, ("mirostat_tau", "mirostat_eta"),
              stateful=True),
    )
}  # fmt: skip
