"""Generate's figures and HTML (the Sampling lab shows the same two charts): the next-token bars, the cumulative
curve and the draw, a step table row, the text as token chips. Token text is escaped (`style.label` for charts,
here for chips), so a token that spells `<script>` never runs."""

from __future__ import annotations

import html
from collections.abc import Mapping

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
    chip_text,
    hline,
    hover,
    label,
    plain_figure,
    probability_colour,
    probability_legend,
    probability_text_colour,
    repr_token,
    status_marker,
)


def next_token_bars(
    table: pd.DataFrame | Mapping, presenter: bool = False, title: str = "Next-token probabilities"
) -> go.Figure:
    """Top-N tokens, most likely on top: raw (T=1) beside final; removed greyed and hatched, the chosen marked,
    "other" last. `table`: `StepView.table` or its `columns`."""
    columns = table if isinstance(table, Mapping) else {name: table[name].to_numpy() for name in table.columns}
    rows = {name: values[::-1] for name, values in columns.items()}  # Plotly draws the first category at the bottom
    names, statuses = [], []
    for token, rank, chosen, removed_by in zip(rows["token"], rows["rank"], rows["chosen"], rows["removed_by"]):
        ranked = pd.notna(rank)
        mark = "▶ " if chosen and ranked else ""
        cut = f"  ✂ {removed_by.replace('_', '-')}" if removed_by else ""
        prefix = f"{int(rank)}. " if ranked else ""
        names.append(f"{mark}{prefix}{label(repr_token(token) if ranked else token)}{cut}")
        statuses.append("chosen" if chosen and ranked else ("removed" if removed_by else "kept"))
    raw, final = np.asarray(rows["raw"], dtype=float), np.asarray(rows["final"], dtype=float)
    bars = {"type": "bar", "orientation": "h", "y": names}
    data = [
        bars
        | {
            "x": raw,
            "name": "raw (T=1, no filters)",
            # a cut token's raw bar is hatched as well as labelled ✂: colour is never the only signal
            "marker": {"color": RAW_COLOUR, "pattern": status_marker(statuses)["pattern"]},
            "hovertemplate": hover("%{y}", "raw %{x:.2%}"),
        },
        bars
        | {
            "x": final,
            "name": "final (after all settings)",
            "marker": status_marker(statuses),
            "text": [f"{v:.1%}" if v >= 0.001 else "" for v in final],
            "textposition": "outside",
            "hovertemplate": hover("%{y}", "final %{x:.2%}"),
        },
    ]
    longest = max(float(raw.max()), float(final.max()), 0.01)
    layout = {
        "barmode": "group",
        "bargap": 0.25,
        "bargroupgap": 0.05,
        # room right of the longest bar for its value label
        "xaxis": {
            "tickformat": ".0%",
            "title": {"text": "probability"},
            "range": [0, longest * (1.3 if presenter else 1.2)],
            "tickangle": 0,  # level, never turned: at 800 px in presenter mode Plotly turned crowded labels upright
            "nticks": 5 if presenter else 8,
        },
        "yaxis": {"automargin": True},
    }
    height = 140 + 22 * len(names)  # 20 bars and Step on one screen
    # the legend a fixed distance under the plot, below the axis title (a fraction of a short plot sat on the title)
    plot_px = height * (1.35 if presenter else 1) - 100  # the height less base_layout's top and bottom margins
    legend = {
        "orientation": "h",
        "y": -(70 if presenter else 50) / plot_px,
        "yanchor": "top",
        "x": 0,
        "xanchor": "left",
    }
    return plain_figure(data, layout, title, presenter, height=height, legend=legend)


def cumulative_curve(view, tokenizer, top_p: float, presenter: bool = False, max_rank: int | None = None) -> go.Figure:
    """Cumulative probability by rank: before top-p, final (the draw walks it), the top-p cut, and where u landed."""
    before = view.cumulative_before_top_p.numpy()
    final = view.cumulative_final.numpy()
    if max_rank is None:
        reach = int(np.searchsorted(before, 0.995)) + 1
        max_rank = int(min(len(before), max(10, reach, view.chosen_rank + 3, view.nucleus_size + 3), 200))
    ranks = np.arange(1, max_rank + 1)
    curve_hover = "rank %{x}<br>cumulative %{y:.3f}<extra></extra>"
    data = [
        {
            "type": "scatter",
            "x": ranks,
            "y": before[:max_rank],
            "mode": "lines",
            "name": "before top-p",
            "line": {"color": RAW_COLOUR, "width": 3},
            "hovertemplate": curve_hover,
        },
        {
            "type": "scatter",
            "x": ranks,
            "y": final[:max_rank],
            "mode": "lines",
            "name": "final (draw walks this)",
            "line": {"color": FINAL_COLOUR, "width": 3, "shape": "hv"},
            "hovertemplate": curve_hover,
        },
    ]
    drawn = view.u is not None and not view.settings.greedy
    if drawn and view.chosen_rank < max_rank:
        chosen = readable_tokens(tokenizer, [view.chosen_id])[0]
        data.append(
            {
                "type": "scatter",
                "x": [view.chosen_rank + 1],
                "y": [view.u],
                "mode": "markers+text",
                "name": "the draw",
                "marker": {"color": CHOSEN_COLOUR, "size": 14, "symbol": "diamond"},
                "text": [f"u = {view.u:.3f} → {label(repr_token(chosen))}"],
                "textposition": "middle right",
                "hovertemplate": "u %{y:.4f} lands on rank %{x}<extra></extra>",
            }
        )
    layout = {
        "xaxis": {
            "title": {"text": "rank (most likely first)"},
            "range": [0.5, max_rank + 0.5],
            "tickangle": 0,
            "nticks": 5 if presenter else 8,
        },
        "yaxis": {"title": {"text": "cumulative probability"}, "range": [0, 1.03]},
    }
    legend = {"orientation": "h", "y": -0.22, "yanchor": "top", "x": 0, "xanchor": "left"}
    lines = []  # (shape, label) of each line, as `fig.add_hline`/`add_vline` make them
    if top_p < 1:
        cutoff, nucleus = {"color": CUTOFF_COLOUR}, view.nucleus_size
        lines.append(hline(top_p, cutoff | {"dash": "dash"}, f"top-p = {top_p:g}"))
        x = nucleus + 0.5
        side = "right" if x > max_rank / 2 else "left"  # the label stays on the chart
        shape = {"type": "line", "xref": "x", "x0": x, "x1": x, "yref": "y domain", "y0": 0, "y1": 1}
        note = {"text": f"nucleus: {nucleus} token{'s' * (nucleus != 1)}", "showarrow": False, "xref": "x", "x": x}
        lines.append(
            (
                {**shape, "line": cutoff | {"dash": "dot"}},
                note | {"xanchor": side, "yref": "y domain", "y": 0, "yanchor": "bottom"},
            )
        )
    if drawn:
        off_chart = view.chosen_rank >= max_rank
        note = f"u = {view.u:.3f} lands at rank {view.chosen_rank + 1:,}, off this chart" if off_chart else None
        lines.append(hline(view.u, {"color": CHOSEN_COLOUR, "width": 1.5}, note, "top left"))
    layout["shapes"] = [shape for shape, _ in lines]
    layout["annotations"] = [note for _, note in lines if note is not None]
    return plain_figure(data, layout, "Cumulative probability and the draw", presenter, height=440, legend=legend)


def step_table_row(row: dict) -> dict:
    """The step table's row of one `record_row` (each row made once, when its step is made)."""
    return {
        "step": row["step"],
        "token": row["token"].replace("\n", "↵"),
        "probability": float(np.round(row["prob"], 4)),
        "model probability (T=1)": float(np.round(row["raw_prob"], 4)),
        "rank": row["rank"],
        "entropy (bits)": float(np.round(row["entropy_bits"], 3)),
        "tokens kept": row["tokens_kept"],
        "u": float(np.round(row["u"], 4)),
        "forward ms": float(np.round(row["forward_ms"], 2)),
        "phase": row["phase"],
    }


def _tip_escape(text: str) -> str:
    """Escaped, newlines as references: a blank line would end Markdown's HTML block."""
    return html.escape(text, quote=True).replace("\n", "&#10;")


def _alternatives_tip(tokenizer, alternatives) -> str:
    lines = ["top 5 (model T=1 │ final)"]
    for token_id, raw, final in alternatives:
        name = readable_token(tokenizer, token_id)
        lines.append(f"{name[:16]:<16} {raw:6.1%} │ {final:6.1%}")
    return _tip_escape("\n".join(lines))


def prompt_chips(tokenizer, prompt_ids: list[int]) -> str:
    """The prompt as grey dashed chips of class `in-prompt` (smaller in presenter mode), special tokens named."""
    special = special_ids(tokenizer)
    parts = []
    for token_id in prompt_ids:
        if token_id in special:
            name = html_token_text(tokenizer.convert_ids_to_tokens(token_id))
            parts.append(f'<span class="token-chip special in-prompt" title="special token">{name}</span>')
        else:
            text = chip_text(token_text(tokenizer, token_id))  # the one decoding, as for generated chips
            parts.append(f'<span class="token-chip prompt in-prompt" title="prompt token {token_id}">{text}</span>')
    return "".join(parts)


def record_chip(tokenizer, r) -> str:
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
    tokenizer,
    prompt_ids: list[int],
    records,
    chips: list[str] | None = None,
    prompt: str | None = None,
    status: str | None = None,
) -> str:
    """The prompt's chips, then the generated ones coloured by the model's probability (hover or focus: the top 5),
    and `status` under the legend. `chips`, `prompt`: made already (a page keeps them: a Step makes one chip)."""
    generated = ",".join(str(r.token_id) for r in records)
    parts = [CHIP_CSS, f'<div class="token-box" data-generated-ids="{generated}">']
    parts.append(prompt if prompt is not None else prompt_chips(tokenizer, prompt_ids))
    parts.extend(chips if chips is not None else (record_chip(tokenizer, r) for r in records))
    parts.append("</div>")
    if records:
        legend = probability_legend((0.02, 0.2, 0.5, 0.9))
        parts.append(
            '<div class="token-legend">Grey dashed: your prompt. Chip colour = the model\'s probability for the '
            f"chosen token (T=1, before filters): {legend}. Hover a chip for the top 5.</div>"
        )
    else:  # no coloured chip yet: the colour key comes with the first (a line less on a projector's first screen)
        parts.append('<div class="token-legend">Grey dashed: your prompt, one chip per token.</div>')
    if status is not None:
        parts.append(f'<div class="token-status">{html.escape(status)}</div>')
    return "".join(parts)
