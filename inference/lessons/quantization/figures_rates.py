"""The decode-rate chart of the Quantization page: each engine's measured tokens/s per weight format, with the
bandwidth limit of those bytes drawn on the same row (pure function: a `rates.table` frame -> Figure)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from inference.lessons.quantization.rates import LLAMA_SERVER, TRANSFORMERS
from inference.lessons.style import PALETTE, base_layout, legend_below

ENGINE_STYLE = {  # colour and pattern: the two engines differ by more than colour
    TRANSFORMERS: (PALETTE["orange"], "/"),
    LLAMA_SERVER: (PALETTE["blue"], ""),
}
LIMIT_COLOUR = PALETTE["ink"]


def row_label(engine: str, weights: str, presenter: bool = False) -> str:
    """ "llama-server · q8_0"; on two lines in presenter mode, whose large text leaves a narrow plot at 800 px."""
    return f"{engine}<br>{weights}" if presenter else f"{engine} · {weights}"


def rates_bars(frame: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """One horizontal bar per engine and format (most bytes on top), its limit a tall tick on the same row, and
    the share of the limit written beside each bar."""
    rows = frame[frame["measured tokens/s"].notna()].iloc[::-1]  # Plotly draws the first row at the bottom
    labels = [row_label(e, w, presenter) for e, w in zip(rows["engine"], rows["weights"])]
    fig = go.Figure()
    for engine, (colour, pattern) in ENGINE_STYLE.items():
        mine = rows["engine"] == engine
        if not mine.any():
            continue
        fig.add_bar(
            y=[label for label, keep in zip(labels, mine) if keep],
            x=rows.loc[mine, "measured tokens/s"],
            orientation="h",
            name=f"{engine}, measured",
            marker=dict(color=colour, pattern=dict(shape=pattern, fillmode="overlay", fgcolor="white", solidity=0.3)),
            hovertemplate="%{y}: %{x:,.1f} tokens/s measured<extra></extra>",
        )
    fig.add_scatter(
        y=labels,
        x=rows["bandwidth limit tokens/s"],
        mode="markers",
        name="bandwidth limit of its bytes",
        marker=dict(symbol="line-ns-open", size=26 if presenter else 20, color=LIMIT_COLOUR, line=dict(width=3)),
        hovertemplate="%{y}: limit %{x:,.1f} tokens/s<extra></extra>",
    )
    right = rows[["measured tokens/s", "bandwidth limit tokens/s"]].max(axis=1)
    fig.add_scatter(  # the share right of the bar or its limit, whichever is further right
        y=labels,
        x=right,
        mode="text",
        showlegend=False,
        hoverinfo="skip",
        textposition="middle right",
        text=[  # presenter: the share alone (the table beside it has the rates)
            f"  {share:.0%}" if presenter else f"  {rate:,.0f} of {limit:,.0f} ({share:.0%})"
            for rate, limit, share in zip(
                rows["measured tokens/s"], rows["bandwidth limit tokens/s"], rows["share of the limit"]
            )
        ],
    )
    fig.update_xaxes(title="decode tokens/s", range=[0, float(right.max()) * (1.3 if presenter else 1.6)])
    fig.update_yaxes(categoryorder="array", categoryarray=labels)  # not by trace: the same bytes stay side by side
    fig.update_layout(barmode="overlay")
    height = 120 + (72 if presenter else 52) * len(rows)
    return legend_below(base_layout(fig, "Decode rate vs the bandwidth limit", presenter, height))
