"""What a llama-server started here can do, every run a replay on its own fresh, warmed-up server: one slot vs N on a
trace, the rate sweep, and capacity: a burst of requests sent at once, so the engine is never short of work, measured
over the window in which every slot was busy (from the moment the first N requests all streamed to the moment the
last N began to finish). With as many requests as slots that is decode at batch B, which the roofline predicts: one
decode pass of that batch at the window's mean context.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from inference.core.measuring import Progress
from inference.engines import llamacpp
from inference.engines.client import LLAMACPP
from inference.lessons.serving import models
from inference.lessons.serving.replay import SLO, EngineTarget, ReplayResult, replay, scaled
from inference.lessons.serving.request_trace import Trace, burst_trace, poisson_trace
from inference.lessons.serving.roofline import Roof, ServedModel, decode_pass, measure_machine_roof

SLOTS = 8  # the bench keys' name says 8 vs 1
PROMPT_TOKENS, REPLY_TOKENS = 16, 32
REQUESTS_PER_SLOT = 3  # a capacity burst: three waves of the batched server's slots
BATCHES = (1, 2, 4, 8)
BATCH_PROMPT_TOKENS, BATCH_REPLY_TOKENS = 16, 64  # decode at batch B: each request's lengths


@contextlib.contextmanager
def local_server(model: models.ModelOnEngine, slots: int):
    """A fresh, warmed-up llama-server for `model` with `slots` batched slots: yields its `EngineTarget`."""
    with llamacpp.serve(model.gguf, parallel=slots) as server:
        target = EngineTarget(server.url, LLAMACPP, model.label, slots)
        with target.client() as client:
            client.complete([0, 1, 2, 3], 4)  # a new server's first pass sets up its buffers
        yield target


def single_vs_batched(
    model: models.ModelOnEngine, trace: Trace, slots: int = SLOTS, progress: Progress | None = None
) -> dict[int, ReplayResult]:
    """The same trace with one slot (one request at a time) and with `slots` batched: {1: ..., slots: ...}."""
    n, out = len(trace.requests), {}
    for i, count in enumerate((1, slots)):
        with local_server(model, count) as target:
            out[count] = replay(trace, target, progress=scaled(progress, i * n, n, 2 * n))
    return out


def rate_sweep(
    model: models.ModelOnEngine,
    shape: str,
    rates: list[float],
    requests: int,
    seed: int,
    vocab_size: int,
    slots: int = SLOTS,
    slo: SLO = SLO(),
    progress: Progress | None = None,
) -> pd.DataFrame:
    """One server, one replay per arrival rate (the same requests on a squeezed clock): a row per rate with what the
    trace asked over its arrivals, what the server streamed in that window, throughput, p50/p95 TTFT and end to end,
    goodput."""
    rows = []
    with local_server(model, slots) as target:
        for i, rate in enumerate(sorted(rates)):
            trace = poisson_trace(shape, rate, requests, seed, vocab_size)
            result = replay(trace, target, progress=scaled(progress, i * requests, requests, len(rates) * requests))
            s = result.summary(slo)
            rows.append(
                {
                    "rate_per_s": rate,
                    "asked_tokens_per_s": trace.asked_tokens_per_s(),
                    "streamed_tokens_per_s": result.streamed_tokens_per_s(),
                    "throughput_tokens_per_s": s.throughput_tokens_per_s,
                    **{f"{m}_p{p}_ms": getattr(s, f"{m}_ms")[p] for m in ("ttft", "e2e") for p in (50, 95)},
                    "goodput_requests_per_s": s.goodput_requests_per_s,
                    "completed": s.completed,
                    "requests": s.requests,
                }
            )
    return pd.DataFrame(rows)


def knee_index(rates: list[float], p95_latency: list[float], factor: float = 2.0) -> int | None:
    """Where queues start to grow: the first rate (in increasing order) whose p95 latency is more than `factor`
    times the one at the lowest rate; None when no rate gets there."""
    order = sorted(range(len(rates)), key=lambda i: rates[i])
    return next((i for i in order[1:] if p95_latency[i] > factor * p95_latency[order[0]]), None)


@dataclass(frozen=True)
class Capacity:
    """A burst's saturated window: `batch` requests decoding together (the slots, or fewer requests)."""

    batch: int
    requests: int
    tokens_in_window: int
    window_s: float
    mean_context: float  # cached tokens per sequence, averaged over the window's tokens
    failures: int

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_in_window / self.window_s


def saturated(result: ReplayResult) -> Capacity:
    """Tokens/s over the window in which every slot was busy (module docstring), and each token's mean context (its
    prompt plus the reply tokens before it)."""
    streams = [r for r in result.records if r.token_times_s]
    batch = min(result.target.slots or 1, len(result.trace.requests))
    if len(streams) < batch:
        raise RuntimeError(f"only {len(streams)} requests streamed: {next(r.error for r in result.records if r.error)}")
    start = sorted(r.token_times_s[0] for r in streams)[batch - 1]
    end = sorted((r.token_times_s[-1] for r in streams), reverse=True)[batch - 1]
    if end <= start:
        raise RuntimeError(f"the {batch} requests were never all decoding at once")
    prompts = {q.index: q.prompt_tokens for q in result.trace.requests}
    contexts = [prompts[r.index] + i for r in streams for i, t in enumerate(r.token_times_s) if start < t <= end]
    failures = sum(not r.complete for r in result.records)
    return Capacity(batch, len(result.records), len(contexts), end - start, float(np.mean(contexts)), failures)


def one_vs_many(
    model: models.ModelOnEngine, slots: int = SLOTS, progress: Progress | None = None
) -> dict[int, Capacity]:
    """The same burst of `REQUESTS_PER_SLOT` x `slots` requests on a fresh server with 1 slot and with `slots`."""
    trace, out = burst_trace(REQUESTS_PER_SLOT * slots, PROMPT_TOKENS, REPLY_TOKENS), {}
    n = len(trace.requests)
    for i, count in enumerate((1, slots)):
        with local_server(model, count) as target:
            out[count] = saturated(replay(trace, target, progress=scaled(progress, i * n, n, 2 * n)))
    return out


def decode_batches(
    model: models.ModelOnEngine, batches: tuple[int, ...] = BATCHES, progress: Progress | None = None
) -> list[Capacity]:
    """Decode at each batch size B: B requests sent at once to one server with as many slots as the largest batch."""
    out = []
    with local_server(model, max(batches)) as target:
        for i, batch in enumerate(batches):
            if progress is not None:
                progress(i, len(batches), f"decoding {batch} requests together")
            out.append(saturated(replay(burst_trace(batch, BATCH_PROMPT_TOKENS, BATCH_REPLY_TOKENS), target)))
    return out


def predicted_vs_measured(served: ServedModel, roof: Roof, measured: list[Capacity]) -> pd.DataFrame:
    """A row per batch: measured and predicted decode tokens/s (one pass at the run's mean context), their ratio, and
    the bound the roofline says."""
    costs = [decode_pass(served, m.batch, round(m.mean_context)) for m in measured]
    table = pd.DataFrame(
        {
            "batch": [m.batch for m in measured],
            "measured_tokens_per_s": [m.tokens_per_s for m in measured],
            "predicted_tokens_per_s": [roof.tokens_per_s(c) for c in costs],
            "bound": [roof.bound(c) for c in costs],
        }
    )
    return table.assign(measured_vs_predicted=table["measured_tokens_per_s"] / table["predicted_tokens_per_s"])


def benchmark(model_key: str | None = None, log=print) -> dict:
    """Bench keys: capacity on the memory-bound random-weights model, 1 slot vs `SLOTS`, beside the roofline's
    ratio ({} with a reason when llama-server is not built)."""
    if not llamacpp.is_built():
        return {"serving_capacity_skipped": "llama-server is not built: python -m inference.engines llamacpp build"}
    model = models.model_on_engine(model_key or models.RANDOM)
    log(f"serving capacity: {model.label}, a burst of {REQUESTS_PER_SLOT * SLOTS} requests, 1 slot then {SLOTS}")
    runs = one_vs_many(model)
    table = predicted_vs_measured(
        ServedModel.from_safetensors(model.safetensors), measure_machine_roof().roof, [runs[1], runs[SLOTS]]
    )
    (one, many), (p_one, p_many) = table["measured_tokens_per_s"], table["predicted_tokens_per_s"]
    return {
        "serving_capacity_8_vs_1": round(many / one, 2),
        "serving_capacity_roofline": round(p_many / p_one, 2),
        "serving_capacity_tokens_per_s_1": round(one, 1),
        "serving_capacity_tokens_per_s_8": round(many, 1),
        "serving_capacity_roofline_tokens_per_s_1": round(p_one, 1),
        "serving_capacity_roofline_tokens_per_s_8": round(p_many, 1),
        "serving_capacity_model": model.label,
    }
