"""The Inside the engine page's sentences: format strings in `text.md`, read into one dict (`TEXT`); the functions
below fill them from the measurement or computation they describe, every comparison word from `measuring.compare`."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from inference.core.measuring import compare
from inference.core.tokens import markdown_token_text
from inference.lessons.serving.text import read_sentences

TEXT = read_sentences(Path(__file__).with_name("text.md"))


def ms(value: float) -> str:
    return f"{value:,.0f} ms" if value >= 10 else f"{value:,.1f} ms"


def plan_sentence(plan, model_name: str, first_tokens: list[str] | None) -> str:
    """What section 1's requests ask of the engine (`prefix_cache.request_plan`), before any server starts."""
    opens = " " + (
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
        chunks = " " + TEXT["server_chunks"].format(count=len(run.server_chunks), sizes=sizes)
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
