"""Replay a trace against a serving engine with streaming, and record when every token arrived.

Each request is sent at its arrival time (seconds after the replay starts) on its own thread (its own
connection from one shared pool), whether or not earlier ones have finished: that is what users do, and it
is what lets a batching engine batch. Its reply streams back token by token; each token is timestamped on arrival with
`time.perf_counter` (one monotonic clock for the whole replay). The engine is asked for exactly the trace's
reply length, greedy, end-of-text ignored, without reusing cached prompts, so runs are comparable.

While it runs, `engine_state.StatePoller` reads the engine's own view (running and waiting requests, KV cache).
A replay stops early when `should_stop()` says so or the progress callback raises (as Streamlit's does when
the visitor cancels): requests not yet sent are dropped, streams in flight are closed (the engine then drops
them too) and recorded as cancelled, and the requests that finished are kept.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from inference.core.measuring import Progress
from inference.engines.client import EngineClient, EngineError
from inference.lessons.serving.engine_metrics import StatePoller
from inference.lessons.serving.request_trace import Request, Trace
from inference.lessons.serving.stats import SLO, RequestRecord, RunSummary, request_table, summarize

READ_TIMEOUT_S = 600.0  # a request queued behind many others may wait minutes for its first byte
TICK_S = 0.005  # how often the scheduling loop looks at the clock
PROGRESS_S = 0.5
POLLER_READY_S = 5.0  # longest wait for the state poller's first read before the trace starts


@dataclass(frozen=True)
class EngineTarget:
    """Where to send a trace: an engine's URL, its dialect (`client.LLAMACPP` or `client.VLLM`), and names."""

    url: str
    dialect: str
    model: str  # what it serves, for labels and cache keys
    slots: int | None = None  # parallel requests the engine batches, when known (llama-server's --parallel)

    @property
    def key(self) -> str:
        return f"{self.dialect}|{self.model}|slots={self.slots}"


@dataclass
class ReplayResult:
    trace: Trace
    target: EngineTarget
    records: list[RequestRecord]
    engine_states: pd.DataFrame
    cancelled: bool = False
    poller_error: str | None = None
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    def summary(self, slo: SLO = SLO()) -> RunSummary:
        return summarize(self.records, slo)

    def table(self) -> pd.DataFrame:
        table = request_table(self.records)
        lengths = self.trace.table()[["request", "prompt_tokens", "arrival_s"]]
        return lengths.merge(table, on="request", how="left")


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
        sent = time.perf_counter() - self.started
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
    poller = StatePoller(target.url, target.dialect, time.perf_counter(), poll_interval_s).start()
    # the trace's clock starts once the poller has read the engine once (or given up for now): on a busy machine its
    # first connection and answer took longer than a short replay, which then had no sample of the engine's state
    poller.answered.wait(POLLER_READY_S)
    started = poller.started = time.perf_counter()
    pending = list(trace.requests)  # in arrival order
    running: list[_InFlight] = []
    total, cancelled = len(pending), False
    reported = (-1, 0.0)  # (finished, when): progress is reported when a request finishes, or every PROGRESS_S
    try:
        while pending or any(f.thread.is_alive() for f in running):
            if should_stop is not None and should_stop():
                cancelled = True
                break
            now = time.perf_counter() - started
            while pending and pending[0].arrival_s <= now:
                flight = _InFlight(pending.pop(0), client, started)
                flight.thread.start()
                running.append(flight)
            done = sum(1 for f in running if not f.thread.is_alive())
            if progress is not None and (done != reported[0] or now - reported[1] > PROGRESS_S):
                progress(done, total, f"{len(running)} of {total} requests sent, {done} finished")
                reported = (done, now)
            wait = TICK_S if not pending else min(max(pending[0].arrival_s - now, 0.0), 0.05)
            time.sleep(max(wait, TICK_S) if pending else 0.02)
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
    wall = time.perf_counter() - started
    records = sorted((f.record for f in running if f.record is not None), key=lambda r: r.index)
    return ReplayResult(
        trace=trace,
        target=target,
        records=records,
        engine_states=states,
        cancelled=cancelled,
        poller_error=poller.error,
        wall_s=wall,
    )


def solo_run(target: EngineTarget, request: Request) -> RequestRecord:
    """One request alone (nothing else sent meanwhile): the reference a batched run's text must equal."""
    with _client(target) as client:
        flight = _InFlight(request, client, time.perf_counter())
        flight.thread.start()
        flight.thread.join()
    return flight.record
