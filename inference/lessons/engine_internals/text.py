"""The Inside the engine page's sentences: one dict of templates, every number and comparison word filled from the
measurement or computation it describes (comparison words from `measuring.compare`)."""

from __future__ import annotations

import pandas as pd

from inference.core.measuring import compare
from inference.core.tokens import markdown_token_text

TEXT = {
    "intro": "Three mechanisms inside a serving engine decide what a request costs: the **prefix cache** (a prompt "
    "that starts like an earlier one skips that part of the prefill), **chunked prefill** (a long prompt is fed in "
    "pieces, and every request already decoding waits for each piece) and the **precision of the KV cache**. Each is "
    "measured here on llama.cpp's `llama-server`, started by the app for each measurement and stopped afterwards, "
    "and read from the server's own answers.",
    "no_build": "llama-server is not built. Build it once (about 5 minutes on 2 cores; the sources come from the "
    "Python package index) and reload this page:\n\n`python -m inference.engines llamacpp build`",
    "model": "{layers} layers, {kv_width} key and {kv_width} value numbers per layer per token, {context:,} positions "
    "per slot, float32 weights.",
    "timing_only": " Its text is nonsense; its timing is real.",
    "plan": "**Before any engine starts:** section 1 will send {name} {plan.requests} prompts of "
    "{plan.prompt_tokens:,} tokens, a shared {plan.prefix_tokens:,}-token prefix then {plan.own_tokens:,} of their "
    "own.{opens} Each prompt's keys and values fill **{kv_mib:,.1f} MiB** of the engine's float32 cache "
    "({plan.kv_bytes_per_token:,} bytes a token; a whole slot of {plan.slot_positions:,} positions, {slot_mib:,.0f} "
    "MiB). The first prefill costs {cold:,.1f} GFLOP; with the prefix cache, each later one evaluates "
    "{plan.own_tokens:,} tokens for {warm:,.2f} GFLOP, **{saved:.0%} less**.",
    "opens_real": " Its first tokens: {tokens} …",
    "opens_filler": " Its tokens are filler ids (what they say changes neither the arithmetic nor the cache).",
    "plan_caption": "Bytes: layers × 2 (a key and a value row) × the KV width × 4 bytes a float32 number, per token. "
    "FLOPs: 2 per multiplied weight per token, plus attention over every earlier position, from the model's weight "
    "shapes.",
    "prefix_intro": "Many requests start with the same long system prompt. A slot keeps the keys and values of the "
    "last prompt it served; with `cache_prompt` on, the next request it serves reuses the longest common prefix and "
    "evaluates only the rest. The server says how many tokens it reused (`timings.cache_n`) and how many it "
    "evaluated (`timings.prompt_n`).",
    "prefix_verdict": "With the cache on, the first request evaluated all {cold_tokens:,} prompt tokens in {cold_ms}; "
    "the next {warm} reused {reused:,} tokens each (`cache_n`) and evaluated only {evaluated:,} (`prompt_n`): "
    "{warm_ms} to the first token, the median, **{words}**. With the cache off, every request evaluated its "
    "{off_tokens:,} tokens again ({off_low} to {off_high}).",
    "prefix_caption": "Time to first token measured here (request sent to its one token parsed) on a fresh one-slot "
    "server after one warm-up request; tokens reused and evaluated from the server's `timings`. {prompts} One run; "
    "the machine is shared.",
    "prompts_real": "The prompts are real English in the model's own tokens: the shared prefix opens “{opening} …”, "
    "each request then adds a different passage.",
    "prompts_filler": "Prompts are fixed pseudo-random token ids (what they say changes neither the arithmetic nor "
    "the cache).",
    "flops": "Reusing {cached:,} tokens skips {saved:,.1f} GFLOP of the {cold:,.1f} GFLOP a cold prefill of this "
    "prompt costs ({share:.0%}).",
    "billing": "Billed per million such requests: **${full:,.0f}** without the discount, **${cheap:,.0f}** with "
    "{discount}% off the input tokens the server reused ({reused:,} of the run's {total:,}).",
    "flops_caption": "FLOPs counted from the model's weight shapes (2 per multiplied weight per token, attention over "
    "the positions before each token); the price and discount are yours (the defaults are illustrative), the token "
    "counts are the measured run's.",
    "keeps": "On this build a request goes to the idle slot that already holds the largest share of its prompt "
    "(above {similarity:.0%}), else to the least recently used one. Beside the slots sits a **prompt cache in RAM** "
    "(`--cache-ram`, MiB, {default:,} by default): before a slot takes another prompt, its state is copied there, "
    "and the best-matching saved state is copied back; when it is full, the oldest is dropped. Two conversations "
    "take turns below on one slot (fewer slots than conversations) and on two.",
    "alternation": "**{setting}**: {hits} of {returning} returning turns reused their prefix",
    "alternation_hit": "{ms} to the first token when they did",
    "alternation_miss": "{ms} when they were evaluated again",
    "alternation_caption": "Each conversation has its own {prefix:,}-token prefix{said} and grows by {turn} tokens a "
    "turn; requests sent one at a time, A1, B1, A2, B2 …, a fresh server per row. Tokens reused from the server's "
    "`timings.cache_n`, times measured here. The small RAM cache is sized from the KV bytes per token (computed "
    "exactly) to hold one conversation's saved state but not two.",
    "chunked_intro": "Each engine iteration is one batch: every decoding request adds its next token, then waiting "
    "prompts fill the batch up to `-b` tokens (the logical batch; `-ub`, the physical batch, only splits that work "
    "into pieces). Nobody gets a token before the iteration ends. So a prompt of P tokens arriving while N requests "
    "decode takes **ceil(P / (b − N))** iterations, and each decoding request waits through every one of them.",
    "stall": "While the newcomer's {prompt:,}-token prompt was prefilled ({prompt_ms} by the server's clock), each of "
    "the {cotenants} co-tenants waited through **{measured} stretched gaps**, {agree}{stretch}. The newcomer got its "
    "first token {ttft} after it was sent.",
    "as_predicted": "as predicted",
    "not_as_predicted": "against {predicted} predicted",
    "stretch": ", the longest {longest} against a usual {usual}",
    "server_chunks": " The server's own progress events counted **{count} iterations** carrying the prompt ({sizes} "
    "tokens): the stall count on the co-tenants' clock can be one off on a busy machine, this one cannot.",
    "stall_caption": "{cotenants} co-tenants stream long greedy replies from a server with {slots} slots; after {warm} "
    "tokens each, a {prompt:,}-token prompt is sent asking for one token. Every token's arrival is timestamped here; "
    "a stall is a co-tenant token that arrived during the newcomer's prefill as the server timed it. Predicted: "
    "ceil(P / (b − N)), from the server's source.",
    "sweep": "From `{small}` to `{large}` the newcomer's first token came after {small_ttft} and {large_ttft}, while the "
    "co-tenants' longest gap went from {small_gap} to {large_gap} and their stalls from {small_stalls} to "
    "{large_stalls}. The measured stall count equals ceil(P / (n_batch − N)) in {matched} of {settings} settings.",
    "trade_title": "The trade, {small} → {large}: the newcomer {ttft_words}, stalls {gap_words}",
    "kv_intro": "`-ctk` and `-ctv` set the types the server stores keys and values in. A quantized V cache needs "
    "flash attention in llama.cpp (`-ctv q8_0 -fa off` refuses to start), so f16 with flash attention on is the "
    "second baseline: it shows what flash attention changes by itself. The weight precisions are on the "
    "Quantization page; this is the cache, at float32 weights.",
    "kv_type": "{kind} holds a token in {bytes:,} bytes instead of {ref_bytes:,} ({share:.0%}; {context_mib:,.2f} MiB "
    "for a full {context:,}-token context), at a mean KL of {kl:.1e} nats from f32 and the same top token at "
    "{top1:.1%} of positions",
    "kv_verdict": "Over {positions:,} positions of {what}: {types}.",
    "kv_caption": "Bytes per token computed exactly from each type's block layout (q8_0: 34 bytes per 32 values, q4_0: "
    "18) beside what the server reports allocating (its `llama_kv_cache` line). KL and top-1 measured over "
    "{positions:,} positions of {what}, each position's whole {vocab:,}-token distribution from the server, against "
    "f32 keys and values without flash attention. Decode: the median of {runs} greedy runs of {tokens} tokens "
    "(server timings), on a shared machine.",
}


def ms(value: float) -> str:
    return f"{value:,.0f} ms" if value >= 10 else f"{value:,.1f} ms"


def plan_sentence(plan, model_name: str, first_tokens: list[str] | None) -> str:
    """What section 1's requests ask of the engine (`prefix_cache.request_plan`), before any server starts."""
    opens = (
        TEXT["opens_real"].format(tokens=" · ".join(markdown_token_text(t) for t in first_tokens))
        if first_tokens
        else TEXT["opens_filler"]
    )
    return TEXT["plan"].format(
        name=model_name,
        plan=plan,
        opens=opens,
        kv_mib=plan.kv_bytes / 2**20,
        slot_mib=plan.slot_positions * plan.kv_bytes_per_token / 2**20,
        cold=plan.cold_flops / 1e9,
        warm=plan.warm_flops / 1e9,
        saved=1 - plan.warm_flops / plan.cold_flops,
    )


def prefix_verdict(table: pd.DataFrame) -> str:
    """The cache-on run against the cache-off run (`prefix_cache.shared_prefix`'s table); needs 2+ requests."""
    on, off = table[table["cache"]], table[~table["cache"]]
    cold, warm = on.iloc[0], on.iloc[1:]
    return TEXT["prefix_verdict"].format(
        cold_tokens=int(cold["evaluated_tokens"]),
        cold_ms=ms(cold["ttft_ms"]),
        warm=len(warm),
        reused=int(warm["cached_tokens"].median()),
        evaluated=int(warm["evaluated_tokens"].median()),
        warm_ms=ms(warm["ttft_ms"].median()),
        words=compare(list(warm["ttft_ms"]), cold["ttft_ms"]).words("slower", "faster"),
        off_tokens=int(off["evaluated_tokens"].median()),
        off_low=ms(off["ttft_ms"].min()),
        off_high=ms(off["ttft_ms"].max()),
    )


def alternation_lines(table: pd.DataFrame) -> list[str]:
    """One line per setting: how many returning turns found their prefix, and their time to first token."""
    lines = []
    for _, rows in table.sort_values("order").groupby("order", sort=True):
        returning = rows[rows["turn"] > 1]
        hits, misses = returning[returning["cached_tokens"] > 0], returning[returning["cached_tokens"] == 0]
        parts = [TEXT["alternation"].format(setting=rows["setting"].iloc[0], hits=len(hits), returning=len(returning))]
        for part, rows_ in (("alternation_hit", hits), ("alternation_miss", misses)):
            if len(rows_):
                parts.append(TEXT[part].format(ms=ms(rows_["ttft_ms"].median())))
        lines.append(", ".join(parts) + ".")
    return lines


def stall_verdict(run) -> str:
    stalls = run.all_stalled_gaps()
    usual = sorted(run.usual_gap_s)[len(run.usual_gap_s) // 2] * 1000
    agree = (
        TEXT["as_predicted"]
        if run.measured == run.predicted
        else TEXT["not_as_predicted"].format(predicted=run.predicted)
    )
    stretch = TEXT["stretch"].format(longest=ms(max(stalls) * 1000), usual=ms(usual)) if stalls else ""
    chunks = ""
    if run.server_chunks:
        sizes = ", ".join(f"{n:,}" for n in run.server_chunks)
        chunks = TEXT["server_chunks"].format(count=len(run.server_chunks), sizes=sizes)
    return (
        TEXT["stall"].format(
            prompt=run.prompt_tokens,
            prompt_ms=ms(run.newcomer_prompt_ms),
            cotenants=run.cotenants,
            measured=run.measured,
            agree=agree,
            stretch=stretch,
            ttft=ms(run.ttft_s * 1000),
        )
        + chunks
    )


def sweep_verdict(table: pd.DataFrame) -> str:
    small, large = table.iloc[0], table.iloc[-1]
    return TEXT["sweep"].format(
        small=small["setting"],
        large=large["setting"],
        small_ttft=ms(small["newcomer_ttft_ms"]),
        large_ttft=ms(large["newcomer_ttft_ms"]),
        small_gap=ms(small["longest_gap_ms"]),
        large_gap=ms(large["longest_gap_ms"]),
        small_stalls=int(small["stalls_measured"]),
        large_stalls=int(large["stalls_measured"]),
        matched=int((table["stalls_measured"] == table["stalls_predicted"]).sum()),
        settings=len(table),
    )


def trade_title(runs) -> str:
    """The smallest batch setting against the largest: the newcomer's first token and the co-tenants' stretched gaps
    (each gap a repeat; a setting without a stall counts its usual gaps)."""
    small, large = runs[0], runs[-1]
    return TEXT["trade_title"].format(
        small=small.setting,
        large=large.setting,
        ttft_words=compare(large.ttft_s, small.ttft_s).words("later", "sooner"),
        gap_words=compare(
            large.all_stalled_gaps() or large.usual_gap_s, small.all_stalled_gaps() or small.usual_gap_s
        ).words("longer", "shorter"),
    )


def kv_verdict(table: pd.DataFrame, positions: int, what: str, context: int) -> str:
    ref, rows = table.iloc[0], table.set_index("type_k")
    types = [
        TEXT["kv_type"].format(
            kind=kind,
            bytes=int(rows.loc[kind, "bytes_per_token"]),
            ref_bytes=int(ref["bytes_per_token"]),
            share=rows.loc[kind, "bytes_per_token"] / ref["bytes_per_token"],
            context_mib=rows.loc[kind, "bytes_per_token"] * context / 2**20,
            context=context,
            kl=rows.loc[kind, "mean_kl_vs_f32"],
            top1=rows.loc[kind, "top1_agreement_vs_f32"],
        )
        for kind in ("q8_0", "q4_0")
        if kind in rows.index
    ]
    return TEXT["kv_verdict"].format(positions=positions, what=what, types="; ".join(types))
