"""Decode speed of the MoE, its top-1 variant and the dense model, measured on the page: one definition (the
same forward path for every model, timed now on this machine), and a record of how it was made."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from inference.core import routing
from inference.core.machine import cpu_name

PROMPT = "Once upon a time, there was a little girl named Lily. She loved to"
REPEATS = 3
STEPS = 24
DENSE, MOE, MOE_TOP_1 = "dense", "MoE, top-2", "MoE, top-1"


@dataclass(frozen=True)
class DecodeTimes:
    ms_per_token: dict[str, float]  # model -> median decode ms per token
    cpu: str
    threads: int  # torch threads during the measurement
    repeats: int
    steps: int
    prompt_tokens: int


def measure(dense_model, moe_model, prompt_ids: list[int], progress=None) -> DecodeTimes:
    """The dense model, the MoE and its top-1 variant (the MoE's own tensors, router keeping one expert) timed by
    `routing.decode_timings`: greedy steps through transformers' forward with a KV cache, runs interleaved."""
    models = {DENSE: dense_model, MOE: moe_model, MOE_TOP_1: routing.variant(moe_model, k=1)}
    ms = routing.decode_timings(models, prompt_ids, repeats=REPEATS, steps=STEPS, progress=progress)
    return DecodeTimes(ms, cpu_name(), torch.get_num_threads(), REPEATS, STEPS, len(prompt_ids))
