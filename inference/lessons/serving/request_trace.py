"""A trace of request traffic: when each request arrives and how long its prompt and reply are.

Arrivals are a Poisson process of rate λ (requests per second): the gaps between requests are
independent exponential draws of mean 1/λ, the usual model of many users acting independently.
Prompt and reply lengths come from log-normal distributions (most requests short, a few long), clipped
to a range that fits one server slot. Everything is drawn from one seeded generator, so a trace is
reproducible: the same settings give the same trace on any machine.

The gaps are drawn at rate 1 and divided by λ, so traces that differ only in λ have the same requests
(prompts and lengths) arriving on a stretched or squeezed clock: a sweep over λ changes the load and
nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class LengthDistribution:
    """A log-normal length: `median` tokens, spread `sigma` (of the log), clipped to [low, high]."""

    median: int
    sigma: float
    low: int
    high: int

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        raw = rng.lognormal(mean=np.log(self.median), sigma=self.sigma, size=n)
        return np.clip(np.rint(raw), self.low, self.high).astype(int)


@dataclass(frozen=True)
class TrafficShape:
    """What kind of requests arrive: prompt and reply lengths (tokens; the prompt counts the start token)."""

    name: str
    description: str
    prompt: LengthDistribution
    reply: LengthDistribution

    @property
    def longest_request(self) -> int:
        return self.prompt.high + self.reply.high


# Both shapes fit a 512-token slot (the bundled model's context) with room to spare.
SHAPES = {
    "short chat": TrafficShape(
        "short chat",
        "short questions, replies a little longer than the question",
        prompt=LengthDistribution(median=24, sigma=0.5, low=4, high=128),
        reply=LengthDistribution(median=48, sigma=0.4, low=8, high=160),
    ),
    "long document": TrafficShape(
        "long document",
        "a long text to read and a short answer (summaries, questions about a document)",
        prompt=LengthDistribution(median=300, sigma=0.2, low=160, high=400),
        reply=LengthDistribution(median=24, sigma=0.3, low=8, high=64),
    ),
}


@dataclass(frozen=True)
class Request:
    index: int
    arrival_s: float  # seconds after the trace starts
    prompt_ids: tuple[int, ...]  # starts with the start token
    reply_tokens: int  # the engine is asked for exactly this many tokens (end-of-text ignored)

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt_ids)


@dataclass(frozen=True)
class Trace:
    shape: TrafficShape
    rate_per_s: float
    seed: int
    requests: tuple[Request, ...]
    prompt_source: str = "random ids"  # or real_text.SOURCE: real prompts in a real model's tokenizer

    @property
    def key(self) -> str:
        """Names the trace for caches: equal keys, equal traces (given the vocabulary)."""
        key = f"{self.shape.name}|rate={self.rate_per_s:g}|n={len(self.requests)}|seed={self.seed}"
        return key if self.prompt_source == "random ids" else f"{key}|{self.prompt_source}"

    @property
    def duration_s(self) -> float:
        """From the first arrival to the last."""
        return self.requests[-1].arrival_s if self.requests else 0.0

    @property
    def reply_tokens(self) -> int:
        return sum(r.reply_tokens for r in self.requests)

    @property
    def prompt_tokens(self) -> int:
        return sum(r.prompt_tokens for r in self.requests)

    def asked_tokens_per_s(self) -> float:
        """The reply tokens per second these draws ask for, over their arrivals: the reply tokens of the requests
        that arrive before the last one, divided by the time from the first arrival to the last (n requests
        make n - 1 gaps; the last request's tokens cannot be served inside the window). The one definition
        the traffic chart, the 1-vs-N verdict and the rate sweep use; `stats.streamed_tokens_per_s` measures
        what a server streamed over the same window. NaN for a single request (no window). Over a short trace it
        strays from the long-run λ x mean reply: the gaps and lengths are random draws."""
        if self.duration_s <= 0:
            return float("nan")
        return sum(r.reply_tokens for r in self.requests[:-1]) / self.duration_s

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "request": [r.index for r in self.requests],
                "arrival_s": [r.arrival_s for r in self.requests],
                "prompt_tokens": [r.prompt_tokens for r in self.requests],
                "reply_tokens": [r.reply_tokens for r in self.requests],
            }
        )


def poisson_trace(
    shape: TrafficShape | str, rate_per_s: float, requests: int, seed: int, vocab_size: int, start_token: int = 0
) -> Trace:
    """`requests` requests arriving as a Poisson process of `rate_per_s`, the first at time 0, with prompt and reply
    lengths from `shape` and prompt token ids drawn uniformly from the vocabulary (what they say does not change the
    arithmetic); each prompt starts with `start_token`. One `numpy` generator seeded with `seed` draws everything."""
    if isinstance(shape, str):
        if shape not in SHAPES:
            raise ValueError(f"unknown traffic shape {shape!r}: choose one of {', '.join(SHAPES)}")
        shape = SHAPES[shape]
    if not rate_per_s > 0:
        raise ValueError(f"the arrival rate has to be > 0 requests per second, not {rate_per_s}")
    if requests < 1:
        raise ValueError(f"a trace needs at least 1 request, not {requests}")
    rng = np.random.default_rng(seed)
    unit_gaps = rng.exponential(1.0, size=requests)  # rate-1 gaps, scaled below: see the module docstring
    prompt_lengths = shape.prompt.draw(rng, requests)
    reply_lengths = shape.reply.draw(rng, requests)
    arrivals = np.concatenate([[0.0], np.cumsum(unit_gaps[:-1])]) / rate_per_s
    items = []
    for i in range(requests):
        body = rng.integers(1, vocab_size, size=int(prompt_lengths[i]) - 1)  # 0 is the start/end token
        items.append(
            Request(
                index=i,
                arrival_s=float(arrivals[i]),
                prompt_ids=(start_token, *map(int, body)),
                reply_tokens=int(reply_lengths[i]),
            )
        )
    return Trace(shape=shape, rate_per_s=float(rate_per_s), seed=seed, requests=tuple(items))
