"""Figures for the KV cache page: pure functions from experiment tables to Plotly figures."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from inference.core.measuring import compare
from inference.lessons.style import (
    PALETTE,
    add_line,
    base_layout,
    hover,
    label,
    legend_below_in_column,
    tick_step,
    wrapped,
)

MEASURED_COLOUR = KV_COLOUR = PALETTE["blue"]  # with the cache, too
FORMULA_COLOUR = PALETTE["red"]  # without the cache, too
WEIGHT_COLOUR, KV_WITHOUT_GQA_COLOUR = PALETTE["slate"], PALETTE["pale_blue"]
# The two decoders of the with/without comparison: (column prefix in its table, legend name, colour).
CACHE_RUNS = (("without_cache", "without cache", FORMULA_COLOUR), ("with_cache", "with cache", MEASURED_COLOUR))
SMOOTHING_STEPS = 9  # the per-step chart's trend line is a running median over this many steps


def cache_growth_figure(growth: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Cache size after each step: the bytes read from the tensors as dots, the formula as
    a dashed line drawn over them (so both stay visible where they coincide)."""
    kb_measured, kb_formula = growth["measured_bytes"] / 1e3, growth["formula_bytes"] / 1e3
    fig = go.Figure()
    fig.add_scatter(
        x=growth["step"],
        y=kb_measured,
        mode="markers",
        name="measured (cache tensors)",
        marker=dict(color=MEASURED_COLOUR, size=7),
        customdata=growth["cache_tokens"],
        hovertemplate="step %{x}: %{customdata} tokens cached<br>measured %{y:,.1f} kB<extra></extra>",
    )
    fig.add_scatter(
        x=growth["step"],
        y=kb_formula,
        mode="lines",
        name="formula",
        line=dict(color=FORMULA_COLOUR, width=2, dash="dash"),
        hovertemplate="step %{x}<br>formula %{y:,.1f} kB<extra></extra>",
    )
    fig.update_xaxes(title="step (0 = prefill)")
    fig.update_yaxes(title="KV cache (kB)", rangemode="tozero", tickformat=",")
    return legend_below_in_column(base_layout(fig, "Cache size after each step", presenter, height=420))


def layer_bytes_figure(layers: pd.DataFrame, presenter: bool = False) -> go.Figure:
    fig = go.Figure()
    fig.add_bar(
        x=layers["layer"],
        y=layers["measured_bytes"] / 1e3,
        name="measured (layer tensors)",
        marker_color=MEASURED_COLOUR,
        hovertemplate="layer %{x}: %{y:,.1f} kB<extra></extra>",
    )
    fig.add_scatter(
        x=layers["layer"],
        y=layers["formula_bytes"] / 1e3,
        mode="markers",
        name="formula for one layer",
        marker=dict(color=FORMULA_COLOUR, symbol="line-ew-open", size=36, line=dict(width=3)),
        hovertemplate="formula %{y:,.1f} kB<extra></extra>",
    )
    # A fixed range: the wide formula markers would otherwise stretch the axis past the layers.
    fig.update_xaxes(
        title="layer", tickmode="linear", dtick=tick_step(len(layers), presenter), range=[-0.5, len(layers) - 0.5]
    )
    fig.update_yaxes(title="keys + values (kB)", rangemode="tozero", tickformat=",")
    return legend_below_in_column(base_layout(fig, "Cache per layer", presenter, height=420))


def step_time_figure(steps: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Time of each step: flat with the cache (one new token per pass), growing without it
    (the whole sequence again every pass). Every step is drawn thin; a running median drawn
    thick shows the trend through the hiccups of a shared machine; the axis is scaled to the
    trend, so a rare spike runs off the top rather than flattening everything else."""
    fig = go.Figure()
    tokens, each_step = steps["context_tokens"], hover("%{x} tokens: %{y:.1f} ms")
    highest_trend = 0.0
    for run, name, colour in CACHE_RUNS:
        times = steps[f"{run}_ms"]
        add_line(fig, tokens, times, f"{name}, each step", colour, width=1, opacity=0.35, hovertemplate=each_step)
        trend = times.rolling(SMOOTHING_STEPS, center=True, min_periods=1).median()
        highest_trend = max(highest_trend, float(trend.max()))
        add_line(fig, tokens, trend, f"{name}, median of {SMOOTHING_STEPS}", colour, width=3, hoverinfo="skip")
    fig.update_xaxes(title="tokens in the sequence")
    fig.update_yaxes(title="ms for this step", range=[0, 1.5 * highest_trend])
    return legend_below_in_column(base_layout(fig, "Time per step", presenter, height=420))


def cumulative_time_figure(steps: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Total time so far: about linear with the cache, about quadratic without; the end marked in
    `measuring.compare`'s words for the two totals."""
    tokens = steps["step"] + 1
    fig = go.Figure()
    for run, name, colour in CACHE_RUNS:
        seconds = steps[f"{run}_cumulative_ms"] / 1e3
        add_line(fig, tokens, seconds, name, colour, hovertemplate=hover("%{x} tokens: %{y:.2f} s"))
    seconds_without = steps["without_cache_cumulative_ms"] / 1e3
    totals = compare(seconds_without.iloc[-1], steps["with_cache_cumulative_ms"].iloc[-1] / 1e3)
    fig.add_annotation(
        x=tokens.iloc[-1],
        y=seconds_without.iloc[-1],
        text=f"{totals.words('slower', 'faster')}<br>without cache",
        showarrow=True,
        arrowhead=0,
        ax=-30,
        ay=25,
        xanchor="right",
        yanchor="top",
        align="right",
    )
    fig.update_xaxes(title="tokens generated")
    fig.update_yaxes(title="total time (s)", rangemode="tozero")
    return legend_below_in_column(base_layout(fig, "Total time so far", presenter, height=420))


def memory_figure(table: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Per model: weights, KV cache, and the KV cache it would need without grouped-query
    attention (one K/V head per query head). Log scale: the models span six orders of size."""
    rows = table.iloc[::-1]  # Plotly draws the first category at the bottom
    # Presenter mode at 800 px: projector-sized names took half the width and the bars' labels ran off the right
    # edge, so a name breaks before its bracket ("storyteller-llama-6m / (this app)") and the plot gets more room.
    line_break = "<br>" if presenter else " "
    names = [label(name).replace(" (", line_break + "(") for name in rows["model"]]
    fig = go.Figure()
    bars = [
        ("weights", "weight_gb", WEIGHT_COLOUR),
        ("KV cache", "kv_gb", KV_COLOUR),
        ("KV cache if KV heads = heads", "kv_gb_without_gqa", KV_WITHOUT_GQA_COLOUR),
    ]
    mla = (rows["attention"] == "MLA").tolist() if "attention" in rows else [False] * len(rows)
    for name, column, colour in bars:
        uncompressed = column == "kv_gb_without_gqa"
        # An MLA model's light bar is the uncompressed per-head cache its latent replaces: say so on the bar (in
        # presenter mode the legend's "(MLA: uncompressed)" says it: "uncompressed: 41 GB" ran off the chart).
        prefix = "" if presenter else "uncompressed: "
        text = [(prefix if uncompressed and is_mla else "") + gb_text(v) for v, is_mla in zip(rows[column], mla)]
        hover = [
            name + (" (MLA: the uncompressed per-head cache)" if uncompressed and is_mla else "") for is_mla in mla
        ]
        fig.add_bar(
            y=names,
            x=rows[column],
            orientation="h",
            name=name + (line_break + "(MLA: uncompressed)" if uncompressed and any(mla) else ""),
            marker_color=colour,
            text=text,
            textposition="outside",
            cliponaxis=False,
            customdata=hover,
            hovertemplate="%{y}<br>%{customdata}: %{x:,.4g} GB<extra></extra>",
        )
    values = pd.concat([rows[column] for _, column, _ in bars])
    # Log axes take log10 of the range; the extra room on the right is for the labels.
    fig.update_xaxes(
        type="log",
        # wrapped narrower than other axis titles: the models' long names leave the plot under half the chart
        title=wrapped("GB (10⁹ bytes, log scale)", 14) if presenter else "GB (10⁹ bytes, log scale)",
        range=[math.floor(math.log10(values.min())), math.log10(values.max()) + (2.6 if presenter else 1.4)],
    )
    fig.update_yaxes(automargin=True)
    fig.update_layout(barmode="group", bargap=0.25)
    fig = base_layout(fig, "Memory per model", presenter, height=200 + 62 * len(rows))
    # The legend on its own lines between the title and the plot (beside the title it covered it at 800 px).
    # The title pinned to the figure's top (Plotly centres it in the top margin, where it met the legend's first line)
    return fig.update_layout(
        legend=dict(orientation="v", y=1.0, yanchor="bottom", x=0, xanchor="left"),
        margin=dict(t=220 if presenter else 130),  # four projector-sized legend lines under the title
        title=dict(yref="container", y=1, yanchor="top", pad=dict(t=30 if presenter else 20)),
    )


def gb_text(value: float) -> str:
    """A size as the memory chart labels its bars (and the sentence beside it quotes them)."""
    if value >= 10:
        return f"{value:,.0f} GB"
    return f"{value:.1f} GB" if value >= 0.1 else f"{value * 1e3:.2g} MB"
