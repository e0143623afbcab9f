"""Drafters: whatever proposes a round's tokens. A drafter is given the text so far and how many tokens it may draft,
and returns its tokens with the distributions q they were drawn from.

- `ModelDrafter`: a small language model with its own KV cache, on transformers' forward (`TransformersForward`, or
  `ShortlistForward` when it scores only its most frequent tokens), drawing under the run's own sampling settings.
- `PromptLookupDrafter`: copies what followed an earlier occurrence of the last few tokens (q is a point mass).
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch

from inference.core.forward import ShortlistForward, TransformersForward
from inference.lessons.speculative.rule import final_probs, greedy_tokens
from inference.sampling.pipeline import SamplingSettings, sample_token

GAMMA_MIN, GAMMA_MAX = 1, 16
DRAFT_MODEL = "draft model"
PROMPT_LOOKUP = "prompt lookup"
FEATURE_DRAFT = "feature draft"  # `feature_draft.FeatureDrafter`
RUNS_A_MODEL = (DRAFT_MODEL, FEATURE_DRAFT)  # drafters whose passes are timed as draft passes (c)
LOOKUP_MAX_NGRAM = 3  # prompt lookup tries the last 3, then 2 tokens
# ...and no fewer: a one-token match is mostly coincidence, and its draft still costs a verify pass of several tokens.
LOOKUP_MIN_NGRAM = 2


@dataclass(frozen=True)
class DraftRequest:
    """What a drafter is given each round: the text so far, how many tokens it may draft, and how the run samples
    (its settings, the tokens the penalty sees, its next uniform number)."""

    committed: list[int]
    gamma: int
    settings: SamplingSettings
    seen: torch.Tensor  # [vocab] bool: the tokens of the committed text
    uniform: Callable[[], float]
    stop_at_eos: bool = True


@dataclass
class Proposal:
    tokens: list[int]
    q_rows: torch.Tensor | None  # [n, vocab] float64 distributions the tokens were drawn from (None: greedy)
    logit_rows: list[torch.Tensor]  # the draft model's [vocab] logits each token was chosen from (none for lookup)
    pass_ms: list[float]  # each draft forward pass (prompt lookup: its search)
    note: str | None = None  # e.g. prompt lookup found no match


class Drafter(Protocol):
    """What a speculative run asks of a drafter."""

    kind: str  # DRAFT_MODEL or PROMPT_LOOKUP

    @property
    def cache_tokens(self) -> int:
        """Positions of the text the drafter's cache holds (0 without a cache)."""

    def room(self, committed: int) -> int:
        """Most tokens it can draft after `committed` tokens of text."""

    def propose(self, request: DraftRequest) -> Proposal:
        """Up to `request.gamma` tokens after `request.committed`."""

    def crop_to(self, length: int) -> None:
        """Forget every position after the first `length` (the run's accepted prefix)."""


def draw_proposal(
    request: DraftRequest,
    first_logits: Callable[[], torch.Tensor],
    next_logits: Callable[[int], torch.Tensor],
    eos_ids: set[int],
) -> Proposal:
    """Draw up to `request.gamma` tokens from a model's [vocab] logits: `first_logits()` gives the first position's,
    `next_logits(token)` the next after feeding `token`. Each pass is timed; greedy takes the top token, else the run's
    sampling settings draw with its next uniform number. It stops after an end-of-text token."""
    settings = request.settings
    tokens, q_rows, logit_rows, pass_ms = [], [], [], []
    seen = request.seen.clone()  # the penalty sees each drafted token from the next position on
    start = time.perf_counter()
    logits = first_logits()
    pass_ms.append((time.perf_counter() - start) * 1000)
    for i in range(request.gamma):
        if settings.greedy:
            token = greedy_tokens(logits.unsqueeze(0), settings, seen)[0]
        else:
            q = final_probs(logits, settings, seen)
            token = sample_token(q, request.uniform())
            q_rows.append(q)
        logit_rows.append(logits)
        tokens.append(token)
        seen[token] = True
        if i == request.gamma - 1 or (request.stop_at_eos and token in eos_ids):
            break  # nothing after an end-of-text token is ever kept
        start = time.perf_counter()
        logits = next_logits(token)
        pass_ms.append((time.perf_counter() - start) * 1000)
    return Proposal(tokens, torch.stack(q_rows) if q_rows else None, logit_rows, pass_ms)


class ModelDrafter:
    """A small language model with its own KV cache. Its cache always holds a prefix of the committed text; each round
    first feeds what it has not seen (the prompt at first, then the target's last token, or two tokens after a fully
    accepted round), then one token a pass."""

    kind = DRAFT_MODEL

    def __init__(self, model, tokenizer, shortlist=None):
        self.model, self.tokenizer = model, tokenizer
        # With a shortlist (token ids) its output layer scores only those tokens, so it never proposes another.
        self.shortlist = None if shortlist is None else list(shortlist)
        self.forward = (
            TransformersForward(model, tokenizer)
            if shortlist is None
            else ShortlistForward(model, tokenizer, self.shortlist)
        )
        self.context, self.eos_ids = self.forward.context, self.forward.eos_ids

    @property
    def cache(self):
        return self.forward.cache

    @property
    def cache_tokens(self) -> int:
        return self.forward.cached_tokens

    def room(self, committed: int) -> int:
        return self.context - committed + 1

    @torch.inference_mode()
    def propose(self, request: DraftRequest) -> Proposal:
        first = lambda: self.forward.logits(request.committed[self.cache_tokens :])[0]  # noqa: E731
        return draw_proposal(request, first, lambda token: self.forward.logits([token])[0], self.eos_ids)

    def crop_to(self, length: int) -> None:
        self.forward.crop_to(length)


@dataclass(frozen=True)
class LookupMatch:
    ngram: int  # how many of the last tokens matched
    position: int  # where the earlier occurrence starts in the text
    continuation_start: int


def find_lookup(
    ids: list[int], max_ngram: int = LOOKUP_MAX_NGRAM, min_ngram: int = LOOKUP_MIN_NGRAM
) -> LookupMatch | None:
    """The most recent earlier occurrence of the text's last `max_ngram` tokens (then fewer, down to `min_ngram`) that
    has at least one token after it: transformers' prompt lookup and llama.cpp's lookup decoding search the same way
    (transformers takes the leftmost match; the latest one follows the text's most recent habit)."""
    # Searched as bytes (4 per token id) by `bytes.rfind`, which scans in C where a Python loop over the text would
    # cost most of a round that drafts nothing. A hit must start on a token's first byte.
    data = array("I", ids).tobytes()
    searched = (len(ids) - 1) * 4  # an occurrence needs a token after it: it ends before the last token
    for n in range(min(max_ngram, len(ids) - 1), min_ngram - 1, -1):
        tail, end = data[-4 * n :], searched
        while (found := data.rfind(tail, 0, end)) >= 0:
            if found % 4 == 0:
                return LookupMatch(n, found // 4, found // 4 + n)
            end = found + 4 * n - 1  # a hit across token boundaries: look further left
    return None


class PromptLookupDrafter:
    """Drafts by copying: find the last few tokens earlier in the text, propose what followed. No model, no cache, no
    cost beyond a search; useless on text that never repeats itself."""

    kind = PROMPT_LOOKUP
    cache_tokens = 0

    def __init__(self, vocab_size: int, max_ngram: int = LOOKUP_MAX_NGRAM):
        self.vocab_size, self.max_ngram = vocab_size, max_ngram
        self.last_match: LookupMatch | None = None

    def room(self, committed: int) -> int:
        return GAMMA_MAX

    def propose(self, request: DraftRequest) -> Proposal:
        committed = request.committed
        start = time.perf_counter()
        match = self.last_match = find_lookup(committed, self.max_ngram)
        if match is None:
            longest = min(self.max_ngram, len(committed))
            tried = f"{longest}" if longest <= LOOKUP_MIN_NGRAM else f"{longest} (down to {LOOKUP_MIN_NGRAM})"
            note = (
                f"Prompt lookup found no earlier occurrence of the last {tried} token(s): it drafted nothing, "
                "so this round is one plain decoding step."
            )
            return Proposal([], None, [], [(time.perf_counter() - start) * 1000], note)
        tokens = committed[match.continuation_start : match.continuation_start + request.gamma]
        q_rows = None
        if not request.settings.greedy:  # a copied token is certain: q is a point mass on it
            q_rows = torch.zeros(len(tokens), self.vocab_size, dtype=torch.float64)
            q_rows[torch.arange(len(tokens)), torch.tensor(tokens)] = 1.0
        note = f"Copied what followed the last {match.ngram} token(s) at position {match.position}."
        return Proposal(tokens, q_rows, [], [(time.perf_counter() - start) * 1000], note)

    def crop_to(self, length: int) -> None:
        pass
