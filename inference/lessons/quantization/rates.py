"""One model's decode rate three ways (issue #45): in transformers, on llama-server, and at the bandwidth limit.

Every decoded token reads every weight once, so from memory no engine decodes faster than
memory bandwidth ÷ the bytes read per token, unless the weights stay in the CPU's last-level cache between passes.
An engine's share of that limit says how much of each token's time goes to reading weights."""

from __future__ import annotations

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
    """Every parameter once (a tied table is one tensor), less the input table when the output layer is its own
    tensor (then the table is only looked up, a row a token)."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    table, head = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    return total if head is table else total - table.numel() * table.element_size()


@dataclass(frozen=True)
class Bandwidth:
    bytes_per_s: float
    threads: int  # CPUs it was measured on
    how: str


@dataclass(frozen=True)
class TransformersRate:
    """The loaded model's decode step in transformers, and this machine's bandwidth."""

    model_name: str
    weights: str  # "float32"
    bytes_per_token: int
    timing: Timing
    threads: int  # torch threads the step ran on
    bandwidth: Bandwidth
    cache_bytes: int | None  # the last-level cache, as the system reports it
    cpu: str

    @property
    def tokens_per_s(self) -> float:
        return 1000 / self.timing.median_ms


def measure(model, model_name: str, progress=None, bandwidth: Bandwidth | None = None) -> TransformersRate:
    """This machine's memory bandwidth (unless given, in a separate process on every CPU), then one decode step of
    `model` timed (the model is only called)."""
    if bandwidth is None:
        if progress:
            progress(0, 2, "this machine's memory bandwidth (a separate process on every CPU)")
        roof = measure_machine_roof()
        bandwidth = Bandwidth(roof.roof.bandwidth_bytes_per_s, roof.threads, roof.how.split("bandwidth: ")[-1])
    if progress:
        progress(1, 2, f"transformers: one decode step at {CONTEXT_TOKENS} tokens of context, timed")
    timing = time_decode_step(model, CONTEXT_TOKENS)
    weights = str(next(model.parameters()).dtype).removeprefix("torch.")
    return TransformersRate(
        model_name,
        weights,
        bytes_read_per_token(model),
        timing,
        torch.get_num_threads(),
        bandwidth,
        machine.last_level_cache_bytes(),
        machine.cpu_name(),
    )


def table(rate: TransformersRate, gguf: GGUFResult | None = None, copies: PrecisionComparison | None = None):
    """One row per engine and weights, most bytes first: measured tokens/s, the limit of its bytes, the share of
    it, whether they fit the cache. `gguf`: llama-server's rows of the same model; `copies`: the torch comparison's
    bfloat16 / int8 / int4 copies (float32 is the model timed here)."""
    rows = [(TRANSFORMERS, rate.weights, rate.bytes_per_token, rate.tokens_per_s)]
    rows += [
        (TRANSFORMERS, f"{p} {COPY}", r.weight_bytes, r.decode_tokens_per_s)
        for p, r in (copies.results if copies else {}).items()
        if p != REFERENCE
    ]
    rows += [
        (LLAMA_SERVER, t, r.bytes_per_token, r.decode_tokens_per_s) for t, r in (gguf.results if gguf else {}).items()
    ]
    frame = pd.DataFrame(rows, columns=["engine", "weights", "bytes per token", "measured tokens/s"])
    frame["bandwidth limit tokens/s"] = rate.bandwidth.bytes_per_s / frame["bytes per token"]
    frame["share of the limit"] = frame["measured tokens/s"] / frame["bandwidth limit tokens/s"]
    cache = rate.cache_bytes
    frame["fits in cache"] = [
        "unknown" if cache is None else "yes" if b <= cache else "no" for b in frame["bytes per token"]
    ]
    return frame.sort_values("bytes per token", ascending=False, kind="stable").reset_index(drop=True)


COLUMNS = {  # the page's columns: Streamlit's format and the hover help
    "bytes per token": ("localized", "The weights' bytes one decode pass reads, counted from the tensors"),
    "measured tokens/s": ("%.1f", "Decode tokens per second, measured on this machine"),
    "bandwidth limit tokens/s": ("%.1f", "This machine's measured memory bandwidth ÷ the bytes per token"),
    "share of the limit": ("percent", "Measured ÷ limit: above 100% only when the weights come from the cache"),
    "fits in cache": ("text", "Are the bytes per token no more than the last-level cache (as the system reports it)?"),
}
