"""One folder per lesson (page), each holding its computation, its sentences (`text.py` where it has
them) and its figures (`figures.py`): start, generate, sampling_lab, compare, prefill_decode, kv_cache,
quantization, moe, cost, speculative, serving. `style` is what the figures share. A lesson imports
core, sampling and engines; nothing below a lesson imports it."""
