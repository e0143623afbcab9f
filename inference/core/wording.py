"""Numbers in sentences, one way everywhere: counts with their word ("1 token", "2 tokens") and signed changes that
never show a sign the rounding removed. Used by the lessons (through inference/lessons/glossary.py) and by the model
cards (inference/training/model_card.py), which must not import a lesson."""

from __future__ import annotations


def plural(count: int, word: str, words: str | None = None) -> str:
    """ "1 token", "2 tokens", "1,024 tokens": the count (with thousands commas) and the word, plural unless the count
    is 1; `words` for a plural that is not `word` + "s" ("1 query", "2 queries")."""
    return f"{count:,} {word if count == 1 else (words or word + 's')}"


def signed(value: float, digits: int) -> str:
    """A change with its sign, `digits` decimals: "+0.012", "-0.340", and "0.000" (never "-0.000" or "+0.000") for one
    that rounds to zero at those decimals, so a label never shows a direction the rounding removed."""
    rounded = round(value, digits)
    return f"{0.0:.{digits}f}" if rounded == 0 else f"{rounded:+.{digits}f}"
