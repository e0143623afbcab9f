"""Timing speculative decoding against plain decoding on this machine: the page's timeline and
sweep, and the benchmark's figures.

Plain decoding is timed on the same text: a prefill, then one decode pass per token (the engine's
own lean step) plus the choice of its token as a speculative round makes it (`spec.choose_token`),
feeding the tokens the speculative run produced. For greedy runs that is exactly what plain greedy
decoding would do (the tokens are equal, tested); for a sampled run it is what plain decoding would
cost to write that text.

Times are wall clock (`time.perf_counter`). On a shared machine one run can be stretched by
other programs, so the benchmark alternates the contenders and takes medians.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass

import pandas as pd
import torch

from inference.core import fast_decode
from inference.core.fixed_cache import FixedCacheForward
from inference.core.limits import Limits
from inference.core.loader import load_model
from inference.core.measuring import GREEDY, Progress, run_greedy
from inference.core.routing import BUNDLED_MOE_DIR
from inference.core.run import run_uniforms, warm_up
from inference.lessons.speculative import drafting, shortlist
from inference.lessons.speculative import run as spec
from inference.sampling.pipeline import SamplingSettings, seen_mask

SWEEP_GAMMAS = tuple(range(1, 9))
SWEEP_TEMPERATURES = (0.0, 0.8, 1.2)
SWEEP_NEW_TOKENS = 48
SAMPLED = SamplingSettings(temperature=0.8)  # the benchmark's sampled pair: temperature the only knob on
# The sampled pair's seeds: each contender decodes the prompt once per seed, and its time is the sum. One seed's 128
# tokens is one draw of the acceptance rate: over 16 seeds the bundled pair's ranged 0.59-0.76 (standard deviation
# 0.04; Intel Xeon VM, 2026-12-03), so a one-seed ratio moved with the seed as much as with the code.
SAMPLED_SEEDS = tuple(range(6))
PLAIN_TIMER_KEY = "spec_plain_timer"  # where `compare` keeps a run's plain timing in a page's session state


@dataclass(frozen=True)
class PlainTiming:
    forward_ms: list[float]  # one per token: the prefill, then one decode pass each
    step_ms: list[float]  # forward pass + the app's draw

    @property
    def total_ms(self) -> float:
        return sum(self.step_ms)

    @property
    def decode_pass_ms(self) -> float:
        """Median one-token decode pass: the unit the draft's cost ratio c is measured in."""
        return statistics.median(self.forward_ms[1:] or self.forward_ms)

    @property
    def decode_ms(self) -> float:
        """Every step after the prefill (speculation's first round pays a prefill too)."""
        return sum(self.step_ms[1:])


class PlainTimer:
    """Plain decoding of a growing text, each token timed once: the page times only a round's new tokens on each
    Step (timing the whole text again every round made a Step's cost grow with the run), on the same cache.
    `extend` starts over when the tokens are not a continuation of those timed (Back, another run)."""

    def __init__(self, target, prompt_ids: list[int], settings: SamplingSettings):
        self.target, self.prompt_ids, self.settings = target, list(prompt_ids), settings
        self._start()

    def _start(self) -> None:
        self.forward = FixedCacheForward(self.target, None)
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
            spec.choose_token(logits, self.settings, self.seen, 0.5)  # the draw's cost, as a round pays it
            self.step_ms.append((time.perf_counter() - start) * 1000)
            self.seen[token] = True
            self.timed.append(token)
        return PlainTiming(list(self.forward_ms), list(self.step_ms))


@torch.inference_mode()
def plain_decode(
    target, prompt_ids: list[int], new_tokens: int, settings: SamplingSettings, seed: int = 0
) -> list[int]:
    """Plain decoding at its leanest, the benchmark's baseline: the engine's one-token step and the token chosen as
    a speculative round chooses its own (`spec.choose_token`: the app's draw, without the alternatives and entropy
    Generate shows), nothing recorded. A Generate trace also records every step for its page, and `sampling.draw`
    ranks the vocabulary for the page's chart (AMD EPYC VM, one thread, 2026-12-02: 126 us a token greedy and 340 us
    at temperature 0.8, against 6 and 36 us for `choose_token`, beside a ~0.9 ms step): either would flatter
    speculation's lean rounds. The trace's tokens, greedy and sampled (tested)."""
    forward = FixedCacheForward(target, None)
    seen = seen_mask(prompt_ids, forward.vocab_size)
    uniforms = run_uniforms(seed, new_tokens).tolist()  # step i draws with the seed's u_i, as a trace does
    tokens, feed = [], list(prompt_ids)
    for u in uniforms:
        token = spec.choose_token(forward.logits(feed)[0], settings, seen, u)
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

    summary: spec.RunSummary
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
        """The verify pass (gamma + 1 positions) over one target decode pass."""
        return self.summary.verify_pass_ms / self.plain.decode_pass_ms

    def cost_ratio_range(self) -> tuple[float, float] | None:
        """c from the lower and upper quartile of the draft passes, over the median target pass: how far c moves
        within this run (None without a draft model, or with under 4 draft passes)."""
        if len(self.draft_passes_ms) < 4:
            return None
        low, _, high = statistics.quantiles(self.draft_passes_ms, n=4)
        return low / self.plain.decode_pass_ms, high / self.plain.decode_pass_ms

    def overhead_passes_per_round(self) -> float | None:
        """What a round spends outside the target's verify pass and the draft model's passes (prompt lookup's
        search, sampling, bookkeeping), in target decode passes: a cost the formula does not charge."""
        if not self.outside_passes_ms:
            return None
        return statistics.median(self.outside_passes_ms) / self.plain.decode_pass_ms

    def draw_passes_per_token(self) -> float:
        """Plain decoding's own cost beyond its pass, per token (the draw), in target decode passes."""
        draws = [step - forward for step, forward in zip(self.plain.step_ms[1:], self.plain.forward_ms[1:])]
        return statistics.median(draws) / self.plain.decode_pass_ms if draws else 0.0

    def predicted_with_overheads(self) -> float | None:
        """Leviathan et al.'s formula with every measured cost in it, in the same unit (one target decode pass):
        tokens per round from α, times plain decoding's cost per token (its pass and its draw), over a round's
        γ·c + verify + what it spends outside the model passes."""
        alpha, overhead = self.summary.acceptance_rate, self.overhead_passes_per_round()
        if alpha is None or overhead is None:
            return None
        rounds_cost = self.gamma * (self.cost_ratio or 0.0) + self.verify_cost + overhead
        return spec.expected_tokens_per_pass(alpha, self.gamma) * (1 + self.draw_passes_per_token()) / rounds_cost

    def predicted_speedup(self, measured_verify: bool = False) -> float | None:
        alpha = self.summary.acceptance_rate
        if alpha is None:
            return None
        return spec.predicted_speedup(
            alpha, self.gamma, self.cost_ratio or 0.0, self.verify_cost if measured_verify else 1.0
        )


def compare(run: spec.SpeculativeRun, settings: SamplingSettings, kept: MutableMapping | None = None) -> Comparison:
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
        spec.summarise(run.rounds),
        plain,
        run.gamma,
        draft_passes_ms=tuple(spec.draft_passes(run.rounds)),
        outside_passes_ms=tuple(
            r.round_ms - r.verify_ms - (sum(r.draft_ms) if r.drafter == spec.DRAFT_MODEL else 0.0) for r in later
        ),
    )


COMPARISON_KEY = "spec_comparison"  # where `kept_comparison` keeps a run's comparison, and for which run and length


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


def sweep(
    target,
    tokenizer,
    make_drafter: Callable[[], object],
    prompt_ids: list[int],
    new_tokens: int = SWEEP_NEW_TOKENS,
    gammas=SWEEP_GAMMAS,
    temperatures=SWEEP_TEMPERATURES,
    seed: int = 0,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """Measured and predicted speed-up at each gamma and temperature: one speculative run each
    (a fresh drafter), and plain decoding of its text. Temperature is the only sampling knob on."""
    rows, total = [], len(gammas) * len(temperatures)
    for t in temperatures:
        settings = SamplingSettings(temperature=t)
        for g in gammas:
            if progress:
                progress(len(rows), total, f"γ = {g}, temperature {t:g}")
            run = spec.new_run(
                target, tokenizer, make_drafter(), prompt_ids, new_tokens, gamma=g, seed=seed, stop_at_eos=False
            )
            list(run.run(settings))
            result = compare(run, settings)
            rows.append(
                {
                    "temperature": t,
                    "gamma": g,
                    "alpha": result.summary.acceptance_rate,
                    "tokens_per_pass": result.summary.tokens_per_target_pass,
                    "predicted_tokens_per_pass": spec.expected_tokens_per_pass(
                        result.summary.acceptance_rate or 0.0, g
                    ),
                    "speculative_ms_per_token": result.summary.ms_per_token,
                    "plain_ms_per_token": result.plain.total_ms / len(run.generated_ids),
                    "measured_speedup": result.measured_speedup,
                    "cost_ratio": result.cost_ratio,
                    "predicted_with_overheads": result.predicted_with_overheads(),
                    "verify_cost": result.verify_cost,
                    "predicted_speedup": result.predicted_speedup(),
                    "predicted_speedup_measured_verify": result.predicted_speedup(measured_verify=True),
                }
            )
    if progress:
        progress(total, total, "done")
    return pd.DataFrame(rows)


def sweep_runs() -> int:
    """Speculative runs in one sweep of one target."""
    return len(SWEEP_GAMMAS) * len(SWEEP_TEMPERATURES)


ONE_C_CALL = "one C call"  # a target pass through `fused_step`: its arithmetic grows with every token fed
TRANSFORMERS_FORWARD = "transformers' forward"  # fixed costs per pass (operator dispatch, Python) dominate


def pass_kind(model) -> str:
    """How this target's passes of a few tokens run here (`fast_decode.fused_pass`)."""
    return ONE_C_CALL if fast_decode.fused_pass(model) else TRANSFORMERS_FORWARD


def sweep_sides(
    sides: list[tuple[str, object, object]],
    make_drafter: Callable[[], object],
    prompt_ids: list[int],
    new_tokens: int = SWEEP_NEW_TOKENS,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """`sweep` on each (name, target, tokenizer) with the same drafter and prompt, one table with `target` and
    `pass_kind` columns: the page's target, and the bundled target whose passes run the other way, so the sweep shows
    where speculation wins on this machine and where it loses."""
    tables = []
    for index, (name, target, tokenizer) in enumerate(sides):

        def step(done, total, text, index=index, name=name):
            if progress:
                progress(index * total + done, len(sides) * total, f"{name}: {text}")

        table = sweep(target, tokenizer, make_drafter, prompt_ids, new_tokens, progress=step)
        tables.append(table.assign(target=name, pass_kind=pass_kind(target)))
    return pd.concat(tables, ignore_index=True)


# -- the benchmark's figures -------------------------------------------------------------------


def alternated_medians(contenders: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Each contender's median wall time in seconds: one untimed warm-up each, then `repeats` rounds taking them in
    turn, so a slow spell on a shared machine hits them alike."""
    for fn in contenders.values():
        fn()
    times = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def benchmark(
    target,
    tokenizer,
    draft,
    draft_tokenizer,
    prompt_ids: list[int],
    new_tokens: int = 128,
    gamma: int = 4,
    repeats: int = 5,  # medians of 5: single runs moved by a third on the Intel Xeon VM (2026-12-02)
    lookup_prompt_ids: list[int] | None = None,
    shortlist: list[int] | None = None,
) -> dict:
    """Greedy, gamma 4: our speculation with the draft model and with prompt lookup, plain
    decoding with the step engine, and transformers' `generate` plain and assisted (with the same
    draft, its default schedule); and at temperature 0.8, speculation with the draft model against plain sampled
    decoding of as many tokens, each once for every seed of `SAMPLED_SEEDS` (the acceptance pooled). Plain decoding
    is `plain_decode`, the leanest we have. Each the median of `repeats` alternated runs. Prompt lookup also runs on
    `lookup_prompt_ids` (default: the same prompt), text that repeats itself, what it is made for, against plain
    decoding of that prompt. With `shortlist` (token ids), the draft model scores only those, as the page's default
    does; the same draft scoring every token runs too (the `_full_vocab` keys)."""
    lookup_prompt_ids = list(lookup_prompt_ids or prompt_ids)
    vocab = spec.vocabulary_rows(target)
    input_ids = torch.tensor([prompt_ids])
    hf_common = dict(
        attention_mask=torch.ones_like(input_ids),
        do_sample=False,
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        pad_token_id=tokenizer.eos_token_id,
    )
    out: dict = {}

    def plain():
        out["plain"] = plain_decode(target, prompt_ids, new_tokens, GREEDY)

    def plain_sampled():
        out["plain_sampled"] = [plain_decode(target, prompt_ids, new_tokens, SAMPLED, seed) for seed in SAMPLED_SEEDS]

    def plain_lookup():
        out["plain_lookup"] = plain_decode(target, lookup_prompt_ids, new_tokens, GREEDY)

    def speculative(name, drafter, settings=GREEDY, prompt=prompt_ids):
        def go():
            runs = []
            for seed in (0,) if settings.greedy else SAMPLED_SEEDS:  # greedy: one text whatever the seed
                run = spec.new_run(
                    target, tokenizer, drafter(), prompt, new_tokens, gamma=gamma, seed=seed, stop_at_eos=False
                )
                list(run.run(settings))
                runs.append(run)
            out[name] = runs[0] if settings.greedy else runs

        return go

    def hf(name, **extra):
        def go():
            with torch.inference_mode():
                out[name] = target.generate(input_ids, **hf_common, **extra)[0, len(prompt_ids) :].tolist()

        return go

    def model_drafter(rows=shortlist):
        return lambda: spec.ModelDrafter(draft, draft_tokenizer, rows)

    contenders = {
        "plain": plain,
        "spec": speculative("spec", model_drafter()),
        "spec_full": speculative("spec_full", model_drafter(None)),
        "lookup_story": speculative("lookup_story", lambda: spec.PromptLookupDrafter(vocab)),
        "plain_lookup": plain_lookup,
        "lookup": speculative("lookup", lambda: spec.PromptLookupDrafter(vocab), prompt=lookup_prompt_ids),
        "plain_sampled": plain_sampled,
        "spec_sampled": speculative("spec_sampled", model_drafter(), SAMPLED),
        "spec_sampled_full": speculative("spec_sampled_full", model_drafter(None), SAMPLED),
        "hf_plain": hf("hf_plain"),
        "hf_assisted": hf("hf_assisted", assistant_model=draft),
    }
    seconds = alternated_medians(contenders, repeats)
    # The app's own greedy trace (untimed): speculation's tokens are checked against it too.
    traced = run_greedy(target, tokenizer, prompt_ids, new_tokens, stop_at_eos=False).generated_ids
    summary = spec.summarise(out["spec"].rounds)
    lookup = spec.summarise(out["lookup"].rounds)
    lookup_story = spec.summarise(out["lookup_story"].rounds)
    costs = compare(out["spec"], GREEDY)  # the run's verify pass and draft pass in one-token target passes
    return {
        "spec_greedy_identical": out["spec"].generated_ids
        == out["spec_full"].generated_ids
        == out["plain"]
        == out["lookup_story"].generated_ids
        == traced
        and out["lookup"].generated_ids == out["plain_lookup"],
        "hf_assisted_identical": out["hf_assisted"] == out["hf_plain"],  # both keep EOS out until the end
        "spec_gamma": gamma,
        "spec_new_tokens": len(out["plain"]),
        "spec_acceptance_rate": round(summary.acceptance_rate, 3),
        "spec_tokens_per_target_pass": round(summary.tokens_per_target_pass, 2),
        "spec_draft_shortlist": len(shortlist) if shortlist else None,  # tokens the draft scores (None: all)
        "spec_speedup_vs_plain": round(seconds["plain"] / seconds["spec"], 2),
        f"spec_speedup_vs_plain_t{SAMPLED.temperature:g}": round(seconds["plain_sampled"] / seconds["spec_sampled"], 2),
        f"spec_acceptance_rate_t{SAMPLED.temperature:g}": round(
            spec.summarise([r for run in out["spec_sampled"] for r in run.rounds]).acceptance_rate, 3
        ),
        "spec_sampled_seeds": len(SAMPLED_SEEDS),
        "spec_acceptance_rate_full_vocab": round(spec.summarise(out["spec_full"].rounds).acceptance_rate, 3),
        "spec_speedup_vs_plain_full_vocab": round(seconds["plain"] / seconds["spec_full"], 2),
        f"spec_speedup_vs_plain_t{SAMPLED.temperature:g}_full_vocab": round(
            seconds["plain_sampled"] / seconds["spec_sampled_full"], 2
        ),
        "spec_draft_cost_ratio_full_vocab": round(compare(out["spec_full"], GREEDY).cost_ratio, 3),
        "spec_prompt_lookup_acceptance_rate": round(lookup.acceptance_rate or 0.0, 3),
        "spec_prompt_lookup_speedup_vs_plain": round(seconds["plain_lookup"] / seconds["lookup"], 2),
        "spec_prompt_lookup_acceptance_rate_story": round(lookup_story.acceptance_rate or 0.0, 3),
        "spec_prompt_lookup_speedup_vs_plain_story": round(seconds["plain"] / seconds["lookup_story"], 2),
        "hf_assisted_speedup_vs_plain": round(seconds["hf_plain"] / seconds["hf_assisted"], 2),
        # Why the speed-up is what it is: a verify pass of gamma + 1 tokens and a draft pass, each in one-token target
        # passes (medians of this run), and Leviathan et al.'s formula with them (no cost outside the passes).
        "spec_verify_cost": round(costs.verify_cost, 2),
        "spec_draft_cost_ratio": round(costs.cost_ratio, 3),
        "spec_predicted_speedup": round(costs.predicted_speedup(measured_verify=True), 2),
        "spec_tokens_per_s": round(len(out["plain"]) / seconds["spec"], 1),
        "hf_assisted_tokens_per_s": round(len(out["plain"]) / seconds["hf_assisted"], 1),
        "spec_vs_hf_assisted": round(seconds["hf_assisted"] / seconds["spec"], 2),
    }


def pair_benchmark(
    target,
    tokenizer,
    draft,
    draft_tokenizer,
    prompt_ids: list[int],
    new_tokens: int = 128,
    gamma: int = 4,
    repeats=3,
    shortlist: list[int] | None = None,
) -> dict:
    """Greedy speculation with the draft model against plain decoding on another target, medians of `repeats`
    alternated runs: the same figures as `benchmark`'s for its pair, without transformers' contenders."""
    out = {}

    def plain():
        out["plain"] = plain_decode(target, prompt_ids, new_tokens, GREEDY)

    def speculative():
        drafter = spec.ModelDrafter(draft, draft_tokenizer, shortlist)
        run = spec.new_run(target, tokenizer, drafter, prompt_ids, new_tokens, gamma=gamma, stop_at_eos=False)
        list(run.run(GREEDY))
        out["spec"] = run

    seconds = alternated_medians({"plain": plain, "spec": speculative}, repeats)
    costs = compare(out["spec"], GREEDY)
    return {
        "identical": out["spec"].generated_ids == out["plain"],
        "acceptance_rate": round(costs.summary.acceptance_rate, 3),
        "speedup_vs_plain": round(seconds["plain"] / seconds["spec"], 2),
        "verify_cost": round(costs.verify_cost, 2),
        "draft_cost_ratio": round(costs.cost_ratio, 3),
        "predicted_speedup": round(costs.predicted_speedup(measured_verify=True), 2),
    }


def moe_benchmark(prompt_ids: list[int], draft, shortlist: list[int] | None = None) -> dict:
    """The bundled draft against the bundled Mixture-of-Experts target (`spec_moe_*`): its passes are transformers'
    forward, whose cost grows little from 1 token to gamma + 1, where the dense target's pass is one C call whose
    arithmetic grows with every token. Both sides of the trade, measured on this machine."""
    moe = load_model(str(BUNDLED_MOE_DIR))
    try:
        spec.check_pair(moe.model, moe.tokenizer, draft.model, draft.tokenizer)
    except spec.SpeculationError as err:
        return {"spec_moe_skipped": str(err)}
    warm_up(moe.model, moe.tokenizer)
    figures = pair_benchmark(moe.model, moe.tokenizer, draft.model, draft.tokenizer, prompt_ids, shortlist=shortlist)
    return {f"spec_moe_{key}": value for key, value in figures.items()}


def bundled_benchmark(target, tokenizer, prompt_ids: list[int], threads: int | None = None, **options) -> dict:
    """`benchmark` with the bundled draft model scoring its `shortlist.DEFAULT_SIZE` most frequent tokens (the page's
    default), when it can draft for this target, on `threads` torch threads
    (default: the app's, `Limits.torch_threads`, so the figures are the Speculative page's; the process's own
    thread count is restored after). The rest of `python -m inference.bench` keeps torch's default."""
    draft = load_model(str(spec.BUNDLED_DRAFT_DIR))
    try:
        spec.check_pair(target, tokenizer, draft.model, draft.tokenizer)
    except spec.SpeculationError as err:
        return {"spec_skipped": str(err)}
    before, threads = torch.get_num_threads(), threads or Limits.from_env().torch_threads
    torch.set_num_threads(threads)
    try:
        warm_up(draft.model, draft.tokenizer)
        rows = drafting.shortlist_ids(draft, shortlist.DEFAULT_SIZE)  # the page's default draft
        figures = benchmark(target, tokenizer, draft.model, draft.tokenizer, prompt_ids, shortlist=rows, **options)
        figures |= moe_benchmark(prompt_ids, draft, rows)  # the same draft on the other side of the trade
    finally:
        torch.set_num_threads(before)
    return {"spec_torch_threads": threads, **figures}
