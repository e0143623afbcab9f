"""The one replay path: send each request of a trace at its arrival time (on its own thread, whether or not earlier
ones have finished: what users do, and what lets an engine batch) and timestamp every streamed token on arrival.

Greedy, exactly the trace's reply length, prompt cache off; a `StatePoller` reads the engine's own view meanwhile.
TTFT = first token - sent; TPOT = (last - first token) / (tokens - 1); end to end = last token - sent; throughput =
tokens / (last token - first send); goodput = requests within the SLO per second of that span. A replay stopped early
(`should_stop`, or the progress callback raising on cancel) drops unsent requests and cuts open streams off.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from inference.core.measuring import Progress, ms_since, now
from inference.engines.client import LLAMACPP, EngineClient, EngineError
from inference.lessons.serving.request_trace import Request, Trace

READ_TIMEOUT_S = 600.0  # a request queued behind many others may wait minutes for its first byte
POLLER_READY_S = 5.0  # longest wait for the state poller's first read before the trace starts
STATE_COLUMNS = ["t_s", "running", "waiting", "kv_tokens", "kv_used"]
TIMES = ("ttft", "tpot", "e2e")  # each request's times a summary takes the p50 and p95 of
TABLE_COLUMNS = ["request", "sent_s", "prefill_start_s", "first_token_s", "last_token_s", "tokens", "ttft_ms"]
TABLE_COLUMNS += ["e2e_ms", "error", "reply"]  # a request's row in what the Gantt draws


@dataclass(frozen=True)
class EngineTarget:
    url: str
    dialect: str  # client.LLAMACPP or client.VLLM
    model: str  # what it serves, for labels and cache keys
    slots: int | None = None  # requests the engine batches, when known (llama-server's --parallel)

    def client(self, timeout: float = READ_TIMEOUT_S) -> EngineClient:
        return EngineClient(self.url, dialect=self.dialect, timeout=timeout, model=self.model)


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
    """The q-th percentile (0-100) by linear interpolation, Nones left out; NaN when there are no values."""
    values = [v for v in values if v is not None]
    return float(np.percentile(values, q)) if values else float("nan")


@dataclass(frozen=True)
class SLO:
    """A service-level objective: a request is good when complete and its time to first token within bounds."""

    ttft_s: float = 1.0

    def met_by(self, record: RequestRecord) -> bool:
        return record.complete and record.ttft_s <= self.ttft_s

    def describe(self) -> str:
        return f"TTFT ≤ {self.ttft_s * 1000:g} ms"


@dataclass(frozen=True)
class RunSummary:
    requests: int
    completed: int
    duration_s: float
    throughput_tokens_per_s: float
    ttft_ms: dict[int, float]  # percentile (50, 95) -> milliseconds
    tpot_ms: dict[int, float]
    e2e_ms: dict[int, float]
    slo: SLO
    good_requests: int

    @property
    def goodput_requests_per_s(self) -> float:
        return self.good_requests / self.duration_s if self.duration_s > 0 else 0.0


def summarize(records: list[RequestRecord], slo: SLO = SLO()) -> RunSummary:
    received = [r for r in records if r.token_times_s]
    duration = max(r.token_times_s[-1] for r in received) - min(r.sent_s for r in records) if received else 0.0
    tokens = sum(r.tokens for r in records)
    return RunSummary(
        requests=len(records),
        completed=sum(r.complete for r in records),
        duration_s=duration,
        throughput_tokens_per_s=tokens / duration if duration > 0 else 0.0,
        **{
            f"{m}_ms": {q: 1000 * percentile([getattr(r, f"{m}_s") for r in records], q) for q in (50, 95)}
            for m in TIMES
        },
        slo=slo,
        good_requests=sum(slo.met_by(r) for r in records),
    )


# -- the engine's own view while a trace runs ---------------------------------------------------------------
# llama-server: /slots (each slot's is_processing, n_prompt_tokens = prompt so far plus tokens generated) and
# /metrics' llamacpp:requests_deferred; vLLM: /metrics' num_requests_running / _waiting, kv_cache_usage_perc.


def metric_total(metrics: dict[str, float], name: str) -> float | None:
    """A Prometheus value by name, summed over its label sets (vLLM labels every metric with the model)."""
    values = [v for key, v in metrics.items() if key.partition("{")[0] == name]
    return sum(values) if values else None


def read_state(client: EngineClient) -> dict:
    """One sample (t_s, running, waiting, kv_tokens, kv_used); raises EngineError when the engine does not answer."""
    if client.dialect == LLAMACPP:
        busy = [s for s in client.slots() if s.get("is_processing")]
        try:
            waiting = metric_total(client.metrics(), "llamacpp:requests_deferred")
        except EngineError:  # started without --metrics
            waiting = None
        kv_tokens = sum(int(s.get("n_prompt_tokens") or 0) for s in busy)
        return dict(t_s=now(), running=len(busy), waiting=waiting, kv_tokens=kv_tokens, kv_used=None)
    metrics = client.metrics()
    used = metric_total(metrics, "vllm:kv_cache_usage_perc")
    return dict(
        t_s=now(),
        running=metric_total(metrics, "vllm:num_requests_running"),
        waiting=metric_total(metrics, "vllm:num_requests_waiting"),
        kv_tokens=None,
        kv_used=metric_total(metrics, "vllm:gpu_cache_usage_perc") if used is None else used,  # older vLLM's name
    )


class StatePoller(threading.Thread):
    """Reads the engine's state every `interval_s` on its own thread and connection until `states()`."""

    def __init__(self, target: EngineTarget, interval_s: float = 0.1):
        super().__init__(name="engine-state", daemon=True)
        self.target, self.interval_s, self.samples, self.error = target, interval_s, [], None
        self.answered, self.done = threading.Event(), threading.Event()  # answered: its connection is warm
        self.start()

    def run(self) -> None:
        try:
            with self.target.client(timeout=5.0) as client:
                while not self.done.is_set():
                    try:
                        self.samples.append(read_state(client))
                    except EngineError as err:
                        self.error = str(err)  # keep polling: one slow answer under load is not the end
                    self.answered.set()
                    self.done.wait(self.interval_s)
        except Exception as err:  # noqa: BLE001 - a poller failure must never break the replay
            self.error = f"{type(err).__name__}: {err}"
        finally:
            self.answered.set()

    def states(self, started: float) -> pd.DataFrame:
        """Stop, and the samples from `started` (a `now()`) on, in seconds since it."""
        self.done.set()
        self.join(timeout=10)
        frame = pd.DataFrame(self.samples, columns=STATE_COLUMNS).assign(t_s=lambda f: f["t_s"] - started)
        return frame[frame["t_s"] >= 0].reset_index(drop=True)


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

    def streamed_tokens_per_s(self) -> float:
        """Reply tokens that arrived during the trace's arrivals, per second: against `Trace.asked_tokens_per_s`
        it says whether the server kept up. NaN for an empty window."""
        window = self.trace.duration_s
        arrived = sum(t <= window for r in self.records for t in r.token_times_s)
        return arrived / window if window > 0 else float("nan")

    def table(self) -> pd.DataFrame:
        """One row per request, what the Gantt draws: its lengths, sent, prefill start, first and last token (s),
        TTFT and end to end (ms), the reply."""

        def row(r: RequestRecord) -> tuple:
            times, ms = r.token_times_s or (None,), lambda t: None if t is None else t * 1000
            prefill = None if r.waiting_s is None else r.sent_s + r.waiting_s
            return (
                r.index,
                r.sent_s,
                prefill,
                times[0],
                times[-1],
                r.tokens,
                ms(r.ttft_s),
                ms(r.e2e_s),
                r.error,
                r.text,
            )

        frame = pd.DataFrame([row(r) for r in self.records], columns=TABLE_COLUMNS)
        return self.trace.table().merge(frame, on="request", how="left")


class _InFlight(threading.Thread):
    """One request on its own thread, sent at its arrival time (all share one connection pool: a client per request
    costs milliseconds of CPU, which would delay the sends behind a burst)."""

    def __init__(self, request: Request, client: EngineClient, started: float, stop: threading.Event):
        super().__init__(name=f"request-{request.index}", daemon=True)
        self.request, self.client, self.started, self.stop = request, client, started, stop
        self.record: RequestRecord | None = None
        self.response = None  # the streaming httpx response, once its headers arrived
        self.start()

    def run(self) -> None:
        request = self.request
        if self.stop.wait(max(0.0, request.arrival_s - ms_since(self.started) / 1000)):
            return  # cancelled before it was sent
        sent, asked = ms_since(self.started) / 1000, request.reply_tokens
        try:
            done = self.client.complete(list(request.prompt_ids), asked, stream=True, on_stream_open=self._opened)
            times = tuple(sent + ms / 1000 for ms in done.arrival_ms)
            self.record = RequestRecord(
                request.index, sent, times, tuple(done.token_ids), done.text, asked, done.timings.prompt_ms
            )
        except Exception as err:  # noqa: BLE001 - every failure is kept as this request's error
            said = str(err) if isinstance(err, EngineError) else f"{type(err).__name__}: {err}"
            error = "cancelled" if self.stop.is_set() else said
            self.record = RequestRecord(request.index, sent, (), asked_tokens=asked, error=error)

    def _opened(self, response) -> None:
        self.response = response
        if self.stop.is_set():
            self.abort()

    def abort(self) -> None:
        """Cut the stream off: shutting the socket down wakes a read blocked on it (a request still queued in the
        engine sends nothing for a long time) and tells the engine the client is gone, so it drops the request."""
        stream = None if self.response is None else self.response.extensions.get("network_stream")
        sock = None if stream is None else stream.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)


def replay(
    trace: Trace,
    target: EngineTarget,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
    poll_interval_s: float = 0.1,
) -> ReplayResult:
    """Send every request of `trace` to `target` at its arrival time and record its stream (module docstring)."""
    poller = StatePoller(target, poll_interval_s)
    # the trace's clock starts once the poller has read the engine once: on a busy machine its first answer took
    # longer than a short replay, which then had no sample of the engine's state
    poller.answered.wait(POLLER_READY_S)
    client, stop, started = target.client(), threading.Event(), now()
    flights = [_InFlight(request, client, started, stop) for request in trace.requests]
    try:
        while any(f.is_alive() for f in flights) and not (should_stop is not None and should_stop()):
            if progress is not None:
                sent = sum(ms_since(started) / 1000 >= r.arrival_s for r in trace.requests)
                done = sum(f.record is not None for f in flights)
                progress(done, len(flights), f"{sent} of {len(flights)} requests sent, {done} finished")
            stop.wait(0.05)
    finally:
        cancelled = any(f.is_alive() for f in flights)  # stopped early, or the progress callback raised
        if cancelled:
            stop.set()
            for flight in flights:
                flight.abort()
        for flight in flights:
            flight.join(timeout=10)
        client.close()
        states = poller.states(started)
    records = [f.record for f in flights if f.record is not None]
    return ReplayResult(trace, target, records, states, cancelled, poller.error, ms_since(started) / 1000)


def scaled(progress: Progress | None, offset: int, span: int, total: int) -> Progress | None:
    """A sub-task's progress (done of its own total) mapped onto [offset, offset + span] of `total`."""
    if progress is None:
        return None
    return lambda done, of, what: progress(offset + round(span * done / max(of, 1)), total, what)


def replay_on_engine(url: str, trace: Trace, progress: Progress | None = None) -> ReplayResult:
    """`trace` against an engine started elsewhere (its dialect read from `/v1/models`), as it is configured."""
    with EngineClient(url) as client:
        target = EngineTarget(client.base_url, client.dialect, client.served_model().name)
    return replay(trace, target, progress=progress)
