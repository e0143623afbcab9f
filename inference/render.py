"""HTML for the running text: prompt tokens, then one chip per generated token.

Every piece of token text is HTML-escaped here, in one place: a token that spells
`<script>` shows those characters and never runs.
"""
from __future__ import annotations

import html

from inference.figures import probability_colour
from inference.tokens import VISIBLE_WHITESPACE, readable_token

CHIP_CSS = """
<style>
.token-box { line-height: 2.3; font-size: 1.15rem; padding: 0.6rem 0.8rem; border: 1px solid #ddd;
             border-radius: 0.5rem; background: #fff; word-break: break-word; }
.token-chip { display: inline-block; padding: 0 0.25rem; margin: 0.08rem 0.06rem; border-radius: 0.3rem;
              white-space: pre; position: relative; cursor: help; color: #111; }
.token-chip.prompt { background: #eceff3; color: #555; border: 1px dashed #b9c0ca; }
.token-chip.special { font-family: monospace; font-size: 0.8em; background: #444; color: #fff; }
.token-chip .tip { visibility: hidden; position: absolute; z-index: 10; left: 0; top: 2.1em; min-width: 13rem;
                   background: #222; color: #fff; font-size: 0.85rem; line-height: 1.35; padding: 0.45rem 0.6rem;
                   border-radius: 0.35rem; white-space: pre; text-align: left; font-family: monospace; }
.token-chip:hover .tip, .token-chip:focus .tip { visibility: visible; }
.token-legend { font-size: 0.85rem; color: #555; margin-top: 0.3rem; }
.token-legend span { display: inline-block; width: 2.2rem; height: 0.8rem; border-radius: 0.2rem; vertical-align: middle; }
</style>
"""


def chip_text(text: str) -> str:
    """What a chip shows: the token's characters with whitespace made visible, escaped.
    A newline shows as ↵ and then really breaks the line, so the text keeps its shape."""
    visible = text.translate(VISIBLE_WHITESPACE)
    escaped = html.escape(visible, quote=True)
    return escaped.replace("↵", "↵<br>")


def _tip_escape(text: str) -> str:
    """Escaped, with newlines as character references: the HTML stays on one line, so
    Markdown never sees a blank line (which would end the HTML block) inside it."""
    return html.escape(text, quote=True).replace("\n", "&#10;")


def _alternatives_tip(tokenizer, alternatives) -> str:
    lines = ["top 5 (model T=1 │ final)"]
    for token_id, raw, final in alternatives:
        name = readable_token(tokenizer, token_id)
        lines.append(f"{name[:16]:<16} {raw:6.1%} │ {final:6.1%}")
    return _tip_escape("\n".join(lines))


def token_html(tokenizer, prompt_ids: list[int], records) -> str:
    """The prompt as grey dashed chips (token boundaries visible), then generated tokens
    coloured by the probability the model gave them; hovering (or focusing, for keyboard
    users) shows the top-5 alternatives."""
    special = set(tokenizer.all_special_ids)
    generated = ",".join(str(r.token_id) for r in records)
    parts = [CHIP_CSS, f'<div class="token-box" data-generated-ids="{generated}">']
    for token_id in prompt_ids:
        if token_id in special:
            parts.append(f'<span class="token-chip special" title="special token">{html.escape(tokenizer.convert_ids_to_tokens(token_id))}</span>')
        else:
            parts.append(f'<span class="token-chip prompt" title="prompt token {token_id}">{chip_text(tokenizer.decode([token_id]))}</span>')
    for r in records:
        raw_prob = next((raw for tid, raw, _ in r.alternatives if tid == r.token_id), None)
        if raw_prob is None:
            raw_prob = float(r.logits.double().softmax(-1)[r.token_id])
        tip = f"step {r.index}: p = {r.prob:.1%} (model T=1: {raw_prob:.1%}), rank {r.rank + 1}\n" \
              f"u = {r.u:.3f}, T = {r.settings.temperature:g}\n"
        tip = _tip_escape(tip) + _alternatives_tip(tokenizer, r.alternatives)
        if r.token_id in special:
            parts.append(f'<span class="token-chip special" tabindex="0">{html.escape(tokenizer.convert_ids_to_tokens(r.token_id))}<span class="tip">{tip}</span></span>')
        else:
            colour = probability_colour(raw_prob)
            text_colour = "#fff" if raw_prob > 0.65 else "#111"
            parts.append(
                f'<span class="token-chip" tabindex="0" style="background:{colour};color:{text_colour}">'
                f'{chip_text(r.token_text)}<span class="tip">{tip}</span></span>'
            )
    parts.append("</div>")
    legend = "".join(
        f'<span style="background:{probability_colour(p)}"></span> {p:.0%} &nbsp;' for p in (0.02, 0.2, 0.5, 0.9)
    )
    parts.append(f'<div class="token-legend">Grey dashed: your prompt. Chip colour = the model\'s probability for the chosen token (T=1, before filters): {legend}. Hover a chip for the top 5.</div>')
    return "".join(parts)
