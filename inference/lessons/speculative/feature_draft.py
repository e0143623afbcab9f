"""A feature draft (EAGLE's idea: Li et al. 2024, "EAGLE: Speculative Sampling Requires Rethinking Feature
Uncertainty"): a draft that does not read the text alone but the target's own last hidden state.

An independent draft must re-learn from the words what the target already worked out. This one starts where the
target stopped: at position j it takes the target's final hidden state h_j (after its final norm: what the target's
output layer reads) and the embedding of the next token x_{j+1}, mixes them with one linear layer (`fc`), runs ONE
Llama decoder layer over them (attending to its own earlier positions through its own KV cache) and predicts h_{j+1};
the target's own output layer, restricted to a shortlist of frequent tokens, turns that into the draft's next-token
logits. To draft a second token it feeds its own predicted h back in place of the target's.

What it costs: one decoder layer of SmolLM2's 30 and a shortlisted output layer, a small share of a target pass. What
it needs: the target's last hidden state for every position of the text, which the verify pass computes anyway
(`TransformersForward.logits_and_features`); so before the target's first pass it has nothing to read and the first
round drafts nothing. Everything runs through transformers' forward (`LlamaModel` over `inputs_embeds`); the target's
embedding, final norm and output rows are only read.

Its model and files: `inference.training.feature_model` (trained by `python -m inference.training.distill_features`).
"""

from __future__ import annotations

import json
from functools import lru_cache

import torch
from transformers import DynamicCache

from inference.core import kv_cache
from inference.core.forward import context_limit, eos_token_ids, vocabulary_rows
from inference.lessons.speculative.drafters import FEATURE_DRAFT, DraftRequest, Proposal, draw_proposal
from inference.training.feature_model import (  # the model and its files, shared with its training
    FEATURE_DRAFT_DIR,
    FEATURE_DRAFT_NAME,
    WEIGHTS_FILE,
    FeatureDraft,
    FeatureDraftError,
    load,
)

__all__ = [
    "FEATURE_DRAFT",
    "FEATURE_DRAFT_DIR",
    "FEATURE_DRAFT_NAME",
    "NOTHING_TO_READ",
    "FeatureDraft",
    "FeatureDraftError",
    "FeatureDrafter",
    "bundled_exists",
    "check_fits",
    "fits",
    "load",
]

NOTHING_TO_READ = (
    "The feature draft reads the target's last hidden state, and before the target's first pass there is none: "
    "this round is the target's prefill alone (it drafted nothing)."
)


@lru_cache(maxsize=1)
def bundled_exists() -> bool:
    return (FEATURE_DRAFT_DIR / WEIGHTS_FILE).is_file()


@lru_cache(maxsize=1)
def _bundled_config() -> dict:
    return json.loads((FEATURE_DRAFT_DIR / "config.json").read_text())


def fits(target) -> bool:
    """The bundled feature draft reads this target's hidden states: same width, a Llama-style layout, and the draft
    was trained on a target of as many output rows (read once from its config, before anything loads: the page asks
    on every rerun)."""
    if not bundled_exists() or not hasattr(getattr(target, "model", None), "norm"):
        return False
    config = _bundled_config()
    return int(config["hidden_size"]) == int(target.config.hidden_size) and int(
        config.get("target_vocab_rows", -1)
    ) == vocabulary_rows(target)


def check_fits(draft: FeatureDraft, target) -> None:
    if draft.hidden_size != int(target.config.hidden_size):
        raise FeatureDraftError(
            f"The feature draft reads {draft.hidden_size}-wide hidden states; this target's are "
            f"{int(target.config.hidden_size)} wide."
        )
    if int(draft.rows[-1]) >= vocabulary_rows(target):
        raise FeatureDraftError("The feature draft's shortlist names tokens this target does not have.")


class FeatureDrafter:
    """One run's feature drafter: its own KV cache for the one-layer body, and the target's final hidden states of the
    text so far (given by the run after each verify pass: `take_features`). Its cache holds positions fed with the
    target's real hidden states only; positions fed with its own predictions are cropped after each round."""

    kind = FEATURE_DRAFT
    reads_target_features = True

    def __init__(self, draft: FeatureDraft, target, tokenizer):
        check_fits(draft, target)
        self.draft, self.target = draft, target
        self.tokenizer = tokenizer
        self.cache = DynamicCache(config=draft.body.config)
        self.context = context_limit(target.config)
        self.eos_ids = eos_token_ids(target, tokenizer)
        self.vocab_size = vocabulary_rows(target)
        self._embedding = target.get_input_embeddings()  # read only
        self._norm = target.model.norm  # read only: the features are what the target's output layer reads
        head = target.get_output_embeddings()
        self._short_weight = head.weight.detach()[draft.rows]  # a copy of the shortlisted rows; the target unchanged
        self._features = torch.zeros(0, draft.hidden_size)  # [positions, hidden]: the target's, normed
        self._real_positions = 0  # positions of the draft's cache fed with the target's real features

    @property
    def cache_tokens(self) -> int:
        return kv_cache.cache_length(self.cache)

    def room(self, committed: int) -> int:
        return self.context - committed + 1

    @torch.inference_mode()
    def take_features(self, first: int, hidden: torch.Tensor) -> None:
        """The target's last-layer hidden states (before its final norm) of positions `first`..: kept normed."""
        kept = self._features[:first]
        self._features = torch.cat([kept, self._norm(hidden.float())])

    def _pass(self, token_ids: list[int], features: torch.Tensor) -> torch.Tensor:
        """Feed positions (embedding of the next token, feature) through the body after its cache; the last output."""
        embedded = self._embedding(torch.tensor(token_ids, dtype=torch.long))
        mixed = self.draft.fc(torch.cat([embedded, features], dim=-1)).unsqueeze(0)
        out = self.draft.body(inputs_embeds=mixed, cache=self.cache, use_cache=True)
        return out.last_hidden_state[0, -1]

    def _logits(self, predicted: torch.Tensor) -> torch.Tensor:
        full = torch.full((self.vocab_size,), -torch.inf)
        full[self.draft.rows] = torch.nn.functional.linear(predicted, self._short_weight).float()
        return full

    @torch.inference_mode()
    def propose(self, request: DraftRequest) -> Proposal:
        committed, known = request.committed, len(self._features)
        if known == 0 or known < len(committed) - 1:
            return Proposal([], None, [], [0.0], NOTHING_TO_READ)
        # Position j pairs the target's feature at j with the token after it; the cache holds j < _real_positions.
        first, last = self._real_positions, len(committed) - 1
        predicted = None

        def first_logits() -> torch.Tensor:
            nonlocal predicted
            predicted = self._pass(committed[first + 1 : last + 1], self._features[first:last])
            return self._logits(predicted)

        def next_logits(token: int) -> torch.Tensor:
            nonlocal predicted  # its own prediction stands in for the target's feature
            predicted = self._pass([token], predicted.unsqueeze(0))
            return self._logits(predicted)

        self._real_positions = last
        return draw_proposal(request, first_logits, next_logits, self.eos_ids)

    def crop_to(self, length: int) -> None:
        """Forget positions after `length`: the cache keeps only positions fed with real features."""
        self._real_positions = min(self._real_positions, length)
        extra = self.cache_tokens - self._real_positions
        if extra > 0:
            self.cache.crop(-extra)
        self._features = self._features[:length]
