"""A feature draft (EAGLE: Li et al. 2024): one Llama decoder layer reading the target's own last hidden state.

At position j it mixes the target's final-normed hidden state h_j with the next token's embedding (`fc`), runs its
layer on its own KV cache and predicts h_{j+1}, scored by the target's output layer over a shortlist; a second draft
token feeds its own prediction back. The verify pass computes h anyway (`logits_and_features`); before the target's
first pass there is nothing to read, so the first round drafts nothing. Its model: `inference.training.feature_model`.
"""

from __future__ import annotations

import json
from functools import lru_cache

import torch

from inference.core import kv_cache
from inference.core.forward import context_limit, eos_token_ids, vocabulary_rows
from inference.lessons.speculative.drafters import FEATURE_DRAFT, DraftRequest, Proposal, draw_proposal
from inference.training.feature_model import (  # noqa: F401 (the model and its files, shared with its training)
    FEATURE_DRAFT_DIR,
    FEATURE_DRAFT_NAME,
    WEIGHTS_FILE,
    FeatureDraft,
    FeatureDraftError,
    load,
)

NOTHING_TO_READ = (
    "The feature draft reads the target's last hidden state, and before the target's first pass there is none: "
    "this round is the target's prefill alone (it drafted nothing)."
)


@lru_cache(maxsize=1)
def _bundled_config() -> dict | None:
    path = FEATURE_DRAFT_DIR / "config.json"
    return json.loads(path.read_text()) if (FEATURE_DRAFT_DIR / WEIGHTS_FILE).is_file() else None


def fits(target) -> bool:
    """The bundled feature draft reads this target (its width, layout and output rows, read before anything loads)."""
    config = _bundled_config()
    if config is None or not hasattr(getattr(target, "model", None), "norm"):
        return False
    return int(config["hidden_size"]) == int(target.config.hidden_size) and int(
        config.get("target_vocab_rows", -1)
    ) == vocabulary_rows(target)


class FeatureDrafter:
    """One run's feature drafter: its layer's KV cache (only positions fed the target's real features survive a
    round) and the target's normed final hidden states of the text so far (`take_features`, after each verify)."""

    kind = FEATURE_DRAFT
    reads_target_features = True

    def __init__(self, draft: FeatureDraft, target, tokenizer):
        if draft.hidden_size != int(target.config.hidden_size) or int(draft.rows[-1]) >= vocabulary_rows(target):
            raise FeatureDraftError(
                f"The feature draft reads {draft.hidden_size}-wide hidden states over {int(draft.rows[-1]) + 1:,}+ "
                f"tokens; this target's are {int(target.config.hidden_size)} wide over {vocabulary_rows(target):,}."
            )
        self.draft = draft
        self.cache = kv_cache.new_cache(draft.body.config)
        self.context, self.eos_ids = context_limit(target.config), eos_token_ids(target, tokenizer)
        self.vocab_size = vocabulary_rows(target)
        self._embedding, self._norm = target.get_input_embeddings(), target.model.norm  # read only
        self._short_weight = target.get_output_embeddings().weight.detach()[draft.rows]  # a copy of the rows
        self._features = torch.zeros(0, draft.hidden_size)  # [positions, hidden]: the target's, normed
        self._real_positions = 0  # positions of the draft's cache fed with the target's real features

    @property
    def cache_tokens(self) -> int:
        return kv_cache.cache_length(self.cache)

    def room(self, committed: int) -> int:
        return self.context - committed + 1

    @torch.inference_mode()
    def take_features(self, first: int, hidden: torch.Tensor) -> None:  # positions first..., before the final norm
        self._features = torch.cat([self._features[:first], self._norm(hidden.float())])

    def _pass(self, token_ids: list[int], features: torch.Tensor) -> torch.Tensor:  # the body's last output
        embedded = self._embedding(torch.tensor(token_ids, dtype=torch.long))
        mixed = self.draft.fc(torch.cat([embedded, features], dim=-1)).unsqueeze(0)
        return self.draft.body(inputs_embeds=mixed, cache=self.cache, use_cache=True).last_hidden_state[0, -1]

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
        self._real_positions = min(self._real_positions, length)
        extra = self.cache_tokens - self._real_positions
        if extra > 0:
            self.cache.crop(-extra)
        self._features = self._features[:length]
