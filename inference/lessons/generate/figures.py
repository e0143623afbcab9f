"""Figures and HTML for the Generate page: the next-token chart, the cumulative curve and the
draw, the step table, and the running text as token chips. Pure functions from data to a
`plotly.graph_objects.Figure` (or an HTML string); no Streamlit here. The Sampling lab shows
the same two charts for one step.

Every piece of token text is escaped: chart labels go through `style.label`, and chip HTML is
escaped here, in one place, so a token that spells `<script>` shows those characters and
never runs.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from inference.core.tokens import (
    html_token_text,
    readable_token,
    readable_tokens,
    special_ids,
    token_text,
)
from inference.lessons.style import (
    CHIP_CSS,
    CHOSEN_COLOUR,
    CUTOFF_COLOUR,
    FINAL_COLOUR,
    RAW_COLOUR,
    REMOVED_COLOUR,
    add_hbar,
    base_layout,
    chip_text,
    hover,
    label,
    legend_below,
    probability_colour,
    probability_text_colour,
    repr_token,
)


def next_token_bars(table: pd.DataFrame, presenter: bool = False, title: str = "Next-token probabilities") -> go.Figure:
    """Top-N tokens (most likely at the top): the raw probability (T=1, no filters) beside
    the final one the draw uses. Removed tokens keep their raw bar and are greyed; the
    chosen token is orange; the last bar is the rest of the vocabulary ("other")."""
    rows = table.iloc[::-1]  # Plotly draws the first category at the bottom
    names = []
    for _, r in rows.iterrows():
        mark = "▶ " if r["chosen"] and pd.notna(r["rank"]) else ""
        cut = f"  ✂ {r['removed_by'].replace('_', '-')}" if r["removed_by"] else ""
        prefix = f"{int(r['rank'])}. " if pd.notna(r["rank"]) else ""
        names.append(f"{mark}{prefix}{label(repr_token(r['token']) if pd.notna(r['rank']) else r['token'])}{cut}")
    final_colours = [
        CHOSEN_COLOUR
        if (r["chosen"] and pd.notna(r["rank"]))
        else (REMOVED_COLOUR if r["removed_by"] else FINAL_COLOUR)
        for _, r in rows.iterrows()
    ]
    fig = go.Figure()
    raw_hover, final_hover = hover("%{y}", "raw %{x:.2%}"), hover("%{y}", "final %{x:.2%}")
    add_hbar(fig, names, rows["raw"], name="raw (T=1, no filters)", marker_color=RAW_COLOUR, hovertemplate=raw_hover)
    add_hbar(
        fig,
        names,
        rows["final"],
        name="final (after all settings)",
        marker_color=final_colours,
        text=[f"{v:.1%}" if v >= 0.001 else "" for v in rows["final"]],
        textposition="outside",
        hovertemplate=final_hover,
    )
    fig.update_layout(barmode="group", bargap=0.25, bargroupgap=0.05)
    longest = max(float(rows["raw"].max()), float(rows["final"].max()), 0.01)
    # Room right of the longest bar for its value label.
    fig.update_xaxes(tickformat=".0%", title="probability", range=[0, longest * (1.3 if presenter else 1.2)])
    fig.update_yaxes(automargin=True)
    return legend_below(base_layout(fig, title, presenter, height=150 + 24 * len(rows)), y=-0.1)


def cumulative_curve(view, tokenizer, top_p: float, presenter: bool = False, max_rank: int | None = None) -> go.Figure:
    """Cumulative probability by rank: the curve top-p cuts (before top-p), the final
    curve the draw walks, the top-p line and cutoff, and where u landed."""
    before = view.cumulative_before_top_p.numpy()
    final = view.cumulative_final.numpy()
    if max_rank is None:
        reach = int(np.searchsorted(before, 0.995)) + 1
        max_rank = int(min(len(before), max(10, reach, view.chosen_rank + 3, view.nucleus_size + 3), 200))
    ranks = np.arange(1, max_rank + 1)
    fig = go.Figure()
    fig.add_scatter(
        x=ranks,
        y=before[:max_rank],
        mode="lines",
        name="before top-p",
        line=dict(color=RAW_COLOUR, width=3),
        hovertemplate="rank %{x}<br>cumulative %{y:.3f}<extra></extra>",
    )
    fig.add_scatter(
        x=ranks,
        y=final[:max_rank],
        mode="lines",
        name="final (draw walks this)",
        line=dict(color=FINAL_COLOUR, width=3, shape="hv"),
        hovertemplate="rank %{x}<br>cumulative %{y:.3f}<extra></extra>",
    )
    if top_p < 1:
        fig.add_hline(
            y=top_p,
            line=dict(color=CUTOFF_COLOUR, dash="dash"),
            annotation_text=f"top-p = {top_p:g}",
            annotation_position="bottom right",
        )
        fig.add_vline(
            x=view.nucleus_size + 0.5,
            line=dict(color=CUTOFF_COLOUR, dash="dot"),
            annotation_text=f"nucleus: {view.nucleus_size} tokens",
            annotation_position="bottom right",
        )
    if view.u is not None and not view.settings.greedy and view.chosen_rank >= max_rank:
        fig.add_hline(
            y=view.u,
            line=dict(color=CHOSEN_COLOUR, width=1.5),
            annotation_text=f"u = {view.u:.3f} lands at rank {view.chosen_rank + 1:,}, off this chart",
            annotation_position="top left",
        )
    elif view.u is not None and not view.settings.greedy:
        chosen = readable_tokens(tokenizer, [view.chosen_id])[0]
        fig.add_hline(y=view.u, line=dict(color=CHOSEN_COLOUR, width=1.5))
        fig.add_scatter(
            x=[view.chosen_rank + 1],
            y=[view.u],
            mode="markers+text",
            name="the draw",
            marker=dict(color=CHOSEN_COLOUR, size=14, symbol="diamond"),
            text=[f"u = {view.u:.3f} → {label(repr_token(chosen))}"],
            textposition="middle right",
            hovertemplate="u %{y:.4f} lands on rank %{x}<extra></extra>",
        )
    fig.update_xaxes(title="rank (most likely first)", range=[0.5, max_rank + 0.5])
    fig.update_yaxes(title="cumulative probability", range=[0, 1.03])
    return legend_below(base_layout(fig, "Cumulative probability and the draw", presenter, height=440))


def step_frame_for_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The step table shown under Generate: one row per generated token."""
    if frame.empty:
        return frame
    return pd.DataFrame(
        {
            "step": frame["step"],
            "token": frame["token"].map(lambda t: t.replace("\n", "↵")),
            "probability": frame["prob"].round(4),
            "model probability (T=1)": frame["raw_prob"].round(4),
            "rank": frame["rank"],
            "entropy (bits)": frame["entropy_bits"].round(3),
            "tokens kept": frame["tokens_kept"],
            "u": frame["u"].round(4),
            "forward ms": frame["forward_ms"].round(2),
            "phase": frame["phase"],
        }
    )


# -- the running text as chips ---------------------------------------------------------


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


def prompt_chips(tokenizer, prompt_ids: list[int]) -> str:
    """The prompt as grey dashed chips (special tokens named)."""
    special = special_ids(tokenizer)
    parts = []
    for token_id in prompt_ids:
        if token_id in special:
            name = html_token_text(tokenizer.convert_ids_to_tokens(token_id))
            parts.append(f'<span class="token-chip special" title="special token">{name}</span>')
        else:
            text = chip_text(token_text(tokenizer, token_id))  # the one decoding, as for generated chips
            parts.append(f'<span class="token-chip prompt" title="prompt token {token_id}">{text}</span>')
    return "".join(parts)


def record_chip(tokenizer, r) -> str:
    """One generated token's chip, coloured by the probability the model gave it, its top 5 in the tip."""
    raw_prob = next((raw for tid, raw, _ in r.alternatives if tid == r.token_id), None)
    if raw_prob is None:
        raw_prob = float(r.logits.double().softmax(-1)[r.token_id])
    tip = (
        f"step {r.index}: p = {r.prob:.1%} (model T=1: {raw_prob:.1%}), rank {r.rank + 1}\n"
        f"u = {r.u:.3f}, T = {r.settings.temperature:g}\n"
    )
    tip = _tip_escape(tip) + _alternatives_tip(tokenizer, r.alternatives)
    if r.token_id in special_ids(tokenizer):
        name = html_token_text(tokenizer.convert_ids_to_tokens(r.token_id))
        return f'<span class="token-chip special" tabindex="0">{name}<span class="tip">{tip}</span></span>'
    colour = probability_colour(raw_prob)
    text_colour = probability_text_colour(raw_prob)
    return (
        f'<span class="token-chip" tabindex="0" style="background:{colour};color:{text_colour}">'
        f'{chip_text(r.token_text)}<span class="tip">{tip}</span></span>'
    )


def token_html(
    tokenizer, prompt_ids: list[int], records, chips: list[str] | None = None, prompt: str | None = None
) -> str:
    """The prompt as grey dashed chips (token boundaries visible), then generated tokens
    coloured by the probability the model gave them; hovering (or focusing, for keyboard
    users) shows the top-5 alternatives. `chips` and `prompt`, when given, are the chips already made for these
    records and this prompt (a page keeps them, so a Step makes one chip, not one per token so far)."""
    generated = ",".join(str(r.token_id) for r in records)
    parts = [CHIP_CSS, f'<div class="token-box" data-generated-ids="{generated}">']
    parts.append(prompt if prompt is not None else prompt_chips(tokenizer, prompt_ids))
    parts.extend(chips if chips is not None else (record_chip(tokenizer, r) for r in records))
    parts.append("</div>")
    legend = "".join(
        f'<span style="background:{probability_colour(p)}"></span> {p:.0%} &nbsp;' for p in (0.02, 0.2, 0.5, 0.9)
    )
    parts.append(
        '<div class="token-legend">Grey dashed: your prompt. Chip colour = the model\'s probability for the '
        f"chosen token (T=1, before filters): {legend}. Hover a chip for the top 5.</div>"
    )
    return "".join(parts)
