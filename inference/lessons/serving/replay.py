"""Replay a trace against a serving engine with streaming: when every token arrived, and what that measured.

Each request is sent at its arrival time on its own thread, whether or not earlier ones have finished (what users
do, and what lets a batching engine batch); every token is timestamped on arrival (`measuring.now`); greedy, exactly
the trace's reply length, prompt cache off. `StatePoller` reads the engine's own view meanwhile. A replay stopped
early (`should_stop`, or the progress callback raising on cancel) drops unsent requests and closes open streams.
TTFT = first token - sent; TPOT = (last - first token) / (tokens - 1); end to end = last token - sent; throughput =
tokens / (last token - first send); goodput = requests within the SLO per second of that span.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from inference.core.measuring import Progress, ms_since, now
from inference.engines.client import LLAMACPP, EngineClient, EngineError
from inference.lessons.serving.request_trace import Request, Trace

READ_TIMEOUT_S = 600.0  # a request queued behind many others may wait minutes for its first byte
TICK_S = 0.005  # how often the scheduling loop looks at the clock
PROGRESS_S = 0.5
POLLER_READY_S = 5.0  # longest wait for the state poller's first read before the trace starts
PERCENTILES = (50, 95)
WARM_UP = Request(index=-1, arrival_s=0.0, prompt_ids=(0, 1, 2, 3), reply_tokens=4)


@dataclass(frozen=True)
class EngineTarget:
    """Where to send a trace: an engine's URL, its dialect (`client.LLAMACPP` or `client.VLLM`), and names."""

    url: str
    dialect: str
    model: str  # what it serves, for labels and cache keys
    slots: int | None = None  # parallel requests the engine batches, when known (llama-server's --parallel)


@dataclass(frozen=True)
class RequestRecord:
    index: int
    sent_s: float
    token_times_s: tuple[float, ...]  # arrival of every streamed token, in order
    token_ids: tuple[int, ...] = ()
    text: str = ""
    asked_tokens: int = 0
    server_prompt_ms: float | None = None  # the engine's own prefill time, when it reports one
    error: str | None = None

    @property
    def tokens(self) -> int:
        return len(self.token_times_s)

    @property
    def complete(self) -> bool:
        return self.error is None and self.tokens == self.asked_tokens

    @property
    def ttft_s(self) -> float | None:
        return self.token_times_s[0] - self.sent_s if self.token_times_s else None

    @property
    def tpot_s(self) -> float | None:
        return (self.token_times_s[-1] - self.token_times_s[0]) / (self.tokens - 1) if self.tokens > 1 else None

    @property
    def e2e_s(self) -> float | None:
        return self.token_times_s[-1] - self.sent_s if self.token_times_s else None

    @property
    def waiting_s(self) -> float | None:
        """TTFT minus the engine's own prefill time: waiting for a slot (and the loopback round trip)."""
        if self.ttft_s is None or self.server_prompt_ms is None:
            return None
        return max(0.0, self.ttft_s - self.server_prompt_ms / 1000)


def percentile(values, q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation; NaN when there are no values."""
    values = [v for v in values if v is not None]
    return float(np.percentile(values, q)) if values else float("nan")


@dataclass(frozen=True)
class SLO:
    """A service-level objective: a request is good when complete and its TTFT (and TPOT, if set) within bounds."""

    ttft_s: float = 1.0
    tpot_s: float | None = None

    def met_by(self, record: RequestRecord) -> bool:
        if not record.complete or record.ttft_s is None or record.ttft_s > self.ttft_s:
            return False
        return self.tpot_s is None or record.tpot_s is None or record.tpot_s <= self.tpot_s

    def describe(self) -> str:
        text = f"TTFT ≤ {self.ttft_s * 1000:g} ms"
        return text if self.tpot_s is None else f"{text} and time per token ≤ {self.tpot_s * 1000:g} ms"


@dataclass(frozen=True)
class RunSummary:
    requests: int
    completed: int
    reply_tokens: int
    duration_s: float
    throughput_tokens_per_s: float
    ttft_s: dict[int, float] = field(default_factory=dict)  # percentile -> seconds
    tpot_s: dict[int, float] = field(default_factory=dict)
    e2e_s: dict[int, float] = field(default_factory=dict)
    slo: SLO = SLO()
    good_requests: int = 0

    @property
    def goodput_requests_per_s(self) -> float:
        return self.good_requests / self.duration_s if self.duration_s > 0 else 0.0

    def percentiles_ms(self, **which: tuple[int, ...]) -> dict[str, float]:
        """Table columns in ms: `percentiles_ms(ttft=(50, 95))` gives ttft_p50_ms, ttft_p95_ms."""
        return {f"{name}_p{p}_ms": getattr(self, f"{name}_s")[p] * 1000 for name, ps in which.items() for p in ps}


def summarize(records: list[RequestRecord], slo: SLO = SLO()) -> RunSummary:
    received = [r for r in records if r.token_times_s]
    duration = max(r.token_times_s[-1] for r in received) - min(r.sent_s for r in records) if received else 0.0
    tokens = sum(r.tokens for r in records)
    return RunSummary(
        requests=len(records),
        completed=sum(r.complete for r in records),
        reply_tokens=tokens,
        duration_s=duration,
        throughput_tokens_per_s=tokens / duration if duration > 0 else 0.0,
        ttft_s={q: percentile([r.ttft_s for r in records], q) for q in PERCENTILES},
        tpot_s={q: percentile([r.tpot_s for r in records], q) for q in PERCENTILES},
        e2e_s={q: percentile([r.e2e_s for r in records], q) for q in PERCENTILES},
        slo=slo,
        good_requests=sum(slo.met_by(r) for r in records),
    )


def streamed_tokens_per_s(records: list[RequestRecord], window_s: float) -> float:
    """Reply tokens that arrived in the first `window_s` seconds (the trace's arrivals), per second: against
    `Trace.asked_tokens_per_s` it says whether the server kept up. NaN for an empty window."""
    if window_s <= 0:
        return float("nan")
    return sum(1 for r in records for t in r.token_times_s if t <= window_s) / window_s


def request_table(records: list[RequestRecord]) -> pd.DataFrame:
    """One row per request, what the Gantt draws: sent, prefill start, first and last token (s), TTFT/TPOT/e2e (ms)."""

    def ms(seconds):
        return None if seconds is None else seconds * 1000

    return pd.DataFrame(
        [
            {
                "request": r.index,
                "sent_s": r.sent_s,
                "prefill_start_s": None if r.waiting_s is None else r.sent_s + r.waiting_s,
                "first_token_s": r.token_times_s[0] if r.token_times_s else None,
                "last_token_s": r.token_times_s[-1] if r.token_times_s else None,
                "tokens": r.tokens,
                "asked_tokens": r.asked_tokens,
                "ttft_ms": ms(r.ttft_s),
                "tpot_ms": ms(r.tpot_s),
                "e2e_ms": ms(r.e2e_s),
                "error": r.error,
                "reply": r.text,
            }
            for r in records
        ]
    )


# -- the engine's own view while a trace runs ---------------------------------------------------------------
# llama-server: /slots (each slot's is_processing, n_prompt_tokens = prompt so far plus tokens generated) and
# /metrics' llamacpp:requests_deferred; vLLM: /metrics' num_requests_running / _waiting, kv_cache_usage_perc.


def _whole(value: float | None) -> int | None:
    return None if value is None else int(value)


def metric_total(metrics: dict[str, float], name: str) -> float | None:
    """A Prometheus value by name, summed over its label sets (vLLM labels every metric with the model)."""
    values = [v for key, v in metrics.items() if key.partition("{")[0] == name]
    return sum(values) if values else None


def read_state(client: EngineClient, t_s: float) -> dict:
    """One sample (t_s, running, waiting, kv_tokens, kv_used); raises EngineError when the engine does not answer."""
    if client.dialect == LLAMACPP:
        busy = [s for s in client.slots() if s.get("is_processing")]
        try:
            waiting = metric_total(client.metrics(), "llamacpp:requests_deferred")
        except EngineError:  # started without --metrics
            waiting = None
        kv_tokens = sum(int(s.get("n_prompt_tokens") or 0) for s in busy)
        return dict(t_s=t_s, running=len(busy), waiting=_whole(waiting), kv_tokens=kv_tokens, kv_used=None)
    metrics = client.metrics()
    used = metric_total(metrics, "vllm:kv_cache_usage_perc")
    return dict(
        t_s=t_s,
        running=_whole(metric_total(metrics, "vllm:num_requests_running")),
        waiting=_whole(metric_total(metrics, "vllm:num_requests_waiting")),
        kv_tokens=None,
        kv_used=metric_total(metrics, "vllm:gpu_cache_usage_perc") if used is None else used,  # older vLLM's name
    )


class StatePoller:
    """Reads the engine's state every `interval_s` on its own thread and connection until `stop()`."""

    def __init__(self, url: str, dialect: str, interval_s: float = 0.1):
        self.url, self.dialect, self.interval_s = url, dialect, interval_s
        self.started = now()  # the replay moves it to the trace's start
        self.samples: list[dict] = []
        self.error: str | None = None
        self.answered = threading.Event()  # set after the first read, answered or not: its connection is warm
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="engine-state", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            with EngineClient(self.url, dialect=self.dialect, timeout=5.0) as client:
                while not self._stop.is_set():
                    try:
                        self.samples.append(read_state(client, now()))  # re-based in stop()
                    except EngineError as err:
                        self.error = str(err)  # keep polling: one slow answer under load is not the end
                    self.answered.set()
                    self._stop.wait(self.interval_s)
        except Exception as err:  # noqa: BLE001 - a poller failure must never break the replay
            self.error = f"{type(err).__name__}: {err}"
        finally:
            self.answered.set()

    def stop(self) -> pd.DataFrame:
        self._stop.set()
        self._thread.join(timeout=10)
        rows = [dict(s, t_s=s["t_s"] - self.started) for s in self.samples]
        return pd.DataFrame(
            [r for r in rows if r["t_s"] >= 0], columns=["t_s", "running", "waiting", "kv_tokens", "kv_used"]
        )


@dataclass
class ReplayResult:
    trace: Trace
    target: EngineTarget
    records: list[RequestRecord]
    engine_states: pd.DataFrame
    cancelled: bool = False
    poller_error: str | None = None
    wall_s: float = 0.0

    def summary(self, slo: SLO = SLO()) -> RunSummary:
        return summarize(self.records, slo)

    def table(self) -> pd.DataFrame:
        lengths = self.trace.table()[["request", "prompt_tokens", "arrival_s"]]
        return lengths.merge(request_table(self.records), on="request", how="left")


class _InFlight:
    """One request on its own thread (all share one connection pool: creating a client per request costs
    milliseconds of CPU, which would delay the sends behind a burst)."""

    def __init__(self, request: Request, client: EngineClient, started: float):
        self.request, self.client, self.started = request, client, started
        self.record: RequestRecord | None = None
        self.cancelled = False
        self.response = None  # the streaming httpx response, once its headers arrived
        self.thread = threading.Thread(target=self._run, name=f"request-{request.index}", daemon=True)

    def _run(self) -> None:
        request = self.request
        sent = ms_since(self.started) / 1000
        try:
            completion = self.client.complete(
                list(request.prompt_ids), request.reply_tokens, stream=True, on_stream_open=self._opened
            )
            self.record = RequestRecord(
                index=request.index,
                sent_s=sent,
                token_times_s=tuple(sent + ms / 1000 for ms in completion.arrival_ms),
                token_ids=tuple(completion.token_ids),
                text=completion.text,
                asked_tokens=request.reply_tokens,
                server_prompt_ms=completion.timings.prompt_ms,
            )
        except Exception as err:  # noqa: BLE001 - every failure is kept as this request's error
            message = (
                "cancelled"
                if self.cancelled
                else (str(err) if isinstance(err, EngineError) else f"{type(err).__name__}: {err}")
            )
            self.record = RequestRecord(
                index=request.index, sent_s=sent, token_times_s=(), asked_tokens=request.reply_tokens, error=message
            )

    def _opened(self, response) -> None:
        self.response = response
        if self.cancelled:
            self.abort()

    def abort(self) -> None:
        """Cut the stream off: shutting the socket down wakes a read blocked on it (a request still queued in the
        engine sends nothing for a long time) and tells the engine the client is gone, so it drops the request."""
        self.cancelled = True
        stream = None if self.response is None else self.response.extensions.get("network_stream")
        sock = None if stream is None else stream.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)


def _client(target: EngineTarget) -> EngineClient:
    return EngineClient(target.url, dialect=target.dialect, timeout=READ_TIMEOUT_S, model=target.model)


def replay(
    trace: Trace,
    target: EngineTarget,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
    poll_interval_s: float = 0.1,
) -> ReplayResult:
    """Send every request of `trace` to `target` at its arrival time and record its stream (module docstring)."""
    client = _client(target)
    poller = StatePoller(target.url, target.dialect, poll_interval_s)
    # the trace's clock starts once the poller has read the engine once: on a busy machine its first answer took
    # longer than a short replay, which then had no sample of the engine's state
    poller.answered.wait(POLLER_READY_S)
    started = poller.started = now()
    pending = list(trace.requests)  # in arrival order
    running: list[_InFlight] = []
    total, cancelled = len(pending), False
    reported = (-1, 0.0)  # (finished, when): progress when a request finishes, or every PROGRESS_S
    try:
        while pending or any(f.thread.is_alive() for f in running):
            if should_stop is not None and should_stop():
                cancelled = True
                break
            clock = ms_since(started) / 1000
            while pending and pending[0].arrival_s <= clock:
                flight = _InFlight(pending.pop(0), client, started)
                flight.thread.start()
                running.append(flight)
            done = sum(1 for f in running if not f.thread.is_alive())
            if progress is not None and (done != reported[0] or clock - reported[1] > PROGRESS_S):
                progress(done, total, f"{len(running)} of {total} requests sent, {done} finished")
                reported = (done, clock)
            time.sleep(max(min(pending[0].arrival_s - clock, 0.05), TICK_S) if pending else 0.02)
    except BaseException:
        cancelled = True
        raise
    finally:
        if cancelled:
            for flight in running:
                flight.abort()
        for flight in running:
            flight.thread.join(timeout=10)
        client.close()
        states = poller.stop()
    records = sorted((f.record for f in running if f.record is not None), key=lambda r: r.index)
    return ReplayResult(trace, target, records, states, cancelled, poller.error, ms_since(started) / 1000)


def solo_run(target: EngineTarget, request: Request) -> RequestRecord:
    """One request alone (nothing else sent meanwhile): the reference a batched run's text must equal."""
    with _client(target) as client:
        flight = _InFlight(request, client, now())
        flight.thread.start()
        flight.thread.join()
    return flight.record


def scaled(progress: Progress | None, offset: int, span: int, total: int) -> Progress | None:
    """A sub-task's progress (done of its own total) mapped onto [offset, offset + span] of `total`."""
    if progress is None:
        return None
    return lambda done, of, what: progress(offset + round(span * done / max(of, 1)), total, what)


def replay_on_engine(url: str, trace: Trace, progress: Progress | None = None) -> ReplayResult:
    """`trace` against an engine started elsewhere (its dialect read from `/v1/models`), as it is configured."""
    with EngineClient(url) as client:
        target = EngineTarget(client.base_url, client.dialect, client.served_model().name, None)
    return replay(trace, target, progress=progress)
