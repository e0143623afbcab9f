"""Turning what a visitor typed into prompt token ids, with every adjustment said aloud."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

from inference.core.loader import ModelLoadError, encode_prompt


@dataclass
class PreparedPrompt:
    ids: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was changed, for the page to show
    error: str | None = None  # the prompt cannot be used; the page keeps its last run
    max_new_tokens: int = 0  # room left in the context after the prompt


def clean_text(text: str) -> tuple[str, int]:
    """Drop control characters (NUL and friends) but keep newlines and tabs; emoji and
    right-to-left text are ordinary characters and stay."""
    kept = [ch for ch in text if ch in "\n\t" or unicodedata.category(ch) != "Cc"]
    return "".join(kept), len(text) - len(kept)


def prepare_prompt(tokenizer, text: str, chat: bool, context: int, limits, new_tokens: int = 1) -> PreparedPrompt:
    """Clean, encode and fit a prompt. A prompt too long for the context keeps its end and
    leaves room for `new_tokens` of reply (at most half the context)."""
    out = PreparedPrompt()
    text, removed = clean_text(text or "")
    if removed:
        out.notes.append(f"Removed {removed} control character{'s' * (removed != 1)} (such as NUL) from the prompt.")
    if not text.strip():
        out.error = "The prompt is empty: type a few words for the model to continue."
        return out
    try:
        ids = encode_prompt(tokenizer, text, chat)
    except ModelLoadError as err:
        out.notes.append(f"{err} Using the plain prompt.")
        ids = encode_prompt(tokenizer, text, False)
    room = max(1, min(new_tokens, context // 2))
    allowed = min(limits.max_prompt_tokens, context - room)
    if len(ids) > allowed:
        keep_bos = tokenizer.bos_token_id is not None and ids[0] == tokenizer.bos_token_id
        tail = ids[-(allowed - keep_bos) :]
        out.notes.append(
            f"The prompt has {len(ids):,} tokens; only the last {allowed:,} fit "
            f"(model context {context:,} tokens with room for {room:,} new ones; server limit "
            f"{limits.max_prompt_tokens:,}), so the start was cut off."
        )
        ids = ([ids[0]] if keep_bos else []) + tail
    out.ids = ids
    out.max_new_tokens = min(limits.max_new_tokens, context - len(ids))
    return out
