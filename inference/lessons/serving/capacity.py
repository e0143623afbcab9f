"""Serving capacity, closed loop: N clients that always have a request waiting, against 1 slot and against N.

The Poisson replay (`experiments.single_vs_batched`) asks how a server copes with a given traffic; its batched-vs-
single ratio depends on whether that traffic outruns one slot on the machine at hand. Capacity asks what the server
can do at all: each of `clients` threads sends a request, reads its stream to the end and sends the next at once,
so the engine is never idle and never short of work. With 1 slot it answers them one at a time; with `clients`
slots it decodes them all in one batch.

Measured: decode throughput, the reply tokens that arrived while every client was in the loop (from the moment
the last client got its first token to the moment the first client got its last one) divided by that time. The
prefill of each new request falls inside the window too, as it does on a real server. Prompts are short and
every request asks for the same number of tokens, greedy, end-of-text ignored, prompt cache off (the client's
defaults), so the work is the same in both runs.

Predicted: the roofline (`roofline.decode_pass`, this machine's measured bandwidth and peak) for one decode pass
of batch 1 and of batch `clients` at the window's mean context: weights read once per pass whatever the batch,
so a memory-bound model's tokens per second grow with the batch until compute binds.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from inference.core.measuring import Progress
from inference.engines import llamacpp
from inference.engines.client import LLAMACPP, EngineClient
from inference.lessons.serving import random_model
from inference.lessons.serving.experiments import WARM_UP, ModelOnEngine, model_on_engine
from inference.lessons.serving.replay import READ_TIMEOUT_S, EngineTarget, solo_run
from inference.lessons.serving.roofline import Roof, ServedModel, decode_pass, measure_machine_roof
from inference.lessons.style import PALETTE, base_layout, legend_below

CLIENTS = 8  # the bench keys' name says 8 vs 1
PROMPT_TOKENS, REPLY_TOKENS = 16, 32
REQUESTS_PER_CLIENT = 3  # with one slot the window opens at the 8th request and closes at the 17th
MEASURED_COLOUR, PREDICTED_COLOUR = PALETTE["orange"], PALETTE["blue_grey"]


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
    """Send each prompt as soon as the previous reply has ended; record (sent, token arrival times) or the error."""
    for prompt in prompts:
        sent = time.perf_counter() - started
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
    """`clients` threads in a closed loop against `target` (module docstring); seeded prompts of filler tokens."""
    rng = np.random.default_rng(seed)
    prompts = [
        [[0, *map(int, rng.integers(1, vocab_size, prompt_tokens - 1))] for _ in range(requests_per_client)]
        for _ in range(clients)
    ]
    results: list[list] = [[] for _ in range(clients)]
    client = EngineClient(target.url, dialect=target.dialect, timeout=READ_TIMEOUT_S, model=target.model)
    started = time.perf_counter()
    threads = [
        threading.Thread(target=_client_loop, args=(client, prompts[i], reply_tokens, started, results[i]), daemon=True)
        for i in range(clients)
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        client.close()
    streams = [[t for _, times, _ in per_client for t in times] for per_client in results]
    failures = sum(error is not None for per_client in results for *_, error in per_client)
    if any(not s for s in streams):
        raise RuntimeError(f"a client received no tokens: {next(e for r in results for *_, e in r if e)}")
    start, end = max(s[0] for s in streams), min(s[-1] for s in streams)
    if end <= start:
        raise RuntimeError("the clients were never all in the loop at once: raise requests_per_client")
    inside = [t for s in streams for t in s if start < t <= end]
    # Each token's context: the prompt plus the reply tokens before it (replies restart at every request).
    contexts = [
        prompt_tokens + position
        for per_client in results
        for _, times, _ in per_client
        for position, t in enumerate(times)
        if start < t <= end
    ]
    return Capacity(target.slots or 1, clients, len(inside), end - start, float(np.mean(contexts)), failures)


def one_vs_many(model: ModelOnEngine, clients: int = CLIENTS, progress: Progress | None = None, **options) -> dict:
    """The same closed loop against a fresh llama-server with 1 slot and with `clients` slots: {slots: Capacity}."""
    out = {}
    for i, slots in enumerate((1, clients)):
        if progress is not None:
            progress(i, 2, f"{clients} clients, {slots} slot(s)")
        with llamacpp.serve(model.gguf, parallel=slots) as server:
            target = EngineTarget(server.url, LLAMACPP, model.label, slots)
            solo_run(target, WARM_UP)
            out[slots] = closed_loop(target, clients, **options)
    if progress is not None:
        progress(2, 2, "done")
    return out


def predicted(served: ServedModel, roof: Roof, batch: int, context: float) -> float:
    """Roofline tokens per second of one decode pass of `batch` sequences at `context` cached tokens each."""
    return roof.tokens_per_s(decode_pass(served, batch, round(context)))


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


def capacity_figure(result: CapacityComparison, presenter: bool = False) -> go.Figure:
    """Decode tokens/s with 1 slot and with N, measured beside the roofline's prediction for the same batch."""

    def clients(n: int) -> str:
        return f"{n} client" if n == 1 else f"{n} clients"

    names = [f"1 slot, {clients(result.one.clients)}", f"{result.many.slots} slots, {clients(result.many.clients)}"]
    measured = [result.one.tokens_per_s, result.many.tokens_per_s]
    roof = [result.predicted_one, result.predicted_many]
    fig = go.Figure()
    for values, name, colour in (
        (measured, "measured (closed loop)", MEASURED_COLOUR),
        (roof, "roofline prediction", PREDICTED_COLOUR),
    ):
        fig.add_bar(
            x=names, y=values, name=name, marker_color=colour, text=[f"{v:.0f}" for v in values], textposition="outside"
        )
    fig.update_layout(barmode="group", bargap=0.3)
    fig.update_yaxes(title="decode tokens/s", range=[0, 1.18 * max(measured + roof)])
    title = f"Capacity: {result.measured_ratio:.1f}× measured, {result.predicted_ratio:.1f}× predicted"
    return legend_below(base_layout(fig, title, presenter, height=360), y=-0.18)


def caption(result: CapacityComparison) -> str:
    """How the figure's numbers were obtained, with this run's own counts."""
    return (
        f"Measured: {result.many.clients} clients in a closed loop (each sends its next request when its reply "
        f"ends), {REPLY_TOKENS} greedy tokens per request, on llama-server with 1 slot and with {result.many.slots}; "
        f"decode tokens/s while every client was in the loop ({result.one.tokens_in_window} and "
        f"{result.many.tokens_in_window} tokens). Computed: the roofline's tokens/s for one decode pass of that batch "
        f"at the same mean context, from this machine's measured bandwidth and peak."
    )


def benchmark(model_key: str | None = None, log=print) -> dict:
    """Bench keys: the closed loop on the memory-bound random-weights model, 1 slot vs `CLIENTS`, beside the
    roofline's ratio for the same batches ({} with a reason when llama-server is not built)."""
    if not llamacpp.is_built():
        return {"serving_capacity_skipped": "llama-server is not built: python -m inference.engines llamacpp build"}
    model = model_on_engine(model_key or random_model.DEFAULT_PUBLIC_MODEL)
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
