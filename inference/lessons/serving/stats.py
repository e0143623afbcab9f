"""What a replayed trace measured, computed from the timestamps recorded while it ran.

Per request (all times in seconds on one monotonic clock, `time.perf_counter`, relative to the trace's start):
- TTFT, time to first token: first token's arrival - the moment the request was sent. It holds the time
  spent waiting for a free slot and the prefill pass over the prompt.
- TPOT, time per output token: (last token's arrival - first token's arrival) / (tokens - 1), the mean gap
  between streamed tokens once decoding runs.
- End to end: last token's arrival - sent.
Percentiles interpolate linearly between the two nearest recorded values (numpy's and pandas' default):
p95 of n values sits at position 0.95 x (n - 1) of the sorted values, counting from 0.

Overall:
- Throughput: reply tokens received / (last token of the run - first request sent).
- Goodput: requests per second that met the service-level objective (SLO), e.g. TTFT <= 1 s: what the
  server delivers that users count as good service, over the same duration.
- Streamed during the arrivals (`streamed_tokens_per_s`): reply tokens that arrived between the first request
  and the last one, per second; compared with what the trace asked over that same window (`Trace.
  asked_tokens_per_s`), it says whether the server kept up.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

PERCENTILES = (50, 95)


@dataclass(frozen=True)
class RequestRecord:
    """One request as the client saw it."""

    index: int
    sent_s: float
    token_times_s: tuple[float, ...]  # arrival of every streamed token, in order
    token_ids: tuple[int, ...] = ()
    text: str = ""
    asked_tokens: int = 0
    server_prompt_ms: float | None = None  # the engine's own prefill time for this request, when it reports one
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
        if self.tokens < 2:
            return None
        return (self.token_times_s[-1] - self.token_times_s[0]) / (self.tokens - 1)

    @property
    def e2e_s(self) -> float | None:
        return self.token_times_s[-1] - self.sent_s if self.token_times_s else None

    @property
    def waiting_s(self) -> float | None:
        """Time before the engine started this request's prefill: TTFT minus the engine's own prefill time
        (None when the engine reports none). Includes the HTTP round trip, which on loopback is well under 1 ms."""
        if self.ttft_s is None or self.server_prompt_ms is None:
            return None
        return max(0.0, self.ttft_s - self.server_prompt_ms / 1000)


def percentile(values, q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation; NaN when there are no values."""
    values = [v for v in values if v is not None]
    return float(np.percentile(values, q)) if values else float("nan")


@dataclass(frozen=True)
class SLO:
    """A service-level objective: a request is good when its TTFT (and, if set, its TPOT) is within bounds."""

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

    @property
    def good_share(self) -> float:
        return self.good_requests / self.requests if self.requests else 0.0

    def percentiles_ms(self, **which: tuple[int, ...]) -> dict[str, float]:
        """Table columns in ms, in the order asked: `percentiles_ms(ttft=(50, 95))` gives ttft_p50_ms, ttft_p95_ms."""
        return {
            f"{name}_p{p}_ms": getattr(self, f"{name}_s")[p] * 1000
            for name, percentiles in which.items()
            for p in percentiles
        }


def summarize(records: list[RequestRecord], slo: SLO = SLO()) -> RunSummary:
    """Throughput, percentiles and goodput of one run (see the module docstring for the definitions)."""
    received = [r for r in records if r.token_times_s]
    if received:
        duration = max(r.token_times_s[-1] for r in received) - min(r.sent_s for r in records)
    else:
        duration = 0.0
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
    """Reply tokens that arrived in the first `window_s` seconds of the run (the trace's arrivals, from its first
    request to its last: `Trace.asked_tokens_per_s`'s window), per second. A server that keeps up streams about
    what the traffic asks over that window; one that falls behind, less (the rest arrives after it). NaN for an
    empty window."""
    if window_s <= 0:
        return float("nan")
    return sum(1 for r in records for t in r.token_times_s if t <= window_s) / window_s


def request_table(records: list[RequestRecord]) -> pd.DataFrame:
    """One row per request: when it was sent, waited, got its first and last token (seconds from the trace's
    start), and its TTFT, TPOT and end-to-end time (ms). What the Gantt chart draws."""
    rows = []
    for r in records:
        waiting = r.waiting_s
        rows.append(
            {
                "request": r.index,
                "sent_s": r.sent_s,
                "prefill_start_s": None if waiting is None else r.sent_s + waiting,
                "first_token_s": r.token_times_s[0] if r.token_times_s else None,
                "last_token_s": r.token_times_s[-1] if r.token_times_s else None,
                "tokens": r.tokens,
                "asked_tokens": r.asked_tokens,
                "ttft_ms": None if r.ttft_s is None else r.ttft_s * 1000,
                "tpot_ms": None if r.tpot_s is None else r.tpot_s * 1000,
                "e2e_ms": None if r.e2e_s is None else r.e2e_s * 1000,
                "error": r.error,
                "reply": r.text,
            }
        )
    return pd.DataFrame(rows)


def knee_index(rates: list[float], p95_latency_s: list[float], factor: float = 2.0) -> int | None:
    """Where queues start to grow: the first rate (in increasing order) whose p95 latency is more than `factor`
    times the p95 latency at the lowest rate. None when no measured rate gets there."""
    if not rates:
        return None
    order = sorted(range(len(rates)), key=lambda i: rates[i])
    base = p95_latency_s[order[0]]
    for i in order[1:]:
        if p95_latency_s[i] > factor * base:
            return i
    return None
