"""What the Cost page says: one dict of Markdown templates, every number filled in from the measured answer, the
batches and the sweeps; comparisons of two measurements worded by `measuring.compare`."""

from __future__ import annotations

import pandas as pd

from inference.core import machine
from inference.core.measuring import compare
from inference.lessons.cost.experiments import AnswerCost
from inference.lessons.prefill_decode.timing import Crossover, Sweep

TEXT = {
    "decides": "Whether a token is an input token (read in one parallel prefill pass) or an output token (one decode "
    "pass each), how many users share each pass (the **batch**), how long the **context** is (every decode step "
    "reads the whole KV cache), and how many weights each token has to touch (**active parameters**, which "
    "Mixture-of-Experts models cut).",
    "answer_caption": "One greedy answer with the step engine: the prefill pass over {prompt} prompt tokens (median "
    "of {repeats}), then {passes} decode passes (the first reply token comes from the prefill pass). The prompt is "
    "fixed pseudo-random tokens: their meaning does not change the time.",
    "output_token_help": "The {how} of the {passes} decode passes (forward pass only) of this {reply}-token reply "
    "after a {prompt}-token prompt, one run after a warm-up: each pass reads a longer cache than the last, so it is "
    "not the single step at a short context other pages time.",
    "shares": "The reply is **{reply_share:.0%} of the tokens** but took **{decode_share:.0%} of the time**. "
    "{weights_vs_cache} {mechanism}",
    "mechanism_in_cache": "The prefill pass pays that fixed cost once for all its prompt tokens; the reply pays it "
    "once per token.",
    "mechanism_from_memory": "The prefill pass reads the weights once for all its prompt tokens; each decode pass "
    "reads them again for one token.",
    "wait": "**When the prompt is what makes you wait.** These {passes} decode passes took {decode_ms:,.0f} ms; ",
    "wait_below": "even the shortest prompt of the Prefill vs decode sweep ({tokens:,.0f} tokens) takes longer to "
    "read. Past a few tokens the prompt dominates the wait.",
    "wait_swept_beyond": "**no prompt this model can read takes as long**: the Prefill vs decode sweep's line through "
    "its last two points reaches that time at about {tokens:,.0f} tokens, past the model's {context:,}-token context "
    "(an extrapolation). On this model the reply dominates the wait, whatever the prompt.",
    "wait_swept": "the Prefill vs decode sweep puts the prompt whose prefill takes as long at about **{tokens:,.0f} "
    "tokens** ({how}). Below that length the reply dominates the wait, above it the prompt.",
    "wait_beyond": "**no prompt this model can read takes as long**: at the rate measured here its whole {context:,}-"
    "token context would prefill in about {whole_ms:,.0f} ms. In proportion, the prompt that would take as long is "
    "about {tokens:,.0f} tokens, past the context (an extrapolation; the Prefill vs decode page's sweep measures the "
    "real curve). On this model the reply dominates the wait, whatever the prompt.",
    "wait_estimate": "a prompt of about **{tokens:,.0f} tokens** would take as long to read, if prefill time grew in "
    "proportion to the prompt at the rate measured here (an estimate; run the sweep on the Prefill vs decode page for "
    "the measured curve). Below that length the reply dominates the wait, above it the prompt.",
    "gpu": "why price lists charge more for output tokens than for input tokens (illustrative)",
    "gpu_body": "🎨 **The GPU picture (illustrative, not measured here):** a model of many GB does not fit any cache, "
    "so on a GPU a decode pass for one sequence is limited by reading every weight from memory, while prefill turns "
    "the same read into arithmetic for every prompt token. That asymmetry is why API price lists charge more for "
    "output tokens than for input tokens.",
    "batching_intro": "Decode passes for {sizes} sequences at once ({prompt}-token prompts; {passes} timed passes per "
    "size, in {rounds} rounds over all sizes; median). One pass reads the weights once however many sequences it "
    "serves.",
    "batching_caption": "Median decode pass for each batch size after a warm-up, through transformers' own forward "
    "(the engine's lean step serves one sequence at a time); machine time per token = pass time ÷ batch. KV cache "
    "bytes are read from the cache tensors.",
    "batching": "One sequence: **{first_ms:.1f} ms** per pass for 1 token through transformers' forward (the engine's "
    "own step, section 1: {step_ms:.2f} ms). {best} sequences: **{best_ms:.1f} ms** per pass for {best} tokens, so "
    "each token took **{words}** machine time: a pass pays {fixed_cost} once, however many sequences it serves. The "
    "gain flattens once the work that grows with the batch (arithmetic for every token, reading every sequence's "
    "cache) takes over, and the KV cache grows with every sequence ({cache_mb:,.1f} MB here at {best} sequences × "
    "{tokens} tokens): memory for the cache is what caps the batch on a real server (see the KV cache page).",
    "fixed_in_cache": "the fixed cost of running its operations (the weights sit in the cache here)",
    "fixed_from_memory": "reading every weight (they do not fit the cache here)",
    "fixed_unknown": "reading the weights and running its operations",
    "price_caption": "The price per hour (${price:,.2f}) is an example you can change; the times are measured above. "
    "At that price, a million **input** tokens (prefill, from section 1) cost ${input_cost:,.4f}. Cost = price per "
    "hour ÷ 3,600,000 ms × ms per token × 1,000,000.",
    "context_intro": "A decode step attends over every token before it, so its keys and values are read from the "
    "cache at every step. This times decode steps after prompts of {lengths} tokens: the same kind of run as the "
    "Prefill vs decode page's sweep, kept apart from it.",
    "context": "A decode step took **{short_ms:.2f} ms** with {short:,} tokens before it and **{long_ms:.2f} ms** with "
    "{long:,} ({words} at the longer context). ",
    "context_flat": "On this model the weights and the fixed cost of a pass still outweigh the cache at these "
    "lengths; on long contexts and large batches the cache is what every step reads most of.",
    "context_cheaper": "A longer cache cannot make a step cheaper: the difference is the shared machine's noise, and on "
    "this model the weights and the fixed cost of a pass outweigh the cache at these lengths; on long contexts and "
    "large batches the cache is what every step reads most of.",
    "context_grows": "The cache already shows: the longer the conversation, the dearer every further token.",
    "context_caption": "Median of {repeats} runs per context length, bars from the first quartile to the third; each "
    "run is {decode_tokens} decode steps with the engine's own step after one prefill.",
    "moe": "A Mixture-of-Experts model holds many expert MLPs but runs only a few for each token: memory is paid for "
    "its total parameters, and the arithmetic for its active ones. Whether the time follows is a measurement: the "
    "Mixture of Experts page runs a real MoE trained here, shows its router token by token, and times it against a "
    "dense model (a small MoE on a CPU can be slower) and MoE against dense models at scale.",
}
VISIBLE_GROWTH = 1.25  # a step at the longest context this much dearer than at the shortest: the cache shows


def output_token_help(answer: AnswerCost) -> str:
    step = answer.decode_step
    said = TEXT["output_token_help"].format(
        how="median" if step is not None else "mean",
        passes=answer.reply_tokens - 1,
        reply=answer.reply_tokens,
        prompt=answer.prompt_tokens,
    )
    return said if step is None else f"{said} {step.label()}."


def answer_sentences(answer: AnswerCost, weight_bytes: int, context: int, crossing: Crossover | None) -> str:
    """Where the answer's time went, and when the prompt is what makes you wait: from the Prefill vs decode sweep
    (`crossing`) or, without it, in proportion to the prefill measured here, past the `context` said as such."""
    fits = machine.weights_fit_in_cache(weight_bytes)
    mechanism = {True: TEXT["mechanism_in_cache"], False: TEXT["mechanism_from_memory"], None: ""}[fits]
    shares = TEXT["shares"].format(
        reply_share=answer.reply_share,
        decode_share=answer.decode_share,
        weights_vs_cache=machine.weights_vs_cache(weight_bytes),
        mechanism=mechanism,
    )
    wait = TEXT["wait"].format(passes=answer.reply_tokens - 1, decode_ms=answer.decode_ms)
    if crossing is not None and crossing.how == "below":
        wait += TEXT["wait_below"].format(tokens=crossing.prompt_tokens)
    elif crossing is not None:
        how = "between two measured lengths" if crossing.how == "interpolated" else "extended past its longest prompt"
        key = "wait_swept_beyond" if crossing.beyond(context) else "wait_swept"
        wait += TEXT[key].format(tokens=crossing.prompt_tokens, context=context, how=how)
    else:
        tokens = answer.crossover_prompt_tokens
        key = "wait_beyond" if tokens > context else "wait_estimate"
        wait += TEXT[key].format(tokens=tokens, context=context, whole_ms=context * answer.ms_per_input_token)
    return f"{shares}\n\n{wait}"


def batching_sentence(batches: pd.DataFrame, step_ms: float, weight_bytes: int) -> str:
    """Batch 1 against the batch with the cheapest token, per token, in `measuring.compare`'s words."""
    first, best = batches.iloc[0], batches.loc[batches["ms_per_token"].idxmin()]
    per_token = compare([ms / best.batch for ms in best.pass_ms], list(first.pass_ms))
    fits = machine.weights_fit_in_cache(weight_bytes)
    return TEXT["batching"].format(
        first_ms=first.ms_per_pass,
        step_ms=step_ms,
        best=int(best.batch),
        best_ms=best.ms_per_pass,
        words=per_token.words(more="more", less="less"),
        fixed_cost=TEXT[{True: "fixed_in_cache", False: "fixed_from_memory", None: "fixed_unknown"}[fits]],
        cache_mb=best.kv_cache_bytes / 1e6,
        tokens=int(best.tokens_per_sequence),
    )


def context_sentence(sweep: Sweep) -> str:
    """The decode step at the shortest and longest context measured, compared over their runs."""
    rows, runs = sweep.summary, sweep.runs
    short, long = rows.iloc[0], rows.iloc[-1]
    times = lambda n: runs[runs.prompt_tokens == n].decode_ms_per_token.tolist()  # noqa: E731
    growth = compare(times(long.prompt_tokens), times(short.prompt_tokens))
    said = TEXT["context"].format(
        short_ms=short.decode_ms_per_token,
        short=int(short.prompt_tokens),
        long_ms=long.decode_ms_per_token,
        long=int(long.prompt_tokens),
        words=growth.words(more="dearer", less="cheaper"),
    )
    if growth.too_close or 1 <= growth.ratio < VISIBLE_GROWTH:
        return said + TEXT["context_flat"]
    return said + TEXT["context_grows" if growth.ratio > 1 else "context_cheaper"]
