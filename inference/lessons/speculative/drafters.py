"""Drafters: whatever proposes a round's tokens, with the distributions q they were drawn from.

`ModelDrafter` is a small model on its own KV cache (scoring only its most frequent tokens with `ShortlistForward`,
as FR-Spec does; a self-draft is the target's own first k layers); `PromptLookupDrafter` copies what followed an
earlier occurrence of the last tokens (q a point mass); `feature_draft.FeatureDrafter` reads the target's last hidden
state (EAGLE). A shortlist leaves other tokens at q = 0, which the rule allows: the residual max(0, p - q) holds them.
"""

from __future__ import annotations

import copy
from array import array
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from inference.core.forward import ShortlistForward, TransformersForward, vocabulary_rows
from inference.core.measuring import Stopwatch
from inference.lessons.speculative.rule import final_probs, greedy_tokens
from inference.sampling.pipeline import SamplingSettings, sample_token
from inference.training.token_frequency import coverage, most_frequent, token_counts  # noqa: F401

GAMMA_MIN, GAMMA_MAX = 1, 16
DRAFT_MODEL, PROMPT_LOOKUP, FEATURE_DRAFT = "draft model", "prompt lookup", "feature draft"
RUNS_A_MODEL = (DRAFT_MODEL, FEATURE_DRAFT)  # drafters whose passes are timed as draft passes (c)
LOOKUP_MAX_NGRAM, LOOKUP_MIN_NGRAM = 3, 2  # a one-token match is mostly coincidence
SHORTLIST_SIZES = (256, 512, 1024, 2048, 4096, 8192)  # the page's choices (the last two for a large vocabulary)
DEFAULT_SHORTLIST = 1024
SELF_DRAFT_LAYERS, SELF_LAYER_CHOICES = 8, (4, 6, 8, 12)  # on SmolLM2 every k measured lost (bench/real_spec.py)
SELF_SHORTLIST_ROWS = 8192  # a BPE tokenizer numbers its merges most frequent first: its first ids are a ranking


@dataclass(frozen=True)
class DraftRequest:
    committed: list[int]  # the text so far
    gamma: int  # tokens it may draft
    settings: SamplingSettings
    seen: torch.Tensor  # [vocab] bool: the committed text's tokens (what the penalty sees)
    uniform: Callable[[], float]
    stop_at_eos: bool = True


@dataclass
class Proposal:
    tokens: list[int]
    q_rows: torch.Tensor | None  # [n, vocab] float64 distributions the tokens were drawn from (None: greedy)
    logit_rows: list[torch.Tensor]  # the [vocab] logits each token was chosen from (none for lookup)
    pass_ms: list[float]  # each draft forward pass (prompt lookup: its search)
    note: str | None = None


def draw_proposal(request: DraftRequest, first_logits: Callable, next_logits: Callable, eos_ids: set[int]) -> Proposal:
    """Up to γ tokens from a model's [vocab] logits (`first_logits()`, then `next_logits(token)`), each pass timed,
    each token chosen under the run's settings with its next uniform. Stops after an end-of-text token."""
    settings, seen = request.settings, request.seen.clone()
    tokens, q_rows, logit_rows, pass_ms = [], [], [], []
    with Stopwatch() as watch:
        logits = first_logits()
    pass_ms.append(watch.ms)
    for i in range(request.gamma):
        if settings.greedy:
            token = greedy_tokens(logits.unsqueeze(0), settings, seen)[0]
        else:
            q_rows.append(final_probs(logits, settings, seen))
            token = sample_token(q_rows[-1], request.uniform())
        logit_rows.append(logits)
        tokens.append(token)
        seen[token] = True
        if i == request.gamma - 1 or (request.stop_at_eos and token in eos_ids):
            break  # nothing after an end-of-text token is ever kept
        with Stopwatch() as watch:
            logits = next_logits(token)
        pass_ms.append(watch.ms)
    return Proposal(tokens, torch.stack(q_rows) if q_rows else None, logit_rows, pass_ms)


class ModelDrafter:
    """A small language model on its own KV cache (a prefix of the committed text); with `shortlist` (token ids) it
    scores only those."""

    kind = DRAFT_MODEL

    def __init__(self, model, tokenizer, shortlist=None):
        self.model, self.tokenizer = model, tokenizer
        self.shortlist = None if shortlist is None else list(shortlist)
        self.forward = (
            TransformersForward(model, tokenizer)
            if shortlist is None
            else ShortlistForward(model, tokenizer, shortlist)
        )
        self.context, self.eos_ids = self.forward.context, self.forward.eos_ids

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
    position: int  # where the earlier occurrence starts
    continuation_start: int


def find_lookup(ids: list[int], max_ngram: int = LOOKUP_MAX_NGRAM, min_ngram: int = LOOKUP_MIN_NGRAM):
    """The latest earlier occurrence of the last `max_ngram` (down to `min_ngram`) tokens with a token after it, as
    transformers' and llama.cpp's lookup search; by `bytes.rfind` on 4 bytes an id (a Python loop cost most of a
    round that drafts nothing). A hit must start on a token."""
    data = array("I", ids).tobytes()
    for n in range(min(max_ngram, len(ids) - 1), min_ngram - 1, -1):
        tail, end = data[-4 * n :], (len(ids) - 1) * 4
        while (found := data.rfind(tail, 0, end)) >= 0:
            if found % 4 == 0:
                return LookupMatch(n, found // 4, found // 4 + n)
            end = found + 4 * n - 1
    return None


class PromptLookupDrafter:
    """Drafts by copying: no model, no cache, no cost beyond a search; useless on text that never repeats itself."""

    kind, cache_tokens = PROMPT_LOOKUP, 0

    def __init__(self, vocab_size: int, max_ngram: int = LOOKUP_MAX_NGRAM):
        self.vocab_size, self.max_ngram = vocab_size, max_ngram

    def room(self, committed: int) -> int:
        return GAMMA_MAX

    def propose(self, request: DraftRequest) -> Proposal:
        committed = request.committed
        with Stopwatch() as watch:
            match = find_lookup(committed, self.max_ngram)
        if match is None:
            longest = min(self.max_ngram, len(committed))
            tried = f"{longest}" if longest <= LOOKUP_MIN_NGRAM else f"{longest} (down to {LOOKUP_MIN_NGRAM})"
            note = (
                f"Prompt lookup found no earlier occurrence of the last {tried} token(s): it drafted nothing, "
                "so this round is one plain decoding step."
            )
            return Proposal([], None, [], [watch.ms], note)
        tokens = committed[match.continuation_start : match.continuation_start + request.gamma]
        q_rows = None
        if not request.settings.greedy:  # a copied token is certain: q is a point mass on it
            q_rows = torch.zeros(len(tokens), self.vocab_size, dtype=torch.float64)
            q_rows[torch.arange(len(tokens)), torch.tensor(tokens)] = 1.0
        note = f"Copied what followed the last {match.ngram} token(s) at position {match.position}."
        return Proposal(tokens, q_rows, [], [watch.ms], note)

    def crop_to(self, length: int) -> None:
        pass


# -- self-speculation: the target's own first k layers, final norm and output layer ---------------------------------


class SelfDraftError(ValueError):
    pass


def can_self_draft(model) -> bool:
    """A decoder laid out as `model.model.layers` with its norm, embeddings and rotary beside them (Llama and kin)."""
    body = getattr(model, "model", None)
    return all(hasattr(body, n) for n in ("layers", "norm", "embed_tokens", "rotary_emb")) and hasattr(model, "lm_head")


def layer_choices(layers: int) -> list[int]:
    """The page's k: every k for a shallow model, else a few and every fourth."""
    if layers <= 8:
        return list(range(1, layers))
    return sorted({k for k in SELF_LAYER_CHOICES if k < layers} | set(range(4, layers, 4)) | {layers // 2, layers - 2})


def layer_draft(target, k: int):
    """A model of the target's class whose modules ARE the target's (embeddings, layers 0..k-1, rotary, final norm,
    output layer): no weight copied or changed, its own KV cache of k layers."""
    layers = int(target.config.num_hidden_layers)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k < layers:
        raise SelfDraftError(f"A self-draft keeps 1 to {layers - 1} of the target's {layers} layers, not {k!r}.")
    if not can_self_draft(target):
        raise SelfDraftError(f"{type(target).__name__} does not expose its layers as model.layers: no self-draft.")
    config = copy.deepcopy(target.config)
    config.num_hidden_layers = k
    if getattr(config, "layer_types", None) is not None:
        config.layer_types = list(config.layer_types[:k])
    with torch.device("meta"):  # the skeleton allocates nothing: each module is replaced by the target's
        draft = type(target)(config)
    body, source = draft.model, target.model
    body.embed_tokens, body.norm, body.rotary_emb = source.embed_tokens, source.norm, source.rotary_emb
    body.layers = nn.ModuleList(list(source.layers[:k]))
    draft.lm_head = target.lm_head
    draft.training = body.training = False  # `.eval()` would walk the shared modules too
    leftovers = [name for name, t in [*draft.named_parameters(), *draft.named_buffers()] if t.is_meta]
    if leftovers:
        raise SelfDraftError(f"The self-draft kept unshared tensors: {', '.join(leftovers)}")
    return draft


def self_drafter(target, tokenizer, layers: int, shortlisted: bool) -> ModelDrafter:
    """The target's first `layers` layers as a drafter, scoring the tokenizer's first ids when `shortlisted`."""
    rows = list(range(min(SELF_SHORTLIST_ROWS, vocabulary_rows(target)))) if shortlisted else None
    return ModelDrafter(layer_draft(target, layers), tokenizer, rows)
