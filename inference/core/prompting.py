"""Turning what a visitor typed into prompt token ids, with every adjustment said aloud."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

from inference.core.bundled import bundled_models
from inference.core.loader import ModelLoadError, encode_prompt

# A storyteller trained here continues a story; any other model gets a question or request a class understands, in
# its chat template where the page offers one.
STORY = "story"
GENERAL = "general"


@dataclass(frozen=True)
class OpeningPrompt:
    text: str
    chat: bool = False  # wrapped in the model's chat template, when it has one and the page offers it


def _both(story: str, general: str, general_chat: bool = False) -> dict[str, OpeningPrompt]:
    return {STORY: OpeningPrompt(story), GENERAL: OpeningPrompt(general, general_chat)}


# The raw general prompts end where the next token has a clear favourite (" Paris" holds 77% on SmolLM2). Asked bare,
# Generate's question opened on a near tie ("The" 15%, "L" 14%) and 4 of seeds 0-5 went off course; asked for a
# sentence, "The" holds 55% and at 0.7 / 0.9 seeds 0-9 all name Paris (at 0.8 / 0.95, 8 of 10).
GENERATE_QUESTION = "What is the capital of France? Answer in one sentence."
GENERATE_SAMPLING = {"temperature": 0.7, "top_p": 0.9}
OPENING_PROMPTS = {
    "start": _both("Once upon a time, there was a little", "The capital of France is"),
    "generate": _both("Once upon a time", GENERATE_QUESTION, general_chat=True),
    "sampling": _both("The little dog was very happy. The cat was very", "The capital of France is"),
    "compare": _both("Once upon a time", "Write a short poem about the sea.", general_chat=True),
    "prefill_decode": _both(
        "Once upon a time, there was a little girl named Lily. She loved to play in the park with her "
        "friends. One day, she saw a big red ball under a tree.",
        "The sea covers most of our planet. Its water is salty because rivers carry minerals from the rocks "
        "into it, and the sun lifts only fresh water back into the clouds. The deepest place in the sea is",
    ),
    "inside": _both(
        "Once upon a time, there was a little girl named Lily. She loved to play in the park with her",
        "Paris is the capital of France. Berlin is the capital of Germany. Rome is the capital of",
    ),
    "kv_cache": _both(
        "Once upon a time, there was a little dog named Max. Max liked to",
        "The sea was calm in the morning. The waves rolled slowly onto the sand, and the",
    ),
    "class": _both("Once upon a time, there was a little", "The capital of France is"),
}


def model_kind(name: str) -> str:
    """STORY for a model trained here (the storytellers shipped in assets/models), GENERAL for any other."""
    return STORY if name in {m.name for m in bundled_models()} else GENERAL


def opening_prompt(page: str, name: str) -> OpeningPrompt:
    """The prompt `page` opens with on the model called `name`."""
    return OPENING_PROMPTS[page][model_kind(name)]


@dataclass
class PreparedPrompt:
    ids: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was changed, for the page to show
    error: str | None = None  # the prompt cannot be used; the page keeps its last run
    max_new_tokens: int = 0  # room left in the context after the prompt


def clean_text(text: str) -> tuple[str, int]:
    """Drop control characters (NUL and friends) but keep newlines and tabs."""
    kept = [ch for ch in text if ch in "\n\t" or unicodedata.category(ch) != "Cc"]
    return "".join(kept), len(text) - len(kept)


def prepare_prompt(tokenizer, text: str, chat: bool, context: int, limits, new_tokens: int = 1) -> PreparedPrompt:
    """Clean, encode and fit a prompt: one too long keeps its end, with room for `new_tokens` (at most half the
    context)."""
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
