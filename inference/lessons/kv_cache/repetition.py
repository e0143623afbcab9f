"""Whether a greedy text loops: the phrase it repeats most, found in its token ids.

Greedy decoding takes the most likely token every step, so once a phrase has made itself likely it can come
back again and again; the page says so when it happens, and points to the repetition penalty.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_PHRASE_TOKENS = 6  # shorter repeats ("he said", ", and the") are ordinary language, not a loop
MIN_TIMES = 3  # a phrase said twice can be a story's refrain; three times in one reply is a loop


@dataclass(frozen=True)
class RepeatedPhrase:
    ids: tuple[int, ...]
    times: int  # non-overlapping occurrences in the text


def _non_overlapping(starts: list[int], length: int) -> int:
    """How many of these occurrences (start positions, ascending) can be counted without two overlapping."""
    times, free_from = 0, -1
    for start in starts:
        if start >= free_from:
            times, free_from = times + 1, start + length
    return times


def repeated_phrase(
    ids: list[int], min_tokens: int = MIN_PHRASE_TOKENS, min_times: int = MIN_TIMES
) -> RepeatedPhrase | None:
    """The loop that takes up most of the text: the phrase of at least `min_tokens` tokens, said at least
    `min_times` times (not overlapping), whose repeats cover the most tokens (ties: more times, then the
    first). None when nothing loops."""
    best, best_key = None, None
    for n in range(min_tokens, len(ids) // min_times + 1):
        starts: dict[tuple[int, ...], list[int]] = {}
        for start in range(len(ids) - n + 1):
            starts.setdefault(tuple(ids[start : start + n]), []).append(start)
        found_any = False
        for phrase, where in starts.items():
            times = _non_overlapping(where, n) if len(where) >= min_times else 0
            if times < min_times:
                continue
            found_any = True
            key = (times * n, times, -where[0])
            if best_key is None or key > best_key:
                best, best_key = RepeatedPhrase(phrase, times), key
        if not found_any:  # a longer phrase can repeat only if its first n tokens do
            break
    return best
