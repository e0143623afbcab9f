"""GGUF files, the formats people download for llama.cpp, beside the torchao copies on the Quantization page.

For each GGUF type: bytes from the file, decode tokens/s from llama-server's own `timings`, and quality against
the app's float32 model over the same teacher-forced text the torchao rows use (the prompt plus float32's greedy
tokens): at every position the server returns its whole next-token distribution, compared with float32's
(KL, top-1 agreement, probability of float32's token), plus where the server's own greedy text departs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import torch

from inference.core.quantize import compare_to_reference, teacher_forced_logits
from inference.engines import llamacpp
from inference.engines.client import LLAMACPP, EngineClient, EngineError  # noqa: F401  (EngineError: for the page)
from inference.lessons.quantization.experiments import drift_columns, first_departure, precision_table

# f32 first: the same engine's baseline for speed (and a check that the file itself changes nothing).
GGUF_ROWS = ("f32", "q8_0", "q4_K_M")
SPEED_ROUNDS = 3  # the median of three: one slow run on a shared machine does not set the figure


@dataclass(frozen=True)
class GGUFResult:
    gguf_type: str
    file_bytes: int
    decode_tokens_per_s: float  # median of the rounds, from the server's timings.predicted_per_second
    greedy_ids: list[int]
    first_departure: int | None
    steps: pd.DataFrame  # compare_to_reference columns, one row per teacher-forced position


def available() -> bool:
    return llamacpp.is_built()


def server_distributions(
    client: EngineClient, sequence: list[int], first_row: int, steps: int, vocab_size: int
) -> torch.Tensor:
    """[steps, vocab] log-probabilities the server gives after each prefix sequence[:first_row + 1 + t]
    (the prompt cache makes each request evaluate one new token)."""
    rows = torch.empty(steps, vocab_size, dtype=torch.float64)
    for t in range(steps):
        dist = client.next_token(sequence[: first_row + 1 + t], vocab_size, vocab_size)
        rows[t] = torch.full((vocab_size,), -math.inf, dtype=torch.float64).index_put_((dist.token_ids,), dist.logprobs)
    return rows


def measure_gguf(
    model,
    prompt_ids: list[int],
    reference_ids: list[int],
    gguf_type: str,
    source: str | None = None,
    reference_logits: torch.Tensor | None = None,
) -> GGUFResult:
    """One GGUF type of the model (bundled, or a local folder `source`) measured on a llama-server started
    for it and stopped after."""
    gguf = llamacpp.convert(source, gguf_type)
    sequence = list(prompt_ids) + list(reference_ids)
    first_row = len(prompt_ids) - 1
    if reference_logits is None:
        with torch.inference_mode():
            reference_logits = teacher_forced_logits(model, sequence)[first_row : first_row + len(reference_ids)]
    vocab = reference_logits.shape[-1]
    with llamacpp.serve(gguf) as server, EngineClient(server.url, dialect=LLAMACPP) as client:
        logprobs = server_distributions(client, sequence, first_row, len(reference_ids), vocab)
        rates, greedy = [], []
        for _ in range(SPEED_ROUNDS):
            completion = client.complete(list(prompt_ids), len(reference_ids))
            greedy = completion.token_ids
            if completion.timings.decode_tokens_per_s is not None:
                rates.append(completion.timings.decode_tokens_per_s)
    steps = compare_to_reference(reference_logits, logprobs.float(), reference_ids).drop(columns="reference_token")
    return GGUFResult(
        gguf_type=gguf_type,
        file_bytes=gguf.stat().st_size,
        decode_tokens_per_s=statistics.median(rates) if rates else math.nan,
        greedy_ids=list(greedy),
        first_departure=first_departure(list(greedy), list(reference_ids)),
        steps=steps,
    )


def measure_ggufs(
    model,
    prompt_ids: list[int],
    reference_ids: list[int],
    source: str | None = None,
    types=GGUF_ROWS,
    progress: Callable | None = None,
) -> dict[str, GGUFResult]:
    sequence = list(prompt_ids) + list(reference_ids)
    first_row = len(prompt_ids) - 1
    with torch.inference_mode():
        reference = teacher_forced_logits(model, sequence)[first_row : first_row + len(reference_ids)]
    out = {}
    for done, gguf_type in enumerate(types):
        if progress:
            progress(done, len(types), f"GGUF {gguf_type}: converting (once), serving, measuring")
        out[gguf_type] = measure_gguf(model, prompt_ids, reference_ids, gguf_type, source, reference)
    if progress:
        progress(len(types), len(types), "done")
    return out


def gguf_table(results: dict[str, GGUFResult]) -> pd.DataFrame:
    """One row per GGUF type, in the columns of `experiments.summary_table` that apply to a file. Size and
    speed are relative to the GGUF f32 file on the same server (llama.cpp's kernels, not torch's)."""
    base = results.get("f32")
    float32_bytes = base.file_bytes if base else math.nan
    float32_tokens_per_s = base.decode_tokens_per_s if base else math.nan
    rows = []
    for gguf_type, result in results.items():
        rows.append(
            {
                "precision": f"GGUF {gguf_type}",
                "weight_bytes": result.file_bytes,
                "size_vs_float32": result.file_bytes / float32_bytes,
                "decode_tokens_per_s": result.decode_tokens_per_s,
                "speed_vs_float32": result.decode_tokens_per_s / float32_tokens_per_s,
                **drift_columns(result.steps, result.first_departure),
            }
        )
    return precision_table(rows)


DISPLAY_COLUMNS = {
    "precision": "format",
    "engine": "runs in",
    "weight_bytes": "weight bytes",
    "size_vs_float32": "size vs float32",
    "decode_tokens_per_s": "decode tokens/s",
    "speed_vs_float32": "speed vs its float32",
    "mean_kl_nats": "mean KL from float32 (nats)",
    "top1_agreement": "top-1 agreement",
}


def side_by_side(torchao_summary: pd.DataFrame, gguf: pd.DataFrame) -> pd.DataFrame:
    """The torchao rows (this app's engine) and the GGUF rows (llama-server) in one table. Speed is relative
    to float32 on the same engine: the two engines' kernels differ, so only ratios within one compare."""
    local = torchao_summary.assign(engine="this app (torch)")
    served = gguf.assign(engine="llama-server")
    both = pd.concat([local, served], ignore_index=True)
    return both[list(DISPLAY_COLUMNS)].rename(columns=DISPLAY_COLUMNS)
