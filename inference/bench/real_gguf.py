"""llama-server's decode rate per GGUF type of SmolLM2-135M-Instruct, and the same model's rate three ways, for
`python -m inference.bench`.

- real_gguf_decode_tokens_per_s: {type: tokens/s}, each type on its own llama-server, the median of `rounds` greedy
  runs of `new_tokens` tokens from the server's own timings, after an untimed warm-up. Goal (issue #45): q8_0 or a
  4-bit type at least 1.8x f32 (on an idle 2-core AMD EPYC: f32 51-53, q8_0 97, q4_K_M 92, Q4_1 95).
- real_decode_rates: the Quantization page's decode-rate table as numbers, per "engine weights" row: tokens/s, the
  bandwidth limit of its bytes and the share of it (transformers timed on the app's torch threads, as the page does).
"""

from __future__ import annotations

import math

import torch

from inference.core import real_model
from inference.core.limits import Limits
from inference.core.loader import load_model
from inference.core.machine import logical_cpus
from inference.lessons.quantization import gguf, rates

KEY = "real_gguf_decode_tokens_per_s"
RATES_KEY = "real_decode_rates"


def real_gguf_figures(new_tokens=128, rounds=3, threads=None, bandwidth_gbs: float | None = None) -> dict:
    reason = gguf.unavailable_reason()
    if reason:
        print(f"{KEY} skipped: {reason}")
        return {}
    try:
        servers = gguf.measure(positions=0, decode_tokens=new_tokens, rounds=rounds, threads=threads)
    except (gguf.EngineError, RuntimeError, OSError) as err:  # a timeout on a busy machine ends this key, not the run
        print(f"{KEY} not measured: {err}")
        return {}
    by_type = {t: round(r.decode_tokens_per_s, 1) for t, r in servers.results.items()}
    return {KEY: by_type, RATES_KEY: decode_rates(servers, bandwidth_gbs)[1]}


def decode_rates(servers: gguf.GGUFResult | None, bandwidth_gbs: float | None = None):
    """The page's table for SmolLM2 with `servers`' llama-server rows, and its record for the bench's JSON."""
    loaded = load_model(real_model.REAL_MODEL_NAME)
    bandwidth = rates.Bandwidth(bandwidth_gbs * 1e9, logical_cpus(), "the roofline's") if bandwidth_gbs else None
    before = torch.get_num_threads()
    torch.set_num_threads(Limits.from_env().torch_threads)  # as the page times it (the app's setting)
    try:
        rate = rates.measure(loaded.model, loaded.info.name, bandwidth=bandwidth)
    finally:
        torch.set_num_threads(before)
    frame = rates.table(rate, servers)
    record = {"bandwidth_gbs": round(rate.bandwidth.bytes_per_s / 1e9, 2), "transformers_threads": rate.threads}
    for r in frame.itertuples(index=False):
        finite = math.isfinite(r[3])
        record[f"{r.engine} {r.weights}"] = {
            "tokens_per_s": round(float(r[3]), 1) if finite else None,
            "limit_tokens_per_s": round(float(r[4]), 1),
            "share_of_limit": round(float(r[5]), 3) if finite else None,
            "bytes_per_token": int(r[2]),
        }
    return frame, record


if __name__ == "__main__":
    figures = real_gguf_figures()
    if figures:
        print({KEY: figures[KEY]})
        print(figures[RATES_KEY])
