"""Figures for the Inside the engine page: pure functions from measured tables to Plotly figures."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from inference.lessons.engine_internals.chunked_prefill import StallRun
from inference.lessons.style import PALETTE, PREFILL_COLOUR, add_line, base_layout, hover, legend_below, log_ticks

MISS_COLOUR = PALETTE["slate"]  # evaluated again
HIT_COLOUR = PALETTE["blue"]  # reused from the cache
NEWCOMER_COLOUR = PALETTE["orange"]
COTENANT_COLOURS = [PALETTE["blue"], PALETTE["navy"], PALETTE["sky"], PALETTE["dark_blue"]]


def prefix_ttft_figure(table: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """One bar per request, cache off and on side by side: time to first token, labelled with the tokens reused."""
    fig = go.Figure()
    for cache_on, name, colour in ((False, "cache_prompt off", MISS_COLOUR), (True, "cache_prompt on", HIT_COLOUR)):
        rows = table[table["cache"] == cache_on]
        fig.add_bar(
            x=rows["request"],
            y=rows["ttft_ms"],
            name=name,
            marker_color=colour,
            text=[f"{c:,} reused" if c else "cold" for c in rows["cached_tokens"]],
            textposition="outside",
            customdata=rows[["cached_tokens", "evaluated_tokens", "server_prompt_ms"]],
            hovertemplate=hover(
                f"{name}, request %{{x}}: %{{y:,.0f}} ms",
                "%{customdata[0]:,} prompt tokens reused (cache_n), %{customdata[1]:,} evaluated (prompt_n)",
                "server's prefill: %{customdata[2]:,.0f} ms",
            ),
        )
    fig.update_layout(barmode="group")
    fig.update_xaxes(title="request (one after another, one slot)", dtick=1)
    fig.update_yaxes(title="time to first token (ms)", rangemode="tozero")
    prompt = int(table["prompt_tokens"].iloc[0])
    title = f"The same long prefix, {prompt:,}-token prompts<br><sup>each request asks for one token</sup>"
    return legend_below(base_layout(fig, title, presenter, height=380), y=-0.2)


def alternation_figure(table: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Settings x requests (A1, B1, A2, ...): colour = share of the prompt reused, text = time to first token.

    Cells carry the time alone and rows a short name (the parenthesis and the tokens reused are in the hover): at
    800 px, or in presenter mode, longer cells overlapped and the row names took half the chart's width."""
    table = table.assign(request=table["conversation"] + table["turn"].astype(str))
    order = list(dict.fromkeys(table.sort_values(["turn", "conversation"])["request"]))
    settings = list(dict.fromkeys(table.sort_values("order")["setting"]))
    wide = table.pivot(index="setting", columns="request", values=["cached_tokens", "prompt_tokens", "ttft_ms"])
    cached, prompt, ttft = (wide[v].loc[settings[::-1], order] for v in ("cached_tokens", "prompt_tokens", "ttft_ms"))
    share = cached / prompt
    text = [[f"{t / 1000:.2f}" for t in row] for row in ttft.values]  # seconds: four characters a cell
    details = [
        [[setting, f"{t:,.0f} ms", f"{c:,.0f}"] for t, c in zip(tr, cr)]
        for setting, tr, cr in zip(share.index, ttft.values, cached.values)
    ]
    fig = go.Figure(
        go.Heatmap(
            z=share.values.tolist(),  # a list: chart_text reads z as numbers, not Plotly's typed-array dict
            x=order,
            y=[s.split(" (")[0].replace(", ", "<br>") for s in share.index],
            text=text,
            texttemplate="%{text}",
            textfont=dict(size=13 if presenter else 12),
            customdata=details,
            zmin=0,
            zmax=1,
            colorscale=[[0, PALETTE["light_grey"]], [1, PALETTE["light_blue"]]],
            showscale=False,
            hovertemplate=hover(
                "%{customdata[0]}, %{x}: time to first token %{customdata[1]}",
                "%{customdata[2]} prompt tokens reused (%{z:.0%})",
            ),
            xgap=3,
            ygap=3,
        )
    )
    fig.update_xaxes(title="conversation and turn, in the order sent", side="bottom", tickmode="array", tickvals=order)
    title = "Two conversations taking turns<br><sup>s to first token; grey: evaluated, blue: reused</sup>"
    fig = base_layout(fig, title, presenter, height=140 + 85 * len(settings))
    if presenter:  # the row names at the projector's 20 px left the cells no room at 800 px
        fig.update_yaxes(tickfont=dict(size=15))
    return fig


def stall_timeline_figure(run: StallRun, presenter: bool = False) -> go.Figure:
    """Every co-tenant's gap before each of its tokens, against when it arrived, with the newcomer's prefill shaded."""
    gaps = run.gaps_table()
    fig = go.Figure()
    start, end = run.prefill_window_s
    fig.add_vrect(x0=start * 1000, x1=end * 1000, fillcolor=PREFILL_COLOUR, opacity=0.12, line_width=0)
    fig.add_vline(x=run.newcomer_sent_s * 1000, line=dict(color=NEWCOMER_COLOUR, dash="dot"))
    fig.add_annotation(
        x=(start + end) / 2 * 1000,
        y=1.0,
        yref="paper",
        yanchor="bottom",
        showarrow=False,
        text=f"newcomer's prefill, {run.prompt_tokens:,} tokens",
    )
    for c in range(run.cotenants):
        rows = gaps[gaps["cotenant"] == c + 1]
        add_line(
            fig,
            rows["arrival_s"] * 1000,
            rows["gap_ms"],
            f"co-tenant {c + 1}",
            COTENANT_COLOURS[c % len(COTENANT_COLOURS)],
            mode="lines+markers",
            hovertemplate=hover(f"co-tenant {c + 1}: token at %{{x:,.0f}} ms", "gap before it: %{y:,.1f} ms"),
        )
    fig.update_xaxes(title="time since the co-tenants started (ms)")
    fig.update_yaxes(title="gap before the token (ms)", type="log", **log_ticks(gaps["gap_ms"]))
    title = (
        f"-b {run.n_batch} -ub {run.n_ubatch}: {run.measured} stretched gaps per co-tenant, "
        f"{run.predicted} predicted<br><sup>dotted: the newcomer is sent; shaded: its prefill (server's time)</sup>"
    )
    return legend_below(base_layout(fig, title, presenter, height=400), y=-0.22)


def stall_trade_figure(table: pd.DataFrame, title: str, presenter: bool = False) -> go.Figure:
    """Per -b/-ub setting: the newcomer's time to first token (bars) and the co-tenants' longest gap (line); `title`
    says the trade in words compared from the runs (`text.trade_title`)."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_bar(
        x=table["setting"],
        y=table["newcomer_ttft_ms"],
        name="newcomer: time to first token",
        marker_color=NEWCOMER_COLOUR,
        text=[f"{m} stalls ({p} predicted)" for m, p in zip(table["stalls_measured"], table["stalls_predicted"])],
        textposition="inside",
        insidetextanchor="start",
        hovertemplate=hover("%{x}: newcomer's first token after %{y:,.0f} ms", "%{text}"),
    )
    add_line(
        fig,
        table["setting"],
        table["longest_gap_ms"],
        "co-tenants: longest gap between tokens",
        PALETTE["navy"],
        mode="lines+markers",
        width=3,
        secondary_y=True,
        hovertemplate=hover("%{x}: longest co-tenant gap %{y:,.0f} ms"),
    )
    fig.update_xaxes(title="server batch: logical -b, physical -ub")
    fig.update_yaxes(title="newcomer TTFT (ms)", rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title="longest co-tenant gap (ms)", rangemode="tozero", secondary_y=True, showgrid=False)
    return legend_below(base_layout(fig, f"{title}<br><sup>one run per setting</sup>", presenter, height=420), y=-0.25)


def kv_precision_figure(table: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Per cache type: bytes per token (computed exactly) and mean KL from f32 (measured), side by side."""
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("KV bytes per token", "mean KL from f32 (nats, log)"), horizontal_spacing=0.2
    )
    names = [c.replace(", flash attention", "<br>flash attn") for c in table["cache"]][::-1]
    fig.add_bar(
        y=names,
        x=table["bytes_per_token"][::-1],
        orientation="h",
        marker_color=PALETTE["sand"],
        text=[f"{b:,.0f} B" for b in table["bytes_per_token"][::-1]],
        textposition="outside",
        showlegend=False,
        hovertemplate=hover("%{y}: %{x:,.0f} bytes per token"),
        row=1,
        col=1,
    )
    kl = table["mean_kl_vs_f32"][::-1].clip(lower=1e-12)
    fig.add_bar(
        y=names,
        x=kl,
        orientation="h",
        marker_color=PALETTE["blue"],
        text=["reference" if v <= 1e-12 else f"{v:.1e}" for v in kl],
        textposition="outside",
        showlegend=False,
        hovertemplate=hover("%{y}: mean KL %{x:.2e} nats"),
        row=1,
        col=2,
    )
    fig.update_xaxes(rangemode="tozero", row=1, col=1)
    positive = table.loc[table["mean_kl_vs_f32"] > 1e-12, "mean_kl_vs_f32"]
    fig.update_xaxes(type="log", row=1, col=2, **log_ticks(positive))
    fig.update_yaxes(showticklabels=False, row=1, col=2)
    fig = base_layout(fig, "KV cache types on llama-server", presenter, height=380)
    fig.update_layout(margin=dict(t=90))
    return fig
