"""Figures for the Inside page: pure functions from the pass's numbers to Plotly figures."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from inference.lessons.style import (
    CHOSEN_COLOUR,
    DECODE_COLOUR,
    PALETTE,
    PREFILL_COLOUR,
    add_hbar,
    add_line,
    base_layout,
    hover,
    label,
    legend_below,
    tick_step,
)

# One colour per K/V head: the query heads that read the same cached keys and values share it.
KV_HEAD_COLOURS = [PALETTE[c] for c in ("blue", "orange", "dark_blue", "sand", "sky", "red", "lavender", "slate")]
BYTES_COLOUR = PALETTE["slate"]


def followed_token_figure(probs: list[float], token: str, presenter: bool = False) -> go.Figure:
    """The followed token's probability after each layer (0 = embeddings): the lens's view of it."""
    layers = list(range(len(probs)))
    fig = go.Figure()
    add_line(
        fig,
        layers,
        probs,
        None,
        CHOSEN_COLOUR,
        mode="lines+markers",
        width=3,
        marker=dict(size=10),
        hovertemplate=hover("after layer %{x}", "p = %{y:.2%}"),
    )
    fig.update_xaxes(
        title="layer (0 = embeddings)", tickmode="array", tickvals=layers[:: tick_step(len(layers), presenter)]
    )
    fig.update_yaxes(title=f"probability of {label(token)}", range=[0, 1.05], tickformat=".0%")
    fig.update_layout(showlegend=False)
    return base_layout(fig, f"{label(token)}, layer by layer", presenter, height=360)


def rank_heatmap(
    ranks, position_labels: list[str], target_labels: list[str], positions: list[int], presenter: bool = False
) -> go.Figure:
    """Layers x positions: the rank of the next token in each layer's lens (1 = its top guess), colour on a log scale."""
    ranks = [[int(r) + 1 for r in row] for row in ranks.tolist()]
    colour = [[math.log10(r) for r in row] for row in ranks]
    layers = list(range(len(ranks)))
    custom = [[[position_labels[j], target_labels[j], positions[j]] for j in range(len(positions))] for _ in layers]
    worst = max(max(row) for row in ranks)
    ticks = [t for t in (1, 10, 100, 1000, 10000, 100000) if t <= max(worst, 10)]
    fig = go.Figure(
        go.Heatmap(
            z=colour,
            x=list(range(len(positions))),
            y=layers,
            text=ranks,
            texttemplate="%{text}" if len(positions) <= 32 else None,
            customdata=custom,
            colorscale="Blues_r",
            zmin=0,
            zmax=math.log10(max(worst, 10)),
            colorbar=dict(title="rank", tickvals=[math.log10(t) for t in ticks], ticktext=[f"{t:,}" for t in ticks]),
            hovertemplate=hover(
                "position %{customdata[2]}: %{customdata[0]}",
                "next token %{customdata[1]}",
                "rank after layer %{y}: %{text}",
            ),
        )
    )
    every = tick_step(len(positions), presenter)  # every position keeps its cell and hover; labels that fit
    fig.update_xaxes(
        tickmode="array",
        tickvals=list(range(len(positions)))[::every],
        ticktext=[label(t) for t in position_labels][::every],
        tickangle=-60,
    )
    fig.update_yaxes(
        title="layer (0 = embeddings)",
        tickmode="array",
        tickvals=layers[:: tick_step(len(layers), presenter)],
        autorange="reversed",
    )
    return base_layout(fig, "Rank of the next token in each layer's lens (1 = top guess)", presenter, height=420)


def attention_grid(
    weights,
    token_labels: list[str],
    kv_groups: list[list[int]],
    positions: list[int],
    columns: int = 2,
    presenter: bool = False,
) -> go.Figure:
    """One small chart per head: the new token's weight (`weights` [heads][drawn]) on each drawn position.
    Bars share their K/V head's colour: those heads read the same cached keys and values."""
    heads = len(weights)
    rows = math.ceil(heads / columns)
    kv_of = {head: g for g, group in enumerate(kv_groups) for head in group}
    titles = [f"head {h} · K/V head {kv_of[h]}" for h in range(heads)]
    fig = make_subplots(
        rows=rows, cols=columns, shared_xaxes=True, subplot_titles=titles, vertical_spacing=0.3 / rows + 0.02
    )
    top = max(max(row) for row in weights)
    for head, row in enumerate(weights):
        fig.add_bar(
            x=positions,
            y=row,
            marker_color=KV_HEAD_COLOURS[kv_of[head] % len(KV_HEAD_COLOURS)],
            customdata=[label(t) for t in token_labels],
            hovertemplate=hover("position %{x}: %{customdata}", f"head {head}: weight %{{y:.3f}}"),
            showlegend=False,
            row=head // columns + 1,
            col=head % columns + 1,
        )
    fig.update_yaxes(range=[0, top * 1.08], tickformat=".0%", nticks=3)
    fig.update_xaxes(title_text="position", row=rows)
    fig.update_layout(bargap=0.05)
    return base_layout(fig, "What the new token's query read, head by head", presenter, height=120 + 150 * rows)


def parts_figure(parts: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Each part's share of the decode pass: measured time beside its FLOPs and the bytes it reads, and the
    prefill pass's time (a prefill follows FLOPs; a decode step, on a big model, follows bytes)."""
    names = list(parts.name)[::-1]  # Plotly draws the first bar at the bottom: the pass reads top to bottom
    rows = parts.iloc[::-1]
    shares = {
        "decode time (measured)": (rows.decode_ms / parts.decode_ms.sum(), DECODE_COLOUR),
        "prefill time (measured)": (rows.prefill_ms / parts.prefill_ms.sum(), PREFILL_COLOUR),
        "decode FLOPs": (rows.flops / max(parts.flops.sum(), 1), PALETTE["dark_blue"]),
        "decode bytes read": (rows.read_bytes / parts.read_bytes.sum(), BYTES_COLOUR),
    }
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, subplot_titles=["time", "work"], horizontal_spacing=0.04)
    for index, (name, (values, colour)) in enumerate(shares.items()):
        add_hbar(
            fig,
            names,
            values,
            name=name,
            marker_color=colour,
            hovertemplate=hover("%{y}", f"{name}: %{{x:.1%}}"),
            row=1,
            col=1 + index // 2,
        )
    fig.update_xaxes(tickformat=".0%", rangemode="tozero")
    fig.update_layout(barmode="group", bargap=0.25, bargroupgap=0.05)
    fig = base_layout(fig, "Share of the pass, part by part", presenter, height=160 + 26 * len(parts))
    return legend_below(fig, y=-0.06 - 40 / (160 + 26 * len(parts)))
