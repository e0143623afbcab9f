"""Inside-the-engine figures for `python -m inference.bench`, each on fresh llama-servers started here:

- prefix_cache_ttft_miss_vs_hit: a cold request's time to first token over the median warm one's, for prompts
  sharing a 512-token prefix (16 own tokens each, one token asked), on the memory-bound SmolLM2-135M shape
  (random weights); prefix_cache_reused_tokens: the warm requests' `timings.cache_n` (the median).
- chunked_prefill_stalls_measured / _predicted: the stretched gaps each of 2 decoding co-tenants sees while a
  760-token prompt is prefilled with -b 256 -ub 256 (same model), and ceil(P / (b - N));
  chunked_prefill_iterations_by_server: the iterations the server's own progress events counted.
- kv_cache_kl_q8_0 / _q4_0 (and _top1_): mean KL (nats) and top-1 agreement against f32 keys and values, over the
  lesson's evaluation text, on the bundled model; kv_cache_bytes_per_token: per type, computed from the block
  layout and checked against the server's own line (a mismatch is reported, not hidden).
One run each; on a shared machine the times move by tens of percent.
"""

from __future__ import annotations

from inference.engines import llamacpp
from inference.lessons.engine_internals import chunked_prefill, kv_precision, prefix_cache, served

PREFIX_TOKENS, SUFFIX_TOKENS, REQUESTS = 512, 16, 3
STALL_PROMPT, STALL_BATCH, COTENANTS = 760, 256, 2
KL_POSITIONS = 192


def run(log=print) -> dict:
    if not llamacpp.is_built():
        return {"engine_internals_skipped": "llama-server is not built: python -m inference.engines llamacpp build"}
    out = {}
    big = served.engine_model(served.MEMORY_BOUND)
    log(f"engine internals: prefix cache, {big.label}")
    table = prefix_cache.shared_prefix(big, PREFIX_TOKENS, SUFFIX_TOKENS, REQUESTS)
    on = table[table["cache"]]
    warm = on.iloc[1:]
    out["prefix_cache_ttft_miss_vs_hit"] = round(on["ttft_ms"].iloc[0] / warm["ttft_ms"].median(), 2)
    out["prefix_cache_ttft_ms_miss"] = round(on["ttft_ms"].iloc[0], 1)
    out["prefix_cache_ttft_ms_hit"] = round(warm["ttft_ms"].median(), 1)
    out["prefix_cache_reused_tokens"] = int(warm["cached_tokens"].median())
    log(f"engine internals: stalls, -b {STALL_BATCH}")
    stalls = chunked_prefill.measure_stalls(big, STALL_PROMPT, STALL_BATCH, STALL_BATCH, COTENANTS)
    out["chunked_prefill_stalls_measured"] = stalls.measured
    out["chunked_prefill_stalls_predicted"] = stalls.predicted
    out["chunked_prefill_iterations_by_server"] = len(stalls.server_chunks)  # its progress events: exact
    out["chunked_prefill_setting"] = (
        f"{big.label}, {STALL_PROMPT}-token prompt, {COTENANTS} co-tenants, -b {STALL_BATCH} -ub {STALL_BATCH}"
    )
    out["chunked_prefill_longest_gap_ms"] = round(stalls.longest_gap_s() * 1000, 1)
    bundled = served.engine_model(served.BUNDLED)
    log("engine internals: KV cache types, bundled model")
    kv = kv_precision.compare(served.gguf(bundled.key), bundled.layers, bundled.kv_width, KL_POSITIONS).table
    rows = kv.set_index("type_k")
    for kind in ("q8_0", "q4_0"):
        out[f"kv_cache_kl_{kind}"] = float(f"{rows.loc[kind, 'mean_kl_vs_f32']:.3g}")
        out[f"kv_cache_top1_{kind}"] = round(float(rows.loc[kind, "top1_agreement_vs_f32"]), 4)
    per_type = kv.drop_duplicates("type_k").set_index("type_k")
    out["kv_cache_bytes_per_token"] = {t: int(b) for t, b in per_type["bytes_per_token"].items()}
    out["kv_cache_bytes_per_token_reported"] = {t: r for t, r in per_type["reported_bytes_per_token"].items()}
    out["kv_cache_decode_tokens_per_s"] = {c: round(v, 1) for c, v in zip(kv["cache"], kv["decode_tokens_per_s"])}
    return out
