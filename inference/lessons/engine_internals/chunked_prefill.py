"""Chunked prefill on llama-server: a long prompt that arrives while others decode stalls them, one chunk at a time.

What this build does (llama.cpp 0c1e570, `update_slots` in `tools/server/server-context.cpp`): every engine
iteration builds one batch. First each decoding request adds its one next token, then prompts fill the batch up
to `-b` (n_batch, the logical batch) tokens; the batch is one `llama_decode`, which the backend runs in pieces of
`-ub` (n_ubatch, the physical batch) tokens. Only when that call returns does any request get its next token. So a
prompt of P tokens arriving while N requests decode is split over

    ceil(P / (n_batch - N))   iterations        (about ceil(P / n_batch) when N is small)

and every decoding request waits through each of them: that many of its gaps between tokens stretch, each by the
time of one chunk's prefill. `-ub` splits each iteration's work but not the iterations, so it changes how long a
stall lasts (the speed of the pieces), never how many there are.

Measured here: N co-tenants stream long replies from a server with N + 1 slots (unified KV cache, so they batch);
once each has streamed a few tokens, the newcomer's prompt is sent asking for one token. The stalls of a co-tenant
are its tokens that arrive while the newcomer's prefill runs: from the newcomer's first token minus the server's
own prompt time for it, to that first token, each end moved by half of the co-tenant's usual gap (a token of the
iteration before the prefill arrives about when it starts, the one of the last chunk about when it ends).

The server also says how the prompt was split: asked with `return_progress`, the newcomer's stream carries one
`prompt_progress` event per iteration that evaluated a chunk of its prompt (after one at 0 %), with the tokens
processed so far and the server's elapsed time. Those counts are exact whatever the machine's load; the co-tenants'
stretched gaps are timed on this process's clock, and a busy machine can move a token across the window's edge.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from inference.core.measuring import Progress, filler_prompt
from inference.engines import llamacpp
from inference.engines.client import GREEDY_CHAIN, LLAMACPP, EngineClient, EngineError, HttpTransport

COTENANT_PROMPT_TOKENS = 8
WARM_TOKENS = 12  # tokens each co-tenant streams before the newcomer is sent: its usual gap comes from these
AFTER_TOKENS = 12  # tokens each co-tenant streams after the newcomer's first token before it is cut off
START_TIMEOUT_S = 120.0


def predicted_stalls(prompt_tokens: int, n_batch: int, decoding: int = 0) -> int:
    """Iterations that carry a chunk of the prompt (module docstring): ceil(P / (n_batch - N))."""
    if n_batch <= decoding:
        raise ValueError(f"n_batch ({n_batch}) has to be larger than the decoding requests ({decoding})")
    if prompt_tokens < 1:
        raise ValueError(f"`prompt_tokens` has to be at least 1, but is {prompt_tokens}")
    return math.ceil(prompt_tokens / (n_batch - decoding))


def chunk_sizes(prompt_tokens: int, n_batch: int, decoding: int = 0) -> list[int]:
    """The prompt tokens each iteration carries: full chunks of n_batch - N, the rest last."""
    per = n_batch - decoding
    full, rest = divmod(prompt_tokens, per)
    return [per] * full + ([rest] if rest else [])


@contextmanager
def _completion_events(url: str, payload: dict) -> Iterator[Iterator[dict]]:
    """The events a streamed /completion sends, read by the engines' one stream reader (`HttpTransport.
    stream_events`: `data:` lines as JSON objects, errors as `EngineError`); leaving the block closes the
    connection, also when the reader stops early (a co-tenant cut off)."""
    with closing(HttpTransport(url, timeout=600)) as http:
        events = http.stream_events("/completion", payload)
        with closing(events):
            yield (event for _, event in events)


class _Streamer:
    """One co-tenant: a streamed greedy completion on its own thread, every token's arrival timestamped on the
    shared clock, cut off (the connection closed, so the server drops it) when `stop` is set."""

    def __init__(self, url: str, prompt_ids: list[int], max_tokens: int, started: float, stop: threading.Event):
        self.url, self.started, self.stop = url, started, stop
        self.payload = {
            "prompt": prompt_ids,
            "n_predict": max_tokens,
            "temperature": 0,
            "samplers": GREEDY_CHAIN,
            "ignore_eos": True,
            "cache_prompt": False,
            "return_tokens": True,
            "stream": True,
        }
        self.times: list[float] = []
        self.error: str | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            with _completion_events(self.url, self.payload) as events:
                for event in events:
                    if self.stop.is_set():
                        return  # closing the events closes the connection: the server drops the request
                    now = time.perf_counter() - self.started
                    self.times.extend(now for t in event.get("tokens") or [] if isinstance(t, int))
        except EngineError as err:
            self.error = f"{type(err).__name__}: {err}"


@dataclass(frozen=True)
class _Newcomer:
    first_token_s: float  # arrival of its first token's event, on the shared clock
    prompt_ms: float  # the server's prompt time
    evaluated: int  # prompt tokens the server evaluated
    chunks: list[int]  # prompt tokens each iteration evaluated, from the server's progress events


def _stream_newcomer(url: str, prompt_ids: list[int], started: float) -> _Newcomer:
    """The newcomer's one-token request, streamed with the server's prompt progress (module docstring)."""
    payload = {
        "prompt": prompt_ids,
        "n_predict": 1,
        "temperature": 0,
        "samplers": GREEDY_CHAIN,
        "cache_prompt": False,
        "return_tokens": True,
        "return_progress": True,
        "stream": True,
    }
    processed, first, timings = [], None, {}
    try:
        with _completion_events(url, payload) as events:
            for event in events:
                now = time.perf_counter() - started
                if "prompt_progress" in event:  # a progress event's "tokens" is a placeholder, not a token
                    processed.append(int(event["prompt_progress"]["processed"]))
                elif event.get("tokens") and first is None:
                    first = now
                timings = event.get("timings") or timings
    except (EngineError, ValueError, KeyError) as err:
        raise EngineError(f"The newcomer's request failed: {type(err).__name__}: {err}") from err
    if first is None:
        raise EngineError("The newcomer's request streamed no token.")
    done = [p for p in processed if p > 0]
    chunks = [b - a for a, b in zip([0, *done], done) if b > a]  # a repeated progress event adds no chunk
    return _Newcomer(first, float(timings.get("prompt_ms") or 0.0), int(timings.get("prompt_n") or 0), chunks)


@dataclass
class StallRun:
    n_batch: int
    n_ubatch: int
    cotenants: int
    prompt_tokens: int
    newcomer_sent_s: float
    newcomer_first_s: float
    newcomer_prompt_ms: float
    newcomer_evaluated: int
    times: list[list[float]]  # each co-tenant's token arrivals (s, one clock)
    usual_gap_s: list[float] = field(default_factory=list)  # each co-tenant's median gap before the newcomer
    server_chunks: list[int] = field(default_factory=list)  # prompt tokens per iteration, from the server's progress

    @property
    def predicted(self) -> int:
        return predicted_stalls(self.prompt_tokens, self.n_batch, self.cotenants)

    @property
    def prefill_window_s(self) -> tuple[float, float]:
        return self.newcomer_first_s - self.newcomer_prompt_ms / 1000, self.newcomer_first_s

    def stalled_gaps(self, cotenant: int) -> list[float]:
        """Gaps (s) before each of this co-tenant's tokens that arrived during the newcomer's prefill."""
        start, end = self.prefill_window_s
        half = self.usual_gap_s[cotenant] / 2
        times = self.times[cotenant]
        return [times[i] - times[i - 1] for i in range(1, len(times)) if start + half < times[i] <= end + half]

    def stalls(self) -> list[int]:
        return [len(self.stalled_gaps(c)) for c in range(self.cotenants)]

    @property
    def measured(self) -> int:
        """The stalls every co-tenant saw (the median over co-tenants; they see the same iterations)."""
        return int(statistics.median(self.stalls()))

    @property
    def ttft_s(self) -> float:
        return self.newcomer_first_s - self.newcomer_sent_s

    def longest_gap_s(self) -> float:
        return max(max(self.stalled_gaps(c), default=0.0) for c in range(self.cotenants))

    def gaps_table(self) -> pd.DataFrame:
        rows = []
        for c, times in enumerate(self.times):
            for i in range(1, len(times)):
                rows.append({"cotenant": c + 1, "arrival_s": times[i], "gap_ms": (times[i] - times[i - 1]) * 1000})
        return pd.DataFrame(rows)


def _wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.perf_counter() + timeout_s
    while not condition():
        if time.perf_counter() > deadline:
            raise EngineError(f"llama-server did not {what} within {timeout_s:g} s.")
        time.sleep(0.002)


def measure_stalls(
    gguf: Path, vocab: int, context: int, prompt_tokens: int, n_batch: int, n_ubatch: int, cotenants: int = 2
) -> StallRun:
    """One run on a fresh server with `-b n_batch -ub n_ubatch` and cotenants + 1 slots (module docstring)."""
    args = ["-b", str(n_batch), "-ub", str(min(n_ubatch, n_batch))]
    with llamacpp.serve(gguf, parallel=cotenants + 1, extra_args=args) as server:
        client = EngineClient(server.url, dialect=LLAMACPP, timeout=600)
        try:
            client.complete([0, 1, 2, 3], 1)  # warm-up: a new server's first pass sets up its buffers
            client.complete(filler_prompt(vocab, min(prompt_tokens, n_batch), 7), 1)  # and its largest batch
            stop, started = threading.Event(), time.perf_counter()
            reply = context - COTENANT_PROMPT_TOKENS - 1  # never ends by itself before it is cut off
            streams = [
                _Streamer(server.url, filler_prompt(vocab, COTENANT_PROMPT_TOKENS, 50 + c), reply, started, stop)
                for c in range(cotenants)
            ]
            try:
                _wait_for(
                    lambda: all(len(s.times) >= WARM_TOKENS or not s.thread.is_alive() for s in streams),
                    START_TIMEOUT_S,
                    "stream the co-tenants' first tokens",
                )
                short = [s.error or "ended early" for s in streams if len(s.times) < WARM_TOKENS]
                if short:
                    raise EngineError(f"A co-tenant's stream failed before the newcomer was sent: {short[0]}")
                usual = [statistics.median(b - a for a, b in zip(s.times, s.times[1:])) for s in streams]
                sent = time.perf_counter() - started
                # streamed, so its token is timed like the co-tenants' (on arrival of its event, not after parsing)
                newcomer = _stream_newcomer(server.url, filler_prompt(vocab, prompt_tokens, 99), started)
                first = newcomer.first_token_s
                counts = [len(s.times) for s in streams]
                _wait_for(
                    lambda: all(
                        len(s.times) >= n + AFTER_TOKENS or not s.thread.is_alive() for s, n in zip(streams, counts)
                    ),
                    START_TIMEOUT_S,
                    "keep streaming after the newcomer",
                )
            finally:
                stop.set()
                for s in streams:
                    s.thread.join(timeout=10)
            errors = [s.error for s in streams if s.error]
            if errors:
                raise EngineError(f"A co-tenant's stream failed: {errors[0]}")
        finally:
            client.close()
    return StallRun(
        n_batch,
        min(n_ubatch, n_batch),
        cotenants,
        prompt_tokens,
        sent,
        first,
        newcomer.prompt_ms,
        newcomer.evaluated,
        [list(s.times) for s in streams],
        usual,
        newcomer.chunks,
    )


def sweep(
    gguf: Path,
    vocab: int,
    context: int,
    prompt_tokens: int,
    settings: list[tuple[int, int]],
    cotenants: int = 2,
    progress: Progress | None = None,
) -> list[StallRun]:
    """`measure_stalls` for each (n_batch, n_ubatch), a fresh server each."""
    runs = []
    for i, (n_batch, n_ubatch) in enumerate(settings):
        if progress is not None:
            progress(i, len(settings), f"-b {n_batch} -ub {n_ubatch}")
        runs.append(measure_stalls(gguf, vocab, context, prompt_tokens, n_batch, n_ubatch, cotenants))
    return runs


def sweep_table(runs: list[StallRun]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "n_batch": r.n_batch,
                "n_ubatch": r.n_ubatch,
                "setting": f"-b {r.n_batch} -ub {r.n_ubatch}",
                "stalls_measured": r.measured,
                "stalls_predicted": r.predicted,
                "iterations_by_server": len(r.server_chunks) or None,
                "stalls_issue_formula": math.ceil(r.prompt_tokens / r.n_batch),
                "newcomer_ttft_ms": r.ttft_s * 1000,
                "newcomer_prompt_ms": r.newcomer_prompt_ms,
                "usual_gap_ms": statistics.median(r.usual_gap_s) * 1000,
                "longest_gap_ms": r.longest_gap_s() * 1000,
                "median_stall_ms": statistics.median(g for c in range(r.cotenants) for g in r.stalled_gaps(c)) * 1000
                if r.measured
                else 0.0,
            }
            for r in runs
        ]
    )
