"""Figures for the Serve many page: pure functions from a trace and measured runs to Plotly figures."""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from inference.lessons.serving.replay import RunSummary
from inference.lessons.serving.request_trace import Trace
from inference.lessons.serving.roofline import PassCost, Roof
from inference.lessons.style import (
    DECODE_COLOUR,
    PALETTE,
    PREFILL_COLOUR,
    add_line,
    base_layout,
    hover,
    legend_below,
    log_ticks,
)

WAITING_COLOUR = PALETTE["light_grey"]
RUNNING_COLOUR = PALETTE["blue"]
KV_COLOUR = PALETTE["sand"]
MEASURED_COLOUR = PALETTE["orange"]
PREDICTED_COLOUR = PALETTE["blue_grey"]
SLOT_COLOURS = [PALETTE["slate"], PALETTE["blue"]]  # one slot, N slots


def traffic_figure(trace: Trace, presenter: bool = False) -> go.Figure:
    """One bar per request at its arrival time: prompt tokens up, reply tokens stacked on top."""
    table = trace.table().melt(["request", "arrival_s"], ["prompt_tokens", "reply_tokens"], "kind", "tokens")
    table["kind"] = table["kind"].str.replace("_", " ")
    colours = {"prompt tokens": PREFILL_COLOUR, "reply tokens": DECODE_COLOUR}
    fig = px.bar(table, x="arrival_s", y="tokens", color="kind", color_discrete_map=colours, custom_data=["request"])
    fig.update_traces(
        width=max(trace.duration_s, 1e-3) / len(trace.requests) * 0.6,
        hovertemplate="request %{customdata[0]} at %{x:.2f} s: %{y} tokens<extra></extra>",
    )
    fig.update_layout(barmode="stack", legend_title_text="")
    fig.update_xaxes(title="arrival time (s)")
    title = (
        f"{len(trace.requests)} requests, {trace.shape}, λ = {trace.rate_per_s:g}/s<br>"
        f"<sup>asking for {trace.asked_tokens_per_s():.0f} reply tokens/s over {trace.duration_s:.1f} s</sup>"
    )
    return legend_below(base_layout(fig, title, presenter, height=320), y=-0.25)


def shorten_reply(text, limit: int = 90) -> str:
    """A reply in one escaped hover line of at most `limit` characters."""
    flat = " ".join(str(text or "").split())
    return html.escape(f"“{flat if len(flat) <= limit else flat[: limit - 1] + '…'}”") if flat else ""


def gantt_figure(
    table: pd.DataFrame, title: str, presenter: bool = False, time_range: float | None = None
) -> go.Figure:
    """One row per request: waiting (sent until the engine starts its prefill), prefill (until the first token),
    decode (until the last token). Without the engine's prefill time, waiting and prefill are one grey-blue bar."""
    fig = go.Figure()
    rows = table.dropna(subset=["first_token_s"])
    y = [f"#{int(r)}" for r in rows["request"]]
    sent, first, last = rows["sent_s"], rows["first_token_s"], rows["last_token_s"]
    wait_end = rows["prefill_start_s"].where(rows["prefill_start_s"].notna(), sent)
    replies = [shorten_reply(t) for t in rows["reply"]]  # as streamed, one escaped line (the hover reads HTML)
    segments = [
        ("waiting for a slot", WAITING_COLOUR, sent, wait_end - sent),
        ("prefill (until the first token)", PREFILL_COLOUR, wait_end, first - wait_end),
        ("decode (until the last token)", DECODE_COLOUR, first, last - first),
    ]
    for name, colour, base, length in segments:
        fig.add_bar(
            y=y,
            x=length * 1000,
            base=base * 1000,
            orientation="h",
            name=name,
            marker_color=colour,
            customdata=np.stack([rows["ttft_ms"], rows["e2e_ms"], rows["tokens"], replies], axis=-1),
            hovertemplate=f"%{{y}} {name}: %{{x:.0f}} ms<br>TTFT %{{customdata[0]:.0f}} ms, end to end "
            f"%{{customdata[1]:.0f}} ms, %{{customdata[2]}} tokens<br>%{{customdata[3]}}<extra></extra>",
        )
    failed, cross = table[table["first_token_s"].isna()], dict(symbol="x", size=10, color=PALETTE["red"])
    if len(failed):
        y_failed = [f"#{int(r)}" for r in failed["request"]]
        fig.add_scatter(
            y=y_failed, x=failed["sent_s"] * 1000, mode="markers", marker=cross, name="no token (error/cancelled)"
        )
    fig.update_layout(barmode="overlay", bargap=0.25)
    fig.update_xaxes(title="time since the start (ms)", range=[0, time_range * 1000] if time_range else None)
    fig.update_yaxes(autorange="reversed", title="request", showticklabels=len(table) <= 40)
    height = 140 + 14 * max(len(table), 8)
    return legend_below(base_layout(fig, title, presenter, height=height), y=-60 / height - 0.12)


def engine_state_figure(
    states: pd.DataFrame, title: str, presenter: bool = False, time_range: float | None = None
) -> go.Figure:
    """Running and waiting requests (left axis) and KV-cache tokens held by running requests (right axis), as the
    engine reported them while the trace ran."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    kv_column = "kv_tokens" if states["kv_tokens"].notna().any() else "kv_used"
    lines = (
        ("running", "running (in a slot)", RUNNING_COLOUR, 1, {}),
        ("waiting", "waiting for a slot", PALETTE["red"], 1, {}),
        ("kv_tokens", "KV cache (tokens)", KV_COLOUR, 1, {"fill": "tozeroy"}),
        ("kv_used", "KV cache used (%)", KV_COLOUR, 100, {}),
    )
    for column, name, colour, scale, more in lines:
        if states[column].notna().any() and (not column.startswith("kv") or column == kv_column):
            y = states[column] * scale
            right = column.startswith("kv")
            add_line(fig, states["t_s"] * 1000, y, name, colour, width=2, shape="hv", secondary_y=right, **more)
    fig.update_xaxes(title="time since the start (ms)", range=[0, time_range * 1000] if time_range else None)
    fig.update_yaxes(title="requests", rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title="KV cache", rangemode="tozero", secondary_y=True, showgrid=False)
    return legend_below(base_layout(fig, title, presenter, height=300), y=-0.3)


def comparison_figure(summaries: dict[str, RunSummary], presenter: bool = False) -> go.Figure:
    """Runs of the same trace side by side (e.g. one slot and N), in the order given: throughput, goodput, and TTFT
    and time per token (p50 and p95)."""
    # two short lines each: a half-width panel at 800 px cut "Time per output token (ms)" at its right edge
    panels = [
        "Throughput<br>tokens/s",
        "Goodput<br>good requests/s",
        "Time to first token<br>ms",
        "Time per token<br>ms",
    ]
    fig = make_subplots(rows=2, cols=2, subplot_titles=panels, horizontal_spacing=0.12, vertical_spacing=0.24)
    for i, (name, s) in enumerate(summaries.items()):
        common = dict(name=name, marker_color=SLOT_COLOURS[min(i, 1)], legendgroup=name, textposition="outside")
        throughput, goodput = s.throughput_tokens_per_s, s.goodput_requests_per_s
        fig.add_bar(x=["all requests"], y=[throughput], text=[f"{throughput:.0f}"], row=1, col=1, **common)
        fig.add_bar(
            x=[s.slo.describe()], y=[goodput], text=[f"{goodput:.2f}"], row=1, col=2, showlegend=False, **common
        )
        for col, values in ((1, s.ttft_ms), (2, s.tpot_ms)):
            ys = [values[50], values[95]]
            fig.add_bar(
                x=["p50", "p95"], y=ys, text=[ms_label(v) for v in ys], row=2, col=col, showlegend=False, **common
            )
    fig.update_layout(barmode="group")
    fig.update_yaxes(rangemode="tozero")
    return legend_below(base_layout(fig, "", presenter, height=600), y=-0.1, t=70, b=20)


def ms_label(ms: float) -> str:
    """A bar's label in ms with enough digits for its size (0.65 ms stays 0.65, not 1); seconds from 1,000 ms."""
    if not math.isfinite(ms):
        return "–"
    if ms >= 1000:
        return f"{ms / 1000:.1f} s"
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.3g}"


def sweep_figure(table: pd.DataFrame, knee: int | None, presenter: bool = False) -> go.Figure:
    """Left: what each trace asked for over its arrivals and what the server streamed over the same window, against
    the arrival rate (the measured line falls below the asked one where the server stops keeping up). Right: p95
    TTFT and end-to-end latency. The knee (where queues start to grow) is marked on both."""
    # one panel above the other: side by side, the right panel's axis title sat on the left panel at 800 px
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.2, subplot_titles=["Streamed vs asked", "p95 latency"])
    x = table["rate_per_s"]

    for column, name, colour, says, style in (
        ("asked_tokens_per_s", "asked during the arrivals", "blue_grey", "the trace asked", dict(dash="dash")),
        ("streamed_tokens_per_s", "streamed in the same window", "ink", "streamed during the arrivals", dict(width=3)),
        (
            "throughput_tokens_per_s",
            "whole run (to the last token)",
            "slate",
            "first request to last token",
            dict(dash="dot"),
        ),
    ):
        says = hover(f"λ %{{x:g}}/s: %{{y:.0f}} tokens/s, {says}")
        add_line(
            fig, x, table[column], name, PALETTE[colour], "lines+markers", row=1, col=1, hovertemplate=says, **style
        )
    for column, name, colour in (
        ("ttft_p95_ms", "p95 TTFT", PREFILL_COLOUR),
        ("e2e_p95_ms", "p95 end to end", DECODE_COLOUR),
    ):
        add_line(fig, x, table[column], name, colour, "lines+markers", width=3, row=2, col=1)
    if knee is not None:
        knee_rate = float(x.iloc[knee])
        for row in (1, 2):
            fig.add_vline(x=knee_rate, line=dict(color=PALETTE["red"], dash="dot"), row=row, col=1)
        fig.add_annotation(
            x=math.log10(knee_rate),  # annotations on a log axis take log10 of the position (lines do not)
            y=1.0,
            yref="y2 domain",
            xref="x2",
            text="knee: queues grow ",
            showarrow=False,
            yanchor="top",
            xanchor="right",
            font=dict(color=PALETTE["red"]),
        )
    fig.update_xaxes(title="arrival rate λ (requests/s)", type="log", **log_ticks(x))
    fig.update_yaxes(title="tokens/s", rangemode="tozero", row=1, col=1)
    latencies = table[["ttft_p95_ms", "e2e_p95_ms"]].to_numpy()
    fig.update_yaxes(title="ms (log scale)", type="log", **log_ticks(latencies), row=2, col=1)
    return legend_below(base_layout(fig, "", presenter, height=640), y=-0.12, t=40, b=20)


def roofline_figure(roof: Roof, points: list[PassCost], presenter: bool = False) -> go.Figure:
    """Log-log roofline: attainable FLOP/s against arithmetic intensity (FLOPs per byte), the ridge marked, and
    each pass where the roofline puts it (on the roof)."""
    intensities = [p.intensity for p in points] + [roof.ridge_intensity]
    low, high = min(intensities) / 4, max(intensities) * 4
    xs = np.geomspace(low, high, 200)
    fig = go.Figure()
    roof_line = dict(color=PALETTE["ink"], width=3)
    ys = [roof.attainable_flops(x) / 1e9 for x in xs]
    fig.add_scatter(x=xs, y=ys, mode="lines", name="roof of this machine", line=roof_line, hoverinfo="skip")
    fig.add_vline(x=roof.ridge_intensity, line=dict(color=PALETTE["grey"], dash="dot"))
    ridge = f"ridge: {roof.ridge_intensity:.1f} FLOP/byte"
    fig.add_annotation(
        x=math.log10(roof.ridge_intensity), y=1.0, yref="paper", showarrow=False, yanchor="bottom", text=ridge
    )
    # Each pass is a marker with its batch size (decode) or "P" (prefill) written inside: text beside the markers
    # overlapped wherever two passes sat close (decode at batch 8 and prefill on a machine with a low ridge).
    for prefill, colour in ((True, PREFILL_COLOUR), (False, DECODE_COLOUR)):
        chosen = [p for p in points if p.name.startswith("prefill") == prefill]
        fig.add_scatter(
            x=[p.intensity for p in chosen],
            y=[roof.attainable_flops(p.intensity) / 1e9 for p in chosen],
            mode="markers+text",
            name=chosen[0].name if prefill else "decode, batch B (B in the marker)",
            text=["P" if prefill else str(p.tokens) for p in chosen],
            textfont=dict(color="white"),
            marker=dict(color=colour, size=30 if presenter else 22, line=dict(color="white", width=1)),
            customdata=[[p.name, roof.bound(p)] for p in chosen],
            hovertemplate=hover("%{customdata[0]}: %{x:.2f} FLOP/byte, roof %{y:.1f} GFLOP/s (%{customdata[1]}-bound)"),
        )
    # legend under the plot, where the ridge label above it cannot cover it
    fig.update_xaxes(type="log", **log_ticks([low, high]), title="FLOPs per byte moved (log)")
    fig.update_yaxes(type="log", **log_ticks([roof.attainable_flops(x) / 1e9 for x in (low, high)]), title="GFLOP/s")
    return legend_below(base_layout(fig, "Roofline of this machine", presenter, height=440), y=-0.2)


def predicted_vs_measured_figure(batches: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Decode tokens/s at each batch size: what the roofline predicts and what the engine did."""
    fig = go.Figure()
    x = [str(b) for b in batches["batch"]]
    for column, name, colour in (
        ("predicted_tokens_per_s", "roofline predicts", PREDICTED_COLOUR),
        ("measured_tokens_per_s", "measured", MEASURED_COLOUR),
    ):
        values = batches[column]
        fig.add_bar(
            x=x, y=values, name=name, marker_color=colour, text=[f"{v:.0f}" for v in values], textposition="outside"
        )
    fig.update_layout(barmode="group")
    fig.update_xaxes(title="requests decoding together (batch)", type="category")
    fig.update_yaxes(title="tokens/s, all requests", rangemode="tozero")
    # two lines: one line was cut at 800 px in presenter mode
    title = "Decode at batch B<br>predicted vs measured"
    return legend_below(base_layout(fig, title, presenter, height=380), y=-0.25, t=80)
