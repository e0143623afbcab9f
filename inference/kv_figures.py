"""Figures for the KV cache page: pure functions from experiment tables to Plotly figures."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from inference.figures import base_layout, label

MEASURED_COLOUR = "#2a6fdb"
FORMULA_COLOUR = "#c0392b"
WITH_CACHE_COLOUR = "#2a6fdb"
WITHOUT_CACHE_COLOUR = "#c0392b"
WEIGHT_COLOUR = "#7f8c8d"
KV_COLOUR = "#2a6fdb"
KV_WITHOUT_GQA_COLOUR = "#b8c4d6"


def cache_growth_figure(growth: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Cache size after each step: the bytes read from the tensors as dots, the formula as
    a line through them."""
    kb_measured, kb_formula = growth["measured_bytes"] / 1e3, growth["formula_bytes"] / 1e3
    fig = go.Figure()
    fig.add_scatter(x=growth["step"], y=kb_formula, mode="lines", name="formula", line=dict(color=FORMULA_COLOUR, width=2),
                    hovertemplate="step %{x}<br>formula %{y:,.1f} kB<extra></extra>")
    fig.add_scatter(x=growth["step"], y=kb_measured, mode="markers", name="measured from the tensors",
                    marker=dict(color=MEASURED_COLOUR, size=6), customdata=growth["cache_tokens"],
                    hovertemplate="step %{x}: %{customdata} tokens cached<br>measured %{y:,.1f} kB<extra></extra>")
    fig.update_xaxes(title="step (0 = prefill of the whole prompt)")
    fig.update_yaxes(title="KV cache (kB)", rangemode="tozero", tickformat=",")
    return base_layout(fig, "The cache grows by the same amount every token", presenter, height=380)


def layer_bytes_figure(layers: pd.DataFrame, presenter: bool = False) -> go.Figure:
    fig = go.Figure()
    fig.add_bar(x=[f"layer {i}" for i in layers["layer"]], y=layers["measured_bytes"] / 1e3, name="measured",
                marker_color=MEASURED_COLOUR, text=[f"{b / 1e3:,.1f} kB" for b in layers["measured_bytes"]],
                textposition="inside", hovertemplate="%{x}: %{y:,.1f} kB<extra></extra>")
    fig.add_scatter(x=[f"layer {i}" for i in layers["layer"]], y=layers["formula_bytes"] / 1e3, mode="markers",
                    name="formula for one layer", marker=dict(color=FORMULA_COLOUR, symbol="line-ew-open", size=40,
                                                              line=dict(width=3)),
                    hovertemplate="formula %{y:,.1f} kB<extra></extra>")
    fig.update_yaxes(title="keys + values (kB)", rangemode="tozero", tickformat=",")
    return base_layout(fig, "Every layer keeps its own keys and values", presenter, height=380)


def step_time_figure(steps: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Time of each step: flat with the cache (one new token per pass), growing without it
    (the whole sequence again every pass)."""
    fig = go.Figure()
    fig.add_scatter(x=steps["context_tokens"], y=steps["without_cache_ms"], mode="lines", name="without cache",
                    line=dict(color=WITHOUT_CACHE_COLOUR), hovertemplate="%{x} tokens: %{y:.1f} ms<extra></extra>")
    fig.add_scatter(x=steps["context_tokens"], y=steps["with_cache_ms"], mode="lines", name="with cache",
                    line=dict(color=WITH_CACHE_COLOUR), hovertemplate="%{x} tokens: %{y:.1f} ms<extra></extra>")
    fig.update_xaxes(title="tokens in the sequence at that step")
    fig.update_yaxes(title="ms for this step", rangemode="tozero")
    return base_layout(fig, "Time per step", presenter, height=380)


def cumulative_time_figure(steps: pd.DataFrame, speedup: float, presenter: bool = False) -> go.Figure:
    """Total time so far: about linear with the cache, about quadratic without."""
    seconds_without, seconds_with = steps["without_cache_cumulative_ms"] / 1e3, steps["with_cache_cumulative_ms"] / 1e3
    tokens = steps["step"] + 1
    fig = go.Figure()
    fig.add_scatter(x=tokens, y=seconds_without, mode="lines", name="without cache",
                    line=dict(color=WITHOUT_CACHE_COLOUR), hovertemplate="%{x} tokens: %{y:.2f} s<extra></extra>")
    fig.add_scatter(x=tokens, y=seconds_with, mode="lines", name="with cache",
                    line=dict(color=WITH_CACHE_COLOUR), hovertemplate="%{x} tokens: %{y:.2f} s<extra></extra>")
    fig.add_annotation(x=tokens.iloc[-1], y=seconds_without.iloc[-1], text=f"{speedup:.1f}× slower",
                       showarrow=True, arrowhead=0, ax=-60, ay=-10, xanchor="right")
    fig.update_xaxes(title="tokens generated")
    fig.update_yaxes(title="total time (s)", rangemode="tozero")
    return base_layout(fig, "Total time so far", presenter, height=380)


def memory_figure(table: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Per model: weights, KV cache, and the KV cache it would need without grouped-query
    attention (one K/V head per query head). Log scale: the models span six orders of size."""
    rows = table.iloc[::-1]  # Plotly draws the first category at the bottom
    names = [label(name) for name in rows["model"]]
    fig = go.Figure()
    bars = [("weights", "weight_gb", WEIGHT_COLOUR), ("KV cache", "kv_gb", KV_COLOUR),
            ("KV cache if KV heads = heads", "kv_gb_without_gqa", KV_WITHOUT_GQA_COLOUR)]
    for name, column, colour in bars:
        fig.add_bar(y=names, x=rows[column], orientation="h", name=name, marker_color=colour,
                    text=[_gb(v) for v in rows[column]], textposition="outside", cliponaxis=False,
                    hovertemplate="%{y}<br>" + name + ": %{x:,.4g} GB<extra></extra>")
    fig.update_xaxes(type="log", title="GB (10⁹ bytes, log scale)")
    fig.update_yaxes(automargin=True)
    fig.update_layout(barmode="group", bargap=0.25)
    return base_layout(fig, "Memory per model", presenter, height=140 + 62 * len(rows))


def _gb(value: float) -> str:
    if value >= 10:
        return f"{value:,.0f} GB"
    if value >= 0.1:
        return f"{value:.1f} GB"
    return f"{value * 1e3:.2g} MB"
