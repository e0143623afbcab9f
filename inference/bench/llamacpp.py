"""llama-server's keys for `python -m inference.bench` (the same model and prompt, greedy, f32, one timed run each
after an untimed warm-up): `llamacpp_decode_tokens_per_s`, the server's own decode rate; `llamacpp_vs_engine`, that
over the step engine's decode rate; `remote_step_ms`, one remote Step on loopback (the whole-vocabulary answer parsed,
the app's pipeline and draw), median over one run. The server at INFERENCE_LAB_BENCH_LLAMACPP_URL, else one started
from the cached build (and stopped); {} when neither, saying why."""

from __future__ import annotations

import os
import statistics
from contextlib import nullcontext

from inference.core.measuring import Stopwatch
from inference.core.remote import connect
from inference.core.run import new_trace, run_greedy
from inference.engines import llamacpp
from inference.sampling.pipeline import SamplingSettings

STEP_SETTINGS = SamplingSettings(temperature=0.8, top_p=0.95)


def engine_figures(model, tokenizer, prompt_ids: list[int], new_tokens: int = 128) -> dict:
    url = os.environ.get("INFERENCE_LAB_BENCH_LLAMACPP_URL", "").strip()
    if not url and not llamacpp.is_built():
        print("llama.cpp figures skipped: llama-server is not built (python -m inference.engines llamacpp build)")
        return {}
    with nullcontext() if url else llamacpp.serve(None) as server:
        remote = connect(url or server.url, timeout=600)  # 128 tokens take minutes on a busy 2-core machine
        client = remote.model.client
        client.complete(prompt_ids, 8)  # warm-up: a first request or pass pays for allocations and threads
        run_greedy(model, tokenizer, prompt_ids, 8, stop_at_eos=False)
        server_rate = client.complete(prompt_ids, new_tokens).timings.decode_tokens_per_s
        local = run_greedy(model, tokenizer, prompt_ids, new_tokens, stop_at_eos=False)
        decode_ms = [r.forward_ms for r in local.records if r.phase == "decode"]
        engine_rate = len(decode_ms) / sum(decode_ms) * 1000
        trace = new_trace(remote.model, remote.tokenizer, prompt_ids, 32, stop_at_eos=False)
        step_ms = []
        for _ in range(32):
            with Stopwatch() as watch:
                trace.step(STEP_SETTINGS)
            step_ms.append(watch.ms)
        client.close()
    return {
        "llamacpp_decode_tokens_per_s": round(server_rate, 1) if server_rate else None,
        "llamacpp_vs_engine": round(server_rate / engine_rate, 2) if server_rate else None,
        "remote_step_ms": round(statistics.median(step_ms[1:]), 2),  # step 0 is the prefill
    }
