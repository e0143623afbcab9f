"""Token text made readable: visible whitespace, special tokens marked, broken bytes shown.

The text returned here is plain (not HTML); whoever renders it as HTML escapes it.
"""

from __future__ import annotations

import re
from functools import lru_cache

from inference.core.wording import plural

VISIBLE_WHITESPACE = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"})


def token_text(tokenizer, token_id: int) -> str:
    """What the token adds to the text, exactly (may be a partial UTF-8 character). Remembered per tokenizer and id:
    a decode costs ~10 us and a speculative round names every drafted token (tokenizers are never changed here)."""
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
    """A label for charts and chips: spaces as ␣, newlines as ↵, special tokens as they are
    named, and a byte-fallback piece (an incomplete UTF-8 character) by its raw token name."""
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
    """A readable label with each run of more than `longest` of one whitespace mark counted ("↵␣␣␣␣␣␣␣␣" ->
    "↵␣×8"): a code indent's token, drawn mark by mark, took half a chart's width for its axis label."""
    return re.sub(rf"([␣⇥])\1{{{longest},}}", lambda m: f"{m.group(1)}×{len(m.group(0))}", label)


def prompt_tail(prompt_ids: list[int], keep: int) -> tuple[str, list[int]]:
    """A long prompt cut to its last `keep` tokens for a figure whose page shows the prompt whole elsewhere: the
    label counting what was cut ("… 32 earlier prompt tokens", "" when nothing was) and the ids kept."""
    hidden = max(0, len(prompt_ids) - keep)
    return (f"… {plural(hidden, 'earlier prompt token')}" if hidden else ""), list(prompt_ids[hidden:])


def _references(text: str) -> str:
    return "".join(REFERENCES.get(ch, ch) for ch in text)


def html_token_text(text: str) -> str:
    """Token text for HTML shown with `st.markdown(..., unsafe_allow_html=True)` (chips, boxes): escaped, every
    Markdown/LaTeX character a reference, a newline as ↵ then a real line break, a tab as ⇥, and never a raw
    newline (a blank line would end the HTML block, and Markdown would read what follows)."""
    visible = _references(text.replace("\r", "␍").replace("\t", "⇥"))
    return visible.replace("\n", "↵<br>")


def markdown_token_text(text: str) -> str:
    """Token text inside a Markdown sentence (`st.markdown`, `st.caption`, `st.info`...): shown literally, on one
    line (a newline as ↵), so `**b**`, `$x$`, backticks, `|` or `<script>` are characters, not syntax."""
    return _references(text.replace("\r", "␍").replace("\t", "⇥").replace("\n", "↵"))
