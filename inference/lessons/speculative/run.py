"""Speculative decoding: a cheap drafter guesses several tokens, the target checks them all in one pass.

One round:

    1. draft: the drafter proposes up to γ tokens (`drafters`: a draft model drawing from its own q under the app's
       sampling pipeline, or prompt lookup copying earlier text);
    2. verify: ONE forward pass of the target (transformers' forward, `TransformersForward`) over [last token,
       x_1..x_γ], on top of its KV cache, gives its distributions p_1..p_{γ+1} under the same pipeline;
    3. accept: `rule.verify_sampled` (u ≤ p/q, else the residual, a bonus token when all pass), or at temperature 0
       `rule.verify_greedy` (keep while the target's argmax agrees);
    4. crop: both KV caches drop every position after the accepted prefix.

Every uniform comes from the run's private `torch.Generator` (the global RNG is never used), so a seed replays a run
exactly. Each round returns a `RoundRecord` with everything a page draws.
"""

from __future__ import annotations

import dataclasses
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field

import pandas as pd
import torch

from inference.core.forward import TransformersForward, vocabulary_rows
from inference.core.paths import MODELS_DIR
from inference.core.run import Generation, check_run, check_seed
from inference.core.tokens import token_text
from inference.lessons.speculative.drafters import GAMMA_MAX, GAMMA_MIN, DraftRequest, ModelDrafter, Proposal
from inference.lessons.speculative.rule import (
    SpeculationError,
    check_settings,
    final_probs,
    greedy_tokens,
    running_seen,
    verify_greedy,
    verify_sampled,
)
from inference.sampling.pipeline import SamplingSettings, seen_mask

BUNDLED_DRAFT_NAME = "storyteller-draft-1m"
BUNDLED_DRAFT_DIR = MODELS_DIR / BUNDLED_DRAFT_NAME
TOKENIZER_MISMATCH = "the draft must use the target's tokenizer"
RESIDUAL_TOP = 8  # tokens a record keeps of the residual distribution, for the page's chart


# -- checks -----------------------------------------------------------------------------------------------------------


def check_gamma(gamma) -> None:
    if isinstance(gamma, bool) or not isinstance(gamma, int) or not GAMMA_MIN <= gamma <= GAMMA_MAX:
        raise SpeculationError(
            f"`gamma` (tokens drafted per round) has to be an integer from {GAMMA_MIN} to {GAMMA_MAX}, but is {gamma!r}"
        )


def parameter_count(model) -> int:
    """Parameters, tied weights counted once."""
    seen, total = set(), 0
    for p in model.parameters():
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            total += p.numel()
    return total


# Each tokenizer's token -> id map, read once: `get_vocab` builds a new dict every call, and every speculative run
# checks its pair. Dropped with the tokenizer; the size is kept with it, so a tokenizer that gained tokens is read
# again.
_VOCABULARIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _vocabulary(tokenizer) -> dict:
    try:
        size = len(tokenizer)
        kept = _VOCABULARIES.get(tokenizer)
    except TypeError:  # no size to tell a changed tokenizer by, or not weakly referable: read every time
        return tokenizer.get_vocab()
    if kept is None or kept[0] != size:
        kept = _VOCABULARIES[tokenizer] = (size, tokenizer.get_vocab())
    return kept[1]


def check_pair(target, target_tokenizer, draft, draft_tokenizer) -> None:
    """Refuse a draft that cannot serve this target, from configs and tokenizers alone (no forward pass runs): p and q
    must be over the same tokens, and the draft must be smaller."""
    target_rows, draft_rows = vocabulary_rows(target), vocabulary_rows(draft)
    if target_rows != draft_rows:
        raise SpeculationError(
            f"Refused before any forward pass: {TOKENIZER_MISMATCH} (the target scores {target_rows:,} tokens, "
            f"the draft {draft_rows:,})."
        )
    if target_tokenizer is not draft_tokenizer and _vocabulary(target_tokenizer) != _vocabulary(draft_tokenizer):
        raise SpeculationError(
            f"Refused before any forward pass: {TOKENIZER_MISMATCH} (both have {target_rows:,} tokens, "
            "but the tokens differ)."
        )
    target_params, draft_params = parameter_count(target), parameter_count(draft)
    if draft_params > target_params:
        raise SpeculationError(
            f"Refused: the draft ({draft_params:,} parameters) is larger than the target ({target_params:,}); "
            "a draft only pays off when it is much cheaper to run."
        )


# -- one round's record -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DraftCheck:
    """One drafted token and its test."""

    position: int  # 0-based within the round
    token_id: int
    text: str
    q: float  # draft probability in the final distribution (1 for a copied token; 1 when greedy)
    p: float  # target probability in the final distribution (greedy: 1 where it is the target's argmax, else 0)
    # The models' probabilities at temperature 1, which a greedy round's chart shows (its rule only asks for the top
    # token): None in the round's own record, filled in only for a greedy round the page draws
    # (`SpeculativeRun.with_t1_probabilities`); q_raw stays None for prompt lookup, and a feature draft's is made in
    # the round from its own logits.
    q_raw: float | None
    p_raw: float | None
    ratio: float | None  # p / q (None if never checked)
    u: float | None  # the uniform it was tested with (None when greedy or never checked)
    status: str  # "accepted", "rejected" or "unchecked" (after a rejection)


@dataclass(frozen=True)
class RoundRecord:
    index: int
    drafter: str
    gamma: int  # asked for
    context_tokens: int  # committed tokens before the round
    checks: list[DraftCheck]
    accepted: int
    token_id: int  # the target's token after the accepted drafts
    token_text: str
    token_kind: str  # "residual", "bonus" or "target"
    token_u: float | None
    residual_top: list[tuple[int, str, float, float, float]]  # (id, text, p, q, residual) on a rejection
    new_tokens: list[int]  # accepted drafts + the target's token (cut after an end-of-text token)
    draft_ms: list[float]
    verify_ms: float
    verify_positions: int  # next-token distributions the verify pass scored
    round_ms: float  # the whole round: drafting, verifying, sampling, bookkeeping
    target_cache_tokens: int
    draft_cache_tokens: int
    note: str | None = None
    greedy: bool = False  # temperature 0: the round kept drafts while they were the target's top token

    @property
    def drafted(self) -> int:
        return len(self.checks)

    @property
    def checked(self) -> int:
        return sum(c.status != "unchecked" for c in self.checks)


def residual_top(residual: torch.Tensor, p: torch.Tensor, q: torch.Tensor, tokenizer) -> list:
    """The residual's most likely tokens with p and q beside them, for the page's chart: the RESIDUAL_TOP most likely
    under each of the three, those of positive probability, most likely in the residual first."""
    picks = []
    for values in (residual, p, q):
        for token in torch.topk(values, min(RESIDUAL_TOP, len(values))).indices.tolist():
            if token not in picks and values[token] > 0:
                picks.append(token)
    rows = [(t, float(residual[t]), float(p[t]), float(q[t])) for t in picks]
    ranked = sorted(rows, key=lambda row: (-row[1], -row[2]))[:RESIDUAL_TOP]
    return [(t, token_text(tokenizer, t), p_t, q_t, r_t) for t, r_t, p_t, q_t in ranked]


def raw_probabilities(logits: torch.Tensor, tokens: list[int]) -> list[float]:
    """Each row's probability of its token at temperature 1 ([n, vocab] logits, n tokens), in float64."""
    if not tokens:
        return []
    log_probs = logits[: len(tokens)].double().log_softmax(dim=-1)
    return log_probs[torch.arange(len(tokens)), torch.tensor(tokens)].exp().tolist()


# -- the run ----------------------------------------------------------------------------------------------------------


@dataclass
class SpeculativeRun(Generation):
    """One speculative generation: a prompt, a target, a drafter, and the records of its rounds.

    Invariant between rounds: the target's cache holds every committed token but the last (it is fed at the start of
    the next verify pass), the drafter's cache a prefix of that."""

    target: object
    tokenizer: object
    drafter: object
    prompt_ids: list[int]
    max_new_tokens: int
    gamma: int = 4
    seed: int = 0
    stop_at_eos: bool = True
    rounds: list[RoundRecord] = field(default_factory=list)
    generated_ids: list[int] = field(default_factory=list)
    stop_reason: str | None = None

    def __post_init__(self):
        check_gamma(self.gamma)
        check_seed(self.seed)
        if isinstance(self.drafter, ModelDrafter):
            check_pair(self.target, self.tokenizer, self.drafter.model, self.drafter.tokenizer)
        forward = self.forward = TransformersForward(self.target, self.tokenizer)
        self.context, self.vocab_size, self.eos_ids = forward.context, forward.vocab_size, forward.eos_ids
        check_run(self.prompt_ids, self.context, self.max_new_tokens, SpeculationError)
        self._generator = torch.Generator().manual_seed(self.seed)
        self._seen = seen_mask(self.prompt_ids, self.vocab_size)
        self._t1_made: dict[int, tuple[list, list]] = {}

    def use_gamma(self, gamma: int) -> None:
        """Draft `gamma` tokens from the next round on; the rounds made keep their own (each record holds its γ),
        so a new γ on the page continues the run instead of starting it over."""
        check_gamma(gamma)
        self.gamma = gamma

    def _uniform(self) -> float:
        """The run's next uniform number in [0, 1), from its own generator."""
        return float(torch.rand((), generator=self._generator, dtype=torch.float64))

    @property
    def cache(self):
        """The target's KV cache."""
        return self.forward.cache

    @torch.inference_mode()
    def step(self, settings: SamplingSettings) -> RoundRecord | None:
        """One round: draft, verify in one target pass, accept or resample, crop. None once stopped."""
        if self.finished:
            return None
        check_settings(settings)
        round_start = time.perf_counter()
        committed = self.all_ids
        left = self.max_new_tokens - len(self.generated_ids)
        gamma = min(self.gamma, left - 1, self.context - len(committed), self.drafter.room(len(committed)))
        note = None
        if gamma < self.gamma:
            why = f"the run may add only {left} more" if gamma == left - 1 else "the context is nearly full"
            note = f"Drafted at most {max(gamma, 0)} token(s): {why}."
        proposal = Proposal([], None, [], [])
        if gamma > 0:
            request = DraftRequest(committed, gamma, settings, self._seen, self._uniform, self.stop_at_eos)
            proposal = self.drafter.propose(request)
        note = proposal.note or note
        drafted, n = proposal.tokens, len(proposal.tokens)

        # 2. verify: one target pass scores every drafted position and the one after them.
        verify_start = time.perf_counter()
        fed_from, fed = self.forward.cached_tokens, committed[self.forward.cached_tokens :] + drafted
        hidden = None  # a feature draft reads the target's last hidden states, which this same pass computes
        if getattr(self.drafter, "reads_target_features", False):
            logits, hidden = self.forward.logits_and_features(fed, keep=n + 1)
        else:
            logits = self.forward.logits(fed, keep=n + 1)  # [n + 1, vocab]
        verify_ms = (time.perf_counter() - verify_start) * 1000

        # 3. accept or reject, under the same pipeline for p as for q.
        seen_rows = running_seen(self._seen, drafted, settings)
        if settings.greedy:  # p is one-hot on each position's argmax
            choices = greedy_tokens(logits, settings, seen_rows)
            verdict = verify_greedy(choices, drafted)
            p_drafted, q_drafted = [float(c == t) for c, t in zip(choices, drafted)], [1.0] * n
        else:
            p_rows = final_probs(logits, settings, seen_rows)
            q_rows = proposal.q_rows if n else torch.zeros(0, self.vocab_size, dtype=torch.float64)
            verdict = verify_sampled(p_rows, q_rows, drafted, self._uniform)
            p_drafted, q_drafted = p_rows[range(n), drafted].tolist(), q_rows[range(n), drafted].tolist()
        new_tokens = drafted[: verdict.accepted] + [verdict.token_id]
        if self.stop_at_eos:
            for i, token in enumerate(new_tokens):
                if token in self.eos_ids:
                    new_tokens = new_tokens[: i + 1]
                    break

        # 4. commit, then crop both caches to the accepted prefix (all committed tokens but the last).
        self.generated_ids.extend(new_tokens)
        self._seen[new_tokens] = True
        prefix = len(self.all_ids) - 1
        self.forward.crop_to(prefix)
        self.drafter.crop_to(prefix)
        if hidden is not None:
            self.drafter.take_features(fed_from, hidden[: prefix - fed_from])
        chart = []
        if verdict.residual is not None:
            i = verdict.accepted
            chart = residual_top(verdict.residual, p_rows[i], q_rows[i], self.tokenizer)
        q_raw = [None] * n  # a greedy round's chart shows q at T=1: a feature draft's comes from its own logits here
        if settings.greedy and proposal.logit_rows and not isinstance(self.drafter, ModelDrafter):
            q_raw = raw_probabilities(torch.stack(proposal.logit_rows), drafted)
        checks = []
        for i, token in enumerate(drafted):
            checked = i <= verdict.accepted and i < len(verdict.ratios)
            status = "accepted" if i < verdict.accepted else ("rejected" if checked else "unchecked")
            text = token_text(self.tokenizer, token)
            ratio = verdict.ratios[i] if checked else None
            u = verdict.uniforms[i] if checked and verdict.uniforms else None
            checks.append(DraftCheck(i, token, text, q_drafted[i], p_drafted[i], q_raw[i], None, ratio, u, status))
        record = RoundRecord(
            index=len(self.rounds),
            drafter=self.drafter.kind,
            gamma=self.gamma,
            context_tokens=len(committed),
            checks=checks,
            accepted=verdict.accepted,
            token_id=verdict.token_id,
            token_text=token_text(self.tokenizer, verdict.token_id),
            token_kind=verdict.kind,
            token_u=verdict.final_u,
            residual_top=chart,
            new_tokens=new_tokens,
            draft_ms=proposal.pass_ms,
            verify_ms=verify_ms,
            verify_positions=n + 1,
            round_ms=(time.perf_counter() - round_start) * 1000,
            target_cache_tokens=self.forward.cached_tokens,
            draft_cache_tokens=self.drafter.cache_tokens,
            note=note,
            greedy=settings.greedy,
        )
        self.rounds.append(record)
        self.stop_reason = self._reason_to_stop()
        return record

    @torch.inference_mode()
    def with_t1_probabilities(self, record: RoundRecord) -> RoundRecord:
        """The record with each drafted token's probability at temperature 1 under both models filled in, which a
        greedy round's chart shows: made when the page draws the round, by each model's forward over the text up to
        it (not in the round, which needs only argmaxes), and kept per round. Sampled rounds come back as they are."""
        if not record.greedy or not record.checks:
            return record
        made = self._t1_made.get(record.index)
        if made is None:
            drafted = [c.token_id for c in record.checks]
            text = torch.tensor([self.all_ids[: record.context_tokens] + drafted])
            first = record.context_tokens - 1  # the position whose logits predict the first drafted token

            def probabilities(model, shortlist=None):
                logits = model(input_ids=text).logits[0, first : first + len(drafted)].float()
                if shortlist is not None:  # the draft scored only these: the rest -inf, as in its passes
                    kept = torch.tensor(shortlist)
                    logits = torch.full_like(logits, -torch.inf).index_copy_(1, kept, logits[:, kept])
                return raw_probabilities(logits, drafted)

            p_raw = probabilities(self.target)
            model_drafter = isinstance(self.drafter, ModelDrafter)
            q_raw = (
                probabilities(self.drafter.model, self.drafter.shortlist)
                if model_drafter
                else [c.q_raw for c in record.checks]  # prompt lookup: None; a feature draft: made in the round
            )
            made = self._t1_made[record.index] = (p_raw, q_raw)
        checks = [dataclasses.replace(c, p_raw=p, q_raw=q) for c, p, q in zip(record.checks, *made)]
        return dataclasses.replace(record, checks=checks)

    def run(self, settings: SamplingSettings, max_rounds: int | None = None) -> Iterator[RoundRecord]:
        """Round after round until a stop (EOS, max new tokens, context) or `max_rounds`, yielding each record."""
        return self._steps(settings, max_rounds)

    def to_frame(self) -> pd.DataFrame:
        """One row per round, for a table or a CSV."""
        return pd.DataFrame(
            [
                {
                    "round": r.index,
                    "drafted": r.drafted,
                    "accepted": r.accepted,
                    "target_token": r.token_text,
                    "how": r.token_kind,
                    "new_tokens": len(r.new_tokens),
                    "draft_ms": sum(r.draft_ms),
                    "draft_passes": len(r.draft_ms),
                    "verify_ms": r.verify_ms,
                    "round_ms": r.round_ms,
                }
                for r in self.rounds
            ]
        )


def new_run(
    target,
    tokenizer,
    drafter,
    prompt_ids: list[int],
    max_new_tokens: int,
    gamma: int = 4,
    seed: int = 0,
    stop_at_eos: bool = True,
) -> SpeculativeRun:
    return SpeculativeRun(
        target=target,
        tokenizer=tokenizer,
        drafter=drafter,
        prompt_ids=list(prompt_ids),
        max_new_tokens=max_new_tokens,
        gamma=gamma,
        seed=seed,
        stop_at_eos=stop_at_eos,
    )
