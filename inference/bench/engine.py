"""The step engine's keys for `python -m inference.bench`: the app's own run (transformers' forward behind
`Trace`, recording the full logits and a sampling view every step) against transformers' `model.generate`, prefill
and decode per token, and the sampling views.

Why the numbers look the way they do:
- Prefill (time to first token) pushes the whole prompt through the model in one pass: each weight read from
  memory is used for many tokens, so it is compute-bound and its cost per token falls as the prompt grows.
- Decode makes one token per pass: every weight is read for a single token, so it is memory-bandwidth-bound and
  its time per token is nearly flat.
- `engine_vs_generate`: both run the same forward; the engine also records every distribution and view, so the
  ratio says what that bookkeeping costs (or saves) against `generate`'s own loop on this machine.
"""

from __future__ import annotations

import statistics
import time

import torch

from inference.core.loader import encode_prompt
from inference.core.run import new_trace, run_greedy
from inference.sampling.pipeline import SamplingSettings, seen_mask
from inference.sampling.step_view import step_view, trace_summary

ALL_STAGES = SamplingSettings(temperature=0.8, top_k=50, top_p=0.9, min_p=0.05, repetition_penalty=1.2)
BENCH_PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her"
# Prompt lookup's own prompt: text that repeats itself, what lookup is made for (the keys without `_story`). It wins
# where the model's continuation repeats too; of six repeated-phrase prompts tried for issue #29 this one gained most.
LOOKUP_PROMPT = 'Tom said, "I want the ball. I want the ball. I want the ball.'


def median_time(fn, repeats: int, warmup: int = 1) -> tuple[float, list[float]]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def engine_vs_generate(model, tokenizer, new_tokens: int = 128, repeats: int = 5) -> dict:
    ids = encode_prompt(tokenizer, BENCH_PROMPT)
    counts = {}

    def run_engine():
        trace = run_greedy(model, tokenizer, ids, new_tokens, stop_at_eos=False)  # exactly `new_tokens` steps
        counts["engine"] = len(trace.records)

    input_ids = torch.tensor([ids])
    mask = torch.ones_like(input_ids)

    def run_generate():
        with torch.inference_mode():
            out = model.generate(
                input_ids,
                attention_mask=mask,
                do_sample=False,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                pad_token_id=tokenizer.eos_token_id,
            )
        counts["generate"] = out.shape[1] - len(ids)

    # Alternate the two, so a slow spell on a shared machine hits both alike.
    run_engine(), run_generate()  # warm-up
    times = {"engine": [], "generate": []}
    for _ in range(repeats):
        for name, fn in (("engine", run_engine), ("generate", run_generate)):
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    engine_s, generate_s = statistics.median(times["engine"]), statistics.median(times["generate"])
    engine_tps, generate_tps = counts["engine"] / engine_s, counts["generate"] / generate_s
    return {
        "engine_tokens_per_s": round(engine_tps, 1),
        "generate_tokens_per_s": round(generate_tps, 1),
        "engine_vs_generate": round(engine_tps / generate_tps, 2),
        "new_tokens": counts["engine"],
    }


def prefill_and_decode(model, tokenizer, prompt_tokens: int = 64, decode_tokens: int = 64, repeats: int = 5) -> dict:
    base = encode_prompt(tokenizer, BENCH_PROMPT * 10)
    ids = base[:prompt_tokens]
    ttft, decode = [], []
    for i in range(repeats + 1):
        records = run_greedy(model, tokenizer, ids, decode_tokens, stop_at_eos=False).records
        if i == 0:
            continue  # warm-up
        ttft.append(records[0].forward_ms)
        decode.append(statistics.median(r.forward_ms for r in records[1:]))
    return {
        "ttft_ms": round(statistics.median(ttft), 2),
        "decode_ms_per_token": round(statistics.median(decode), 3),
        "prompt_tokens": len(ids),
    }


def view_ms(vocab: int, repeats: int = 50) -> float:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(vocab, generator=gen) * 3
    seen = seen_mask(list(range(0, vocab, 97)), vocab)
    seconds, _ = median_time(lambda: step_view(logits, ALL_STAGES, seen, u=0.42), repeats, warmup=3)
    return round(seconds * 1000, 3)


def trace_view_ms(model, tokenizer, steps: int = 200, repeats: int = 10) -> float:
    trace = new_trace(model, tokenizer, encode_prompt(tokenizer, BENCH_PROMPT), steps, stop_at_eos=False)
    list(trace.run(SamplingSettings(temperature=0.9)))
    logits, seen = trace.logits_matrix(), trace.seen_masks()
    us = torch.tensor([r.u for r in trace.records], dtype=torch.float64)
    chosen = torch.tensor(trace.generated_ids)
    seconds, _ = median_time(lambda: trace_summary(logits, seen, ALL_STAGES, us, chosen), repeats, warmup=2)
    return round(seconds * 1000, 2)
