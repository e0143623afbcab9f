"""Language-model quality in units that compare across tokenizers: bits per byte.

bits per byte = (sum of next-token losses in nats) / ln 2 / (UTF-8 bytes of the text).
A tokenizer with longer tokens has a higher loss per token but fewer tokens, so nats per
token alone cannot compare models; bits per byte can.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from inference.core.forward import TransformersForward


@dataclass(frozen=True)
class LossReport:
    nats_per_token: float
    bits_per_byte: float
    tokens_scored: int
    bytes: int


def score_stream(model, token_ids: list[int], n_bytes: int, window: int = 512, stride: int = 256) -> LossReport:
    """Loss of every token of `token_ids` after the first, with sliding windows.

    Each window is `window` tokens long and scores about `stride` new tokens, each with at
    least `window - stride` tokens of context (all there is, near the start); every token is
    scored exactly once. The first token is the BOS and is not scored.
    """
    total_nats = 0.0
    scored = 0
    next_to_score = 1  # position of the first token not yet scored
    overlap = max(1, window - stride)  # context carried into each window (at least the previous token)
    while next_to_score < len(token_ids):
        start = max(0, next_to_score - overlap)
        end = min(start + window, len(token_ids))
        chunk = token_ids[start:end]
        logits = TransformersForward(model, None).logits(chunk, keep=len(chunk))[:-1]  # [T-1, vocab]: chunk[1:]
        targets = torch.tensor(chunk[1:], dtype=torch.long)
        losses = F.cross_entropy(logits, targets, reduction="none")
        first = next_to_score - start - 1  # index into losses of the first unscored token
        total_nats += losses[first:].sum().item()
        scored += len(losses) - first
        next_to_score = end
    return LossReport(
        nats_per_token=total_nats / scored,
        bits_per_byte=total_nats / math.log(2) / n_bytes,
        tokens_scored=scored,
        bytes=n_bytes,
    )
