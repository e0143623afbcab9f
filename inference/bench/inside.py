"""Bench key of the Inside page: `inside_ms_300`, the page's computation (`look_inside`: one prefill timed
part by part, five timed decode passes, the lens, the rank heat map, the attention) for a 300-token context.
Goal: <= 200 ms, so a step or prompt change redraws the page quickly (a layer pick reruns nothing).
`inside_plain_prefill_ms_300` is transformers' own forward over the same tokens, timed alongside: the floor,
since the page times one prefill of the context (on a busy machine both grow alike)."""

from __future__ import annotations

import statistics

from inference.core.forward import PREFILL, TransformersForward
from inference.core.loader import encode_prompt
from inference.core.measuring import Stopwatch
from inference.lessons.inside.forward_pass import look_inside

CONTEXT_TOKENS = 300
STORY = (
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
    "friends. One day, she found a big red ball under a tree and ran to show her mom. "
)


def context_ids(tokenizer, tokens: int = CONTEXT_TOKENS) -> list[int]:
    text = STORY
    while len(encode_prompt(tokenizer, text)) < tokens:
        text += STORY
    return encode_prompt(tokenizer, text)[:tokens]


def inside_figures(model, tokenizer, repeats: int = 5) -> dict:
    ids = context_ids(tokenizer)
    look_inside(model, ids)  # warm-up: first allocations for this shape
    times, plain = [], []
    for _ in range(repeats):  # interleaved, so a busy spell hits both alike
        with Stopwatch() as watch:
            look_inside(model, ids)
        times.append(watch.ms)
        plain.append(TransformersForward(model, None).next_pass(ids, PREFILL).forward_ms)
    return {
        "inside_ms_300": round(statistics.median(times), 1),
        "inside_plain_prefill_ms_300": round(statistics.median(plain), 1),
    }
