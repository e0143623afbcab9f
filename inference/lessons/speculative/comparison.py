"""A speculative run against plain decoding of the same text, on this machine: the page's metrics and timeline.

Plain decoding is timed on the same text: a prefill, then one decode pass per token (the target's own forward,
`TransformersForward`, as the speculative run's verify pass) plus the choice of its token under the app's pipeline
(`rule.choose_token`), feeding the tokens the speculative run produced. For greedy runs that is exactly what plain
greedy decoding would do (the tokens are equal, tested); for a sampled run it is what plain decoding would cost to write
that text.

Times are wall clock (`time.perf_counter`). On a shared machine one run can be stretched by other programs.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import MutableMapping
from dataclasses import dataclass

import torch

from inference.core.forward import TransformersForward
from inference.core.measuring import Timing, pass_timing
from inference.core.run import run_uniforms
from inference.lessons.speculative import summary as spec_summary
from inference.lessons.speculative.drafters import RUNS_A_MODEL
from inference.lessons.speculative.rule import choose_token
from inference.lessons.speculative.run import SpeculativeRun
from inference.sampling.pipeline import SamplingSettings, seen_mask

PLAIN_TIMER_KEY = "spec_plain_timer"  # where `compare` keeps a run's plain timing in a page's session state
COMPARISON_KEY = "spec_comparison"  # where `kept_comparison` keeps a run's comparison, and for which run and length


@dataclass(frozen=True)
class PlainTiming:
    forward_ms: list[float]  # one per token: the prefill, then one decode pass each
    step_ms: list[float]  # forward pass + the app's choice of the token

    @property
    def total_ms(self) -> float:
        return sum(self.step_ms)

    @property
    def decode_step(self) -> Timing | None:
        """Plain decoding's one-token decode passes as a `Timing` (median, middle half, what was timed); None with
        fewer than two."""
        what = (
            "one decode step of plain decoding on this text (transformers' forward on its cache, the context growing)"
        )
        return pass_timing(self.forward_ms[1:], what) if len(self.forward_ms) > 2 else None

    @property
    def decode_pass_ms(self) -> float:
        """Median one-token decode pass (`decode_step`'s): the unit the draft's cost ratio c and the verify cost are
        measured in; with fewer than two decode passes, the median of what there is (the prefill, one step)."""
        step = self.decode_step
        return step.median_ms if step is not None else statistics.median(self.forward_ms[1:] or self.forward_ms)

    @property
    def decode_ms(self) -> float:
        """Every step after the prefill (speculation's first round pays a prefill too)."""
        return sum(self.step_ms[1:])


class PlainTimer:
    """Plain decoding of a growing text, each token timed once: the page times only a round's new tokens on each Step
    (timing the whole text again every round made a Step's cost grow with the run), on the same cache. `extend` starts
    over when the tokens are not a continuation of those timed (Back, another run)."""

    def __init__(self, target, prompt_ids: list[int], settings: SamplingSettings):
        self.target, self.prompt_ids, self.settings = target, list(prompt_ids), settings
        self._start()

    def _start(self) -> None:
        self.forward = TransformersForward(self.target, None)
        self.seen = seen_mask(self.prompt_ids, self.forward.vocab_size)
        self.timed: list[int] = []
        self.forward_ms: list[float] = []
        self.step_ms: list[float] = []

    @torch.inference_mode()
    def extend(self, token_ids: list[int]) -> PlainTiming:
        """Times the tokens of `token_ids` not timed yet; returns the timing of all of them."""
        if token_ids[: len(self.timed)] != self.timed:
            self._start()
        for token in token_ids[len(self.timed) :]:
            feed = [self.timed[-1]] if self.timed else self.prompt_ids
            start = time.perf_counter()
            logits = self.forward.logits(feed)[0]
            self.forward_ms.append((time.perf_counter() - start) * 1000)
            choose_token(logits, self.settings, self.seen, 0.5)  # the choice's cost, as a round pays it
            self.step_ms.append((time.perf_counter() - start) * 1000)
            self.seen[token] = True
            self.timed.append(token)
        return PlainTiming(list(self.forward_ms), list(self.step_ms))


@torch.inference_mode()
def plain_decode(
    target, prompt_ids: list[int], new_tokens: int, settings: SamplingSettings, seed: int = 0
) -> list[int]:
    """Plain decoding at its leanest, the benchmark's baseline: the target's forward and the token chosen as a
    speculative round chooses its own (`rule.choose_token`), nothing recorded. A Generate trace also records every
    step for its page, which would flatter speculation's lean rounds. The trace's tokens, greedy and sampled
    (tested): step i draws with the seed's u_i, as a trace does."""
    forward = TransformersForward(target, None)
    seen = seen_mask(prompt_ids, forward.vocab_size)
    tokens, feed = [], list(prompt_ids)
    for u in run_uniforms(seed, new_tokens).tolist():
        token = choose_token(forward.logits(feed)[0], settings, seen, u)
        seen[token] = True
        tokens.append(token)
        feed = [token]
    return tokens


def time_plain(target, prompt_ids: list[int], token_ids: list[int], settings: SamplingSettings) -> PlainTiming:
    """Plain decoding's cost for exactly these tokens (see the module docstring)."""
    return PlainTimer(target, prompt_ids, settings).extend(token_ids)


@dataclass(frozen=True)
class Comparison:
    """One speculative run against plain decoding of its text."""

    summary: spec_summary.RunSummary
    plain: PlainTiming
    gamma: int
    draft_passes_ms: tuple[float, ...] = ()  # every one-token draft pass that sets c (summarise's rule)
    outside_passes_ms: tuple[float, ...] = ()  # per round after round 0: its time not in draft or verify passes

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

    def cost_ratio_range(self) -> tuple[float, float] | None:
        """c from the lower and upper quartile of the draft passes, over the median target pass: how far c moves within
        this run (None without a draft model, or with under 4 draft passes)."""
        if len(self.draft_passes_ms) < 4:
            return None
        low, _, high = statistics.quantiles(self.draft_passes_ms, n=4)
        return low / self.plain.decode_pass_ms, high / self.plain.decode_pass_ms

    def overhead_passes_per_round(self) -> float | None:
        """What a round spends outside the target's verify pass and the draft model's passes (prompt lookup's search,
        sampling, bookkeeping), in target decode passes: a cost the formula does not charge."""
        if not self.outside_passes_ms:
            return None
        return statistics.median(self.outside_passes_ms) / self.plain.decode_pass_ms

    def draw_passes_per_token(self) -> float:
        """Plain decoding's own cost beyond its pass, per token (the choice), in target decode passes."""
        draws = [step - forward for step, forward in zip(self.plain.step_ms[1:], self.plain.forward_ms[1:])]
        return statistics.median(draws) / self.plain.decode_pass_ms if draws else 0.0

    def predicted_with_overheads(self) -> float | None:
        """Leviathan et al.'s formula with every measured cost in it, in the same unit (one target decode pass): tokens
        per round from α, times plain decoding's cost per token (its pass and its choice), over a round's γ·c + verify
        + what it spends outside the model passes."""
        alpha, overhead = self.summary.acceptance_rate, self.overhead_passes_per_round()
        if alpha is None or overhead is None:
            return None
        rounds_cost = self.gamma * (self.cost_ratio or 0.0) + self.verify_cost + overhead
        return (
            spec_summary.expected_tokens_per_pass(alpha, self.gamma) * (1 + self.draw_passes_per_token()) / rounds_cost
        )

    def predicted_speedup(self, measured_verify: bool = False) -> float | None:
        alpha = self.summary.acceptance_rate
        if alpha is None:
            return None
        verify = self.verify_cost if measured_verify else 1.0
        return spec_summary.predicted_speedup(alpha, self.gamma, self.cost_ratio or 0.0, verify)


def compare(run: SpeculativeRun, settings: SamplingSettings, kept: MutableMapping | None = None) -> Comparison:
    """The run against plain decoding of its text. `kept` (a page's session state) keeps the plain timing of the
    tokens already timed for this run and these settings, so a page's rerun after a round times only its tokens."""
    later = run.rounds[1:] or run.rounds
    held = None if kept is None else kept.get(PLAIN_TIMER_KEY)
    if held is None or held[0] is not run or held[1].settings != settings:
        held = (run, PlainTimer(run.target, run.prompt_ids, settings))
        if kept is not None:
            kept[PLAIN_TIMER_KEY] = held
    plain = held[1].extend(run.generated_ids)
    return Comparison(
        spec_summary.summarise(run.rounds),
        plain,
        run.gamma,
        draft_passes_ms=tuple(spec_summary.draft_passes(run.rounds)),
        outside_passes_ms=tuple(
            r.round_ms - r.verify_ms - (sum(r.draft_ms) if r.drafter in RUNS_A_MODEL else 0.0) for r in later
        ),
    )


def kept_comparison(run, settings: SamplingSettings, kept: MutableMapping, guards=()) -> Comparison:
    """`compare`, made once per run and length of its text and kept in `kept` (a page's session state, which also
    keeps the plain timing it extends); each of `guards` (context manager factories) is held while it times."""
    made = kept.get(COMPARISON_KEY)
    if made is None or made[0] is not run or made[1] != len(run.generated_ids):
        with contextlib.ExitStack() as stack:
            for guard in guards:
                stack.enter_context(guard())
            made = kept[COMPARISON_KEY] = (run, len(run.generated_ids), compare(run, settings, kept))
    return made[2]
