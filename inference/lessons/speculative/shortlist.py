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

import numpy as np

# the counts, read and ranked where they are written (training sits below the lessons)
from inference.training.token_frequency import coverage, most_frequent, token_counts

__all__ = ["DEFAULT_SIZE", "LARGE_SIZES", "SIZES", "coverage", "most_frequent", "token_counts", "usable_sizes"]

SIZES = (256, 512, 1024, 2048)  # the page's choices, besides the whole vocabulary
LARGE_SIZES = (4096, 8192)  # and for a draft of a large vocabulary (SmolLM2's, 49,152 tokens)
DEFAULT_SIZE = 1024  # the bundled pair keeps its greedy acceptance with it (the page and the bench measure it)


def usable_sizes(counts: np.ndarray | None, vocab: int) -> list[int]:
    """The shortlist sizes a page offers for this draft: below its vocabulary, and only with counts of its size."""
    if counts is None or len(counts) != vocab:
        return []
    return [size for size in (*SIZES, *LARGE_SIZES) if size < vocab]
