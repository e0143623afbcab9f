"""A trace of request traffic: when each request arrives, its prompt and how long a reply it asks for.

Arrivals are a Poisson process of rate λ: the gaps are independent exponential draws of mean 1/λ (many users acting
independently). Prompt and reply lengths are log-normal (most requests short, a few long), clipped to fit one slot.
One seeded generator draws everything, and the gaps are drawn at rate 1 then divided by λ, so traces that differ
only in λ hold the same requests on a stretched or squeezed clock: a sweep over λ changes the load and nothing else.

On the real SmolLM2 the prompts are real (`with_real_prompts`): everyday questions (short chat) or a text to
summarise (long document) in its chat template; the arrivals and reply lengths stay the seeded draws.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
from transformers import AutoTokenizer

from inference.core import real_model

REAL_SOURCE = "real text"


@dataclass(frozen=True)
class Lengths:
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
    description: str
    prompt: Lengths  # tokens, the start token included
    reply: Lengths


# Both fit a 512-token slot (the bundled model's context) with room to spare.
SHAPES = {
    "short chat": TrafficShape(
        "short questions, replies a little longer than the question", Lengths(24, 0.5, 4, 128), Lengths(48, 0.4, 8, 160)
    ),
    "long document": TrafficShape(
        "a long text to read and a short answer (summaries, questions about a document)",
        Lengths(300, 0.2, 160, 400),
        Lengths(24, 0.3, 8, 64),
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
    shape: str  # a SHAPES name, or "burst"
    rate_per_s: float
    seed: int
    requests: tuple[Request, ...]
    prompt_source: str = "random ids"  # or REAL_SOURCE

    @property
    def key(self) -> str:
        """Names the trace for caches: equal keys, equal traces (given the vocabulary)."""
        return f"{self.shape}|rate={self.rate_per_s:g}|n={len(self.requests)}|seed={self.seed}|{self.prompt_source}"

    @property
    def duration_s(self) -> float:
        """From the first arrival to the last."""
        return self.requests[-1].arrival_s

    @property
    def reply_tokens(self) -> int:
        return sum(r.reply_tokens for r in self.requests)

    @property
    def prompt_tokens(self) -> int:
        return sum(r.prompt_tokens for r in self.requests)

    def asked_tokens_per_s(self) -> float:
        """Reply tokens per second these draws ask for over their arrivals: the tokens of the requests before the
        last one over the time from the first arrival to the last (n requests make n - 1 gaps); NaN for one request.
        The one definition the traffic chart, the 1-vs-N verdict and the sweep use."""
        if self.duration_s <= 0:
            return float("nan")
        return sum(r.reply_tokens for r in self.requests[:-1]) / self.duration_s

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(
            [(r.index, r.arrival_s, r.prompt_tokens, r.reply_tokens) for r in self.requests],
            columns=["request", "arrival_s", "prompt_tokens", "reply_tokens"],
        )


def filler_ids(rng: np.random.Generator, length: int, vocab_size: int, start_token: int = 0) -> tuple[int, ...]:
    return (start_token, *map(int, rng.integers(1, vocab_size, size=length - 1)))


def poisson_trace(shape: str, rate_per_s: float, requests: int, seed: int, vocab_size: int) -> Trace:
    """`requests` Poisson arrivals at `rate_per_s` (the first at 0), lengths from `SHAPES[shape]`, prompt ids drawn
    uniformly from the vocabulary after the start token 0; one numpy generator seeded with `seed` draws everything."""
    if shape not in SHAPES:
        raise ValueError(f"unknown traffic shape {shape!r}: choose one of {', '.join(SHAPES)}")
    if not rate_per_s > 0:
        raise ValueError(f"the arrival rate has to be > 0 requests per second, not {rate_per_s}")
    if requests < 1:
        raise ValueError(f"a trace needs at least 1 request, not {requests}")
    rng = np.random.default_rng(seed)
    unit_gaps = rng.exponential(1.0, size=requests)
    prompts, replies = SHAPES[shape].prompt.draw(rng, requests), SHAPES[shape].reply.draw(rng, requests)
    arrivals = np.concatenate([[0.0], np.cumsum(unit_gaps[:-1])]) / rate_per_s
    items = tuple(
        Request(i, float(arrivals[i]), filler_ids(rng, int(prompts[i]), vocab_size), int(replies[i]))
        for i in range(requests)
    )
    return Trace(shape, float(rate_per_s), seed, items)


def burst_trace(requests: int, prompt_tokens: int, reply_tokens: int, seed: int = 0, vocab_size: int = 4096) -> Trace:
    """`requests` seeded filler prompts all arriving at once: the engine is never short of work until the last."""
    rng = np.random.default_rng(seed)
    items = tuple(Request(i, 0.0, filler_ids(rng, prompt_tokens, vocab_size), reply_tokens) for i in range(requests))
    return Trace("burst", 0.0, seed, items)


# -- real prompts for the real model -----------------------------------------------------------------

# a text to summarise, the request to summarise it, then the questions, one a line
DOCUMENT, SUMMARY_ASK, QUESTIONS = Path(__file__).with_name("real_prompts.txt").read_text().split("\n\n")
DOCUMENT, QUESTIONS = " ".join(DOCUMENT.split()), tuple(QUESTIONS.strip().splitlines())


@lru_cache(maxsize=1)
def real_tokenizer():
    """SmolLM2's own tokenizer, from the converted folder (converted once); only ever read."""
    return AutoTokenizer.from_pretrained(real_model.real_model_folder())


def prompt_ids(tokenizer, index: int, length: int, shape_name: str) -> tuple[int, ...]:
    """Request `index`'s prompt in the chat template: a question (short chat), or the document's first ~`length`
    tokens and a request to summarise them (long document)."""
    if shape_name == "long document":
        words = tokenizer.encode(DOCUMENT, add_special_tokens=False)[: max(16, length - 24)]
        content = f"{tokenizer.decode(words)}\n\n{SUMMARY_ASK}"
    else:
        content = QUESTIONS[index % len(QUESTIONS)]
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True
    )
    return tuple(tokenizer.encode(text, add_special_tokens=False))


def with_real_prompts(trace: Trace, tokenizer) -> Trace:
    """The same arrivals and reply lengths with real prompts."""
    requests = tuple(
        dataclasses.replace(r, prompt_ids=prompt_ids(tokenizer, r.index, r.prompt_tokens, trace.shape))
        for r in trace.requests
    )
    return dataclasses.replace(trace, requests=requests, prompt_source=REAL_SOURCE)


def question_of(tokenizer, request: Request) -> str:
    """What the user asked: the prompt's last user turn without the template's markers."""
    text = tokenizer.decode(request.prompt_ids, skip_special_tokens=True)
    return text.rsplit("user\n", 1)[-1].removesuffix("\n").removesuffix("assistant").strip()


def texts_table(tokenizer, trace: Trace, records) -> list[dict]:
    """One row per request: what it asked and what the engine answered (as streamed)."""
    replies = {r.index: r.text for r in records}
    return [
        {"request": r.index, "asked": question_of(tokenizer, r), "reply": replies.get(r.index, "")}
        for r in trace.requests
    ]


@lru_cache(maxsize=1)
def _english_stream() -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The document's sentences then the questions as SmolLM2's ids, and where each sentence starts."""
    sentences = [f"{part.strip().rstrip('.')}." for part in DOCUMENT.split(". ") if part.strip()] + list(QUESTIONS)
    stream, starts = [], []
    for sentence in sentences:
        starts.append(len(stream))
        stream += real_tokenizer().encode((" " if stream else "") + sentence, add_special_tokens=False)
    return tuple(stream), tuple(starts)


def text_ids(length: int, seed: int) -> list[int]:
    """`length` ids of real English (the prefix-cache lesson's prompts) from the sentence `seed` picks, wrapping
    round: different seeds start at different sentences, so two prompts share a prefix only where meant to."""
    stream, starts = _english_stream()
    start = starts[(seed * 7) % len(starts)]
    return [stream[(start + i) % len(stream)] for i in range(length)]


def opening(ids: list[int], words: int = 12) -> str:
    """The first words of a `text_ids` prompt, decoded."""
    return " ".join(real_tokenizer().decode(ids[: words * 2]).split()[:words])
