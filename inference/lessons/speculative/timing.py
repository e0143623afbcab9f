"""The benchmark's speculative figures (`python -m inference.bench`, `bundled_benchmark`): speculation against plain
decoding on this machine, greedy and sampled, with the draft model and with prompt lookup, on the bundled dense target
and on the bundled Mixture-of-Experts target, each the median of alternated runs.

Times are wall clock (`time.perf_counter`). On a shared machine one run can be stretched by other programs, so the
benchmark alternates the contenders and takes medians.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from inference.core.limits import Limits
from inference.core.loader import load_model
from inference.core.routing import BUNDLED_MOE_DIR
from inference.core.run import GREEDY, run_greedy, warm_up
from inference.lessons.speculative import drafting, shortlist
from inference.lessons.speculative import run as spec
from inference.lessons.speculative.comparison import compare, plain_decode
from inference.lessons.speculative.drafters import ModelDrafter, PromptLookupDrafter
from inference.lessons.speculative.summary import summarise
from inference.sampling.pipeline import SamplingSettings

SAMPLED = SamplingSettings(temperature=0.8)  # the benchmark's sampled pair: temperature the only knob on
# The sampled pair's seeds: each contender decodes the prompt once per seed, and its time is the sum. One seed's 128
# tokens is one draw of the acceptance rate, which moves with the seed as much as a change of code moves the ratio.
SAMPLED_SEEDS = tuple(range(6))


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
    repeats: int = 5,  # medians of 5: single runs on a shared machine move by a third
    lookup_prompt_ids: list[int] | None = None,
    shortlist: list[int] | None = None,
) -> dict:
    """Greedy, γ 4: our speculation with the draft model and with prompt lookup, plain
    decoding on the target's forward, and transformers' `generate` plain and assisted (with the same
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
        return lambda: ModelDrafter(draft, draft_tokenizer, rows)

    contenders = {
        "plain": plain,
        "spec": speculative("spec", model_drafter()),
        "spec_full": speculative("spec_full", model_drafter(None)),
        "lookup_story": speculative("lookup_story", lambda: PromptLookupDrafter(vocab)),
        "plain_lookup": plain_lookup,
        "lookup": speculative("lookup", lambda: PromptLookupDrafter(vocab), prompt=lookup_prompt_ids),
        "plain_sampled": plain_sampled,
        "spec_sampled": speculative("spec_sampled", model_drafter(), SAMPLED),
        "spec_sampled_full": speculative("spec_sampled_full", model_drafter(None), SAMPLED),
        "hf_plain": hf("hf_plain"),
        "hf_assisted": hf("hf_assisted", assistant_model=draft),
    }
    seconds = alternated_medians(contenders, repeats)
    # The app's own greedy trace (untimed): speculation's tokens are checked against it too.
    traced = run_greedy(target, tokenizer, prompt_ids, new_tokens, stop_at_eos=False).generated_ids
    summary = summarise(out["spec"].rounds)
    lookup = summarise(out["lookup"].rounds)
    lookup_story = summarise(out["lookup_story"].rounds)
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
            summarise([r for run in out["spec_sampled"] for r in run.rounds]).acceptance_rate, 3
        ),
        "spec_sampled_seeds": len(SAMPLED_SEEDS),
        "spec_acceptance_rate_full_vocab": round(summarise(out["spec_full"].rounds).acceptance_rate, 3),
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
        drafter = ModelDrafter(draft, draft_tokenizer, shortlist)
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
    """The bundled draft against the bundled Mixture-of-Experts target (`spec_moe_*`), measured beside the dense target:
    the same draft and per-token work, another cost for a pass of γ + 1 tokens (`spec_moe_verify_cost`)."""
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
