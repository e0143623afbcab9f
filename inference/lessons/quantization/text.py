"""Every sentence of the Quantization page: format strings in `text.md`, read into one dict (`TEXT`); the functions
below only fill them from a measurement, taking every comparison word from `measuring.compare`."""

from __future__ import annotations

import math
import re
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


def read_sentences(path: Path) -> dict[str, str]:
    """`## key` headings, each followed by one format string whose lines are joined by spaces."""
    parts = re.split(r"^## (.+)$", path.read_text(), flags=re.M)[1:]
    return {key.strip(): " ".join(body.split()) for key, body in zip(parts[::2], parts[1::2])}


TEXT = read_sentences(Path(__file__).with_name("text.md"))
PRECISION_NOTES = {p: TEXT[f"note {p}"] for p in ("float32", "bfloat16", "int8", "int4")}
SAY_FASTER = dict(more="faster", less="slower", same="about the same speed")
SAY_BYTES = dict(more="more bytes", less="fewer bytes", same="about the same bytes")


def rate(tokens_per_s: float) -> str:
    """ "1 token/s", "51 tokens/s": the rate as the page rounds it, singular when that reads 1."""
    shown = f"{tokens_per_s:,.0f}"
    return f"{shown} token/s" if shown == "1" else f"{shown} tokens/s"


def bytes_words(a: float, b: float) -> str:
    """'3.8x fewer bytes': `a` bytes against `b`, exact counts."""
    return compare(a, b).words(**SAY_BYTES)


def gguf_sentences(result: GGUFResult, frame: pd.DataFrame) -> dict[str, str]:
    """The caption, speed, quality and answer sentences of a GGUF measurement and its `gguf.table`."""
    base, types = result.results["f32"], list(result.results)
    out = {
        "caption": TEXT["gguf_caption"].format(
            rounds=result.rounds,
            decode_tokens=result.decode_tokens,
            positions=result.positions,
            question=result.question,
            prompt_tokens=result.prompt_tokens,
            top_k=TOP_K,
        )
    }
    others = frame.iloc[1:]
    if others.empty or not math.isfinite(base.decode_tokens_per_s):
        out["speed"] = "Only the f32 file was measured."
    else:
        best = others.loc[others["speed vs f32"].idxmax()]
        best_type = types[int(best.name)]
        measured = TEXT["gguf_speed"].format(
            base_rate=rate(base.decode_tokens_per_s),
            best=best["GGUF type"],
            best_rate=rate(best["decode tokens/s"]),
            speed_words=compare(result.results[best_type].decode_rates, base.decode_rates).words(**SAY_FASTER),
            size_words=bytes_words(best["file bytes"], base.file_bytes),
        )
        widest = frame["spread over rounds"].fillna(0).idxmax()
        busy = []
        if frame.loc[widest, "spread over rounds"] > BUSY_SPREAD:
            busy.append(TEXT["busy_spread"].format(what=types[widest], spread=frame.loc[widest, "spread over rounds"]))
        if best["speed vs f32"] > BYTES_SLACK / best["size vs f32"]:
            bound = 1 / best["size vs f32"]
            busy.append(TEXT["busy_bytes"].format(what=best_type, speed=best["speed vs f32"], bound=bound))
        if busy:
            out["speed"] = TEXT["gguf_busy"].format(why=" and ".join(busy), measured=measured)
        else:
            out["speed"] = measured + " " + TEXT["gguf_idle"].format(mb=base.file_bytes / 1e6)
    parts = [
        TEXT["gguf_quality_part"].format(type=t, kl=row["mean KL from f32 (nats)"], same=row["same top-1 as f32"])
        for t, (_, row) in zip(types, frame.iterrows())
        if t != "f32"
    ]
    out["quality"] = TEXT["gguf_quality"].format(parts="; ".join(parts)) if parts else "Only f32 was measured."
    if SHIPPED in types:
        out["quality"] += " " + TEXT["gguf_shipped"].format(shipped=SHIPPED)
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
    file = f" (the wheel's Q4_1 file: {rows[shipped[0]] / 1e6:,.0f} MB)" if shipped else ""
    sentence = TEXT["bytes"].format(
        millions=count / 1e6,
        full_mb=rows["float32"] / 1e6,
        int4_mb=rows["int4"] / 1e6,
        file=file,
        fewer=bytes_words(rows["int4"], rows["float32"]),
    )
    file_note = " The GGUF row is the wheel's file size, read from the file." if shipped else ""
    return sentence, TEXT["bytes_caption"].format(count=count, file=file_note)


def speed_findings(comparison: PrecisionComparison, cache_bytes: int | None = None) -> list[str]:
    """What the measured speeds mean, each reason chosen by the measured direction and by where float32's weights
    live against this machine's last-level cache (`cache_bytes`, read from the machine when None)."""
    cache = machine.last_level_cache_bytes() if cache_bytes is None else cache_bytes
    reference = comparison.results[REFERENCE]
    size = describe_bytes(reference.weight_bytes)
    if cache is None:
        findings, home = [TEXT["cache_unknown"].format(size=size)], "memory"
    else:
        home = "cache" if reference.weight_bytes <= cache else "memory"
        findings = [
            TEXT[f"cache_{'fits' if home == 'cache' else 'memory'}"].format(size=size, cache=describe_bytes(cache))
        ]
    findings.append(TEXT["kernels"])
    for precision, result in comparison.results.items():
        rates = [r for r in result.round_rates if math.isfinite(r)]
        base = [r for r in reference.round_rates if math.isfinite(r)]
        if precision == REFERENCE or not rates or not base:
            continue
        speed = compare(rates, base)
        direction = "slower" if speed.too_close or speed.ratio < 1 else "faster"
        keyed = f"why {precision} {direction} {home}" in TEXT
        why = TEXT[f"why {precision} {direction} {home if keyed else 'any'}"]
        why = why.format(fewer=bytes_words(result.weight_bytes, reference.weight_bytes))
        if cache is None and keyed:
            why = why.rstrip(".") + " " + TEXT["why unknown cache"] + "."
        fits = ""
        if home == "memory" and cache is not None and result.weight_bytes <= cache:
            fits = " " + TEXT["finding_fits"].format(
                size=describe_bytes(result.weight_bytes), cache=describe_bytes(cache), base_size=size
            )
        findings.append(
            TEXT["finding"].format(
                precision=precision,
                rate=result.decode_tokens_per_s,
                base=reference.decode_tokens_per_s,
                words=speed.words(**SAY_FASTER),
                rounds=len(rates),
                why=("Why no clear gain: " if speed.too_close else "") + why,
                fits=fits,
            )
        )
    findings.append(TEXT["gpu"])
    return findings


def layer_notes(comparison: PrecisionComparison) -> list[str]:
    """What was and was not converted: GPT-2's Conv1D layers, the scales, the layers left in bf16."""
    notes = [TEXT["conv1d"].format(n=comparison.conv1d_layers)] if comparison.conv1d_layers else []
    for precision in ("int8", "int4"):
        result = comparison.results.get(precision)
        if result is None:
            continue
        overhead, skipped = result.overhead, result.skipped_layers
        kept = "; ".join(f"`{s.name}` ({s.reason})" for s in skipped[:4])
        more = f" and {len(skipped) - 4} more" if len(skipped) > 4 else ""
        notes.append(
            TEXT["layers"].format(
                precision=precision,
                n=result.quantized_layers,
                groups=" " + TEXT["layers_groups"].format(size=comparison.int4_group_size)
                if precision == "int4"
                else "",
                overhead=TEXT["layers_overhead"].format(
                    values=overhead.value_bytes, scales=overhead.scale_bytes, fraction=overhead.fraction
                )
                if overhead.value_bytes
                else "",
                kept=f"; left in bf16: {kept}{more}" if skipped else "",
            )
        )
    return notes


def departure(result) -> str:
    """A few words on how this precision's greedy text relates to float32's."""
    if result.precision == REFERENCE:
        return "the reference"
    if result.first_departure is None:
        return "same as float32"
    if result.first_departure >= len(result.greedy_tokens):
        return f"stops early, at step {result.first_departure}"
    return f"departs at step {result.first_departure}"


def comparison_sentences(comparison: PrecisionComparison, summary: pd.DataFrame) -> dict[str, str]:
    """The torch comparison's captions and its spread sentence."""
    results = comparison.results
    rows = summary[summary["precision"] != REFERENCE]
    widest = rows.loc[(rows["speed_high"] - rows["speed_low"]).idxmax()] if len(rows) else None
    return {
        "cost": TEXT["cost_caption"].format(new_tokens=len(comparison.reference_ids), rounds=comparison.rounds),
        "memory": TEXT["memory_caption"].format(
            int4=bytes_words(results["int4"].weight_bytes, results[REFERENCE].weight_bytes),
            ideal=bytes_words(WIDTHS["int4"], WIDTHS["float32"]),
        ),
        "spread": ""
        if widest is None
        else TEXT["speed_spread"].format(
            precision=widest["precision"],
            low=widest["speed_low"],
            high=widest["speed_high"],
            median=widest["speed_vs_float32"],
        ),
        "quality": TEXT["quality_caption"].format(steps=len(comparison.reference_ids)),
    }


def gguf_gap(comparison: PrecisionComparison, gguf: GGUFResult) -> str:
    """Why llama-server's f32 GGUF decodes faster than torch's float32 of the same weights: the same arithmetic, so
    the time torch spends beyond it is per-token overhead. "" when there is nothing to say."""
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


def rates_sentences(
    frame: pd.DataFrame, measured: TransformersRate, gguf: GGUFResult | None, copies: bool
) -> dict[str, str]:
    """The decode-rate section's caption, chart text and findings, from `rates.table`."""
    fields = dict(
        cpu=measured.cpu, gbs=measured.bandwidth.bytes_per_s / 1e9, cache=describe_bytes(measured.cache_bytes)
    )
    server = " " + TEXT["rates_caption_server"].format(rounds=gguf.rounds, tokens=gguf.decode_tokens) if gguf else ""
    out = {
        "caption": TEXT["rates_caption"].format(
            **fields,
            timing=measured.timing.label(),
            model=measured.model_name,
            weights=measured.weights,
            threads=measured.threads,
            server=server,
            how=measured.bandwidth.how,
            copies=" " + TEXT["rates_caption_copies"].format(copy=COPY) if copies else "",
        )
    }
    shown = frame[frame["measured tokens/s"].notna()]
    bars = [
        f"{r['engine']} {r['weights']} {rate(r['measured tokens/s'])} of a {rate(r['bandwidth limit tokens/s'])} limit "
        f"({r['share of the limit']:.0%})"
        for _, r in shown.iterrows()
    ]
    out["chart"] = TEXT["rates_chart"].format(bars="; ".join(bars))

    def row(engine, weights):
        found = shown[(shown["engine"] == engine) & (shown["weights"] == weights)]
        return None if found.empty else found.iloc[0]

    def in_cache(r):
        if measured.cache_bytes is None or r["bytes per token"] > measured.cache_bytes:
            return ""
        return TEXT["rates_in_cache"].format(weights=r["weights"], mb=r["bytes per token"] / 1e6, **fields)

    own = row(TRANSFORMERS, measured.weights)
    if own is None:
        out["gap"] = "The transformers decode step was not measured."
        return out
    spreads = {"transformers' middle half of steps": measured.timing.q3_ms / measured.timing.q1_ms - 1}
    for gguf_type, result in (gguf.results if gguf else {}).items():
        spreads[f"llama-server's {gguf_type} rounds"] = round_spread(result.decode_rates)
    what, spread = max(((w, s) for w, s in spreads.items() if math.isfinite(s)), key=lambda ws: ws[1])
    parts = [TEXT["rates_busy"].format(what=what, spread=spread) if spread > BUSY_SPREAD else ""]
    own_fields = dict(own_share=own["share of the limit"], own_rate=own["measured tokens/s"], threads=measured.threads)
    parts.append(
        TEXT["rates_limit"].format(
            **fields,
            threads=measured.bandwidth.threads,
            mb=own["bytes per token"] / 1e6,
            weights=measured.weights,
            limit=own["bandwidth limit tokens/s"],
        )
    )
    server_row = row(LLAMA_SERVER, "f32" if measured.weights == "float32" else "")
    if server_row is not None:
        parts.append(
            TEXT["rates_both"].format(
                server_share=server_row["share of the limit"],
                server_weights=server_row["weights"],
                server_rate=server_row["measured tokens/s"],
                **own_fields,
            )
        )
    else:
        parts.append(TEXT["rates_own"].format(**own_fields))
    if own["share of the limit"] <= 1:
        parts.append(in_cache(own))
    servers = shown[shown["engine"] == LLAMA_SERVER]
    if len(servers) > 1:
        fewest = servers.loc[servers["bytes per token"].idxmin()]
        parts.append(
            TEXT["rates_fewest"].format(
                weights=fewest["weights"],
                mb=fewest["bytes per token"] / 1e6,
                limit=fewest["bandwidth limit tokens/s"],
                rate=fewest["measured tokens/s"],
                share=fewest["share of the limit"],
            )
        )
        if fewest["share of the limit"] <= 1:
            parts.append(in_cache(fewest))
    torch_copies = shown[shown["weights"].str.endswith(f" {COPY}")]
    if len(torch_copies):
        shares = ", ".join(f"{r['weights']} {r['share of the limit']:.0%}" for _, r in torch_copies.iterrows())
        parts.append(TEXT["rates_copies"].format(shares=shares))
    for _, r in shown[shown["share of the limit"] > 1].iterrows():
        if measured.cache_bytes is None:
            why = TEXT["above_unknown"]
        else:
            key = "above_cache" if r["bytes per token"] <= measured.cache_bytes else "above_memory"
            why = TEXT[key].format(mb=r["bytes per token"] / 1e6, **fields)
        parts.append(
            TEXT["rates_above"].format(
                engine=r["engine"],
                weights=r["weights"],
                share=r["share of the limit"],
                rate=r["measured tokens/s"],
                limit=r["bandwidth limit tokens/s"],
                why=why,
            )
        )
    out["gap"] = " ".join(part for part in parts if part)
    return out


def fit_sentences(
    fit: pd.DataFrame, labels: list[str], overhead: float | None, group: int, reserve_gb: float
) -> dict[str, str]:
    """The fit chart's rule, its sentence (per width, how many models fit one card; the largest model's need at the
    widest and narrowest width) and its caption."""
    widths = sorted(fit["bits"].unique(), reverse=True)
    largest = fit.loc[fit["parameters"].idxmax(), "model"]

    def needs(bits) -> str:
        row = fit[(fit["model"] == largest) & (fit["bits"] == bits)].iloc[0]
        where = row["fits_on"] if isinstance(row["fits_on"], str) else f"{row['largest_needed']} × {row['largest']}"
        return f"{row['weight_gb']:,.0f} GB at {bits:g} bits ({where})"

    scales = (
        TEXT["fit_scales_not_yet"].format(group=group)
        if overhead is None
        else TEXT["fit_scales_measured"].format(fraction=overhead, group=group)
    )
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
            labels=", ".join(labels), reserve=reserve_gb, largest=labels[-1], scales=scales
        ),
    }


def fits(card, needed_bytes: int, cards_needed: int, largest_label: str) -> str:
    """The calculator's answer, short (a metric's delta is cut at about 30 characters at 800 px)."""
    if card is not None:
        return f"{card.label}, {(card.usable_bytes - needed_bytes) / GB:,.1f} GB left"
    return f"needs {cards_needed} × {largest_label}"
