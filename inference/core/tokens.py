"""Token text made readable (visible whitespace, special tokens marked, broken bytes shown), and escaped for HTML
and Markdown in one place."""

from __future__ import annotations

import re
from functools import lru_cache

from inference.core.wording import plural

VISIBLE_WHITESPACE = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"})


def token_text(tokenizer, token_id: int) -> str:
    """What the token adds to the text, exactly (maybe part of a UTF-8 character); remembered per tokenizer and id."""
    try:
        return _decoded(tokenizer, int(token_id))
    except TypeError:  # a tokenizer that cannot be a cache key: decode every time
        return _decode(tokenizer, token_id)


def _decode(tokenizer, token_id: int) -> str:
    return tokenizer.decode([token_id], skip_special_tokens=False, clean_up_tokenization_spaces=False)


_decoded = lru_cache(maxsize=1 << 16)(_decode)


@lru_cache(maxsize=16)
def special_ids(tokenizer) -> frozenset[int]:
    """The tokenizer's special token ids, collected once per tokenizer (charts label many tokens)."""
    return frozenset(tokenizer.all_special_ids)


def readable_token(tokenizer, token_id: int) -> str:
    """A label: spaces as ␣, newlines as ↵, special tokens by name, a byte-fallback piece by its raw token name."""
    if token_id in special_ids(tokenizer):
        return tokenizer.convert_ids_to_tokens(token_id)
    text = token_text(tokenizer, token_id)
    if "\ufffd" in text or text == "":
        return f"⟨{tokenizer.convert_ids_to_tokens(token_id)}⟩"
    return text.translate(VISIBLE_WHITESPACE)


def readable_tokens(tokenizer, token_ids) -> list[str]:
    return [readable_token(tokenizer, int(token_id)) for token_id in token_ids]


# Characters Markdown (and Streamlit's LaTeX, tables and strikethrough) would read as syntax, as HTML character
# references: a reference renders as the character itself in Markdown, in inline HTML and inside an HTML block.
# HTML's own (&, <, >, quotes) are among them: one pass, so no reference is escaped twice.
REFERENCES = {ch: f"&#{ord(ch)};" for ch in "&<>\"'\\`*_{}[]()#+-.!|$~:"}


def counted_runs(label: str, longest: int = 3) -> str:
    """Each run of more than `longest` of one whitespace mark counted ("↵␣␣␣␣␣␣␣␣" -> "↵␣×8")."""
    return re.sub(rf"([␣⇥])\1{{{longest},}}", lambda m: f"{m.group(1)}×{len(m.group(0))}", label)


def prompt_tail(prompt_ids: list[int], keep: int) -> tuple[str, list[int]]:
    """The last `keep` ids and a label counting what was cut ("… 32 earlier prompt tokens", or "")."""
    hidden = max(0, len(prompt_ids) - keep)
    return (f"… {plural(hidden, 'earlier prompt token')}" if hidden else ""), list(prompt_ids[hidden:])


def _references(text: str) -> str:
    return "".join(REFERENCES.get(ch, ch) for ch in text)


def html_token_text(text: str) -> str:
    """Token text inside HTML given to `st.markdown`: every Markdown/LaTeX character a reference, a newline as ↵ and
    <br>, never a raw newline (a blank line would end the HTML block)."""
    visible = _references(text.replace("\r", "␍").replace("\t", "⇥"))
    return visible.replace("\n", "↵<br>")


def markdown_token_text(text: str) -> str:
    """Token text inside a Markdown sentence: literally, on one line, so `**b**`, `$x$` or `<script>` are text."""
    return _references(text.replace("\r", "␍").replace("\t", "⇥").replace("\n", "↵"))
