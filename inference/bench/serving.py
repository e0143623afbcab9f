"""Serving figures for `python -m inference.bench`: batched vs one-at-a-time throughput, p95 TTFT, the roofline.

Each model gets a trace that arrives faster than one slot can answer (so throughput measures what the server can
do, not what the traffic asks): the same trace with 1 slot and with `SLOTS`, on fresh llama-servers. One run each;
the machine is shared, so these move by tens of percent between runs.
"""

from __future__ import annotations

from inference.engines import llamacpp
from inference.lessons.serving import capacity, models
from inference.lessons.serving.request_trace import poisson_trace
from inference.lessons.serving.roofline import measure_machine_roof

SLOTS = 8
# (bench key suffix, model, arrival rate per s, requests): rates well past one slot's capacity on a 2-core CPU
# (the bundled model answers ~30 short-chat requests/s alone, the memory-bound one well under 1).
RUNS = (("_bundled", models.BUNDLED, 64.0, 32), ("", models.RANDOM, 4.0, 16))


def run(log=print) -> dict:
    roof = measure_machine_roof()
    out = {
        "roofline_bandwidth_gbs": round(roof.roof.bandwidth_bytes_per_s / 1e9, 2),
        "roofline_peak_gflops_fp32": round(roof.roof.peak_flops / 1e9, 1),
        "roofline_how": roof.how,
    }
    if not llamacpp.is_built():
        return out | {"serving_skipped": "llama-server is not built: python -m inference.engines llamacpp build"}
    for suffix, model_key, rate, requests in RUNS:
        log(f"serving: {model_key}, {requests} requests at {rate:g}/s, 1 slot then {SLOTS}")
        model, trace = models.model_on_engine(model_key), poisson_trace("short chat", rate, requests, 0, models.VOCAB)
        results = capacity.single_vs_batched(model, trace, SLOTS)
        one, many = results[1].summary(), results[SLOTS].summary()
        out[f"serving_batched_vs_single_throughput{suffix}"] = round(
            many.throughput_tokens_per_s / one.throughput_tokens_per_s, 2
        )
        out[f"serving_tokens_per_s_single{suffix}"] = round(one.throughput_tokens_per_s, 1)
        out[f"serving_tokens_per_s_batched{suffix}"] = round(many.throughput_tokens_per_s, 1)
        if suffix == "":
            out["serving_ttft_p95_ms_batched"] = round(many.ttft_ms[95], 1)
            out["serving_ttft_p95_ms_single"] = round(one.ttft_ms[95], 1)
        out[f"serving_trace{suffix}"] = f"{trace.key}, {SLOTS} slots, {model.label}"
    return out
