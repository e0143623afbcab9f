"""llama-server figures for `python -m inference.bench`: same model, same prompt, greedy, f32, one timed run
each after an untimed warm-up.

- llamacpp_decode_tokens_per_s: the server's own `timings.predicted_per_second` for `new_tokens` greedy tokens.
- llamacpp_vs_engine: that rate over the step engine's decode rate (decode steps / their forward time) on the
  same prompt and token count.
- remote_step_ms: one remote Step on loopback (request with the whole text, the whole-vocabulary answer parsed,
  the app's pipeline and draw), median over the steps of one run.

Uses the server at INFERENCE_LAB_BENCH_LLAMACPP_URL when set, else starts one from the cached build (and stops
it); returns {} when neither is possible, saying why.
"""

from __future__ import annotations

import os
import statistics
import time

from inference.core.remote import connect
from inference.core.run import new_trace, run_greedy
from inference.engines import llamacpp
from inference.sampling.pipeline import SamplingSettings

STEP_SETTINGS = SamplingSettings(temperature=0.8, top_p=0.95)


def engine_figures(model, tokenizer, prompt_ids: list[int], new_tokens: int = 128) -> dict:
    url = os.environ.get("INFERENCE_LAB_BENCH_LLAMACPP_URL", "").strip()
    server = None
    if not url:
        if not llamacpp.is_built():
            print("llama.cpp figures skipped: llama-server is not built (python -m inference.engines llamacpp build)")
            return {}
        server = llamacpp.serve(None)
        url = server.url
    try:
        remote = connect(url)
        client = remote.model.client
        # One untimed short run each first: a first request or pass pays for allocations and thread start-up.
        client.complete(prompt_ids, 8)
        run_greedy(model, tokenizer, prompt_ids, 8, stop_at_eos=False)
        completion = client.complete(prompt_ids, new_tokens)
        server_rate = completion.timings.decode_tokens_per_s

        local = run_greedy(model, tokenizer, prompt_ids, new_tokens, stop_at_eos=False)
        decode_ms = [r.forward_ms for r in local.records if r.phase == "decode"]
        engine_rate = len(decode_ms) / (sum(decode_ms) / 1000)

        trace = new_trace(remote.model, remote.tokenizer, prompt_ids, 32, stop_at_eos=False)
        step_ms = []
        for _ in range(32):
            start = time.perf_counter()
            trace.step(STEP_SETTINGS)
            step_ms.append((time.perf_counter() - start) * 1000)
        client.close()
        return {
            "llamacpp_decode_tokens_per_s": round(server_rate, 1) if server_rate else None,
            "llamacpp_vs_engine": round(server_rate / engine_rate, 2) if server_rate else None,
            "remote_step_ms": round(statistics.median(step_ms[1:]), 2),  # step 0 is the prefill
        }
    finally:
        if server is not None:
            server.stop()
