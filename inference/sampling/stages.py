"""Every stage of the sampling pipeline, in one module and one table (`STAGES`).

A stage takes next-token logits [..., vocab] (one step, or a batch of steps) and returns a NEW tensor; removed
tokens get -inf, so the softmax of a stage's output is the distribution after that stage. Each stage is written
once as a pure function of the logits and its own knobs (the functions tests hold against transformers'
LogitsProcessors and llama.cpp's definitions), and is one row of `STAGES`: how it reads a step's settings, when
those settings switch it off, the check of its knobs, and what it does to the ranking. `pipeline.py` runs the rows
in the order the settings name and draws from the last one's output.

Where each definition comes from:
- repetition penalty: CTRL (Keskar et al. 2019), as transformers' `RepetitionPenaltyLogitsProcessor`.
- temperature, top-k, top-p, min-p: as transformers' warpers of those names.
- typical-p: Meister et al. 2023, "Locally Typical Sampling"; arithmetic as transformers' `TypicalLogitsWarper`.
- top-nσ: Tang et al. 2024, "Top-nσ: Not All Logits Are You Need"; as llama.cpp's
  `llama_sampler_top_n_sigma_apply` (src/llama-sampling.cpp): keep logits >= max - n·σ, σ the population standard
  deviation of the logits still kept.
- XTC, "exclude top choices" (oobabooga text-generation-webui PR 6335; llama.cpp `llama_sample_xtc_apply`): with
  probability `probability`, of the tokens whose probability is >= `threshold`, remove all but the least likely one.
- DRY, "don't repeat yourself" (koboldcpp PR 982 by pi6am; llama.cpp `llama_sampler_dry_apply`): a token that
  would extend a sequence already seen in the context, repeated n >= allowed tokens long, loses
  multiplier · base^(n - allowed) from its logit. Sequence breakers stop the look-back.
- mirostat v2: Basu et al. 2021, "Mirostat: A Neural Text Decoding Algorithm that Directly Controls Perplexity"; as
  llama.cpp `llama_sampler_mirostat_v2_apply`: drop tokens whose surprise -log2 p exceeds mu; after the draw,
  mu -= eta · (observed surprise - tau).
- the format mask (constrained decoding): every token a format (JSON schema, regex, choices) does not allow at
  this step is removed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

NEG_INF = float("-inf")
MASK = "mask"  # the format mask: a stage only in steps whose settings carry an allowed set
LLAMA_CPP_DRY_BREAKERS = ("\n", ":", '"', "*")  # llama.cpp's default `--dry-sequence-breaker`s


def finite_number(name: str, value) -> float:
    """`value` as a float, or a ValueError naming `name` (booleans, non-numbers, nan and inf refused): every
    sampler knob's check starts here."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"`{name}` has to be a finite number, but is {value!r}")
    return float(value)


def finite_count(logits: torch.Tensor) -> int:
    """Most tokens any row still keeps (removed tokens are -inf)."""
    finite = torch.isfinite(logits).sum(dim=-1)
    return int(finite if logits.dim() == 1 else finite.max())


@dataclass(frozen=True)
class StepContext:
    """What a step's stateful stages read beyond the logits: the ids so far (DRY), the DRY
    breakers as token ids, the step's XTC uniform, and mirostat's running target mu
    (None: the start, 2·tau)."""

    history: tuple[int, ...] = ()
    breaker_ids: frozenset[int] = frozenset()
    xtc_u: float | None = None
    mirostat_mu: float | None = None


def step_contexts(label: str, context: StepContext | list[StepContext] | None) -> list[StepContext]:
    """One StepContext per row (a single step is one row), or a sentence saying the stage needs them."""
    rows = context if isinstance(context, list) else [context]
    if any(c is None for c in rows):
        raise ValueError(f"The {label} stage needs the step's context (history, uniform, mu)")
    return rows


# -- the format mask ------------------------------------------------------------------------


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


# -- repetition penalty ---------------------------------------------------------------------


def check_repetition_penalty(r) -> None:
    if finite_number("repetition_penalty", r) <= 0:
        raise ValueError(f"`repetition_penalty` has to be a float > 0 (1 switches it off), but is {r}")


def apply_repetition_penalty(logits: torch.Tensor, seen: torch.Tensor, penalty: float) -> torch.Tensor:
    """CTRL-style penalty on tokens already seen: positive logits are divided by the
    penalty, negative ones multiplied, so a penalty > 1 always makes them less likely."""
    check_repetition_penalty(penalty)
    if penalty == 1.0:
        return logits.clone()
    penalised = torch.where(logits < 0, logits * penalty, logits / penalty)
    return torch.where(seen, penalised, logits)


# -- DRY ------------------------------------------------------------------------------------


def check_dry(multiplier, base, allowed_length) -> None:
    if finite_number("dry_multiplier", multiplier) < 0:
        raise ValueError(f"`dry_multiplier` has to be a float >= 0 (0 switches it off), but is {multiplier}")
    if finite_number("dry_base", base) < 1:
        raise ValueError(f"`dry_base` has to be a float >= 1, but is {base}")
    if isinstance(allowed_length, bool) or not isinstance(allowed_length, int) or allowed_length < 1:
        raise ValueError(f"`dry_allowed_length` has to be an integer >= 1, but is {allowed_length!r}")


def _reversed_match_lengths(history: list[int]) -> list[int]:
    """z[k] = how many tokens end-aligned at position len - 1 - k repeat the end of the
    history (the Z-function of the reversed history; z[0] is unused)."""
    s = history[::-1]
    n = len(s)
    z = [0] * n
    left = right = 0
    for k in range(1, n):
        if k < right:
            z[k] = min(right - k, z[k - left])
        while k + z[k] < n and s[z[k]] == s[k + z[k]]:
            z[k] += 1
        if k + z[k] > right:
            left, right = k, k + z[k]
    return z


def dry_penalties(
    history: list[int],
    multiplier: float,
    base: float,
    allowed_length: int,
    breaker_ids: frozenset[int] | set[int] = frozenset(),
) -> dict[int, float]:
    """Token id -> the amount DRY subtracts from its logit after this history.

    For every earlier place where the last n tokens of the history already occurred
    (n >= allowed_length, counted back no further than the last sequence breaker), the
    token that followed there would extend the repeat to n + 1: it loses
    multiplier · base^(n - allowed_length), with the longest n per token. A breaker token
    itself is never penalised. Single-token breakers only: llama.cpp also matches a
    breaker string split over several tokens."""
    check_dry(multiplier, base, allowed_length)
    if multiplier == 0 or len(history) <= allowed_length:
        return {}
    # How far back a repeat may reach: up to (not including) the most recent breaker.
    limit = len(history)
    for distance, token in enumerate(reversed(history)):
        if token in breaker_ids:
            limit = distance
            break
    if limit < allowed_length:
        return {}
    z = _reversed_match_lengths(history)
    longest: dict[int, int] = {}
    last = len(history) - 1
    for k in range(1, len(history)):
        repeat = min(z[k], limit)
        if repeat >= allowed_length:
            follower = history[last - k + 1]  # the token that came after that earlier occurrence
            longest[follower] = max(longest.get(follower, 0), repeat)
    # pow overflows float32 past ~88.7 / ln(base) (llama.cpp clamps the exponent the same way)
    max_exponent = int(88.7228391 / math.log(base)) if base > 1.000001 else 0
    penalties = {}
    for token, repeat in longest.items():
        if token in breaker_ids:
            continue
        exponent = repeat - allowed_length
        if max_exponent > 0:
            exponent = min(exponent, max_exponent)
        penalties[token] = multiplier * base**exponent
    return penalties


def apply_dry(
    logits: torch.Tensor,
    history: list[int],
    multiplier: float,
    base: float,
    allowed_length: int,
    breaker_ids: frozenset[int] | set[int] = frozenset(),
) -> torch.Tensor:
    """One step's logits [vocab] minus the DRY penalty of each token (see `dry_penalties`)."""
    penalties = dry_penalties(history, multiplier, base, allowed_length, breaker_ids)
    out = logits.clone()
    if penalties:
        ids = torch.tensor(list(penalties), dtype=torch.long)
        out[ids] = out[ids] - torch.tensor(list(penalties.values()), dtype=logits.dtype)
    return out


def _dry_rows(logits: torch.Tensor, settings, seen: torch.Tensor, context) -> torch.Tensor:
    """DRY on one step or on each row of a batch, each with its own history."""
    rows = step_contexts("DRY", context)
    knobs = (settings.dry_multiplier, settings.dry_base, settings.dry_allowed_length)
    if logits.dim() == 1:
        return apply_dry(logits, list(rows[0].history), *knobs, rows[0].breaker_ids)
    return torch.stack([apply_dry(row, list(c.history), *knobs, c.breaker_ids) for row, c in zip(logits, rows)])


def dry_breaker_ids(tokenizer, breakers: tuple[str, ...]) -> frozenset[int]:
    """Token ids whose text contains any breaker string (so "\\n\\n" breaks like "\\n")."""
    if not breakers:
        return frozenset()
    ids = range(len(tokenizer))
    texts = tokenizer.batch_decode([[i] for i in ids])
    return frozenset(i for i, text in zip(ids, texts) if any(b in text for b in breakers))


# -- temperature ------------------------------------------------------------------------------


def check_temperature(t) -> None:
    if finite_number("temperature", t) < 0:
        raise ValueError(f"`temperature` has to be >= 0 (0 means greedy), but is {t}")


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Divide logits by T: T < 1 sharpens, T > 1 flattens. T = 0 is the limit: only the
    argmax survives (greedy), computed without dividing by zero."""
    check_temperature(temperature)
    if temperature == 0:
        best = logits.argmax(dim=-1, keepdim=True)
        keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, best, True)
        return logits.masked_fill(~keep, NEG_INF)
    return logits / temperature


# -- top-k ------------------------------------------------------------------------------------


def check_top_k(k) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"`top_k` has to be an integer >= 0 (0 switches it off), but is {k!r}")


def apply_top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k highest logits (ties with the k-th are kept too); 0 keeps all."""
    check_top_k(k)
    if k == 0 or k >= logits.shape[-1]:
        return logits.clone()
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, NEG_INF)


# -- top-p ------------------------------------------------------------------------------------


def check_top_p(p) -> None:
    if not 0 < finite_number("top_p", p) <= 1:
        raise ValueError(f"`top_p` has to be a float > 0 and <= 1 (1 switches it off), but is {p}")


def apply_top_p(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose probability reaches p.

    Written as transformers' TopPLogitsWarper is: sort ascending, drop every token whose
    cumulative probability from the bottom is <= 1 - p, always keep the top token. The
    pipeline runs the same arithmetic on fewer tokens (`fast_top_p`); tests prove both equal."""
    check_top_p(p)
    if p >= 1.0:
        return logits.clone()
    sorted_logits, sorted_index = torch.sort(logits, dim=-1, descending=False)
    cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    remove_sorted = cumulative <= (1 - p)
    remove_sorted[..., -1:] = False  # the most likely token always stays
    remove = remove_sorted.scatter(-1, sorted_index, remove_sorted)
    return logits.masked_fill(remove, NEG_INF)


def fast_top_p(logits: torch.Tensor, p: float, descending_order: torch.Tensor | None = None) -> torch.Tensor:
    """`apply_top_p` without sorting what does not need sorting: the pipeline's top-p.

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
            return torch.full_like(logits, NEG_INF).index_put((survivors,), fast_top_p(logits[survivors], p))
        top_logits, top_index = torch.topk(logits, finite, dim=-1)  # rows keep different counts
        kept = fast_top_p(top_logits, p)
        return torch.full_like(logits, NEG_INF).scatter(-1, top_index, kept)
    sorted_logits, sorted_index = torch.sort(logits, dim=-1, descending=False)
    return torch.full_like(logits, NEG_INF).scatter(-1, sorted_index, _top_p_sorted(sorted_logits, p))


def _top_p_sorted(ascending_logits: torch.Tensor, p: float) -> torch.Tensor:
    """Top-p on logits already sorted ascending; returns them in the same order."""
    cumulative = ascending_logits.softmax(dim=-1).cumsum(dim=-1)
    remove = cumulative <= (1 - p)
    remove[..., -1:] = False
    return ascending_logits.masked_fill(remove, NEG_INF)


# -- min-p ------------------------------------------------------------------------------------


def check_min_p(p) -> None:
    if not 0 <= finite_number("min_p", p) <= 1:
        raise ValueError(f"`min_p` has to be a float >= 0 and <= 1 (0 switches it off), but is {p}")


def apply_min_p(logits: torch.Tensor, min_p: float) -> torch.Tensor:
    """Drop tokens less likely than min_p times the most likely token's probability."""
    check_min_p(min_p)
    if min_p == 0:
        return logits.clone()
    probs = logits.softmax(dim=-1)
    remove = probs < min_p * probs.amax(dim=-1, keepdim=True)
    return logits.masked_fill(remove, NEG_INF)


# -- typical-p --------------------------------------------------------------------------------


def check_typical_p(p) -> None:
    if not 0 < finite_number("typical_p", p) <= 1:
        raise ValueError(f"`typical_p` has to be a float > 0 and <= 1 (1 switches it off), but is {p}")


def apply_typical_p(logits: torch.Tensor, mass: float) -> torch.Tensor:
    """Keep the tokens whose surprise -log p is closest to the entropy (the expected
    surprise), adding them closest first until their probability exceeds `mass`.

    As transformers' TypicalLogitsWarper (min_tokens_to_keep = 1): sort by |-log p - H|,
    keep up to and including the first token where the running sum reaches `mass`."""
    check_typical_p(mass)
    if mass >= 1.0:
        return logits.clone()
    normalized = torch.log_softmax(logits, dim=-1)
    p = normalized.exp()
    entropy = -(normalized * p).nansum(-1, keepdim=True)  # removed tokens: -inf * 0 = nan, skipped
    shifted = torch.abs(-normalized - entropy)
    sorted_scores, sorted_index = torch.sort(shifted, descending=False)
    cumulative = logits.gather(-1, sorted_index).softmax(dim=-1).cumsum(dim=-1)
    last = (cumulative < mass).sum(dim=-1, keepdim=True).clamp(max=logits.shape[-1] - 1)
    remove_sorted = sorted_scores > sorted_scores.gather(-1, last)
    remove_sorted[..., :1] = False  # the most typical token always stays
    remove = remove_sorted.scatter(-1, sorted_index, remove_sorted)
    return logits.masked_fill(remove, NEG_INF)


# -- top-nσ -----------------------------------------------------------------------------------


def check_top_n_sigma(n) -> None:
    if finite_number("top_n_sigma", n) < 0:
        raise ValueError(f"`top_n_sigma` has to be a float >= 0 (0 switches it off), but is {n}")


def apply_top_n_sigma(logits: torch.Tensor, n: float) -> torch.Tensor:
    """Keep logits within n standard deviations of the largest: l >= max - n·σ.

    Mean and σ (population, divided by the count) over the logits still kept, as llama.cpp
    computes them. On logits divided by T the cut moves with them, so the kept set does not
    depend on a temperature applied before it (the paper's point)."""
    check_top_n_sigma(n)
    if n == 0:
        return logits.clone()
    kept = torch.isfinite(logits)
    values = torch.where(kept, logits, torch.zeros_like(logits)).double()
    count = kept.sum(dim=-1, keepdim=True).clamp(min=1)
    mean = values.sum(dim=-1, keepdim=True) / count
    spread = torch.where(kept, (values - mean) ** 2, torch.zeros_like(values)).sum(dim=-1, keepdim=True) / count
    cut = logits.double().amax(dim=-1, keepdim=True) - n * spread.sqrt()
    return logits.masked_fill(logits.double() < cut, NEG_INF)


# -- XTC --------------------------------------------------------------------------------------


def check_xtc(probability, threshold) -> None:
    if not 0 <= finite_number("xtc_probability", probability) <= 1:
        raise ValueError(f"`xtc_probability` has to be a float from 0 to 1 (0 switches it off), but is {probability}")
    if not 0 <= finite_number("xtc_threshold", threshold) <= 1:
        raise ValueError(f"`xtc_threshold` has to be a float from 0 to 1 (above 0.5 it never acts), but is {threshold}")


def apply_xtc(logits: torch.Tensor, probability: float, threshold: float, u: float | torch.Tensor) -> torch.Tensor:
    """Exclude top choices: when its own uniform draw `u` is <= `probability`, every token at
    or above `threshold` probability is removed except the least likely of them; it acts
    only when at least two tokens reach the threshold, so one likely token always stays.

    `u` is a recorded uniform from the run's generator (one per step, or one per row)."""
    check_xtc(probability, threshold)
    if probability == 0:
        return logits.clone()
    probs = logits.double().softmax(dim=-1)
    above = probs >= threshold
    enough = above.sum(dim=-1, keepdim=True) >= 2
    acts = torch.as_tensor(u, dtype=torch.float64).reshape(*logits.shape[:-1], 1) <= probability
    # The least likely token at or above the threshold stays.
    least = torch.where(above, probs, torch.full_like(probs, 2.0)).argmin(dim=-1, keepdim=True)
    remove = above & enough & acts
    remove = remove.scatter(-1, least, False)
    return logits.masked_fill(remove, NEG_INF)


def _xtc_rows(logits: torch.Tensor, settings, seen: torch.Tensor, context) -> torch.Tensor:
    """XTC on one step or on each row of a batch, each with its own recorded uniform."""
    rows = step_contexts("XTC", context)
    if any(c.xtc_u is None for c in rows):
        raise ValueError("The XTC stage needs the step's recorded uniform (`xtc_u`)")
    u = rows[0].xtc_u if logits.dim() == 1 else torch.tensor([c.xtc_u for c in rows], dtype=torch.float64)
    return apply_xtc(logits, settings.xtc_probability, settings.xtc_threshold, u)


XTC_STREAM_OFFSET = 2**32  # seeds are < 2**32: seed + this is a generator no run's draws use


def xtc_uniforms(seed: int, steps: int) -> torch.Tensor:
    """XTC's own uniform for steps 0, 1, ...: a second stream of the run's seed from a private
    generator (the global torch RNG is never touched), so a rerun, a fork and a second run
    with the same seed all get the same numbers, and the draw's u stream is left as it was."""
    return torch.rand(steps, generator=torch.Generator().manual_seed(seed + XTC_STREAM_OFFSET), dtype=torch.float64)


# -- mirostat v2 ------------------------------------------------------------------------------


def check_mirostat(tau, eta) -> None:
    if finite_number("mirostat_tau", tau) <= 0:
        raise ValueError(f"`mirostat_tau` has to be a float > 0 (target surprise in bits), but is {tau}")
    if not 0 < finite_number("mirostat_eta", eta) <= 1:
        raise ValueError(f"`mirostat_eta` has to be a float > 0 and <= 1 (learning rate), but is {eta}")


def _check_mirostat_knobs(settings) -> None:
    if not isinstance(settings.mirostat, bool):
        raise ValueError(f"`mirostat` has to be True or False, but is {settings.mirostat!r}")
    check_mirostat(settings.mirostat_tau, settings.mirostat_eta)


def mirostat_start(tau: float) -> float:
    """The running target mu before the first step: 2·tau (as llama.cpp and the paper)."""
    return 2.0 * tau


def mirostat_mu_for(settings, context: StepContext | None) -> float:
    """The step's mu: the context's, or the start when the run has none yet."""
    mu = None if context is None else context.mirostat_mu
    return mirostat_start(settings.mirostat_tau) if mu is None else mu


def apply_mirostat(logits: torch.Tensor, mu: float | torch.Tensor) -> torch.Tensor:
    """Mirostat v2's cut: drop every token whose surprise -log2 p is above mu (p over the
    tokens still kept); the most likely token always stays."""
    finite_number("mirostat mu", float(mu) if not torch.is_tensor(mu) else 0.0)
    log_p = torch.log_softmax(logits.double(), dim=-1) / math.log(2)
    mu = torch.as_tensor(mu, dtype=torch.float64).reshape(*logits.shape[:-1], 1)
    remove = -log_p > mu
    best = logits.argmax(dim=-1, keepdim=True)
    remove = remove.scatter(-1, best, False)
    return logits.masked_fill(remove, NEG_INF)


def _mirostat_rows(logits: torch.Tensor, settings, seen: torch.Tensor, context) -> torch.Tensor:
    """Mirostat's cut on one step or on each row of a batch, each at its own mu."""
    mu = [mirostat_mu_for(settings, c) for c in step_contexts("mirostat v2", context)]
    return apply_mirostat(logits, mu[0] if logits.dim() == 1 else torch.tensor(mu, dtype=torch.float64))


def mirostat_next_mu(mu: float, tau: float, eta: float, chosen_prob: float) -> float:
    """mu after a draw: mu - eta · (observed surprise - tau), the surprise -log2 p of the
    chosen token in the distribution it was drawn from."""
    check_mirostat(tau, eta)
    return mu - eta * (-math.log2(chosen_prob) - tau)


# -- the table --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stage:
    """One row of `STAGES`. `apply(logits, settings, seen, context)` returns new logits [..., vocab] (seen: [...,
    vocab] bool, the tokens already in each history; context: one StepContext, one per row, or None).
    `off(settings, vocab)` is True when these settings switch the stage off: a classic stage then hands on its input
    unchanged, any other is left out of the pipeline. `check(settings)` raises a ValueError naming the knob and its
    value."""

    name: str
    label: str  # as charts and sentences name it
    apply: Callable[..., torch.Tensor]
    off: Callable[..., bool]
    check: Callable[..., None]
    classic: bool = False  # one of the classic five: always in the pipeline and on the charts, even when off
    reweights: bool = False  # may change which token ranks above which (the others remove tokens or divide by T)
    keeps_top: bool = False  # keeps only tokens more likely than every token it removes: a prefix of display order
    stateful: bool = False  # reads the step's context (history, its own uniform, a running target)


# `vocab` in `off`: math.inf when no vocabulary is at hand (then top-k is off only at 0).
STAGES: dict[str, Stage] = {
    stage.name: stage
    for stage in (
        Stage(
            MASK,
            "format mask",
            apply=lambda logits, s, seen, context: apply_format_mask(logits, s.allowed_mask(logits.shape[-1])),
            off=lambda s, vocab: s.allowed_tokens is None,
            check=lambda s: None,  # the packed bits are read (and refused if not bytes) when the settings are made
        ),
        Stage(
            "penalty",
            "repetition penalty",
            apply=lambda logits, s, seen, context: apply_repetition_penalty(logits, seen, s.repetition_penalty),
            off=lambda s, vocab: s.repetition_penalty == 1.0,
            check=lambda s: check_repetition_penalty(s.repetition_penalty),
            classic=True,
            reweights=True,
        ),
        Stage(
            "dry",
            "DRY",
            apply=_dry_rows,
            off=lambda s, vocab: s.dry_multiplier == 0,
            check=lambda s: check_dry(s.dry_multiplier, s.dry_base, s.dry_allowed_length),
            reweights=True,
            stateful=True,
        ),
        Stage(
            "temperature",
            "temperature",
            apply=lambda logits, s, seen, context: apply_temperature(logits, s.temperature),
            off=lambda s, vocab: s.temperature == 1.0,  # x / 1.0 == x exactly
            check=lambda s: check_temperature(s.temperature),
            classic=True,
            keeps_top=True,  # T > 0 keeps every token in the same order; T = 0 keeps the top one
        ),
        Stage(
            "top_k",
            "top-k",
            apply=lambda logits, s, seen, context: apply_top_k(logits, s.top_k),
            off=lambda s, vocab: s.top_k == 0 or s.top_k >= vocab,
            check=lambda s: check_top_k(s.top_k),
            classic=True,
            keeps_top=True,
        ),
        Stage(
            "top_p",
            "top-p",
            apply=lambda logits, s, seen, context: fast_top_p(logits, s.top_p),
            off=lambda s, vocab: s.top_p >= 1.0,
            check=lambda s: check_top_p(s.top_p),
            classic=True,
            keeps_top=True,
        ),
        Stage(
            "min_p",
            "min-p",
            apply=lambda logits, s, seen, context: apply_min_p(logits, s.min_p),
            off=lambda s, vocab: s.min_p == 0,
            check=lambda s: check_min_p(s.min_p),
            classic=True,
            keeps_top=True,
        ),
        Stage(
            "typical_p",
            "typical-p",
            apply=lambda logits, s, seen, context: apply_typical_p(logits, s.typical_p),
            off=lambda s, vocab: s.typical_p >= 1.0,
            check=lambda s: check_typical_p(s.typical_p),
        ),
        Stage(
            "top_n_sigma",
            "top-nσ",
            apply=lambda logits, s, seen, context: apply_top_n_sigma(logits, s.top_n_sigma),
            off=lambda s, vocab: s.top_n_sigma == 0,
            check=lambda s: check_top_n_sigma(s.top_n_sigma),
            keeps_top=True,
        ),
        Stage(
            "xtc",
            "XTC",
            apply=_xtc_rows,
            off=lambda s, vocab: s.xtc_probability == 0,
            check=lambda s: check_xtc(s.xtc_probability, s.xtc_threshold),
            stateful=True,
        ),
        Stage(
            "mirostat",
            "mirostat v2",
            apply=_mirostat_rows,
            off=lambda s, vocab: not s.mirostat,
            check=_check_mirostat_knobs,
            keeps_top=True,
            stateful=True,
        ),
    )
}
