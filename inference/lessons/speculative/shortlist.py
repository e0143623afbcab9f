"""A draft that scores only the most frequent tokens (FR-Spec: Zhao et al. 2025, "Accelerating Large-Vocabulary
Language Models via Frequency-Ranked Speculative Sampling").

Why it pays: the bundled draft's output layer is 4,096 x 128 of its 0.92M weights (57% of a pass's multiply-adds),
and the text it drafts is mostly common tokens. Scoring the k most frequent ones only leaves every other token at
probability 0 in q, which speculative sampling allows: the accept/reject rule keeps the output exactly the target's
for any q (the target's residual max(0, p - q) then holds every token the draft could not propose). It only costs
acceptance where the target wanted a token outside the shortlist.

The ranking is the draft's own training text's token counts (`token_frequency.json` beside its weights, written by
`python -m inference.training.token_frequency`); a draft without that file has no shortlist.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from inference.training.token_frequency import FILE_NAME

SIZES = (256, 512, 1024, 2048)  # the page's choices, besides the whole vocabulary
DEFAULT_SIZE = 1024  # the bundled pair keeps its greedy acceptance with it (the page and the bench measure it)


@lru_cache(maxsize=8)
def _counts(path: str, modified: float) -> np.ndarray | None:
    try:
        counts = np.asarray(json.loads(Path(path).read_text())["counts"], dtype=np.int64)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return counts if counts.ndim == 1 and len(counts) and (counts >= 0).all() else None


def token_counts(model_dir: Path | str | None) -> np.ndarray | None:
    """The draft's training-text count of every token id, or None when the folder has no readable counts."""
    if model_dir is None:
        return None
    path = Path(model_dir) / FILE_NAME
    try:
        modified = path.stat().st_mtime
    except OSError:
        return None
    return _counts(str(path), modified)


def most_frequent(counts: np.ndarray, size: int) -> list[int]:
    """The `size` most frequent token ids (ties: the lower id first), in id order."""
    order = np.argsort(-counts, kind="stable")[:size]
    return sorted(order.tolist())


def coverage(counts: np.ndarray, size: int) -> float:
    """The share of the training text's tokens that are among the `size` most frequent: computed exactly."""
    total = counts.sum()
    return float(np.sort(counts)[::-1][:size].sum() / total) if total else 0.0


def usable_sizes(counts: np.ndarray | None, vocab: int) -> list[int]:
    """The shortlist sizes a page offers for this draft: below its vocabulary, and only with counts of its size."""
    if counts is None or len(counts) != vocab:
        return []
    return [size for size in SIZES if size < vocab]
