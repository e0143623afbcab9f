"""Figures for the Prefill vs decode page: pure functions from timing data to Plotly figures."""

from __future__ import annotations

import plotly.graph_objects as go

from inference.lessons.prefill_decode.timing import SATURATION, GenerationTiming, Sweep
from inference.lessons.style import (
    DECODE_COLOUR,
    PALETTE,
    PREFILL_COLOUR,
    add_line,
    base_layout,
    hover,
    label,
    legend_below,
    legend_below_in_column,
    quartile_bars,
)


def _phase_curve(fig: go.Figure, s, y, phase: str, name: str, value_text: str, error_bars: dict | None = None) -> None:
    """One phase's curve against the prompt length P (for decode, the context it reads), in the phase's colour."""
    colour, x_text = (PREFILL_COLOUR, "P = %{x}") if phase == "prefill" else (DECODE_COLOUR, "context %{x}")
    add_line(
        fig,
        s["prompt_tokens"],
        y,
        name,
        colour,
        "lines+markers",
        error_y=error_bars,
        hovertemplate=hover(x_text, value_text),
    )


def _sweep_layout(fig: go.Figure, title: str, presenter: bool) -> go.Figure:
    fig.update_xaxes(type="log", title="prompt tokens P (log)")  # short: a half-width chart at 800 px cut it
    return legend_below_in_column(base_layout(fig, title, presenter, height=440))


def timeline_figure(timing: GenerationTiming, presenter: bool = False) -> go.Figure:
    """One lane of time: the prefill block (all prompt tokens in one pass), then one block
    per decode step, each as wide as its measured time."""
    steps = timing.steps
    colours = [PREFILL_COLOUR if phase == "prefill" else DECODE_COLOUR for phase in steps["phase"]]
    hover = [
        f"step {s.step} ({s.phase}): fed {s.tokens_in_forward} token{'s' * (s.tokens_in_forward != 1)}<br>"
        f"{s.step_ms:.1f} ms · chose '{label(s.token)}'"
        for s in steps.itertuples()
    ]
    fig = go.Figure(
        go.Bar(
            y=["time"] * len(steps),
            x=steps["step_ms"],
            base=steps["start_ms"],
            orientation="h",
            marker=dict(color=colours, line=dict(color="white", width=1)),
            hovertext=hover,
            hoverinfo="text",
            showlegend=False,
        )
    )
    # The bars carry no legend of their own (one trace, two colours): two empty traces name them.
    for colour, name in (
        (PREFILL_COLOUR, f"prefill: {timing.prompt_tokens} prompt tokens in one pass"),
        (DECODE_COLOUR, f"decode: {len(timing.decode_steps)} passes of one token each"),
    ):
        fig.add_scatter(
            x=[None], y=[None], mode="markers", marker=dict(color=colour, size=12, symbol="square"), name=name
        )
    fig.add_vline(x=timing.ttft_ms, line=dict(color=PALETTE["ink"], dash="dash", width=1.5))
    fig.add_annotation(
        x=timing.ttft_ms,
        y=1.0,
        yref="paper",
        yanchor="bottom",
        xanchor="left",
        showarrow=False,
        text=f" first token at {timing.ttft_ms:.0f} ms",
    )
    fig.update_xaxes(title="time since the prompt arrived (ms)", rangemode="tozero")
    fig.update_yaxes(visible=False)
    fig = base_layout(fig, "One generation, pass by pass", presenter, height=250)
    fig.update_layout(bargap=0.15)
    return legend_below(fig, y=-0.55, t=70, b=20)


def sweep_time_figure(sweep: Sweep, presenter: bool = False) -> go.Figure:
    """Milliseconds per forward pass: a prefill pass over P tokens against a decode pass of
    one token with P tokens already in the cache."""
    s = sweep.summary
    fig = go.Figure()
    for phase, measure, name, value_text in (
        ("prefill", "prefill_ms", "prefill (P tokens per pass)", "prefill %{y:.1f} ms"),
        ("decode", "decode_ms_per_token", "decode (1 token per pass)", "decode %{y:.1f} ms per token"),
    ):
        _phase_curve(fig, s, s[measure], phase, name, value_text, quartile_bars(s, measure))
    fig.update_xaxes(tickvals=s["prompt_tokens"].tolist())
    fig.update_yaxes(title="ms per forward pass", rangemode="tozero")
    return _sweep_layout(fig, "Time of one forward pass", presenter)


def sweep_rate_figure(sweep: Sweep, saturation_tokens: int, presenter: bool = False) -> go.Figure:
    """Tokens per second: prefill climbs with the prompt length until the arithmetic units
    are busy; decode makes one token per pass whatever the context."""
    s = sweep.summary
    fig = go.Figure()
    rate, prefill_rate = "%{y:,.0f} tokens/s", s["prefill_tokens_per_s"]
    _phase_curve(fig, s, prefill_rate, "prefill", "prefill (prompt)", rate, quartile_bars(s, "prefill_tokens_per_s"))
    _phase_curve(fig, s, 1000 / s["decode_ms_per_token"], "decode", "decode (new tokens)", rate)
    # The saturation line is a trace named in the legend: a note beside it sat on the prefill curve at 800 px.
    top = float(s["prefill_tokens_per_s_q3"].max())
    add_line(
        fig,
        [saturation_tokens, saturation_tokens],
        [0, top],
        f"{SATURATION:.0%} of best, P = {saturation_tokens}",  # short: a half-width legend at 800 px cut it
        PALETTE["grey"],
        dash="dot",
        width=1.5,
        hoverinfo="skip",
    )
    fig.update_xaxes(tickvals=s["prompt_tokens"].tolist())
    fig.update_yaxes(title="tokens per second", rangemode="tozero", tickformat=",")
    return _sweep_layout(fig, "Tokens per second", presenter)
