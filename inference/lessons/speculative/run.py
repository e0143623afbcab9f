"""Speculative decoding: a cheap drafter guesses several tokens, the target checks them all in one pass.

One round: 1. the drafter proposes up to γ tokens (`drafters`); 2. ONE target pass over [last token, x_1..x_γ] on its
KV cache gives p_1..p_{γ+1}; 3. `rule.verify_sampled` (or `verify_greedy` at temperature 0) keeps a prefix and adds
the target's own token; 4. both caches drop every position after it. Every uniform comes from the run's own
`torch.Generator`, so a seed replays a run exactly.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import pandas as pd
import torch

from inference.core.forward import TransformersForward, vocabulary_rows  # noqa: F401 (the pages' reading of rows)
from inference.core.measuring import Stopwatch
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

TOKENIZER_MISMATCH = "the draft must use the target's tokenizer"
RESIDUAL_TOP = 8  # tokens a record keeps of the residual distribution, for the page's chart
# Each tokenizer's token -> id map, read once (`get_vocab` builds a new dict a call; the page checks on every rerun).
_VOCABULARIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def check_gamma(gamma) -> None:
    if isinstance(gamma, bool) or not isinstance(gamma, int) or not GAMMA_MIN <= gamma <= GAMMA_MAX:
        raise SpeculationError(
            f"`gamma` (tokens drafted per round) has to be an integer from {GAMMA_MIN} to {GAMMA_MAX}, but is {gamma!r}"
        )


def _vocabulary(tokenizer) -> dict:
    kept = _VOCABULARIES.get(tokenizer)
    if kept is None or kept[0] != len(tokenizer):
        kept = _VOCABULARIES[tokenizer] = (len(tokenizer), tokenizer.get_vocab())
    return kept[1]


def check_pair(target, target_tokenizer, draft, draft_tokenizer) -> None:
    """Before any forward pass: p and q must be over the same tokens, and the draft must be smaller."""
    target_rows, draft_rows = vocabulary_rows(target), vocabulary_rows(draft)
    refused = f"Refused before any forward pass: {TOKENIZER_MISMATCH}"
    if target_rows != draft_rows:
        raise SpeculationError(f"{refused} (the target scores {target_rows:,} tokens, the draft {draft_rows:,}).")
    if target_tokenizer is not draft_tokenizer and _vocabulary(target_tokenizer) != _vocabulary(draft_tokenizer):
        raise SpeculationError(f"{refused} (both have {target_rows:,} tokens, but the tokens differ).")
    target_params, draft_params = target.num_parameters(), draft.num_parameters()  # tied weights counted once
    if draft_params > target_params:
        raise SpeculationError(
            f"Refused: the draft ({draft_params:,} parameters) is larger than the target ({target_params:,}); "
            "a draft only pays off when it is much cheaper to run."
        )


@dataclass(frozen=True)
class DraftCheck:
    position: int  # 0-based within the round
    token_id: int
    text: str
    q: float  # draft probability in the final distribution (1 for a copied token, and when greedy)
    p: float  # target probability in the final distribution (greedy: 1 where it is the target's argmax, else 0)
    q_raw: float | None  # greedy rounds: each model's probability at T=1, which the chart shows (lookup: none)
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
    residual_top: list[tuple[int, str, float, float, float]]  # (id, text, p, q, residual) on a rejection
    new_tokens: list[int]  # accepted drafts + the target's token (cut after an end-of-text token)
    draft_ms: list[float]
    verify_ms: float
    round_ms: float  # the whole round: drafting, verifying, sampling, bookkeeping
    note: str | None = None
    greedy: bool = False

    @property
    def drafted(self) -> int:
        return len(self.checks)

    @property
    def checked(self) -> int:
        return sum(c.status != "unchecked" for c in self.checks)

    @property
    def verify_positions(self) -> int:  # next-token distributions the verify pass scored
        return self.drafted + 1


def residual_top(residual: torch.Tensor, p: torch.Tensor, q: torch.Tensor, tokenizer) -> list:
    """The residual's likeliest tokens with p and q beside them: the RESIDUAL_TOP likeliest of each of the three."""
    picks = {
        t for values in (residual, p, q) for t in torch.topk(values, min(RESIDUAL_TOP, len(values))).indices.tolist()
    }
    ranked = sorted(
        (t for t in picks if max(residual[t], p[t], q[t]) > 0), key=lambda t: (-float(residual[t]), -float(p[t]), t)
    )
    return [(t, token_text(tokenizer, t), float(p[t]), float(q[t]), float(residual[t])) for t in ranked[:RESIDUAL_TOP]]


def raw_probabilities(logits: torch.Tensor, tokens: list[int]) -> list[float]:
    """Each row's probability of its token at temperature 1 ([n, vocab] logits, n tokens), in float64."""
    if not tokens:
        return []
    log_probs = logits[: len(tokens)].double().log_softmax(-1)
    return log_probs[torch.arange(len(tokens)), torch.tensor(tokens)].exp().tolist()


@dataclass
class SpeculativeRun(Generation):
    """A prompt, a target, a drafter, and the records of its rounds. Between rounds the target's cache holds every
    committed token but the last, the drafter's a prefix of that."""

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
        self.prompt_ids = list(self.prompt_ids)
        check_gamma(self.gamma)
        check_seed(self.seed)
        if isinstance(self.drafter, ModelDrafter):
            check_pair(self.target, self.tokenizer, self.drafter.model, self.drafter.tokenizer)
        forward = self.forward = TransformersForward(self.target, self.tokenizer)
        self.context, self.vocab_size, self.eos_ids = forward.context, forward.vocab_size, forward.eos_ids
        check_run(self.prompt_ids, self.context, self.max_new_tokens, SpeculationError)
        self._generator = torch.Generator().manual_seed(self.seed)
        self._seen = seen_mask(self.prompt_ids, self.vocab_size)

    def use_gamma(self, gamma: int) -> None:
        """Draft `gamma` tokens from the next round on; the rounds made keep their own."""
        check_gamma(gamma)
        self.gamma = gamma

    def _uniform(self) -> float:
        return float(torch.rand((), generator=self._generator, dtype=torch.float64))

    @torch.inference_mode()
    def step(self, settings: SamplingSettings) -> RoundRecord | None:
        """One round: draft, verify in one target pass, accept or resample, crop. None once stopped."""
        if self.finished:
            return None
        check_settings(settings)
        with Stopwatch() as round_watch:
            committed, left = self.all_ids, self.max_new_tokens - len(self.generated_ids)
            gamma = min(self.gamma, left - 1, self.context - len(committed), self.drafter.room(len(committed)))
            note, proposal = None, Proposal([], None, [], [])
            if gamma < self.gamma:
                why = f"the run may add only {left} more" if gamma == left - 1 else "the context is nearly full"
                note = f"Drafted at most {max(gamma, 0)} token(s): {why}."
            if gamma > 0:  # 1. draft
                request = DraftRequest(committed, gamma, settings, self._seen, self._uniform, self.stop_at_eos)
                proposal = self.drafter.propose(request)
            note, drafted, n = proposal.note or note, proposal.tokens, len(proposal.tokens)

            # 2. verify: one target pass scores every drafted position and the one after them
            fed_from = self.forward.cached_tokens
            fed, hidden = committed[fed_from:] + drafted, None
            with Stopwatch() as verify_watch:
                if getattr(self.drafter, "reads_target_features", False):  # computed by the same pass
                    logits, hidden = self.forward.logits_and_features(fed, keep=n + 1)
                else:
                    logits = self.forward.logits(fed, keep=n + 1)  # [n + 1, vocab]

            # 3. accept or reject, under the same pipeline for p as for q
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
            ends = [i for i, token in enumerate(new_tokens) if self.stop_at_eos and token in self.eos_ids]
            new_tokens = new_tokens[: ends[0] + 1] if ends else new_tokens

            # 4. commit, then crop both caches to the accepted prefix (all committed tokens but the last)
            self.generated_ids.extend(new_tokens)
            self._seen[new_tokens] = True
            prefix = len(self.all_ids) - 1
            self.forward.crop_to(prefix)
            self.drafter.crop_to(prefix)
            if hidden is not None:
                self.drafter.take_features(fed_from, hidden[: prefix - fed_from])
            i, chart = verdict.accepted, []
            if verdict.residual is not None:
                chart = residual_top(verdict.residual, p_rows[i], q_rows[i], self.tokenizer)
        # a greedy round's chart shows both models' T=1 probabilities (after the clock: the page's, not the rule's)
        p_raw = q_raw = [None] * n
        if settings.greedy and n:
            p_raw = raw_probabilities(logits, drafted)
            q_raw = raw_probabilities(torch.stack(proposal.logit_rows), drafted) if proposal.logit_rows else q_raw
        checks = []
        for i, token in enumerate(drafted):
            checked = i <= verdict.accepted and i < len(verdict.ratios)
            status = "accepted" if i < verdict.accepted else ("rejected" if checked else "unchecked")
            u = verdict.uniforms[i] if checked and verdict.uniforms else None
            ratio = verdict.ratios[i] if checked else None
            text = token_text(self.tokenizer, token)
            checks.append(DraftCheck(i, token, text, q_drafted[i], p_drafted[i], q_raw[i], p_raw[i], ratio, u, status))
        record = RoundRecord(
            len(self.rounds), self.drafter.kind, self.gamma, len(committed), checks, verdict.accepted,
            verdict.token_id, token_text(self.tokenizer, verdict.token_id), verdict.kind, chart, new_tokens,
            proposal.pass_ms, verify_watch.ms, round_watch.ms, note, settings.greedy,
        )  # fmt: skip
        self.rounds.append(record)
        self.stop_reason = self._reason_to_stop()
        return record

    def run(self, settings: SamplingSettings, max_rounds: int | None = None):
        """Round after round until a stop (EOS, max new tokens, context) or `max_rounds`, yielding each record."""
        return self._steps(settings, max_rounds)

    def to_frame(self) -> pd.DataFrame:
        """One row per round, for a table or a CSV."""
        return pd.DataFrame(
            {
                "round": r.index,
                "gamma": r.gamma,
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
        )


new_run = SpeculativeRun  # (target, tokenizer, drafter, prompt_ids, max_new_tokens, gamma=4, seed=0, stop_at_eos=True)
