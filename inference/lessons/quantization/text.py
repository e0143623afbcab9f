"""The Quantization page's sentences: format strings in `text.md` (`TEXT`), filled here from a measurement, every
comparison word from `measuring.compare`."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from inference.core import machine
from inference.core.calculator import GB
from inference.core.machine import describe_bytes
from inference.core.measuring import compare
from inference.lessons.quantization.experiments import REFERENCE, PrecisionComparison
from inference.lessons.quantization.gguf import BUSY_SPREAD, BYTES_SLACK, SHIPPED, TOP_K, GGUFResult, round_spread
from inference.lessons.quantization.rates import COPY, LLAMA_SERVER, TRANSFORMERS, TransformersRate
from inference.lessons.quantization.tables import RUNTIME_RESERVE_WHAT, WIDTHS
from inference.lessons.text_md import read_text_md

TEXT = read_text_md(Path(__file__).with_name("text.md"))
SAY_FASTER = dict(more="faster", less="slower", same="about the same speed")
SAY_BYTES = dict(more="more bytes", less="fewer bytes", same="about the same bytes")


def rate(tokens_per_s: float) -> str:
    """ "51 tokens/s", and "1 token/s" when it rounds to one."""
    shown = f"{tokens_per_s:,.0f}"
    return f"{shown} token/s" if shown == "1" else f"{shown} tokens/s"


def bytes_words(a: float, b: float) -> str:
    return compare(a, b).words(**SAY_BYTES)


def gguf_sentences(result: GGUFResult, frame: pd.DataFrame) -> dict[str, str]:
    """The caption, speed, quality and answer sentences of a GGUF measurement and its `gguf.table`."""
    base, types = result.results["f32"], list(result.results)
    fields = dict(rounds=result.rounds, decode_tokens=result.decode_tokens, positions=result.positions, top_k=TOP_K)
    out = {
        "caption": TEXT["gguf_caption"].format(**fields, question=result.question, prompt_tokens=result.prompt_tokens)
    }
    out["speed"] = out["quality"] = "Only the f32 file was measured."
    if len(types) > 1 and math.isfinite(base.decode_tokens_per_s):
        at = int(frame["speed vs f32"].iloc[1:].idxmax())
        best, best_type = frame.loc[at], types[at]
        measured = TEXT["gguf_speed"].format(
            base_rate=rate(base.decode_tokens_per_s),
            best=best["GGUF type"],
            best_rate=rate(best["decode tokens/s"]),
            speed_words=compare(result.results[best_type].decode_rates, base.decode_rates).words(**SAY_FASTER),
            size_words=bytes_words(best["file bytes"], base.file_bytes),
        )
        widest = int(frame["spread over rounds"].fillna(0).idxmax())
        spread, busy = frame.loc[widest, "spread over rounds"], []
        if spread > BUSY_SPREAD:
            busy.append(TEXT["busy_spread"].format(what=types[widest], spread=spread))
        if best["speed vs f32"] > BYTES_SLACK / best["size vs f32"]:
            busy.append(
                TEXT["busy_bytes"].format(what=best_type, speed=best["speed vs f32"], bound=1 / best["size vs f32"])
            )
        idle = measured + " " + TEXT["gguf_idle"].format(mb=base.file_bytes / 1e6)
        out["speed"] = TEXT["gguf_busy"].format(why=" and ".join(busy), measured=measured) if busy else idle
    parts = [
        TEXT["gguf_quality_part"].format(type=t, kl=row["mean KL from f32 (nats)"], same=row["same top-1 as f32"])
        for t, (_, row) in list(zip(types, frame.iterrows()))[1:]
    ]
    if parts:
        shipped = " " + TEXT["gguf_shipped"].format(shipped=SHIPPED) if SHIPPED in types else ""
        out["quality"] = TEXT["gguf_quality"].format(parts="; ".join(parts)) + shipped
    same = [t for t in types[1:] if result.results[t].answer_ids == base.answer_ids]
    differ = [t for t in types[1:] if t not in same]
    out["answer"] = TEXT["gguf_answer"].format(
        n=len(base.answer_ids),
        text=result.reference_text.strip(),
        same=f" {', '.join(same)} gave the same tokens." if same else "",
        differ=f" {', '.join(differ)} departed from it somewhere in those tokens." if differ else "",
    )
    return out


def bytes_sentences(frame: pd.DataFrame, count: int) -> tuple[str, str]:
    """The first screen's sentence and caption, from `tables.bytes_table`."""
    rows = frame.set_index("stored as")["weight bytes"]
    shipped = [name for name in rows.index if "GGUF" in name]
    sentence = TEXT["bytes"].format(
        millions=count / 1e6,
        full_mb=rows["float32"] / 1e6,
        int4_mb=rows["int4"] / 1e6,
        file=f" (the wheel's Q4_1 file: {rows[shipped[0]] / 1e6:,.0f} MB)" if shipped else "",
        fewer=bytes_words(rows["int4"], rows["float32"]),
    )
    return sentence, TEXT["bytes_caption"].format(count=count, file=TEXT["bytes_file"] if shipped else "")


def speed_findings(comparison: PrecisionComparison, cache_bytes: int | None = None) -> list[str]:
    """What the measured speeds mean, each reason chosen by the measured direction and by where float32's weights
    live against this machine's last-level cache (`cache_bytes`, read from the machine when None)."""
    cache = machine.last_level_cache_bytes() if cache_bytes is None else cache_bytes
    reference = comparison.results[REFERENCE]
    size = describe_bytes(reference.weight_bytes)
    home = "memory" if cache is None or reference.weight_bytes > cache else "cache"
    where = "cache_unknown" if cache is None else f"cache_{'fits' if home == 'cache' else 'memory'}"
    findings = [TEXT[where].format(size=size, cache=describe_bytes(cache or 0)), TEXT["kernels"]]
    for precision, result in list(comparison.results.items())[1:]:
        if not all(map(math.isfinite, result.round_rates + reference.round_rates)):
            continue  # a run too short for one decode step has no speed
        speed = compare(result.round_rates, reference.round_rates)
        direction = "slower" if speed.too_close or speed.ratio < 1 else "faster"
        keyed = f"why {precision} {direction} {home}" in TEXT
        why = TEXT[f"why {precision} {direction} {home if keyed else 'any'}"]
        why = why.format(fewer=bytes_words(result.weight_bytes, reference.weight_bytes))
        if cache is None and keyed:
            why = why.rstrip(".") + " " + TEXT["why unknown cache"] + "."
        fits = home == "memory" and cache is not None and result.weight_bytes <= cache
        findings.append(
            TEXT["finding"].format(
                precision=precision,
                rate=result.decode_tokens_per_s,
                base=reference.decode_tokens_per_s,
                words=speed.words(**SAY_FASTER),
                rounds=len(result.round_rates),
                why=("Why no clear gain: " if speed.too_close else "") + why,
                fits=" "
                + TEXT["finding_fits"].format(
                    size=describe_bytes(result.weight_bytes), cache=describe_bytes(cache or 0), base_size=size
                )
                if fits
                else "",
            )
        )
    return findings + [TEXT["gpu"]]


def layer_notes(comparison: PrecisionComparison) -> list[str]:
    """What was and was not converted: GPT-2's Conv1D layers, the scales, the layers left in bf16."""
    notes = [TEXT["conv1d"].format(n=comparison.conv1d_layers)] if comparison.conv1d_layers else []
    for precision in ("int8", "int4"):
        result = comparison.results[precision]
        overhead, skipped = result.overhead, result.skipped_layers
        kept = "; ".join(f"`{s.name}` ({s.reason})" for s in skipped[:4])
        more = f" and {len(skipped) - 4} more" if len(skipped) > 4 else ""
        groups = TEXT["layers_groups"].format(size=comparison.int4_group_size) if precision == "int4" else ""
        scales = TEXT["layers_overhead"].format(
            values=overhead.value_bytes, scales=overhead.scale_bytes, fraction=overhead.fraction
        )
        notes.append(
            TEXT["layers"].format(
                precision=precision,
                n=result.quantized_layers,
                groups=f" {groups}" if groups else "",
                overhead=scales if overhead.value_bytes else "",
                kept=f"; left in bf16: {kept}{more}" if skipped else "",
            )
        )
    return notes


def departure(result) -> str:
    """How this precision's greedy text relates to float32's, in a few words."""
    if result.precision == REFERENCE:
        return "the reference"
    if result.first_departure is None:
        return "same as float32"
    if result.first_departure >= len(result.greedy_tokens):
        return f"stops early, at step {result.first_departure}"
    return f"departs at step {result.first_departure}"


def comparison_sentences(comparison: PrecisionComparison, summary: pd.DataFrame) -> dict[str, str]:
    """The torch comparison's captions and its spread sentence."""
    results, rows = comparison.results, summary.iloc[1:]
    widest = rows.loc[(rows["speed_high"] - rows["speed_low"]).idxmax()]
    return {
        "cost": TEXT["cost_caption"].format(new_tokens=len(comparison.reference_ids), rounds=comparison.rounds),
        "memory": TEXT["memory_caption"].format(
            int4=bytes_words(results["int4"].weight_bytes, results[REFERENCE].weight_bytes),
            ideal=bytes_words(WIDTHS["int4"], WIDTHS["float32"]),
        ),
        "spread": TEXT["speed_spread"].format(
            precision=widest["precision"],
            low=widest["speed_low"],
            high=widest["speed_high"],
            median=widest["speed_vs_float32"],
        ),
        "quality": TEXT["quality_caption"].format(steps=len(comparison.reference_ids)),
    }


def gguf_gap(comparison: PrecisionComparison, gguf: GGUFResult) -> str:
    """Why llama-server's f32 decodes faster than torch's float32 of the same weights: the same arithmetic, so what
    torch spends beyond it is per-token overhead. "" when torch is not slower."""
    torch_rate = comparison.results[REFERENCE].decode_tokens_per_s
    server_rate = gguf.results["f32"].decode_tokens_per_s
    if not (torch_rate > 0 and server_rate > torch_rate):
        return ""
    torch_ms, server_ms = 1000 / torch_rate, 1000 / server_rate
    extra_ms = torch_ms - server_ms
    return TEXT["gguf_gap"].format(
        mflops=comparison.decode_flops / 1e6,
        server_ms=server_ms,
        torch_ms=torch_ms,
        words=compare(torch_ms, server_ms).words(more="longer", less="shorter"),
        extra_ms=extra_ms,
        extra_share=extra_ms / torch_ms,
        modules=comparison.leaf_modules,
        per_module_us=extra_ms * 1000 / max(comparison.leaf_modules, 1),
    )


ROW = {"bytes per token": "bytes", "measured tokens/s": "rate", "bandwidth limit tokens/s": "limit"}


def rates_sentences(frame: pd.DataFrame, measured: TransformersRate, gguf: GGUFResult | None, copies: bool) -> dict:
    """The decode-rate section's caption, chart text and findings, from `rates.table`."""
    cache, bandwidth = measured.cache_bytes, measured.bandwidth
    place = dict(cpu=measured.cpu, gbs=bandwidth.bytes_per_s / 1e9, cache=describe_bytes(cache))
    server = " " + TEXT["rates_caption_server"].format(rounds=gguf.rounds, tokens=gguf.decode_tokens) if gguf else ""
    copied = " " + TEXT["rates_caption_copies"].format(copy=COPY) if copies else ""
    timed = dict(timing=measured.timing.label(), model=measured.model_name, threads=measured.threads, how=bandwidth.how)
    out = {
        "caption": TEXT["rates_caption"].format(
            **place, **timed, weights=measured.weights, server=server, copies=copied
        )
    }
    shown = frame[frame["measured tokens/s"].notna()].rename(columns={**ROW, "share of the limit": "share"})
    rows = shown.assign(mb=shown["bytes"] / 1e6).to_dict("records")
    bars = [
        f"{r['engine']} {r['weights']} {rate(r['rate'])} of a {rate(r['limit'])} limit ({r['share']:.0%})" for r in rows
    ]
    out["chart"] = TEXT["rates_chart"].format(bars="; ".join(bars))

    def in_cache(r: dict) -> str:
        fits = cache is not None and r["bytes"] <= cache and r["share"] <= 1
        return TEXT["rates_in_cache"].format(**place | r) if fits else ""

    own = next(r for r in rows if r["engine"] == TRANSFORMERS and r["weights"] == measured.weights)
    spreads = {"transformers' middle half of steps": measured.timing.q3_ms / measured.timing.q1_ms - 1}
    for gguf_type, result in (gguf.results if gguf else {}).items():
        spreads[f"llama-server's {gguf_type} rounds"] = round_spread(result.decode_rates)
    what, spread = max(((w, s) for w, s in spreads.items() if math.isfinite(s)), key=lambda ws: ws[1])
    parts = [TEXT["rates_busy"].format(what=what, spread=spread) if spread > BUSY_SPREAD else ""]
    parts.append(TEXT["rates_limit"].format(**place | own | {"threads": bandwidth.threads}))
    mine = {f"own_{key}": value for key, value in own.items()} | {"threads": measured.threads}
    servers = [r for r in rows if r["engine"] == LLAMA_SERVER]
    same = [r for r in servers if r["weights"] == ("f32" if measured.weights == "float32" else "")]
    theirs = {f"server_{key}": value for key, value in same[0].items()} if same else {}
    parts += [TEXT["rates_both" if same else "rates_own"].format(**mine, **theirs), in_cache(own)]
    if len(servers) > 1:
        fewest = min(servers, key=lambda r: r["bytes"])
        parts += [TEXT["rates_fewest"].format(**fewest), in_cache(fewest)]
    torch_copies = [f"{r['weights']} {r['share']:.0%}" for r in rows if r["weights"].endswith(f" {COPY}")]
    if torch_copies:
        parts.append(TEXT["rates_copies"].format(shares=", ".join(torch_copies)))
    for r in (r for r in rows if r["share"] > 1):
        why = "above_unknown" if cache is None else "above_cache" if r["bytes"] <= cache else "above_memory"
        parts.append(TEXT["rates_above"].format(**r, why=TEXT[why].format(**place | r)))
    out["gap"] = " ".join(part for part in parts if part)
    return out


def fit_sentences(fit: pd.DataFrame, labels: list[str], overhead: float | None, group: int, reserve_gb: float) -> dict:
    """The fit chart's rule, its sentence (how many models fit one card at each width, the largest model's need at
    the widest and narrowest) and its caption."""
    widths = sorted(fit["bits"].unique(), reverse=True)
    largest = fit.loc[fit["parameters"].idxmax(), "model"]

    def needs(bits) -> str:
        row = fit[(fit["model"] == largest) & (fit["bits"] == bits)].iloc[0]
        where = row["fits_on"] if isinstance(row["fits_on"], str) else f"{row['largest_needed']} × {row['largest']}"
        return f"{row['weight_gb']:,.0f} GB at {bits:g} bits ({where})"

    scales = "fit_scales_not_yet" if overhead is None else "fit_scales_measured"
    return {
        "rule": TEXT["fit_rule"].format(reserve=reserve_gb, what=RUNTIME_RESERVE_WHAT),
        "sentence": TEXT["fit_sentence"].format(
            models=fit["model"].nunique(),
            fitting=", ".join(f"{int(fit[fit['bits'] == b]['fits_on'].notna().sum())} at {b:g} bits" for b in widths),
            largest=largest,
            widest=needs(widths[0]),
            narrowest=needs(widths[-1]),
        ),
        "caption": TEXT["fit_caption"].format(
            labels=", ".join(labels),
            reserve=reserve_gb,
            largest=labels[-1],
            scales=TEXT[scales].format(fraction=overhead, group=group),
        ),
    }


def fits(card, needed_bytes: int, cards_needed: int, largest_label: str) -> str:
    """The calculator's answer, short (a metric's delta is cut at about 30 characters at 800 px)."""
    if card is not None:
        return f"{card.label}, {(card.usable_bytes - needed_bytes) / GB:,.1f} GB left"
    return f"needs {cards_needed} × {largest_label}"
