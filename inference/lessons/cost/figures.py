"""Figures for the Cost page: pure functions from measurements to Plotly figures."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from inference.core.measuring import compare
from inference.lessons.cost.experiments import AnswerCost
from inference.lessons.style import (
    DECODE_COLOUR,
    PREFILL_COLOUR,
    add_hbar,
    add_line,
    base_layout,
    hover,
    legend_below,
    quartile_bars,
)


def answer_split_figure(answer: AnswerCost, presenter: bool = False) -> go.Figure:
    """Two stacked bars: where the tokens are (prompt vs reply) and where the time goes."""
    fig = go.Figure()
    rows = ["tokens", "time"]
    segments = [
        (
            "prompt → prefill",
            PREFILL_COLOUR,
            [1 - answer.reply_share, 1 - answer.decode_share],
            [f"{answer.prompt_tokens} prompt tokens", f"prefill {answer.prefill_ms:.0f} ms"],
        ),
        (
            "reply → decode",
            DECODE_COLOUR,
            [answer.reply_share, answer.decode_share],
            [f"{answer.reply_tokens} reply tokens", f"decode {answer.decode_ms:.0f} ms"],
        ),
    ]
    for name, colour, shares, texts in segments:
        # A label squeezed into a sliver becomes unreadable (Plotly turns it sideways): slivers keep theirs for the
        # hover; projector-sized text needs a wider bar.
        add_hbar(
            fig,
            rows,
            shares,
            name=name,
            marker_color=colour,
            text=[t if share >= (0.25 if presenter else 0.12) else "" for t, share in zip(texts, shares)],
            hovertext=texts,
            hoverinfo="text",
            textposition="inside",
            insidetextanchor="middle",
        )
    fig.update_layout(barmode="stack", legend_traceorder="normal")
    fig.update_xaxes(tickformat=".0%", range=[0, 1], title="share")
    fig.update_yaxes(autorange="reversed")
    fig = base_layout(fig, "Share of the tokens vs share of the time", presenter, height=260)
    return legend_below(fig, y=-0.45, t=60, b=20)


def batching_figure(batches: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Left: tokens per second from all sequences together. Right: machine time per token."""
    # one panel above the other: side by side, their titles and axis titles ran into each other at 800 px
    fig = make_subplots(
        rows=2,
        cols=1,
        vertical_spacing=0.22,
        subplot_titles=["Tokens per second (all sequences)", "Machine time per token (ms)"],
    )
    alone = list(batches["pass_ms"].iloc[0])  # each token against batch 1's, in measuring.compare's words
    cheaper = [
        compare([ms / b for ms in times], alone).words("dearer", "cheaper", "about the same")
        for b, times in zip(batches["batch"], batches["pass_ms"])
    ]
    for row, column, colour, text, value_text in (
        (1, "tokens_per_s", DECODE_COLOUR, None, "%{y:,.0f} tokens/s"),
        (2, "ms_per_token", PREFILL_COLOUR, cheaper, "%{y:.3f} ms per token (%{text})"),
    ):
        add_line(
            fig,
            batches["batch"],
            batches[column],
            None,
            colour,
            "lines+markers",
            width=3,
            showlegend=False,
            row=row,
            col=1,
            text=text,
            hovertemplate=hover("batch %{x}: " + value_text),
        )
        fig.update_xaxes(type="log", title="sequences per batch", tickvals=list(batches["batch"]), row=row, col=1)
    fig.update_yaxes(
        type="log",
        tickvals=[0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100],
        title="ms (log scale)",
        row=2,
        col=1,
    )
    fig.update_yaxes(title="tokens/s", rangemode="tozero", row=1, col=1)
    return base_layout(fig, "", presenter, height=640)


def context_figure(summary: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Decode step time against the tokens already in the cache: the median of the runs, bars from the first
    quartile to the third (a sweep's `summary`: prompt_tokens, decode_ms_per_token and its _q1 / _q3)."""
    fig = go.Figure()
    add_line(
        fig,
        summary["prompt_tokens"],
        summary["decode_ms_per_token"],
        "decode step",
        DECODE_COLOUR,
        "lines+markers",
        width=3,
        showlegend=False,
        error_y=quartile_bars(summary, "decode_ms_per_token"),
        hovertemplate=hover("%{x} tokens in the cache: %{y:.2f} ms per step"),
    )
    fig.update_xaxes(type="log", title="tokens in the cache (log)", tickvals=summary["prompt_tokens"].tolist())
    fig.update_yaxes(title="ms per decode step", rangemode="tozero")
    return base_layout(fig, "Decode step time against context", presenter, height=360)
