"""The page's sentences, every number passed in from the measurement or computation it describes."""

from __future__ import annotations

import pandas as pd

from inference.core.tokens import markdown_token_text
from inference.lessons.engine_internals.chunked_prefill import StallRun
from inference.lessons.engine_internals.prefix_cache import RequestPlan


def _ms(value: float) -> str:
    return f"{value:,.0f} ms" if value >= 10 else f"{value:,.1f} ms"


def plan_sentence(plan: RequestPlan, model_name: str, first_tokens: list[str] | None) -> str:
    """What section 1's requests ask of the engine (`prefix_cache.request_plan`), said before any server starts;
    `first_tokens`: the shared prefix's first tokens as the real model's tokenizer cuts them, else None (filler)."""
    mib = 2**20
    opens = (
        " Its first tokens: " + " · ".join(markdown_token_text(t) for t in first_tokens) + " …"
        if first_tokens
        else " Its tokens are filler ids (what they say changes neither the arithmetic nor the cache)."
    )
    saved = 1 - plan.warm_flops / plan.cold_flops
    return (
        f"**Before any engine starts:** section 1 will send {model_name} {plan.requests} prompts of "
        f"{plan.prompt_tokens:,} tokens, a shared {plan.prefix_tokens:,}-token prefix then {plan.own_tokens:,} of "
        f"their own.{opens} Each prompt's keys and values fill **{plan.kv_bytes / mib:,.1f} MiB** of the engine's "
        f"float32 cache ({plan.kv_bytes_per_token:,} bytes a token; a whole slot of {plan.slot_positions:,} "
        f"positions, {plan.slot_positions * plan.kv_bytes_per_token / mib:,.0f} MiB). The first prefill costs "
        f"{plan.cold_flops / 1e9:,.1f} GFLOP; with the prefix cache, each later one evaluates {plan.own_tokens:,} "
        f"tokens for {plan.warm_flops / 1e9:,.2f} GFLOP, **{saved:.0%} less**."
    )


PLAN_CAPTION = (
    "Bytes: layers × 2 (a key and a value row) × the KV width × 4 bytes a float32 number, per token. FLOPs: 2 per "
    "multiplied weight per token, plus attention over every earlier position, from the model's weight shapes."
)


def prefix_verdict(table: pd.DataFrame) -> str:
    """What the cache-on run did against the cache-off run (`prefix_cache.shared_prefix`'s table)."""
    on, off = table[table["cache"]], table[~table["cache"]]
    cold, warm = on.iloc[0], on.iloc[1:]
    if warm.empty:
        return "Only one request was sent: nothing could be reused."
    warm_ms = warm["ttft_ms"].median()
    ratio = cold["ttft_ms"] / warm_ms if warm_ms > 0 else float("nan")
    return (
        f"With the cache on, the first request evaluated all {int(cold['evaluated_tokens']):,} prompt tokens in "
        f"{_ms(cold['ttft_ms'])}; the next {len(warm)} reused {int(warm['cached_tokens'].median()):,} tokens each "
        f"(`cache_n`) and evaluated only {int(warm['evaluated_tokens'].median()):,} (`prompt_n`): "
        f"{_ms(warm_ms)} to the first token, the median, **{ratio:,.1f}× faster**. With the cache off, every "
        f"request evaluated its {int(off['evaluated_tokens'].median()):,} tokens again "
        f"({_ms(off['ttft_ms'].min())} to {_ms(off['ttft_ms'].max())})."
    )


def flops_sentence(saved_flops: float, cold_flops: float, cached_tokens: int) -> str:
    return (
        f"Reusing {cached_tokens:,} tokens skips {saved_flops / 1e9:,.1f} GFLOP of the "
        f"{cold_flops / 1e9:,.1f} GFLOP a cold prefill of this prompt costs ({saved_flops / cold_flops:.0%})."
    )


def billing_sentence(full: float, cheap: float, discount: int, reused: int, total: int) -> str:
    """What a million requests like the measured ones are billed, without and with the cached-input discount."""
    return (
        f"Billed per million such requests: **${full:,.0f}** without the discount, **${cheap:,.0f}** with "
        f"{discount}% off the input tokens the server reused ({reused:,} of the run's {total:,})."
    )


FLOPS_CAPTION = (
    "FLOPs counted from the model's weight shapes (2 per multiplied weight per token, attention over the positions "
    "before each token); the price and discount are yours (the defaults are illustrative), the token counts are the "
    "measured run's."
)


def alternation_verdicts(table: pd.DataFrame) -> list[str]:
    """One line per setting: how many of the returning turns found their prefix, and their time to first token."""
    lines = []
    for _, rows in table.sort_values("order").groupby("order", sort=True):
        returning = rows[rows["turn"] > 1]
        hits = returning[returning["cached_tokens"] > 0]
        misses = returning[returning["cached_tokens"] == 0]
        parts = [f"**{rows['setting'].iloc[0]}**: {len(hits)} of {len(returning)} returning turns reused their prefix"]
        if len(hits):
            parts.append(f"{_ms(hits['ttft_ms'].median())} to the first token when they did")
        if len(misses):
            parts.append(f"{_ms(misses['ttft_ms'].median())} when they were evaluated again")
        lines.append(", ".join(parts) + ".")
    return lines


def stall_verdict(run: StallRun) -> str:
    stalls = [g for c in range(run.cotenants) for g in run.stalled_gaps(c)]
    usual = sorted(run.usual_gap_s)[len(run.usual_gap_s) // 2] * 1000
    agree = "as predicted" if run.measured == run.predicted else f"against {run.predicted} predicted"
    stretch = f", the longest {_ms(max(stalls) * 1000)} against a usual {_ms(usual)}" if stalls else ""
    return (
        f"While the newcomer's {run.prompt_tokens:,}-token prompt was prefilled ({_ms(run.newcomer_prompt_ms)} by "
        f"the server's clock), each of the {run.cotenants} co-tenants waited through **{run.measured} stretched "
        f"gaps**, {agree}{stretch}. The newcomer got its first token {_ms(run.ttft_s * 1000)} after it was sent."
        + _server_chunks(run)
    )


def _server_chunks(run: StallRun) -> str:
    """What the server itself reported: its progress events, one per iteration that carried a chunk."""
    if not run.server_chunks:
        return ""
    sizes = ", ".join(f"{n:,}" for n in run.server_chunks)
    return (
        f" The server's own progress events counted **{len(run.server_chunks)} iterations** carrying the prompt "
        f"({sizes} tokens): the stall count on the co-tenants' clock can be one off on a busy machine, this one cannot."
    )


def sweep_verdict(table: pd.DataFrame) -> str:
    small, large = table.iloc[0], table.iloc[-1]
    matched = int((table["stalls_measured"] == table["stalls_predicted"]).sum())
    return (
        f"From `{small['setting']}` to `{large['setting']}` the newcomer's first token came after "
        f"{_ms(small['newcomer_ttft_ms'])} and {_ms(large['newcomer_ttft_ms'])}, while the co-tenants' longest gap "
        f"went from {_ms(small['longest_gap_ms'])} to {_ms(large['longest_gap_ms'])} and their stalls from "
        f"{int(small['stalls_measured'])} to {int(large['stalls_measured'])}. The measured stall count equals "
        f"ceil(P / (n_batch − N)) in {matched} of {len(table)} settings."
    )


def kv_verdict(table: pd.DataFrame, positions: int, text_what: str, context: int) -> str:
    ref = table.iloc[0]
    rows = table.set_index("type_k")
    parts = []
    for kind in ("q8_0", "q4_0"):
        if kind in rows.index:
            r = rows.loc[kind]
            parts.append(
                f"{kind} holds a token in {int(r['bytes_per_token']):,} bytes instead of "
                f"{int(ref['bytes_per_token']):,} ({r['bytes_per_token'] / ref['bytes_per_token']:.0%}; "
                f"{r['bytes_per_token'] * context / 2**20:,.2f} MiB for a full {context:,}-token context), at a mean KL "
                f"of {r['mean_kl_vs_f32']:.1e} nats from f32 and the same top token at "
                f"{r['top1_agreement_vs_f32']:.1%} of positions"
            )
    return f"Over {positions:,} positions of {text_what}: " + "; ".join(parts) + "."


KV_TYPES_INTRO = (
    "`-ctk` and `-ctv` set the types the server stores keys and values in. A quantized V cache needs flash "
    "attention in llama.cpp (`-ctv q8_0 -fa off` refuses to start), so f16 with flash attention on is the second "
    "baseline: it shows what flash attention changes by itself. The weight precisions are on the "
    "Quantization page; this is the cache, at float32 weights."
)


PREFIX_INTRO = (
    "Many requests start with the same long system prompt. A slot keeps the keys and values of the last prompt it "
    "served; with `cache_prompt` on, the next request it serves reuses the longest common prefix and evaluates only "
    "the rest. The server says how many tokens it reused (`timings.cache_n`) and how many it evaluated "
    "(`timings.prompt_n`)."
)


def prefix_caption(opening: str | None) -> str:
    """How the prefix-cache table was measured, and what its prompts say: real text on the real model (its opening
    quoted), filler token ids otherwise."""
    prompts = (
        f"The prompts are real English in the model's own tokens: the shared prefix opens “{opening} …”, each request "
        "then adds a different passage."
        if opening
        else "Prompts are fixed pseudo-random token ids (what they say changes neither the arithmetic nor the cache)."
    )
    return (
        "Time to first token measured here (request sent to its one token parsed) on a fresh one-slot server after "
        f"one warm-up request; tokens reused and evaluated from the server's `timings`. {prompts} One run; the "
        "machine is shared."
    )


def alternation_caption(prefix_tokens: int, turn_tokens: int, real_text: bool) -> str:
    """How the alternating conversations were run and measured."""
    said = " of real English" if real_text else ""
    return (
        f"Each conversation has its own {prefix_tokens:,}-token prefix{said} and grows by {turn_tokens} tokens a turn; "
        "requests sent one at a time, A1, B1, A2, B2 …, a fresh server per row. Tokens reused from the server's "
        "`timings.cache_n`, times measured here. The small RAM cache is sized from the KV bytes per token "
        "(computed exactly) to hold one conversation's saved state but not two."
    )
