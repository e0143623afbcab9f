"""The sentences of the Quantization page's decode-rate section (transformers, llama-server and the bandwidth
limit side by side: `rates`), every number passed in from the measurement it describes."""

from __future__ import annotations

import math

import pandas as pd

from inference.core.machine import describe_bytes
from inference.lessons.quantization.rates import COPY, LLAMA_SERVER, TRANSFORMERS, TransformersRate
from inference.lessons.quantization.real_gguf import BUSY_SPREAD, RealGGUFResult, rate_text, round_spread

SUMMARY = "The same model's decode rate three ways: transformers, llama-server, and the limit memory bandwidth sets"
BUTTON = "Measure transformers' decode rate and this machine's bandwidth"
SAME_WEIGHTS = {"float32": "f32"}  # the transformers weights and the GGUF type holding the same numbers

INTRO = (
    "Every decoded token reads every weight once. So however good the engine, it cannot decode faster than "
    "**memory bandwidth ÷ the weights' bytes** tokens per second, unless the weights stay in the CPU's cache between "
    "tokens. Here that limit stands beside what two engines reach with the same weights: how far below it each one "
    "stays is time spent on something other than reading weights."
)


def not_yet(model_name: str) -> str:
    return (
        f"Press **{BUTTON}**: it times one decode step of {model_name} in this app's transformers forward (a few "
        "seconds) and this machine's memory bandwidth in a separate process (about 10 s). llama-server's rows are the "
        "GGUF measurement's above."
    )


def _row(frame: pd.DataFrame, engine: str, weights: str) -> pd.Series | None:
    rows = frame[(frame["engine"] == engine) & (frame["weights"] == weights)]
    return None if rows.empty or not math.isfinite(rows.iloc[0]["measured tokens/s"]) else rows.iloc[0]


def _mb(n_bytes: float) -> str:
    return f"{n_bytes / 1e6:,.0f} MB"


def _threads(n: int) -> str:
    return f"{n} thread{'' if n == 1 else 's'}"


def gap_sentence(frame: pd.DataFrame, rate: TransformersRate, gguf: RealGGUFResult | None = None) -> str:
    """The limit, what each engine reaches of it at the same weights and why they differ; the fewest-bytes GGUF's
    higher limit; for any row above its limit, why (its weights fit in the cache, or they do not and the bandwidth
    was measured low); and, first, whether the timings say the machine was busy (`busy_note`)."""
    bandwidth_gbs = rate.bandwidth.bytes_per_s / 1e9
    own = _row(frame, TRANSFORMERS, rate.weights)
    if own is None:
        return "The transformers decode step was not measured."
    parts = [
        busy_note(rate, gguf),
        f"On this {rate.cpu}, memory delivers {bandwidth_gbs:,.1f} GB/s (measured on {_threads(rate.bandwidth.threads)}):"
        f" {_mb(own['bytes per token'])} of {rate.weights} weights read per token allow at most "
        f"{rate_text(own['bandwidth limit tokens/s'])}.",
    ]
    server = _row(frame, LLAMA_SERVER, SAME_WEIGHTS.get(rate.weights, ""))
    if server is not None:
        parts.append(
            f"llama-server reaches {server['share of the limit']:.0%} of it at {server['weights']} "
            f"({rate_text(server['measured tokens/s'])}), transformers {own['share of the limit']:.0%} "
            f"({rate_text(own['measured tokens/s'])}): the same weights, the same bytes; what differs is the kernels and "
            "the Python around each pass"
            + (
                f", and transformers here runs on the app's {_threads(rate.threads)} (llama-server on its default)."
                if rate.threads < rate.bandwidth.threads
                else "."
            )
        )
    else:
        parts.append(
            f"transformers reaches {own['share of the limit']:.0%} of it ({rate_text(own['measured tokens/s'])}) on "
            f"{_threads(rate.threads)}: the rest of each token's time goes to the kernels and the Python around each "
            "pass, not to reading weights."
        )
    if own["share of the limit"] <= 1:
        parts.append(_cache_note(own, rate.cache_bytes))
    servers = frame[(frame["engine"] == LLAMA_SERVER) & frame["measured tokens/s"].notna()]
    if len(servers) > 1:
        fewest = servers.loc[servers["bytes per token"].idxmin()]
        parts.append(
            f"Fewer bytes raise the limit: {fewest['weights']} reads {_mb(fewest['bytes per token'])} per token, so its "
            f"limit is {rate_text(fewest['bandwidth limit tokens/s'])}, and llama-server reaches "
            f"{rate_text(fewest['measured tokens/s'])} ({fewest['share of the limit']:.0%})."
        )
        if fewest["share of the limit"] <= 1:
            parts.append(_cache_note(fewest, rate.cache_bytes))
    copies = frame[frame["weights"].str.endswith(f" {COPY}") & frame["measured tokens/s"].notna()]
    if len(copies):
        shares = ", ".join(f"{r['weights']} {r['share of the limit']:.0%}" for _, r in copies.iterrows())
        parts.append(
            f"The torch copies read fewer bytes, and reach these shares of their own limits: {shares}. Fewer bytes "
            "give speed only where the kernels multiply the small numbers directly (the copies' section below)."
        )
    parts += [_above(row, rate.cache_bytes) for _, row in frame.iterrows() if row["share of the limit"] > 1]
    return " ".join(part for part in parts if part)


def busy_note(rate: TransformersRate, gguf: RealGGUFResult | None) -> str:
    """When one engine's timings spread widely (llama-server's rounds, or the middle half of transformers' steps),
    other work shared the CPU: the shares then say more about that work than about the engines."""
    spreads = {"transformers' middle half of steps": rate.timing.q3_ms / rate.timing.q1_ms - 1}
    for gguf_type, result in (gguf.results if gguf else {}).items():
        spreads[f"llama-server's {gguf_type} rounds"] = round_spread(result.decode_rates)
    what, spread = max(((w, s) for w, s in spreads.items() if math.isfinite(s)), key=lambda ws: ws[1])
    if spread <= BUSY_SPREAD:
        return ""
    return (
        f"**The machine was busy while this ran** ({what} differed by {spread:.0%}): these rates and shares say "
        "more about the other work than about the engines. Measure again when the server is idle."
    )


def _cache_note(row: pd.Series, cache_bytes: int | None) -> str:
    """For a row below its limit whose weights fit in the last-level cache: that limit is not a ceiling for it."""
    if cache_bytes is None or row["bytes per token"] > cache_bytes:
        return ""
    return (
        f"The {row['weights']} weights ({_mb(row['bytes per token'])}) fit in this machine's "
        f"{describe_bytes(cache_bytes)} last-level cache (as the system reports it), where they can stay between "
        "tokens and be read faster than memory delivers them: for them the limit is not a hard ceiling."
    )


def _above(row: pd.Series, cache_bytes: int | None) -> str:
    """Why one row goes above its limit."""
    what = (
        f"{row['engine']} at {row['weights']} goes above its limit ({row['share of the limit']:.0%}, "
        f"{rate_text(row['measured tokens/s'])} against {rate_text(row['bandwidth limit tokens/s'])})"
    )
    if cache_bytes is None:
        return (
            f"{what}: this machine does not report its cache size, but weights that stay in the cache between tokens "
            "are read faster than memory delivers them, which is the one way past this limit."
        )
    if row["bytes per token"] <= cache_bytes:
        return (
            f"{what}: its {_mb(row['bytes per token'])} fit in this machine's {describe_bytes(cache_bytes)} "
            "last-level cache (as the system reports it), so between tokens they stay in the cache and are read from "
            "there, faster than memory delivers them: for weights this small, memory bandwidth is not the limit."
        )
    return (
        f"{what}, although its {_mb(row['bytes per token'])} do not fit in the {describe_bytes(cache_bytes)} cache: "
        "the bandwidth was measured lower than this engine read, most likely while other work shared the memory. "
        "Measure again when the machine is idle."
    )


def chart_text(frame: pd.DataFrame) -> str:
    """The chart as one sentence: each bar's rate, limit and share."""
    rows = frame[frame["measured tokens/s"].notna()]
    bars = [
        f"{r['engine']} {r['weights']} {rate_text(r['measured tokens/s'])} of a "
        f"{rate_text(r['bandwidth limit tokens/s'])} limit ({r['share of the limit']:.0%})"
        for _, r in rows.iterrows()
    ]
    return "Decode tokens/s against the bandwidth limit: " + "; ".join(bars) + "."


def caption(rate: TransformersRate, gguf: RealGGUFResult | None, copies: int = 0) -> str:
    """`copies`: how many torch copies' rows the table holds (0 before the comparison below is measured)."""
    copies_how = (
        f" The {COPY} rows are the torch comparison's below (their median decode step over its rounds, on the "
        "page's prompt; bytes from the copies' tensors)."
        if copies
        else ""
    )
    server = (
        f" llama-server's: the median of {gguf.rounds} rounds of {gguf.decode_tokens} greedy tokens from the GGUF "
        "measurement above (the server's own timings, on its default threads)."
        if gguf is not None
        else ""
    )
    return (
        f"Measured on this machine ({rate.cpu}). transformers' tokens/s = 1 ÷ {rate.timing.label()}, this app's "
        f"forward on {rate.model_name}'s {rate.weights} weights on {_threads(rate.threads)}.{server} Bytes per token "
        "counted from the tensors (the model's parameters; each GGUF's tensors, its header left out). Limit = the "
        f"bandwidth ÷ those bytes; the bandwidth {rate.bandwidth.bytes_per_s / 1e9:,.1f} GB/s is the "
        f"{rate.bandwidth.how}. Last-level cache: {describe_bytes(rate.cache_bytes)}, as the system reports it."
        + copies_how
    )


def no_server_rows(model_name: str, real_name: str, reason: str | None, gguf: RealGGUFResult | None) -> str | None:
    """Why llama-server has no rows here, or None when it has."""
    if model_name != real_name:
        return f"llama-server's rows are {real_name}'s: load it in the sidebar to see both engines on the same weights."
    if reason:
        return f"No llama-server rows: {reason}"
    if gguf is None:
        return "llama-server's rows appear once its GGUF types above are measured."
    return None
