"""Token text made readable: visible whitespace, special tokens marked, broken bytes shown.

The text returned here is plain (not HTML); whoever renders it as HTML escapes it.
"""
from __future__ import annotations

VISIBLE_WHITESPACE = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"})


def token_text(tokenizer, token_id: int) -> str:
    """What the token adds to the text, exactly (may be a partial UTF-8 character)."""
    return tokenizer.decode([token_id], skip_special_tokens=False, clean_up_tokenization_spaces=False)


def readable_token(tokenizer, token_id: int) -> str:
    """A label for charts and chips: spaces as ␣, newlines as ↵, special tokens as they are
    named, and a byte-fallback piece (an incomplete UTF-8 character) by its raw token name."""
    if token_id in set(tokenizer.all_special_ids):
        return tokenizer.convert_ids_to_tokens(token_id)
    text = token_text(tokenizer, token_id)
    if "\ufffd" in text or text == "":
        return f"⟨{tokenizer.convert_ids_to_tokens(token_id)}⟩"
    return text.translate(VISIBLE_WHITESPACE)


def readable_tokens(tokenizer, token_ids) -> list[str]:
    special = set(tokenizer.all_special_ids)
    out = []
    for tid in token_ids:
        tid = int(tid)
        if tid in special:
            out.append(tokenizer.convert_ids_to_tokens(tid))
        else:
            out.append(readable_token(tokenizer, tid))
    return out
