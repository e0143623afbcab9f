"""Speculative decoding: a cheap drafter guesses several tokens, the target checks them all in one pass.

One round (Leviathan, Kalman & Matias 2023, "Fast Inference from Transformers via Speculative
Decoding"; Chen et al. 2023, "Accelerating Large Language Model Decoding with Speculative Sampling"):

    1. draft: the drafter proposes up to gamma tokens x_1..x_gamma. A draft model draws each from
       its own next-token distribution q_i under the app's sampling pipeline (`inference.sampling.pipeline`:
       penalty, temperature, top-k, top-p, min-p); prompt lookup copies what followed an earlier
       occurrence of the last few tokens (a point mass: q_i(x_i) = 1);
    2. verify: ONE forward pass of the target over [last token, x_1..x_gamma], on top of its KV
       cache, gives its distributions p_1..p_{gamma+1} under the same pipeline;
    3. accept: in order, x_i is kept when u_i <= p_i(x_i) / q_i(x_i) for a recorded uniform u_i.
       At the first rejection the target's token is drawn from normalise(max(0, p_i - q_i)) and the
       round ends; if every draft is kept, p_{gamma+1} gives one bonus token;
    4. crop: both KV caches drop every position after the accepted prefix.

Why the text's distribution is exactly the target's: a token x comes out of step 3 either as an
accepted draft, probability q(x) min(1, p(x)/q(x)) = min(p, q)(x), or from the residual, probability
(1 - sum min(p, q)) (p - q)+(x) / sum (p - q)+ = p(x) - min(p, q)(x); together p(x).
At temperature 0 p and q are one-hot on their argmax, so the rule is "accept while the argmax
agrees" and the output is plain greedy decoding's, token for token (no uniform is needed).

Every uniform comes from the run's private `torch.Generator` (the global RNG is never used), so a
seed replays a run exactly. Each round returns a `RoundRecord` with everything a page draws.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
import weakref
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from inference.core import small_matmul
from inference.core.fixed_cache import FixedCacheForward
from inference.core.forward import vocabulary_rows
from inference.core.paths import MODELS_DIR
from inference.core.run import Generation, check_run, check_seed
from inference.core.tokens import token_text
from inference.lessons.speculative.uniforms import UniformStream
from inference.sampling.pipeline import (
    SamplingSettings,
    apply_temperature,
    inverse_cdf_index,
    seen_mask,
    stage_logits,
    stages_switched_off,
)

BUNDLED_DRAFT_NAME = "storyteller-draft-1m"
BUNDLED_DRAFT_DIR = MODELS_DIR / BUNDLED_DRAFT_NAME
GAMMA_MIN, GAMMA_MAX = 1, 16
TOKENIZER_MISMATCH = "the draft must use the target's tokenizer"
RESIDUAL_TOP = 8  # tokens a record keeps of the residual distribution, for the page's chart
LOOKUP_MAX_NGRAM = 3  # prompt lookup tries the last 3, then 2 tokens
# ...and no fewer: a one-token match is mostly coincidence, and its draft still costs a verify pass of several tokens
# (2.6 one-token passes for 5 here). Measured with the bundled model, greedy, 128 tokens, AMD EPYC VM, 2026-12-02:
# against plain decoding 0.62x -> 0.79x on the bench's story prompt, 1.13x -> 1.20x on a repetitive one.
LOOKUP_MIN_NGRAM = 2

DRAFT_MODEL = "draft model"
PROMPT_LOOKUP = "prompt lookup"


class SpeculationError(ValueError):
    """A speculative run cannot start with these inputs; the message says why."""


# -- checks ------------------------------------------------------------------------------


def check_gamma(gamma) -> None:
    if isinstance(gamma, bool) or not isinstance(gamma, int) or not GAMMA_MIN <= gamma <= GAMMA_MAX:
        raise SpeculationError(
            f"`gamma` (tokens drafted per round) has to be an integer from {GAMMA_MIN} to {GAMMA_MAX}, but is {gamma!r}"
        )


def parameter_count(model) -> int:
    """Parameters, tied weights counted once."""
    seen, total = set(), 0
    for p in model.parameters():
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            total += p.numel()
    return total


# Each tokenizer's token -> id map, read once: `get_vocab` builds a new dict every call (~1 ms each for 4,096 tokens
# on the AMD EPYC VM, 2026-12-02), and every speculative run checks its pair. Dropped with the tokenizer; the size
# is kept with it, so a tokenizer that gained tokens is read again.
_VOCABULARIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _vocabulary(tokenizer) -> dict:
    try:
        size = len(tokenizer)
        kept = _VOCABULARIES.get(tokenizer)
    except TypeError:  # no size to tell a changed tokenizer by, or not weakly referable: read every time
        return tokenizer.get_vocab()
    if kept is None or kept[0] != size:
        kept = _VOCABULARIES[tokenizer] = (size, tokenizer.get_vocab())
    return kept[1]


def check_pair(target, target_tokenizer, draft, draft_tokenizer) -> None:
    """Refuse a draft that cannot serve this target, from configs and tokenizers alone (no
    forward pass runs): p and q must be over the same tokens, and the draft must be smaller."""
    target_rows, draft_rows = vocabulary_rows(target), vocabulary_rows(draft)
    if target_rows != draft_rows:
        raise SpeculationError(
            f"Refused before any forward pass: {TOKENIZER_MISMATCH} (the target scores {target_rows:,} tokens, "
            f"the draft {draft_rows:,})."
        )
    if target_tokenizer is not draft_tokenizer and _vocabulary(target_tokenizer) != _vocabulary(draft_tokenizer):
        raise SpeculationError(
            f"Refused before any forward pass: {TOKENIZER_MISMATCH} (both have {target_rows:,} tokens, "
            "but the tokens differ)."
        )
    target_params, draft_params = parameter_count(target), parameter_count(draft)
    if draft_params > target_params:
        raise SpeculationError(
            f"Refused: the draft ({draft_params:,} parameters) is larger than the target ({target_params:,}); "
            "a draft only pays off when it is much cheaper to run."
        )


# -- the pipeline, reused from inference.sampling.pipeline ------------------------------------------


def final_logits(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor) -> torch.Tensor:
    """Logits after the app's whole pipeline ([..., vocab]; removed tokens -inf): the last
    stage `stage_logits` returns is the one the draw samples from."""
    stages = stage_logits(logits, settings, seen)
    return stages[next(reversed(stages))]


def temperature_alone_acts(settings: SamplingSettings, vocab: int) -> bool:
    """Every stage of the pipeline but temperature is switched off (see `stages_switched_off`). A round asks ~4 times
    with the same settings, each right after a pass (~50 us cold on the Intel Xeon VM, 2026-12-03): the last answer is
    kept for those settings (frozen, so the same object gives the same answer), in one tuple, so threads never read
    half of one."""
    global _last_alone
    last = _last_alone
    if last is not None and last[0] is settings and last[1] == vocab:
        return last[2]
    alone = set(settings.pipeline) - {"temperature"} <= stages_switched_off(settings, vocab)
    _last_alone = (settings, vocab, alone)
    return alone


_last_alone: tuple[SamplingSettings, int, bool] | None = None


def only_temperature_acts(settings: SamplingSettings, vocab: int) -> bool:
    """Greedy with every other stage switched off: the pipeline's token is then the raw logits' argmax (temperature
    0 keeps exactly `argmax`, the first of tied maxima, and nothing else changes the logits), so a round or a plain
    step can take it without running the five stages (~0.3 ms a round)."""
    return settings.greedy and temperature_alone_acts(settings, vocab)


def greedy_tokens(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor) -> np.ndarray:
    """The greedy token of each row of [..., vocab] logits under the app's pipeline, as numpy ints. numpy's argmax
    takes the first of tied maxima, as torch's does, for a fraction of its cost: on the Intel Xeon VM (2026-12-02,
    one thread) 0.6 us for a [4096] row against 11 us, and 48 us for torch's [5, 4096] argmax by rows."""
    if only_temperature_acts(settings, logits.shape[-1]):
        return logits.float().numpy().argmax(axis=-1)
    return final_logits(logits, settings, seen).float().numpy().argmax(axis=-1)


def choose_token(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor, u: float) -> int:
    """One [vocab] row's token, as `sampling.draw` picks it with this u (tests), computed as lean as a speculative
    round computes its own: plain decoding's step in the benchmark and the page's timer."""
    if settings.greedy:
        return int(greedy_tokens(logits, settings, seen))
    return draw(logits, settings, seen, u)[1]


def check_settings(settings: SamplingSettings) -> None:
    """Speculative sampling needs p and q to be fixed functions of the text so far. Samplers with
    their own running state (a per-step random cut, a target that moves with each choice) are not."""
    if getattr(settings, "needs_context", False):
        raise SpeculationError(
            "Speculative sampling here runs the penalty, temperature, top-k, top-p, min-p and the other "
            "stateless filters; switch off DRY, XTC and mirostat (they carry state from step to step)."
        )


def final_probs(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor) -> torch.Tensor:
    """The distribution the app samples from, float64 over the full vocabulary. Where temperature is the only stage
    that acts (the others switched off: each would return a copy of its input), it is `logits / T` alone, as the
    temperature stage computes it: the same numbers without five copies of the rows (each ~20-50 us on the Intel Xeon
    VM right after a pass, 2026-12-02)."""
    if temperature_alone_acts(settings, logits.shape[-1]):
        return apply_temperature(logits, settings.temperature).double().softmax(dim=-1)
    return final_logits(logits, settings, seen).double().softmax(dim=-1)


def temperature_alone_in_c(settings: SamplingSettings, vocab: int) -> bool:
    """A sampled draw whose pipeline is temperature alone, with the C library built: `draws.c`'s
    `temperature_softmax` computes its distribution from float32 rows."""
    return not settings.greedy and temperature_alone_acts(settings, vocab) and small_matmul.available()


def temperature_in_c(logits: torch.Tensor, settings: SamplingSettings) -> bool:
    """`temperature_alone_in_c`, and these logits are float32."""
    return logits.dtype == torch.float32 and temperature_alone_in_c(settings, logits.shape[-1])


def probs_for_draw(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor) -> torch.Tensor:
    """The distribution a speculative round (p and q) or plain decoding's step draws from: `final_probs`, computed in
    C where temperature is the only stage acting (float64, equal to `final_probs` to float rounding, ~1e-15: see
    draws.c). Torch's temperature and softmax cost ~0.1 ms a row right after a pass on the Intel Xeon VM
    (2026-12-03), the C function a few microseconds."""
    if not temperature_in_c(logits, settings):
        return final_probs(logits, settings, seen)
    rows = logits.detach().contiguous()
    q = torch.empty(rows.shape, dtype=torch.float64)
    count = 1 if rows.dim() == 1 else rows.shape[0]
    small_matmul.library().temperature_softmax(
        rows.data_ptr(), count, rows.shape[-1], settings.temperature, q.data_ptr()
    )
    return q


def draw(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor, u: float) -> tuple[torch.Tensor, int]:
    """A sampled token from one [vocab] row of logits: (the distribution drawn from, the token), `sample_index` on
    `probs_for_draw`. Where that runs in C, the softmax and the head's draw are one call."""
    if not temperature_in_c(logits, settings) or logits.shape[-1] <= SHORT_ROW:
        probs = probs_for_draw(logits, settings, seen)
        return probs, sample_index(probs, u)
    row = logits.detach().contiguous()
    vocab = row.shape[-1]
    q, ids = torch.empty(vocab, dtype=torch.float64), torch.empty(2 * vocab, dtype=torch.int64)
    token = small_matmul.library().temperature_draw(
        row.data_ptr(), vocab, settings.temperature, float(u), q.data_ptr(), ids.data_ptr()
    )
    return q, (token if token >= 0 else sample_index(q, u))


# A draw first looks among the most likely tokens: every token with at least max / 2^shift of probability, for each
# shift in turn (a dozen tokens on a peaked row, a few hundred on a flat one), nearly always where u lands, for a
# fraction of the cost of ordering the whole vocabulary. Rows of at most SHORT_ROW tokens are ordered whole.
HEAD_SHIFTS = (8, 16, 24)  # draws.c's, the same
SHORT_ROW = 256


def sample_index(probs: torch.Tensor, u: float) -> int:
    """Inverse-CDF draw from a [vocab] distribution in display order (most likely first, ties by id), as
    the app's `sampling.draw` does, so one u always picks the same token on every page.

    The head, every token with at least max / 2^shift of probability, is exactly the start of that order (ties
    across the cut included: every token outside is less likely than every token inside), so when its running sum
    passes u the draw is decided there, with the same sums as over the whole order (numpy's cumsum adds left to
    right, as torch's does); otherwise the next shift's head, and at last the whole order. The head's draw runs in C
    (`inference/core/draws.c`, where the library is built): the same heads, the same sums added in the same order, so
    the same token (tests: against the numpy below, which runs where it is not built). Inside a round numpy's handful
    of operations cost ~0.37 ms a draw on the Intel Xeon VM (2026-12-02: each operation after a pass finds the caches
    cold), ~4.8 draws a sampled round."""
    p = probs.detach().numpy()
    if p.shape[-1] > SHORT_ROW:
        in_c = p.dtype == np.float64 and small_matmul.available()
        token = head_draw_in_c(p, u) if in_c else head_draw_numpy(p, u)
        if token >= 0:  # decided in the head, at a token of positive probability
            return token
    order = torch.sort(probs, descending=True, stable=True).indices
    return int(order[inverse_cdf_index(probs[order], u)])


def head_draw_numpy(p: np.ndarray, u: float) -> int:
    """`sample_index`'s head draw in numpy: the token, or -1 when no head's sum passes u."""
    top = p.max()
    if not top > 0:
        return -1
    for shift in HEAD_SHIFTS:
        head = np.flatnonzero(p >= np.ldexp(top, -shift))  # id order, so the stable sort breaks ties by id
        head = head[np.argsort(-p[head], kind="stable")]
        cumulative = np.cumsum(p[head])
        if cumulative[-1] > u:
            return int(head[np.searchsorted(cumulative, u, side="right")])
    return -1


def head_draw_in_c(p: np.ndarray, u: float) -> int:
    """The same draw through draws.c (float64 rows, the library built): the same token, or -1."""
    p = np.ascontiguousarray(p)
    ids = torch.empty(2 * len(p), dtype=torch.int64)
    return small_matmul.library().head_draw(p.ctypes.data, len(p), float(u), ids.data_ptr())


def raw_probabilities(logits: torch.Tensor, tokens: list[int]) -> list[float]:
    """Each row's probability of its token at temperature 1 ([n, vocab] logits, n tokens), in float64: exp(its logit
    - the row's log-sum-exp). Only the n tokens' probabilities are made, in numpy (torch's float64 softmax of the
    whole rows cost ~0.25 ms a call right after a pass on the Intel Xeon VM, 2026-12-02); called when the page draws
    a greedy round (`SpeculativeRun.with_t1_probabilities`), not in the round."""
    if not tokens:
        return []
    rows = logits[: len(tokens)].float().numpy().astype(np.float64)
    peak = rows.max(axis=1)
    log_total = np.log(np.exp(rows - peak[:, None]).sum(axis=1))
    picked = rows[np.arange(len(tokens)), tokens]
    return np.exp(picked - peak - log_total).tolist()


def running_seen(base: torch.Tensor, tokens: list[int], settings: SamplingSettings) -> torch.Tensor:
    """[len(tokens) + 1, vocab]: what the repetition penalty sees at each position of a round:
    the text so far, plus the drafted tokens before that position. At penalty 1 (off) no stage reads
    it: `base` itself ([vocab]) then, not a row per position built for nobody."""
    if settings.repetition_penalty == 1.0:
        return base
    rows = base.unsqueeze(0).repeat(len(tokens) + 1, 1)
    for i, token in enumerate(tokens):
        rows[i + 1 :, token] = True
    return rows


# -- the accept / reject rule: pure functions of p, q and uniforms ---------------------------


@dataclass(frozen=True)
class Verdict:
    accepted: int  # drafted tokens kept, from the first
    token_id: int  # the target's own token after them (from the residual, or the bonus)
    kind: str  # "residual" (a draft was rejected), "bonus" (all kept) or "target" (nothing was drafted)
    ratios: list[float]  # p/q of each token checked (inf where q = 0 cannot happen: drafts come from q)
    uniforms: list[float]  # u of each token checked
    final_u: float | None  # the uniform of the residual or bonus draw (None for greedy)
    residual: torch.Tensor | None  # [vocab] normalise(max(0, p - q)) at the rejection


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """normalise(max(0, p - q)): what is left of p once the draft's accepted share is taken."""
    residual = (p - q).clamp(min=0)
    total = residual.sum()
    return residual / total if total > 0 else p  # total is 0 only if p == q, where no rejection happens


def residual_draw(p: torch.Tensor, q: torch.Tensor, u: float) -> tuple[torch.Tensor, int]:
    """(the residual, the token drawn from it with u): `sample_index` on `residual_distribution`, in one C call
    where the library is built (draws.c: the same residual to float rounding, ~1e-15; torch's four operations on
    fresh rows cost ~0.1 ms right after a pass)."""
    rows_in_c = p.dtype == q.dtype == torch.float64 and p.shape[-1] > SHORT_ROW and small_matmul.available()
    if not rows_in_c:
        residual = residual_distribution(p, q)
        return residual, sample_index(residual, u)
    p, q = p.contiguous(), q.contiguous()
    residual, ids = torch.empty_like(p), torch.empty(2 * p.shape[-1], dtype=torch.int64)
    token = small_matmul.library().residual_draw(
        p.data_ptr(), q.data_ptr(), p.shape[-1], float(u), residual.data_ptr(), ids.data_ptr()
    )
    return residual, (token if token >= 0 else sample_index(residual, u))


def verify_sampled(
    p_rows: torch.Tensor, q_rows: torch.Tensor, drafted: list[int], uniform: Callable[[], float]
) -> Verdict:
    """Speculative sampling's accept/reject step. p_rows: [n + 1, vocab] target distributions,
    q_rows: [n, vocab] draft distributions the n drafted tokens were drawn from; `uniform()`
    gives the next recorded uniform number in [0, 1)."""
    ratios, uniforms = [], []
    p_values, q_values = p_rows.numpy(), q_rows.numpy()  # reading one number: numpy, not a torch op per number
    for i, token in enumerate(drafted):
        p, q = float(p_values[i, token]), float(q_values[i, token])
        ratio = p / q if q > 0 else math.inf
        u = uniform()
        ratios.append(ratio)
        uniforms.append(u)
        if u > ratio:  # rejected: the target's token comes from what p has beyond q
            final_u = uniform()
            residual, token = residual_draw(p_rows[i], q_rows[i], final_u)
            return Verdict(i, token, "residual", ratios, uniforms, final_u, residual)
    final_u = uniform()
    kind = "bonus" if drafted else "target"
    return Verdict(len(drafted), sample_index(p_rows[len(drafted)], final_u), kind, ratios, uniforms, final_u, None)


class CheckBuffers:
    """The memory `check_round`'s C call writes, made once a run and reused every round, with its addresses: after
    the verify pass each allocation, and each numpy `.ctypes` or torch view made, cost ~20-80 us (Intel Xeon VM,
    2026-12-03, caches cold). A round's p rows and residual are views of it, valid until the next round's check."""

    # where each output starts in `numbers` (float64) and `ints` (int64)
    P_DRAFTED, Q_DRAFTED, RATIOS, CHART_VALUES = 0, GAMMA_MAX, 2 * GAMMA_MAX, 3 * GAMMA_MAX  # chart: 3 a token
    DRAFTED, CHART_IDS, RESULT, SCRATCH = 0, GAMMA_MAX, GAMMA_MAX + RESIDUAL_TOP, GAMMA_MAX + RESIDUAL_TOP + 4

    def __init__(self, vocab: int):
        most = GAMMA_MAX + 1  # drafted tokens and the position after them
        self.vocab = vocab
        self.p = torch.empty(most, vocab, dtype=torch.float64)
        self.p_rows = [self.p[: n + 1] for n in range(most)]
        self.residual = torch.empty(vocab, dtype=torch.float64)
        self.numbers = np.empty(self.CHART_VALUES + 3 * RESIDUAL_TOP)
        self.ints = np.empty(self.SCRATCH + 2 * vocab, dtype=np.int64)
        self.number_items, self.int_items = memoryview(self.numbers), memoryview(self.ints)
        numbers, ints = self.numbers.ctypes.data, self.ints.ctypes.data
        self.drafted_address = ints + 8 * self.DRAFTED
        # verify_round's outputs, in its order
        self.addresses = (
            self.p.data_ptr(),
            numbers + 8 * self.P_DRAFTED,
            numbers + 8 * self.Q_DRAFTED,
            numbers + 8 * self.RATIOS,
            self.residual.data_ptr(),
            ints + 8 * self.CHART_IDS,
            numbers + 8 * self.CHART_VALUES,
            ints + 8 * self.SCRATCH,
            ints + 8 * self.RESULT,
        )


@dataclass(frozen=True)
class RoundCheck:
    """A sampled round's check: the target's distributions, the verdict, p and q of each drafted token, on a rejection
    the chart's tokens (id, p, q, residual), most likely in the residual first (None: not made in the check)."""

    p_rows: torch.Tensor | None  # None when greedy (p is one-hot on each position's argmax)
    verdict: Verdict
    p_drafted: list[float]
    q_drafted: list[float] | None  # None when greedy (a greedy draft's q is one-hot)
    chart: list[tuple[int, float, float, float]] | None


def check_round(
    logits: torch.Tensor,
    settings: SamplingSettings,
    seen: torch.Tensor,
    q_rows: torch.Tensor | None,
    drafted: list[int],
    uniforms: UniformStream,
    buffers: CheckBuffers | None = None,
) -> RoundCheck:
    """A sampled round's check: `verify_sampled` on `probs_for_draw(logits, ...)`. Where temperature is the only
    stage acting, one C call (draws.c `verify_round`) makes the same p rows, ratios, residual, draws and chart tokens
    (tests), reading its uniforms ahead from the stream and using as many as the Python check would. The Python check
    cost ~0.9 ms a round right after the verify pass on the Intel Xeon VM (2026-12-03), mostly each torch and numpy
    operation finding the caches cold."""
    n, vocab = len(drafted), logits.shape[-1]
    q_rows = q_rows if n else torch.zeros(0, vocab, dtype=torch.float64)
    in_c = temperature_in_c(logits, settings) and vocab > SHORT_ROW and q_rows.dtype == torch.float64
    if not in_c:
        p_rows = probs_for_draw(logits, settings, seen)
        verdict = verify_sampled(p_rows, q_rows, drafted, uniforms)
        picked = np.arange(n), drafted
        return RoundCheck(p_rows, verdict, p_rows.numpy()[picked].tolist(), q_rows.numpy()[picked].tolist(), None)
    b = buffers if buffers is not None and buffers.vocab == vocab else CheckBuffers(vocab)
    int_items, number_items = b.int_items, b.number_items
    for i, token in enumerate(drafted):
        int_items[b.DRAFTED + i] = token
    rows = logits if logits.is_contiguous() else logits.contiguous()
    q = q_rows if q_rows.is_contiguous() else q_rows.contiguous()
    small_matmul.library().verify_round(
        rows.data_ptr(), n, vocab, settings.temperature, q.data_ptr(), b.drafted_address, uniforms.ahead(n + 1),
        RESIDUAL_TOP, *b.addresses,
    )  # fmt: skip
    accepted, token, used, charted = int_items[b.RESULT : b.RESULT + 4].tolist()
    used_uniforms = uniforms.skip(used)
    final_u = used_uniforms.pop()
    rejected = accepted < n
    p_rows = b.p_rows[n]
    if token < 0:  # no head decided the draw: the whole order
        token = sample_index(b.residual if rejected else p_rows[n], final_u)
    kind = "residual" if rejected else ("bonus" if n else "target")
    ratios = number_items[b.RATIOS : b.RATIOS + accepted + rejected].tolist()
    verdict = Verdict(accepted, token, kind, ratios, used_uniforms, final_u, b.residual if rejected else None)
    chart = None
    if rejected:
        values = number_items[b.CHART_VALUES : b.CHART_VALUES + 3 * charted].tolist()
        ids = int_items[b.CHART_IDS : b.CHART_IDS + charted].tolist()
        chart = [(t, *values[3 * i : 3 * i + 3]) for i, t in enumerate(ids)]
    p_drafted = number_items[b.P_DRAFTED : b.P_DRAFTED + n].tolist()
    q_drafted = number_items[b.Q_DRAFTED : b.Q_DRAFTED + n].tolist()
    return RoundCheck(p_rows, verdict, p_drafted, q_drafted, chart)


def verify_greedy(target_choices: list[int], drafted: list[int]) -> Verdict:
    """Temperature 0: accept while the draft's token is the target's argmax; at the first
    disagreement (or after all) the target's argmax is the next token."""
    accepted = 0
    while accepted < len(drafted) and drafted[accepted] == target_choices[accepted]:
        accepted += 1
    kind = "residual" if accepted < len(drafted) else ("bonus" if drafted else "target")
    ratios = [1.0] * accepted + ([0.0] if accepted < len(drafted) else [])
    return Verdict(accepted, target_choices[accepted], kind, ratios, [], None, None)


# -- drafters ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DraftRequest:
    """What a drafter is given each round: the text so far, how many tokens it may draft, and how the run
    samples (its settings, the tokens the penalty sees, its next recorded uniform number)."""

    committed: list[int]
    gamma: int
    settings: SamplingSettings
    seen: torch.Tensor  # [vocab] bool: the tokens of the committed text
    uniform: Callable[[], float]
    stop_at_eos: bool = True


@dataclass
class Proposal:
    tokens: list[int]
    q_rows: torch.Tensor | None  # [n, vocab] float64 distributions the tokens were drawn from (None: greedy)
    # the draft model's logits each token was chosen from (none for prompt lookup), a row each or one [n, vocab]
    # tensor: a greedy round's T=1 probabilities are made from them only if the page draws that round
    # (`SpeculativeRun.with_t1_probabilities`)
    logit_rows: list[torch.Tensor] | torch.Tensor
    pass_ms: list[float]  # each draft forward pass
    note: str | None = None  # e.g. prompt lookup found no match


class ModelDrafter:
    """A small language model with its own KV cache. Its cache always holds a prefix of the
    committed text; each round first feeds what it has not seen (the prompt at first, then
    the target's last token, or two tokens after a fully accepted round)."""

    kind = DRAFT_MODEL

    def __init__(self, model, tokenizer, shortlist=None):
        self.model, self.tokenizer = model, tokenizer
        # One token a pass goes through the engine's lean decode step, exactly as plain decoding does; with a
        # shortlist (token ids), its output layer scores only those tokens and it never proposes another.
        self.shortlist = None if shortlist is None else list(shortlist)
        self.forward = FixedCacheForward(model, tokenizer, shortlist)
        self.context, self.eos_ids = self.forward.context, self.forward.eos_ids
        # the C round's memory, reused round after round: a proposal's rows are valid until the next proposal
        self._round_buffers = None

    @property
    def cache(self):
        return self.forward.cache

    @property
    def cache_tokens(self) -> int:
        return self.forward.cached_tokens

    def room(self, committed: int) -> int:
        """Most tokens it can draft after `committed` tokens without passing its context."""
        return self.context - committed + 1

    @torch.inference_mode()
    def propose(self, request: DraftRequest) -> Proposal:
        settings, gamma = request.settings, request.gamma
        tokens, q_rows, logit_rows, pass_ms = [], [], [], []
        unseen = request.committed[self.cache_tokens :]  # the prompt, or the last 1-2 committed tokens
        in_c = self._round_in_c(unseen, request)  # catch-up and round in one call
        if in_c is not None:
            return Proposal(in_c.tokens, in_c.q, in_c.logits, [seconds * 1000 for seconds in in_c.pass_seconds])
        seen = request.seen.clone()
        start = time.perf_counter()
        logits = self._catch_up(unseen)
        pass_ms.append((time.perf_counter() - start) * 1000)
        in_c = self._round_in_c(logits, request)  # the round in one call after a prompt's catch-up
        if in_c is not None:
            pass_ms.extend(seconds * 1000 for seconds in in_c.pass_seconds)
            return Proposal(in_c.tokens, in_c.q, in_c.logits, pass_ms)
        for i in range(gamma):
            if settings.greedy:
                token = int(greedy_tokens(logits, settings, seen))
            else:
                q, token = draw(logits, settings, seen, request.uniform())
                q_rows.append(q)
            logit_rows.append(logits)
            tokens.append(token)
            seen[token] = True
            if i == gamma - 1 or (request.stop_at_eos and token in self.eos_ids):
                break  # nothing after an end-of-text token is ever kept
            start = time.perf_counter()
            logits = self.forward.logits([token])[0]
            pass_ms.append((time.perf_counter() - start) * 1000)
        return Proposal(tokens, torch.stack(q_rows) if q_rows else None, logit_rows, pass_ms)

    def _round_in_c(self, start, request: DraftRequest):
        """The round in one C call (`FixedCacheForward.draft_round`) from `start` (the unseen tokens, or the first
        drafted token's logits after a catch-up) where the choice is the pipeline's without Python: greedy with every
        other stage off, or temperature alone acting (the rows are float32). The same tokens, logits and q as the
        loop in `propose`, with the same uniforms (tests): from the run's stream the call reads the next γ in place
        and the round uses one per token drafted, so a round stopped early by an end-of-text token leaves the rest
        for the check, as the loop does. None elsewhere."""
        settings = request.settings
        if isinstance(start, torch.Tensor):
            ready = self.forward.draft_round_ready(request.gamma)
        else:
            ready = 1 <= len(start) <= small_matmul.MAX_ROWS and self.forward.draft_round_ready(
                len(start) + request.gamma
            )
        if not ready:
            return None
        vocab = self.forward.vocab_size  # the C round's rows are float32 over the whole vocabulary
        if settings.greedy:
            if not only_temperature_acts(settings, vocab):
                return None
            uniforms, temperature = None, 0.0
        elif temperature_alone_in_c(settings, vocab):
            stream = request.uniform if isinstance(request.uniform, UniformStream) else None
            # a stream's next γ numbers, read in place: the round uses one per token drafted, as the loop does
            uniforms = stream.ahead(request.gamma) if stream else [request.uniform() for _ in range(request.gamma)]
            temperature = settings.temperature
        else:
            return None
        stops = self.eos_ids if request.stop_at_eos else ()
        buffers = self._round_buffers
        if buffers is None or buffers.gamma != request.gamma:
            buffers = self._round_buffers = self.forward.round_buffers(request.gamma)
        made = self.forward.draft_round(start, request.gamma, temperature, uniforms, stops, buffers)
        if made is not None and temperature > 0 and stream:
            stream.skip(len(made.tokens))
        return made

    def _catch_up(self, ids: list[int]) -> torch.Tensor:
        """Feed what the draft has not seen; the last position's logits. A prompt's first `MAX_ROWS` tokens go in
        one few-tokens pass, and the rest after them in fused passes of as many (`fast_decode.few_tokens_logits`
        does that on a cache that holds text): a draft's numbers need to be the draft's to float rounding, not bit
        for bit, since they only propose. The bundled draft reads a 24-token prompt in ~0.3 ms instead of ~1.2."""
        head, rest = ids[: small_matmul.MAX_ROWS], ids[small_matmul.MAX_ROWS :]
        logits = self.forward.few_tokens(head)
        return (self.forward.few_tokens(rest) if rest else logits)[0]

    def crop_to(self, length: int) -> None:
        self.forward.crop_to(length)


@dataclass(frozen=True)
class LookupMatch:
    ngram: int  # how many of the last tokens matched
    position: int  # where the earlier occurrence starts in the text
    continuation_start: int


def find_lookup(
    ids: list[int], max_ngram: int = LOOKUP_MAX_NGRAM, min_ngram: int = LOOKUP_MIN_NGRAM
) -> LookupMatch | None:
    """The most recent earlier occurrence of the text's last `max_ngram` tokens (then fewer, down to `min_ngram`)
    that has at least one token after it: transformers' prompt lookup and llama.cpp's lookup
    decoding search the same way (transformers takes the leftmost match; the latest one follows
    the text's most recent habit)."""
    # Searched as bytes (4 per token id) by `bytes.rfind`, in C: the scan in Python took ~0.1 ms a round at 150
    # tokens, most of a round that drafts nothing. A hit must start on a token's first byte.
    data = array("I", ids).tobytes()
    searched = (len(ids) - 1) * 4  # an occurrence needs a token after it: it ends before the last token
    for n in range(min(max_ngram, len(ids) - 1), min_ngram - 1, -1):
        tail, end = data[-4 * n :], searched
        while (found := data.rfind(tail, 0, end)) >= 0:
            if found % 4 == 0:
                return LookupMatch(n, found // 4, found // 4 + n)
            end = found + 4 * n - 1  # a hit across token boundaries: look further left
    return None


class PromptLookupDrafter:
    """Drafts by copying: find the last few tokens earlier in the text, propose what followed.
    No model, no cache, no cost beyond a search; useless on text that never repeats itself."""

    kind = PROMPT_LOOKUP
    cache_tokens = 0

    def __init__(self, vocab_size: int, max_ngram: int = LOOKUP_MAX_NGRAM):
        self.vocab_size, self.max_ngram = vocab_size, max_ngram
        self.last_match: LookupMatch | None = None

    def room(self, committed: int) -> int:
        return GAMMA_MAX

    def propose(self, request: DraftRequest) -> Proposal:
        committed = request.committed
        start = time.perf_counter()
        match = self.last_match = find_lookup(committed, self.max_ngram)
        if match is None:
            longest = min(self.max_ngram, len(committed))
            tried = f"{longest}" if longest <= LOOKUP_MIN_NGRAM else f"{longest} (down to {LOOKUP_MIN_NGRAM})"
            note = (
                f"Prompt lookup found no earlier occurrence of the last {tried} token(s): it drafted nothing, "
                "so this round is one plain decoding step."
            )
            return Proposal([], None, [], [(time.perf_counter() - start) * 1000], note)
        tokens = committed[match.continuation_start : match.continuation_start + request.gamma]
        q_rows = None
        if not request.settings.greedy:  # a copied token is certain: q is a point mass on it
            q_rows = torch.zeros(len(tokens), self.vocab_size, dtype=torch.float64)
            q_rows[torch.arange(len(tokens)), torch.tensor(tokens)] = 1.0
        note = f"Copied what followed the last {match.ngram} token(s) at position {match.position}."
        return Proposal(tokens, q_rows, [], [(time.perf_counter() - start) * 1000], note)

    def crop_to(self, length: int) -> None:
        pass


# -- one round's record ------------------------------------------------------------------------


@dataclass(frozen=True)
class DraftCheck:
    """One drafted token and its test."""

    position: int  # 0-based within the round
    token_id: int
    text: str
    q: float  # draft probability in the final distribution (1 for a copied token; 1 when greedy)
    p: float  # target probability in the final distribution
    # The models' probabilities at temperature 1, which a greedy round's chart shows (its rule only asks for the top
    # token): None in the round's own record, filled in only for a greedy round the page draws
    # (`SpeculativeRun.with_t1_probabilities`); q_raw stays None for prompt lookup.
    q_raw: float | None
    p_raw: float | None
    ratio: float | None  # p / q (None if never checked)
    u: float | None  # the uniform it was tested with (None when greedy or never checked)
    status: str  # "accepted", "rejected" or "unchecked" (after a rejection)


@dataclass(frozen=True)
class RoundRecord:
    index: int
    drafter: str
    gamma: int  # asked for
    context_tokens: int  # committed tokens before the round
    checks: list[DraftCheck]
    accepted: int
    token_id: int  # the target's token after the accepted drafts
    token_text: str
    token_kind: str  # "residual", "bonus" or "target"
    token_u: float | None
    residual_top: list[tuple[int, str, float, float, float]]  # (id, text, p, q, residual) on a rejection
    new_tokens: list[int]  # accepted drafts + the target's token (cut after an end-of-text token)
    draft_ms: list[float]
    verify_ms: float
    verify_positions: int  # next-token distributions the verify pass scored
    round_ms: float  # the whole round: drafting, verifying, sampling, bookkeeping
    target_cache_tokens: int
    draft_cache_tokens: int
    note: str | None = None
    greedy: bool = False  # temperature 0: the round kept drafts while they were the target's top token

    @property
    def drafted(self) -> int:
        return len(self.checks)

    @property
    def checked(self) -> int:
        return sum(c.status != "unchecked" for c in self.checks)


def top_tokens(values: torch.Tensor, k: int) -> list[int]:
    """The k largest of a [vocab] row's values, largest first: draws.c's one pass where the library is built (ties
    by id), torch's topk elsewhere (ties in its own order)."""
    k = min(k, values.shape[-1])
    if values.dtype != torch.float64 or not small_matmul.available():
        return torch.topk(values, k).indices.tolist()
    values, ids = values.contiguous(), torch.empty(k, dtype=torch.int64)
    count = small_matmul.library().top_tokens(values.data_ptr(), values.shape[-1], k, ids.data_ptr())
    return ids[:count].tolist()


def _residual_top(residual: torch.Tensor, p: torch.Tensor, q: torch.Tensor, tokenizer) -> list:
    """The residual's most likely tokens, with p and q beside them, for the page's chart: the RESIDUAL_TOP most likely
    under each of the three, those of positive probability, most likely in the residual first. The candidates by
    `top_tokens`, every number read through numpy: reading single numbers from torch cost ~0.3 ms a rejection on the
    Intel Xeon VM (2026-12-02), and numpy's argpartition more than torch's topk right after a pass."""
    tensors = (residual, p, q)
    rows = [values.numpy() for values in tensors]
    picks = []
    for values, row in zip(tensors, rows):
        for token in top_tokens(values, RESIDUAL_TOP):
            if token not in picks and row[token] > 0:
                picks.append(token)
    r, pp, qq = (row[picks].tolist() for row in rows)
    ranked = sorted(zip(picks, r, pp, qq), key=lambda kept: (-kept[1], -kept[2]))[:RESIDUAL_TOP]
    return [(t, token_text(tokenizer, t), p_t, q_t, r_t) for t, r_t, p_t, q_t in ranked]


# -- the run -------------------------------------------------------------------------------


@dataclass
class SpeculativeRun(Generation):
    """One speculative generation: a prompt, a target, a drafter, and the records of its rounds.

    Invariant between rounds: the target's cache holds every committed token but the last (it
    is fed at the start of the next verify pass), the drafter's cache a prefix of that."""

    target: object
    tokenizer: object
    drafter: object
    prompt_ids: list[int]
    max_new_tokens: int
    gamma: int = 4
    seed: int = 0
    stop_at_eos: bool = True
    rounds: list[RoundRecord] = field(default_factory=list)
    generated_ids: list[int] = field(default_factory=list)
    stop_reason: str | None = None

    def __post_init__(self):
        check_gamma(self.gamma)
        check_seed(self.seed)
        if isinstance(self.drafter, ModelDrafter):
            check_pair(self.target, self.tokenizer, self.drafter.model, self.drafter.tokenizer)
        forward = self.forward = FixedCacheForward(self.target, self.tokenizer)
        self.context, self.vocab_size, self.eos_ids = forward.context, forward.vocab_size, forward.eos_ids
        check_run(self.prompt_ids, self.context, self.max_new_tokens, SpeculationError)
        self._uniforms = UniformStream(self.seed)
        self._seen = seen_mask(self.prompt_ids, self.vocab_size)
        self._seen_items = memoryview(self._seen.numpy())  # the same memory
        self._check_buffers: CheckBuffers | None = None
        self._t1_rows = None  # see `with_t1_probabilities`
        self._t1_made: dict[int, tuple[list, list]] = {}

    @property
    def cache(self):
        """The target's KV cache."""
        return self.forward.cache

    @torch.inference_mode()
    def step(self, settings: SamplingSettings) -> RoundRecord | None:
        """One round: draft, verify in one target pass, accept or resample, crop. None once stopped."""
        if self.finished:
            return None
        check_settings(settings)
        round_start = time.perf_counter()
        committed = self.all_ids
        left = self.max_new_tokens - len(self.generated_ids)
        gamma = min(self.gamma, left - 1, self.context - len(committed), self.drafter.room(len(committed)))
        note = None
        if gamma < self.gamma:
            why = f"the run may add only {left} more" if gamma == left - 1 else "the context is nearly full"
            note = f"Drafted at most {max(gamma, 0)} token(s): {why}."
        if gamma > 0:
            proposal = self.drafter.propose(
                DraftRequest(committed, gamma, settings, self._seen, self._uniforms, self.stop_at_eos)
            )
        else:
            proposal = Proposal([], None, [], [])
        note = proposal.note or note
        drafted = proposal.tokens

        # 2. verify: one target pass scores every drafted position and the one after them.
        feed = committed[self.forward.cached_tokens :] + drafted
        verify_start = time.perf_counter()
        logits = self.forward.few_tokens(feed, keep=len(drafted) + 1)  # [n + 1, vocab]
        verify_ms = (time.perf_counter() - verify_start) * 1000

        # 3. accept or reject, under the same pipeline for p as for q.
        seen_rows = running_seen(self._seen, drafted, settings)
        if settings.greedy:  # p is one-hot on each position's argmax: kept as the argmaxes alone
            choices = greedy_tokens(logits, settings, seen_rows).tolist()
            p_drafted = [1.0 if choice == token else 0.0 for choice, token in zip(choices, drafted)]
            check = RoundCheck(None, verify_greedy(choices, drafted), p_drafted, None, None)
        else:
            if self._check_buffers is None:
                self._check_buffers = CheckBuffers(self.vocab_size)
            check = check_round(
                logits, settings, seen_rows, proposal.q_rows, drafted, self._uniforms, self._check_buffers
            )
        verdict = check.verdict
        new_tokens = drafted[: verdict.accepted] + [verdict.token_id]
        if self.stop_at_eos:
            for i, token in enumerate(new_tokens):
                if token in self.eos_ids:
                    new_tokens = new_tokens[: i + 1]
                    break

        # 4. commit, then crop both caches to the accepted prefix (all committed tokens but the last).
        self.generated_ids.extend(new_tokens)
        for token in new_tokens:  # through the buffer: torch's indexing cost ~0.25 ms right after a pass
            self._seen_items[token] = True
        prefix = len(self.all_ids) - 1
        self.forward.crop_to(prefix)
        self.drafter.crop_to(prefix)
        record = self._record(proposal, check, new_tokens, verify_ms, round_start, note, settings.greedy)
        # the rows a greedy round's T=1 probabilities come from, kept for the newest round only (no copy: the draft's
        # are views of its round memory, which the next round's proposal rewrites; nothing reads this reference from
        # then until the end of that round replaces it): the page draws it after a Step; an older one is recomputed
        self._t1_rows = (record.index, logits, proposal.logit_rows) if settings.greedy and drafted else None
        self.rounds.append(record)
        self.stop_reason = self._reason_to_stop()
        return record

    def _record(self, proposal, check: RoundCheck, new_tokens, verify_ms, round_start, note, greedy):
        """The round's record: only the numbers the page shows, each computed once here from what the round
        already holds (the check's p and q of each drafted token, and the residual's chart where the check made it).
        Not the T=1 probabilities: see `with_t1_probabilities`."""
        drafted, verdict = proposal.tokens, check.verdict
        checks = []
        for i, token in enumerate(drafted):
            checked = i <= verdict.accepted and i < len(verdict.ratios)
            status = "accepted" if i < verdict.accepted else ("rejected" if checked else "unchecked")
            p = check.p_drafted[i]
            q = 1.0 if check.q_drafted is None else check.q_drafted[i]  # greedy: one-hot q
            checks.append(
                DraftCheck(
                    position=i,
                    token_id=token,
                    text=token_text(self.tokenizer, token),
                    q=q,
                    p=p,
                    q_raw=None,
                    p_raw=None,
                    ratio=verdict.ratios[i] if checked else None,
                    u=verdict.uniforms[i] if checked and verdict.uniforms else None,
                    status=status,
                )
            )
        residual_top = []
        if check.chart is not None:
            residual_top = [(t, token_text(self.tokenizer, t), p_t, q_t, r_t) for t, p_t, q_t, r_t in check.chart]
        elif verdict.residual is not None:
            i = verdict.accepted
            residual_top = _residual_top(verdict.residual, check.p_rows[i], proposal.q_rows[i], self.tokenizer)
        return RoundRecord(
            index=len(self.rounds),
            drafter=self.drafter.kind,
            gamma=self.gamma,
            context_tokens=len(self.all_ids) - len(new_tokens),
            checks=checks,
            accepted=verdict.accepted,
            token_id=verdict.token_id,
            token_text=token_text(self.tokenizer, verdict.token_id),
            token_kind=verdict.kind,
            token_u=verdict.final_u,
            residual_top=residual_top,
            new_tokens=new_tokens,
            draft_ms=proposal.pass_ms,
            verify_ms=verify_ms,
            verify_positions=len(drafted) + 1,
            round_ms=(time.perf_counter() - round_start) * 1000,
            target_cache_tokens=self.forward.cached_tokens,
            draft_cache_tokens=self.drafter.cache_tokens,
            note=note,
            greedy=greedy,
        )

    @torch.inference_mode()
    def with_t1_probabilities(self, record: RoundRecord) -> RoundRecord:
        """The record with each drafted token's probability at temperature 1 under both models filled in, which a
        greedy round's chart shows: computed when the page draws the round, not in the round (two float64 softmaxes
        of its rows cost ~0.5 ms a round on the Intel Xeon VM, 2026-12-02, ~10% of a round). The newest round uses
        its passes' own logits; an older one runs each model's forward (transformers') over the text up to it,
        the same logits to float rounding. Kept per round once made. Sampled rounds are returned as they are."""
        if not record.greedy or not record.checks:
            return record
        made = self._t1_made.get(record.index)
        if made is None:
            drafted = [c.token_id for c in record.checks]
            kept = self._t1_rows
            if kept is not None and kept[0] == record.index:
                p_raw = raw_probabilities(kept[1], drafted)
                draft_rows = kept[2] if isinstance(kept[2], torch.Tensor) else torch.stack(kept[2])
                q_raw = raw_probabilities(draft_rows, drafted) if len(kept[2]) else [None] * len(drafted)
            else:
                text = (self.prompt_ids + self.generated_ids)[: record.context_tokens] + drafted
                first = record.context_tokens - 1  # the position whose logits predict the first drafted token

                def rows(model, shortlist=None):
                    logits = model(input_ids=torch.tensor([text])).logits[0, first : first + len(drafted)].float()
                    if shortlist is not None:  # the draft scored only these: the rest -inf, as in its passes
                        logits = torch.full_like(logits, -torch.inf).index_copy_(
                            1, torch.tensor(shortlist), logits[:, shortlist]
                        )
                    return raw_probabilities(logits, drafted)

                p_raw = rows(self.target)
                model_drafter = isinstance(self.drafter, ModelDrafter)
                q_raw = rows(self.drafter.model, self.drafter.shortlist) if model_drafter else [None] * len(drafted)
            made = self._t1_made[record.index] = (p_raw, q_raw)
        p_raw, q_raw = made
        checks = [dataclasses.replace(c, p_raw=p, q_raw=q) for c, p, q in zip(record.checks, p_raw, q_raw)]
        return dataclasses.replace(record, checks=checks)

    def run(self, settings: SamplingSettings, max_rounds: int | None = None) -> Iterator[RoundRecord]:
        """Round after round until a stop (EOS, max new tokens, context) or `max_rounds`, yielding each record."""
        return self._steps(settings, max_rounds)

    def to_frame(self) -> pd.DataFrame:
        """One row per round, for a table or a CSV."""
        return pd.DataFrame(
            [
                {
                    "round": r.index,
                    "drafted": r.drafted,
                    "accepted": r.accepted,
                    "target_token": r.token_text,
                    "how": r.token_kind,
                    "new_tokens": len(r.new_tokens),
                    "draft_ms": sum(r.draft_ms),
                    "draft_passes": len(r.draft_ms),
                    "verify_ms": r.verify_ms,
                    "round_ms": r.round_ms,
                }
                for r in self.rounds
            ]
        )


def new_run(
    target,
    tokenizer,
    drafter,
    prompt_ids: list[int],
    max_new_tokens: int,
    gamma: int = 4,
    seed: int = 0,
    stop_at_eos: bool = True,
) -> SpeculativeRun:
    return SpeculativeRun(
        target=target,
        tokenizer=tokenizer,
        drafter=drafter,
        prompt_ids=list(prompt_ids),
        max_new_tokens=max_new_tokens,
        gamma=gamma,
        seed=seed,
        stop_at_eos=stop_at_eos,
    )


# -- what a run says ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunSummary:
    rounds: int
    new_tokens: int
    drafted: int
    checked: int
    accepted: int
    draft_ms: float
    verify_ms: float
    total_ms: float
    draft_pass_ms: float | None  # median one-token draft pass (None: no draft model)
    verify_pass_ms: float  # median verify pass after the first round (whose pass also reads the prompt)
    verify_read_prompt: bool = False  # only round 0 ran: `verify_pass_ms` is its pass, the prompt's tokens included

    @property
    def acceptance_rate(self) -> float | None:
        """alpha: accepted / checked. Drafts after a rejection are never checked, so this (the
        maximum-likelihood estimate of a per-token acceptance chance) is what the theory's alpha is."""
        return self.accepted / self.checked if self.checked else None

    @property
    def tokens_per_target_pass(self) -> float:
        return self.new_tokens / self.rounds if self.rounds else 0.0

    @property
    def ms_per_token(self) -> float:
        return self.total_ms / self.new_tokens if self.new_tokens else float("nan")


def draft_passes(rounds: list[RoundRecord]) -> list[float]:
    """The draft model's one-token passes, in ms: round 0's first pass reads the whole prompt and is left out;
    every later pass feeds one token (two after a fully accepted round). Empty for prompt lookup."""
    return [ms for r in rounds if r.drafter == DRAFT_MODEL for i, ms in enumerate(r.draft_ms) if r.index > 0 or i > 0]


def summarise(rounds: list[RoundRecord]) -> RunSummary:
    draft_passes_ms = draft_passes(rounds)
    verify = [r.verify_ms for r in rounds[1:]] or [r.verify_ms for r in rounds] or [float("nan")]
    return RunSummary(
        rounds=len(rounds),
        new_tokens=sum(len(r.new_tokens) for r in rounds),
        drafted=sum(r.drafted for r in rounds),
        checked=sum(r.checked for r in rounds),
        accepted=sum(r.accepted for r in rounds),
        draft_ms=sum(sum(r.draft_ms) for r in rounds),
        verify_ms=sum(r.verify_ms for r in rounds),
        total_ms=sum(r.round_ms for r in rounds),
        draft_pass_ms=statistics.median(draft_passes_ms) if draft_passes_ms else None,
        verify_pass_ms=statistics.median(verify),
        verify_read_prompt=len(rounds) == 1,
    )


# -- theory ------------------------------------------------------------------------------------


def expected_tokens_per_pass(alpha: float, gamma: int) -> float:
    """Expected tokens one round (one target pass) yields when each draft is accepted with
    chance alpha independently: 1 + alpha + ... + alpha^gamma = (1 - alpha^(gamma+1)) / (1 - alpha)."""
    if not 0 <= alpha <= 1:
        raise ValueError(f"`alpha` has to be from 0 to 1, but is {alpha}")
    if alpha == 1:
        return gamma + 1.0
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def predicted_speedup(alpha: float, gamma: int, cost_ratio: float, verify_cost: float = 1.0) -> float:
    """Leviathan et al.'s speed-up over plain decoding: tokens per round divided by the round's
    cost in target decode steps, gamma draft passes at c each plus the verify pass (1 in the paper,
    which assumes scoring gamma + 1 positions costs one step; pass the measured ratio instead)."""
    return expected_tokens_per_pass(alpha, gamma) / (gamma * cost_ratio + verify_cost)


def break_even_alpha(gamma: int, cost_ratio: float, verify_cost: float = 1.0) -> float | None:
    """The smallest alpha at which speculation stops losing (predicted speed-up 1), or None if
    even alpha = 1 loses."""
    if predicted_speedup(1.0, gamma, cost_ratio, verify_cost) < 1:
        return None
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if predicted_speedup(mid, gamma, cost_ratio, verify_cost) < 1 else (low, mid)
    return high
