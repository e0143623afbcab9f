"""Chunked prefill on llama-server: a long prompt that arrives while others decode stalls them, one chunk at a time.

llama.cpp 0c1e570 (`update_slots`, `tools/server/server-context.cpp`) builds one batch per iteration: each decoding
request's next token, then prompt tokens up to `-b`; one `llama_decode` (run in `-ub` pieces) before anyone gets a
token. So a P-token prompt arriving while N requests decode takes ceil(P / (b - N)) iterations, and each decoding
request waits through every one. Measured: co-tenants' tokens that arrive during the newcomer's prefill (the
server's own prompt time), and the server's `prompt_progress` events, one per iteration that carried a chunk.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from contextlib import closing
from dataclasses import dataclass, field

import pandas as pd

from inference.core.measuring import filler_prompt, ms_since, now
from inference.engines import llamacpp
from inference.engines.client import GREEDY_CHAIN, LLAMACPP, EngineClient, EngineError
from inference.lessons.engine_internals import served
from inference.lessons.engine_internals.served import EngineModel

COTENANT_PROMPT_TOKENS = 8
WARM_TOKENS = 12  # tokens each co-tenant streams before the newcomer is sent: its usual gap comes from these
AFTER_TOKENS = 12  # tokens each co-tenant streams after the newcomer's first token before it is cut off
START_TIMEOUT_S = 120.0


def chunk_sizes(prompt_tokens: int, n_batch: int, decoding: int = 0) -> list[int]:
    """The prompt tokens each iteration carries: full chunks of n_batch - N, the rest last."""
    if n_batch <= decoding:
        raise ValueError(f"n_batch ({n_batch}) has to be larger than the decoding requests ({decoding})")
    full, rest = divmod(prompt_tokens, n_batch - decoding)
    return [n_batch - decoding] * full + ([rest] if rest else [])


def predicted_stalls(prompt_tokens: int, n_batch: int, decoding: int = 0) -> int:
    """Iterations that carry a chunk of the prompt: ceil(P / (n_batch - N))."""
    return len(chunk_sizes(prompt_tokens, n_batch, decoding))


def _events(url: str, prompt_ids: list[int], n_predict: int, started: float, **extra):
    """(seconds since `started`, event) for each event of a streamed greedy /completion, read by the engines' one
    stream reader; closing the generator closes the connection (a co-tenant cut off: the server drops it)."""
    payload = {
        "prompt": prompt_ids,
        "n_predict": n_predict,
        "temperature": 0,
        "samplers": GREEDY_CHAIN,
        "cache_prompt": False,
        "return_tokens": True,
        "stream": True,
        **extra,
    }
    with EngineClient(url, LLAMACPP, timeout=600) as http, closing(http.stream_events("/completion", payload)) as ev:
        for _, event in ev:
            yield ms_since(started) / 1000, event


class _Streamer:
    """One co-tenant on its own thread: every token's arrival timestamped, cut off when `stop` is set."""

    def __init__(self, url: str, prompt_ids: list[int], max_tokens: int, started: float, stop: threading.Event):
        self.times: list[float] = []
        self.error: str | None = None
        self.thread = threading.Thread(target=self._run, args=(url, prompt_ids, max_tokens, started, stop), daemon=True)
        self.thread.start()

    def _run(self, url, prompt_ids, max_tokens, started, stop) -> None:
        try:
            events = _events(url, prompt_ids, max_tokens, started, ignore_eos=True)
            with closing(events):
                for t, event in events:
                    if stop.is_set():
                        return
                    self.times.extend(t for token in event.get("tokens") or [] if isinstance(token, int))
        except EngineError as err:
            self.error = f"{type(err).__name__}: {err}"


def _newcomer(url: str, prompt_ids: list[int], started: float) -> tuple[float, float, int, list[int]]:
    """The newcomer's one-token request with the server's prompt progress: (its first token's arrival, the server's
    prompt ms, prompt tokens evaluated, tokens each iteration evaluated)."""
    processed, first, timings = [], None, {}
    try:
        for t, event in _events(url, prompt_ids, 1, started, return_progress=True):
            if "prompt_progress" in event:  # a progress event's "tokens" is a placeholder, not a token
                processed.append(int(event["prompt_progress"]["processed"]))
            elif event.get("tokens") and first is None:
                first = t
            timings = event.get("timings") or timings
    except (EngineError, ValueError, KeyError) as err:
        raise EngineError(f"The newcomer's request failed: {type(err).__name__}: {err}") from err
    if first is None:
        raise EngineError("The newcomer's request streamed no token.")
    done = [p for p in processed if p > 0]
    chunks = [b - a for a, b in zip([0, *done], done) if b > a]  # a repeated progress event adds no chunk
    return first, float(timings.get("prompt_ms") or 0.0), int(timings.get("prompt_n") or 0), chunks


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
    server_chunks: list[int] = field(default_factory=list)  # prompt tokens per iteration, from the server

    @property
    def setting(self) -> str:
        return f"-b {self.n_batch} -ub {self.n_ubatch}"

    @property
    def predicted(self) -> int:
        return predicted_stalls(self.prompt_tokens, self.n_batch, self.cotenants)

    @property
    def prefill_window_s(self) -> tuple[float, float]:
        return self.newcomer_first_s - self.newcomer_prompt_ms / 1000, self.newcomer_first_s

    def stalled_gaps(self, cotenant: int) -> list[float]:
        """Gaps (s) before each of this co-tenant's tokens that arrived during the newcomer's prefill."""
        start, end = self.prefill_window_s
        half, times = self.usual_gap_s[cotenant] / 2, self.times[cotenant]
        return [b - a for a, b in zip(times, times[1:]) if start + half < b <= end + half]

    def all_stalled_gaps(self) -> list[float]:
        return [g for c in range(self.cotenants) for g in self.stalled_gaps(c)]

    def stalls(self) -> list[int]:
        return [len(self.stalled_gaps(c)) for c in range(self.cotenants)]

    @property
    def measured(self) -> int:
        """The median over co-tenants (they see the same iterations)."""
        return int(statistics.median(self.stalls()))

    @property
    def ttft_s(self) -> float:
        return self.newcomer_first_s - self.newcomer_sent_s

    def longest_gap_s(self) -> float:
        return max(self.all_stalled_gaps(), default=0.0)

    def gaps_table(self) -> pd.DataFrame:
        rows = [
            {"cotenant": c + 1, "arrival_s": b, "gap_ms": (b - a) * 1000}
            for c, times in enumerate(self.times)
            for a, b in zip(times, times[1:])
        ]
        return pd.DataFrame(rows, columns=["cotenant", "arrival_s", "gap_ms"])


def _wait_for(condition, what: str) -> None:
    deadline = now() + START_TIMEOUT_S
    while not condition():
        if now() > deadline:
            raise EngineError(f"llama-server did not {what} within {START_TIMEOUT_S:g} s.")
        time.sleep(0.002)


def measure_stalls(model: EngineModel, prompt_tokens: int, n_batch: int, n_ubatch: int, cotenants: int = 2) -> StallRun:
    """One run on a fresh server with `-b n_batch -ub n_ubatch` and cotenants + 1 slots (module docstring)."""
    args, vocab = ["-b", str(n_batch), "-ub", str(min(n_ubatch, n_batch))], model.vocab
    with (
        llamacpp.serve(served.gguf(model.key), parallel=cotenants + 1, extra_args=args) as server,
        EngineClient(server.url, dialect=LLAMACPP, timeout=600) as client,
    ):
        client.complete([0, 1, 2, 3], 1)  # warm-up: a new server's first pass sets up its buffers
        client.complete(filler_prompt(vocab, min(prompt_tokens, n_batch), 7), 1)  # and its largest batch
        stop, started = threading.Event(), now()
        reply = model.context - COTENANT_PROMPT_TOKENS - 1  # never ends by itself before it is cut off
        streams = [
            _Streamer(server.url, filler_prompt(vocab, COTENANT_PROMPT_TOKENS, 50 + c), reply, started, stop)
            for c in range(cotenants)
        ]
        try:
            _wait_for(
                lambda: all(len(s.times) >= WARM_TOKENS or not s.thread.is_alive() for s in streams),
                "stream the co-tenants' first tokens",
            )
            short = [s.error or "ended early" for s in streams if len(s.times) < WARM_TOKENS]
            if short:
                raise EngineError(f"A co-tenant's stream failed before the newcomer was sent: {short[0]}")
            usual = [statistics.median(b - a for a, b in zip(s.times, s.times[1:])) for s in streams]
            sent = ms_since(started) / 1000
            # streamed, so its token is timed like the co-tenants' (on arrival of its event)
            first, prompt_ms, evaluated, chunks = _newcomer(
                server.url, filler_prompt(vocab, prompt_tokens, 99), started
            )
            counts = [len(s.times) for s in streams]
            _wait_for(
                lambda: all(
                    len(s.times) >= n + AFTER_TOKENS or not s.thread.is_alive() for s, n in zip(streams, counts)
                ),
                "keep streaming after the newcomer",
            )
        finally:
            stop.set()
            for s in streams:
                s.thread.join(timeout=10)
        errors = [s.error for s in streams if s.error]
        if errors:
            raise EngineError(f"A co-tenant's stream failed: {errors[0]}")
    times = [list(s.times) for s in streams]
    n_ubatch = min(n_ubatch, n_batch)
    return StallRun(
        n_batch, n_ubatch, cotenants, prompt_tokens, sent, first, prompt_ms, evaluated, times, usual, chunks
    )


def sweep(
    model: EngineModel, prompt_tokens: int, settings: list[tuple[int, int]], cotenants: int = 2, progress=None
) -> list[StallRun]:
    """`measure_stalls` for each (n_batch, n_ubatch), a fresh server each."""
    runs = []
    for i, (n_batch, n_ubatch) in enumerate(settings):
        if progress is not None:
            progress(i, len(settings), f"-b {n_batch} -ub {n_ubatch}")
        runs.append(measure_stalls(model, prompt_tokens, n_batch, n_ubatch, cotenants))
    return runs


def sweep_table(runs: list[StallRun]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "setting": r.setting,
                "stalls_measured": r.measured,
                "stalls_predicted": r.predicted,
                "iterations_by_server": len(r.server_chunks) or None,
                "stalls_issue_formula": math.ceil(r.prompt_tokens / r.n_batch),
                "newcomer_ttft_ms": r.ttft_s * 1000,
                "newcomer_prompt_ms": r.newcomer_prompt_ms,
                "usual_gap_ms": statistics.median(r.usual_gap_s) * 1000,
                "longest_gap_ms": r.longest_gap_s() * 1000,
                "median_stall_ms": statistics.median(r.all_stalled_gaps()) * 1000 if r.measured else 0.0,
            }
            for r in runs
        ]
    )
