"""What a llama-server started here can do: one slot vs N on a trace, the rate sweep, decode at batch B against the
roofline, and capacity in a closed loop. Every run starts its own warmed-up server and stops it.

Closed loop: each client sends its next request as soon as its reply ends, so the engine is never short of work;
measured are the tokens that arrived while every client was in the loop (from the last first token to the first last
token) over that time. With one request per client it is decode at batch B; the roofline predicts one decode pass of
that batch at the window's mean context.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass

import numpy as np
import pandas as pd

from inference.core.measuring import Progress, ms_since, now
from inference.engines import llamacpp
from inference.engines.client import LLAMACPP, EngineClient
from inference.lessons.serving import models
from inference.lessons.serving.replay import (
    READ_TIMEOUT_S,
    SLO,
    WARM_UP,
    EngineTarget,
    ReplayResult,
    replay,
    scaled,
    solo_run,
    streamed_tokens_per_s,
)
from inference.lessons.serving.request_trace import Trace, poisson_trace
from inference.lessons.serving.roofline import Roof, ServedModel, decode_pass, measure_machine_roof

DEFAULT_SLOTS = CLIENTS = 8  # the bench keys' name says 8 vs 1
PROMPT_TOKENS, REPLY_TOKENS = 16, 32
REQUESTS_PER_CLIENT = 3  # with one slot the window opens at the 8th request and closes at the 17th
BATCHES = (1, 2, 4, 8)
BATCH_PROMPT_TOKENS, BATCH_REPLY_TOKENS = 16, 64  # decode at batch B: each request's lengths


@contextlib.contextmanager
def local_server(model: models.ModelOnEngine, slots: int):
    """A fresh, warmed-up llama-server for `model` with `slots` batched slots: yields its `EngineTarget`."""
    with llamacpp.serve(model.gguf, parallel=slots) as server:
        target = EngineTarget(server.url, LLAMACPP, model.label, slots)
        solo_run(target, WARM_UP)
        yield target


def single_vs_batched(
    model: models.ModelOnEngine, trace: Trace, slots: int = DEFAULT_SLOTS, progress: Progress | None = None
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
    slots: int = DEFAULT_SLOTS,
    slo: SLO = SLO(),
    progress: Progress | None = None,
) -> pd.DataFrame:
    """One server, one replay per arrival rate (the same requests on a squeezed clock): a row per rate with what
    the trace asked over its arrivals, what the server streamed in that window, throughput, p50/p95 TTFT and end to
    end, goodput."""
    rows = []
    with local_server(model, slots) as target:
        for i, rate in enumerate(sorted(rates)):
            trace = poisson_trace(shape, rate, requests, seed, vocab_size)
            result = replay(trace, target, progress=scaled(progress, i * requests, requests, len(rates) * requests))
            summary = result.summary(slo)
            rows.append(
                {
                    "rate_per_s": rate,
                    "asked_tokens_per_s": trace.asked_tokens_per_s(),
                    "streamed_tokens_per_s": streamed_tokens_per_s(result.records, trace.duration_s),
                    "throughput_tokens_per_s": summary.throughput_tokens_per_s,
                    **summary.percentiles_ms(ttft=(50, 95), e2e=(50, 95)),
                    "goodput_requests_per_s": summary.goodput_requests_per_s,
                    "completed": summary.completed,
                    "requests": summary.requests,
                }
            )
    return pd.DataFrame(rows)


def knee_index(rates: list[float], p95_latency: list[float], factor: float = 2.0) -> int | None:
    """Where queues start to grow: the first rate (in increasing order) whose p95 latency is more than `factor`
    times the one at the lowest rate; None when no rate gets there."""
    if not rates:
        return None
    order = sorted(range(len(rates)), key=lambda i: rates[i])
    return next((i for i in order[1:] if p95_latency[i] > factor * p95_latency[order[0]]), None)


@dataclass(frozen=True)
class Capacity:
    """One closed-loop run: `clients` clients against a server with `slots` slots."""

    slots: int
    clients: int
    tokens_in_window: int
    window_s: float
    mean_context: float  # cached tokens per sequence, averaged over the window's tokens
    failures: int

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_in_window / self.window_s


def _client_loop(client: EngineClient, prompts: list[list[int]], reply_tokens: int, started: float, out: list):
    """Send each prompt as soon as the previous reply has ended; record (sent, token arrival times, error)."""
    for prompt in prompts:
        sent = ms_since(started) / 1000
        try:
            completion = client.complete(prompt, reply_tokens, stream=True)
            out.append((sent, [sent + ms / 1000 for ms in completion.arrival_ms], None))
        except Exception as err:  # noqa: BLE001 - kept as this request's failure
            out.append((sent, [], f"{type(err).__name__}: {err}"))


def closed_loop(
    target: EngineTarget,
    clients: int = CLIENTS,
    requests_per_client: int = REQUESTS_PER_CLIENT,
    prompt_tokens: int = PROMPT_TOKENS,
    reply_tokens: int = REPLY_TOKENS,
    seed: int = 0,
    vocab_size: int = 4096,
) -> Capacity:
    """`clients` threads in a closed loop against `target` (module docstring), seeded filler prompts."""
    rng = np.random.default_rng(seed)
    prompts = [
        [[0, *map(int, rng.integers(1, vocab_size, prompt_tokens - 1))] for _ in range(requests_per_client)]
        for _ in range(clients)
    ]
    results: list[list] = [[] for _ in range(clients)]
    with EngineClient(target.url, dialect=target.dialect, timeout=READ_TIMEOUT_S, model=target.model) as client:
        started = now()
        threads = [
            threading.Thread(target=_client_loop, args=(client, prompts[i], reply_tokens, started, results[i]))
            for i in range(clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    streams = [[t for _, times, _ in per_client for t in times] for per_client in results]
    if any(not s for s in streams):
        raise RuntimeError(f"a client received no tokens: {next(e for r in results for *_, e in r if e)}")
    start, end = max(s[0] for s in streams), min(s[-1] for s in streams)
    if end <= start:
        raise RuntimeError(f"the {clients} clients were never all decoding at once (fewer slots than clients?)")
    # each token's context: its prompt plus the reply tokens before it
    contexts = [
        prompt_tokens + position
        for per_client in results
        for _, times, _ in per_client
        for position, t in enumerate(times)
        if start < t <= end
    ]
    failures = sum(error is not None for per_client in results for *_, error in per_client)
    return Capacity(target.slots or 1, clients, len(contexts), end - start, float(np.mean(contexts)), failures)


def one_vs_many(
    model: models.ModelOnEngine, clients: int = CLIENTS, progress: Progress | None = None
) -> dict[int, Capacity]:
    """The same closed loop on a fresh server with 1 slot and with `clients` slots: {slots: Capacity}."""
    out = {}
    for i, slots in enumerate((1, clients)):
        if progress is not None:
            progress(i, 2, f"{clients} clients, {slots} slot(s)")
        with local_server(model, slots) as target:
            out[slots] = closed_loop(target, clients)
    return out


def decode_batches(
    model: models.ModelOnEngine, batches: tuple[int, ...] = BATCHES, progress: Progress | None = None
) -> list[Capacity]:
    """Decode at each batch size B: B requests sent at once (a closed loop of one request each) on one server with
    as many slots as the largest batch."""
    out = []
    with local_server(model, max(batches)) as target:
        for i, batch in enumerate(batches):
            if progress is not None:
                progress(i, len(batches), f"decoding {batch} requests together")
            out.append(closed_loop(target, batch, 1, BATCH_PROMPT_TOKENS, BATCH_REPLY_TOKENS))
    return out


def predicted(served: ServedModel, roof: Roof, batch: int, context: float) -> float:
    """Roofline tokens per second of one decode pass of `batch` sequences at `context` cached tokens each."""
    return roof.tokens_per_s(decode_pass(served, batch, round(context)))


def predicted_vs_measured(served: ServedModel, roof: Roof, measured: list[Capacity]) -> pd.DataFrame:
    """A row per batch size: measured and predicted decode tokens/s, their ratio, the bound the roofline says."""
    rows = []
    for m in measured:
        cost = decode_pass(served, m.clients, round(m.mean_context))
        rows.append(
            {
                "batch": m.clients,
                "measured_tokens_per_s": m.tokens_per_s,
                "predicted_tokens_per_s": roof.tokens_per_s(cost),
                "measured_vs_predicted": m.tokens_per_s / roof.tokens_per_s(cost),
                "bound": roof.bound(cost),
            }
        )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class CapacityComparison:
    one: Capacity
    many: Capacity
    predicted_one: float
    predicted_many: float

    @property
    def measured_ratio(self) -> float:
        return self.many.tokens_per_s / self.one.tokens_per_s

    @property
    def predicted_ratio(self) -> float:
        return self.predicted_many / self.predicted_one


def compare(runs: dict[int, Capacity], served: ServedModel, roof: Roof) -> CapacityComparison:
    """Measured against predicted, each batch at its own run's mean context."""
    one, many = runs[1], runs[max(runs)]
    return CapacityComparison(
        one, many, predicted(served, roof, 1, one.mean_context), predicted(served, roof, many.slots, many.mean_context)
    )


def benchmark(model_key: str | None = None, log=print) -> dict:
    """Bench keys: the closed loop on the memory-bound random-weights model, 1 slot vs `CLIENTS`, beside the
    roofline's ratio ({} with a reason when llama-server is not built)."""
    if not llamacpp.is_built():
        return {"serving_capacity_skipped": "llama-server is not built: python -m inference.engines llamacpp build"}
    model = models.model_on_engine(model_key or models.DEFAULT_PUBLIC_MODEL)
    log(f"serving capacity: {model.label}, {CLIENTS} clients in a closed loop, 1 slot then {CLIENTS}")
    result = compare(one_vs_many(model), ServedModel.from_safetensors(model.safetensors), measure_machine_roof().roof)
    return {
        "serving_capacity_8_vs_1": round(result.measured_ratio, 2),
        "serving_capacity_roofline": round(result.predicted_ratio, 2),
        "serving_capacity_tokens_per_s_1": round(result.one.tokens_per_s, 1),
        "serving_capacity_tokens_per_s_8": round(result.many.tokens_per_s, 1),
        "serving_capacity_roofline_tokens_per_s_1": round(result.predicted_one, 1),
        "serving_capacity_roofline_tokens_per_s_8": round(result.predicted_many, 1),
        "serving_capacity_model": model.label,
    }
