"""One model's decode rate three ways (issue #45): in transformers, on llama-server, and at the bandwidth limit.

Decode makes one token per pass, and every pass reads every weight once (a tied output layer is the embedding
table, read whole for every token; an untied table is only looked up, one row a token). So from memory no engine
decodes faster than

    limit (tokens/s) = memory bandwidth (bytes/s) ÷ the weights' bytes read per token,

unless the weights stay in the CPU's last-level cache between passes: then they come from the cache, faster than
from memory, and an engine can pass the limit. An engine's share of the limit says how much of each token's time
goes to reading the weights, and how much to everything else (kernels that do not stream at full bandwidth, and
the Python around each pass).

- transformers: this project's forward on the loaded model, one decode step timed by
  `measuring.time_decode_step` (the project's one way to time a pass), on the app's torch threads;
- llama-server: the rates the page's GGUF measurement took (`gguf`), with each file's tensor bytes;
- the bandwidth: the roofline's (`serving.roofline.measure_machine_roof`), measured in a separate process on every
  CPU, the most this machine's memory delivers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import torch
from torch import nn

from inference.core import machine
from inference.core.measuring import Timing, time_decode_step
from inference.lessons.quantization.experiments import REFERENCE, PrecisionComparison
from inference.lessons.quantization.gguf import GGUFResult
from inference.lessons.serving.roofline import measure_machine_roof

CONTEXT_TOKENS = 64  # context of the timed decode step: about the middle of llama-server's timed answers
TRANSFORMERS, LLAMA_SERVER = "transformers", "llama-server"
COPY = "copy"  # a torch copy's weights label: "int8 copy"


def bytes_read_per_token(model: nn.Module) -> int:
    """The bytes of the model's parameters one decode pass reads: every parameter once (a tied table is one
    tensor), less the input embedding table when the output layer is a tensor of its own."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    table, head = model.get_input_embeddings(), model.get_output_embeddings()
    tied = head is not None and head.weight is table.weight
    return total if tied else total - table.weight.numel() * table.weight.element_size()


def weights_name(model: nn.Module) -> str:
    """'float32', 'bfloat16': the number type of the model's weights."""
    return str(next(model.parameters()).dtype).removeprefix("torch.")


@dataclass(frozen=True)
class Bandwidth:
    bytes_per_s: float
    threads: int  # CPUs it was measured on
    how: str


@dataclass(frozen=True)
class TransformersRate:
    """What the page's button measures: the loaded model's decode step in transformers, and this machine's
    bandwidth."""

    model_name: str
    weights: str  # "float32"
    bytes_per_token: int
    timing: Timing
    threads: int  # torch threads the step ran on
    bandwidth: Bandwidth
    cache_bytes: int | None  # the last-level cache, as the system reports it
    cpu: str
    context_tokens: int = CONTEXT_TOKENS  # tokens in the cache when the step was timed

    @property
    def tokens_per_s(self) -> float:
        return 1000 / self.timing.median_ms


def measure(
    model: nn.Module,
    model_name: str,
    progress: Callable[[int, int, str], None] | None = None,
    context_tokens: int = CONTEXT_TOKENS,
    bandwidth: Bandwidth | None = None,
) -> TransformersRate:
    """This machine's memory bandwidth (unless given), then one decode step of `model` timed (the model is only
    called: a cached model is never changed)."""
    if bandwidth is None:
        if progress:
            progress(0, 2, "this machine's memory bandwidth (a separate process on every CPU)")
        roof = measure_machine_roof()
        bandwidth = Bandwidth(roof.roof.bandwidth_bytes_per_s, roof.threads, roof.how.split("bandwidth: ")[-1])
    if progress:
        progress(1, 2, f"transformers: one decode step at {context_tokens} tokens of context, timed")
    timing = time_decode_step(model, context_tokens)
    if progress:
        progress(2, 2, "done")
    return TransformersRate(
        model_name,
        weights_name(model),
        bytes_read_per_token(model),
        timing,
        torch.get_num_threads(),
        bandwidth,
        machine.last_level_cache_bytes(),
        machine.cpu_name(),
        context_tokens,
    )


def limit_tokens_per_s(bytes_per_token: float, bandwidth_bytes_per_s: float) -> float:
    """The most tokens per second memory can feed: bandwidth ÷ the bytes each token reads."""
    return bandwidth_bytes_per_s / bytes_per_token


def table(
    rate: TransformersRate, gguf: GGUFResult | None = None, copies: PrecisionComparison | None = None
) -> pd.DataFrame:
    """One row per engine and weight format, fewest bytes last: measured tokens/s, the bandwidth limit for its
    bytes, the share of that limit, and whether those bytes fit in the last-level cache. `gguf` adds
    llama-server's rows (only for the same model: the caller checks); `copies`, the page's torch comparison,
    its bfloat16 / int8 / int4 copies as they measured them (their bytes from the copies' tensors)."""
    rows = [(TRANSFORMERS, rate.weights, rate.bytes_per_token, rate.tokens_per_s)]
    for precision, result in (copies.results if copies else {}).items():
        if precision != REFERENCE:  # the reference is the model itself: its row is the one timed here
            rows.append((TRANSFORMERS, f"{precision} {COPY}", result.weight_bytes, result.decode_tokens_per_s))
    for gguf_type, result in (gguf.results if gguf else {}).items():
        rows.append((LLAMA_SERVER, gguf_type, result.bytes_per_token, result.decode_tokens_per_s))
    frame = pd.DataFrame(rows, columns=["engine", "weights", "bytes per token", "measured tokens/s"])
    frame["bandwidth limit tokens/s"] = limit_tokens_per_s(frame["bytes per token"], rate.bandwidth.bytes_per_s)
    frame["share of the limit"] = frame["measured tokens/s"] / frame["bandwidth limit tokens/s"]
    cache = rate.cache_bytes
    frame["fits in cache"] = [
        "unknown" if cache is None else "yes" if b <= cache else "no" for b in frame["bytes per token"]
    ]
    return frame.sort_values("bytes per token", ascending=False, kind="stable").reset_index(drop=True)


COLUMNS = {  # the page's columns: Streamlit's format and the hover help (TEXT_FORMATS: str.format's, for presenter mode)
    "bytes per token": ("localized", "The weights' bytes one decode pass reads, counted from the tensors"),
    "measured tokens/s": ("%.1f", "Decode tokens per second, measured on this machine"),
    "bandwidth limit tokens/s": ("%.1f", "This machine's measured memory bandwidth ÷ the bytes per token"),
    "share of the limit": ("percent", "Measured ÷ limit: above 100% only when the weights come from the cache"),
    "fits in cache": ("text", "Are the bytes per token no more than the last-level cache (as the system reports it)?"),
}
TEXT_FORMATS = {
    "bytes per token": "{:,.0f}",
    "measured tokens/s": "{:,.1f}",
    "bandwidth limit tokens/s": "{:,.1f}",
    "share of the limit": "{:.0%}",
}


def as_record(frame: pd.DataFrame, rate: TransformersRate) -> dict:
    """The table as plain numbers for the bench's JSON: per "engine weights" row its tokens/s, limit, share and
    bytes per token, beside the bandwidth, the cache and the threads they were measured with."""
    record = {
        "cpu": rate.cpu,
        "bandwidth_gbs": round(rate.bandwidth.bytes_per_s / 1e9, 2),
        "bandwidth_threads": rate.bandwidth.threads,
        "last_level_cache_bytes": rate.cache_bytes,
        "transformers_threads": rate.threads,
        "transformers_context_tokens": rate.context_tokens,
    }
    for _, row in frame.iterrows():
        measured = row["measured tokens/s"]
        record[f"{row['engine']} {row['weights']}"] = {
            "tokens_per_s": round(float(measured), 1) if math.isfinite(measured) else None,
            "limit_tokens_per_s": round(float(row["bandwidth limit tokens/s"]), 1),
            "share_of_limit": round(float(row["share of the limit"]), 3) if math.isfinite(measured) else None,
            "bytes_per_token": int(row["bytes per token"]),
        }
    return record
