"""Language-model quality in units that compare across tokenizers, bits per byte (nats summed / ln 2 / UTF-8 bytes:
longer tokens cost more per token but are fewer), and a draft's agreement with its target."""

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
    """Loss of every token after the first (the BOS), each scored once, with at least `window - stride` tokens of
    context (all there is near the start)."""
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


AGREEMENT_TEMPERATURES = (1.0, 0.8)


def agreement(teacher, student, token_ids: list[int], window: int = 512, max_tokens: int = 16384) -> dict:
    """On the first `max_tokens` of `token_ids`, in windows without overlap: the share of positions where the two
    models' top tokens agree, and the mean of sum_x min(p(x), q(x)) at each of AGREEMENT_TEMPERATURES."""
    ids = token_ids[:max_tokens]
    same_top, overlap, positions = 0, dict.fromkeys(AGREEMENT_TEMPERATURES, 0.0), 0
    for start in range(0, len(ids) - 1, window):
        chunk = ids[start : start + window]
        p_logits, q_logits = (
            TransformersForward(m, None).logits(chunk, len(chunk)).double() for m in (teacher, student)
        )
        same_top += int((p_logits.argmax(-1) == q_logits.argmax(-1)).sum())
        for t in AGREEMENT_TEMPERATURES:
            kept = torch.minimum(torch.softmax(p_logits / t, -1), torch.softmax(q_logits / t, -1)).sum(-1)
            overlap[t] += float(kept.sum())
        positions += len(chunk)
    report = {"greedy_agreement": round(same_top / positions, 4)}
    report.update({f"acceptance_t{t:g}": round(total / positions, 4) for t, total in overlap.items()})
    report["positions"] = positions
    return report
