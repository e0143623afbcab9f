"""The samplers local LLM tools added after top-k/top-p/min-p, as pure stages.

Each takes logits [..., vocab] (removed tokens are -inf) and returns a NEW tensor, like the
stages in `inference.sampling.pipeline`. Definitions, with where they come from:

- typical-p: Meister et al. 2023, "Locally Typical Sampling"; arithmetic as transformers'
  `TypicalLogitsWarper` (our oracle in tests).
- top-nσ: Tang et al. 2024, "Top-nσ: Not All Logits Are You Need"; as llama.cpp's
  `llama_sampler_top_n_sigma_apply` (src/llama-sampling.cpp): keep logits >= max - n·σ,
  σ the population standard deviation of the logits still kept.
- XTC, "exclude top choices" (oobabooga text-generation-webui PR 6335; llama.cpp
  `llama_sample_xtc_apply`): with probability `probability`, of the tokens whose
  probability is >= `threshold`, remove all but the least likely one.
- DRY, "don't repeat yourself" (koboldcpp PR 982 by pi6am; llama.cpp `llama_sampler_dry_apply`):
  a token that would extend a sequence already seen in the context, repeated n >= allowed
  tokens long, loses multiplier · base^(n - allowed) from its logit. Sequence breakers stop
  the look-back.
- mirostat v2: Basu et al. 2021, "Mirostat: A Neural Text Decoding Algorithm that Directly
  Controls Perplexity"; as llama.cpp `llama_sampler_mirostat_v2_apply`: drop tokens whose
  surprise -log2 p exceeds mu; after the draw, mu -= eta · (observed surprise - tau).
"""

from __future__ import annotations

import math

import torch

NEG_INF = float("-inf")
LLAMA_CPP_DRY_BREAKERS = ("\n", ":", '"', "*")  # llama.cpp's default `--dry-sequence-breaker`s


def finite_number(name: str, value) -> float:
    """`value` as a float, or a ValueError naming `name` (booleans, non-numbers, nan and inf refused): every
    sampler knob's check, here and in `inference.sampling.pipeline`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"`{name}` has to be a finite number, but is {value!r}")
    return float(value)


# -- argument checks: each names the argument and the value it got -------------------------


def check_typical_p(p) -> None:
    if not 0 < finite_number("typical_p", p) <= 1:
        raise ValueError(f"`typical_p` has to be a float > 0 and <= 1 (1 switches it off), but is {p}")


def check_top_n_sigma(n) -> None:
    if finite_number("top_n_sigma", n) < 0:
        raise ValueError(f"`top_n_sigma` has to be a float >= 0 (0 switches it off), but is {n}")


def check_xtc(probability, threshold) -> None:
    if not 0 <= finite_number("xtc_probability", probability) <= 1:
        raise ValueError(f"`xtc_probability` has to be a float from 0 to 1 (0 switches it off), but is {probability}")
    if not 0 <= finite_number("xtc_threshold", threshold) <= 1:
        raise ValueError(f"`xtc_threshold` has to be a float from 0 to 1 (above 0.5 it never acts), but is {threshold}")


def check_dry(multiplier, base, allowed_length) -> None:
    if finite_number("dry_multiplier", multiplier) < 0:
        raise ValueError(f"`dry_multiplier` has to be a float >= 0 (0 switches it off), but is {multiplier}")
    if finite_number("dry_base", base) < 1:
        raise ValueError(f"`dry_base` has to be a float >= 1, but is {base}")
    if isinstance(allowed_length, bool) or not isinstance(allowed_length, int) or allowed_length < 1:
        raise ValueError(f"`dry_allowed_length` has to be an integer >= 1, but is {allowed_length!r}")


def check_mirostat(tau, eta) -> None:
    if finite_number("mirostat_tau", tau) <= 0:
        raise ValueError(f"`mirostat_tau` has to be a float > 0 (target surprise in bits), but is {tau}")
    if not 0 < finite_number("mirostat_eta", eta) <= 1:
        raise ValueError(f"`mirostat_eta` has to be a float > 0 and <= 1 (learning rate), but is {eta}")


# -- typical-p -----------------------------------------------------------------------------


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


# -- top-nσ --------------------------------------------------------------------------------


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


# -- XTC ------------------------------------------------------------------------------------


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


# -- DRY ------------------------------------------------------------------------------------


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


def dry_breaker_ids(tokenizer, breakers: tuple[str, ...]) -> frozenset[int]:
    """Token ids whose text contains any breaker string (so "\\n\\n" breaks like "\\n")."""
    if not breakers:
        return frozenset()
    ids = range(len(tokenizer))
    texts = tokenizer.batch_decode([[i] for i in ids])
    return frozenset(i for i, text in zip(ids, texts) if any(b in text for b in breakers))


# -- the random numbers XTC draws -----------------------------------------------------------------

XTC_STREAM_OFFSET = 2**32  # seeds are < 2**32: seed + this is a generator no run's draws use


def xtc_uniforms(seed: int, steps: int) -> torch.Tensor:
    """XTC's own uniform for steps 0, 1, ...: a second stream of the run's seed from a private
    generator (the global torch RNG is never touched), so a rerun, a fork and a second run
    with the same seed all get the same numbers, and the draw's u stream is left as it was."""
    return torch.rand(steps, generator=torch.Generator().manual_seed(seed + XTC_STREAM_OFFSET), dtype=torch.float64)


# -- mirostat v2 ---------------------------------------------------------------------------


def mirostat_start(tau: float) -> float:
    """The running target mu before the first step: 2·tau (as llama.cpp and the paper)."""
    return 2.0 * tau


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


def mirostat_next_mu(mu: float, tau: float, eta: float, chosen_prob: float) -> float:
    """mu after a draw: mu - eta · (observed surprise - tau), the surprise -log2 p of the
    chosen token in the distribution it was drawn from."""
    check_mirostat(tau, eta)
    return mu - eta * (-math.log2(chosen_prob) - tau)
