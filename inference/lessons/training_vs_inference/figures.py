"""Figures for Training vs inference: pure functions from the lesson's results to Plotly figures."""

from __future__ import annotations

import plotly.graph_objects as go

from inference.lessons.style import (
    DECODE_COLOUR,
    FINAL_COLOUR,
    PALETTE,
    PREFILL_COLOUR,
    RAW_COLOUR,
    add_hbar,
    add_line,
    base_layout,
    hover,
    label,
    legend_below,
)
from inference.lessons.training_vs_inference.cost import Memory, StepCost
from inference.lessons.training_vs_inference.text import pct
from inference.lessons.training_vs_inference.weights import TensorChange

INFERENCE_COLOUR = PREFILL_COLOUR
TRAINING_COLOUR = DECODE_COLOUR


def distribution_figure(rows: list[tuple[str, float, float | None]], presenter: bool = False) -> go.Figure:
    """Next-token probabilities before (pale) and after training (hatched: colour is not the only signal)."""
    trained = rows[0][2] is not None
    rows = rows[::-1]  # Plotly draws the first name at the bottom
    names = [label(r[0]) for r in rows]
    fig = go.Figure()
    bars = [(1, "before training", RAW_COLOUR, "")] + ([(2, "after training", FINAL_COLOUR, "/")] if trained else [])
    for column, name, colour, pattern in bars:
        values = [r[column] for r in rows]
        others = [r[3 - column] for r in rows] if trained else [1.0] * len(rows)  # untrained: label all
        add_hbar(
            fig,
            names,
            values,
            name=name,
            marker_color=colour,
            marker_pattern=dict(shape=pattern, fillmode="overlay", fgcolor="white"),
            text=[pct(p) if p >= 0.001 or other >= 0.1 else "" for p, other in zip(values, others)],
            textposition="outside",
            hovertemplate=hover(f"%{{y}}: %{{x:.3%}} {name}"),
        )
    fig.update_layout(barmode="group", bargap=0.25, showlegend=trained)
    upper = max(max(r[1], r[2] or 0.0) for r in rows) * 1.25 + 0.02
    ticks = dict(range=[0, 1.18], tickvals=[0, 0.2, 0.4, 0.6, 0.8, 1.0]) if upper > 1 else dict(range=[0, upper])
    fig.update_xaxes(tickformat=".0%", title="probability of the next token", **ticks)
    per_row = (52 if presenter else 34) * (2 if trained else 1) * 0.75
    fig = base_layout(fig, "The next token's probabilities", presenter, height=int(110 + per_row * len(rows)))
    return legend_below(fig, y=-0.18 if len(rows) > 6 else -0.3, t=60, b=20)


def cell(name: str) -> tuple[str, str]:
    """A tensor's heat-map cell: ("layer 3", "self_attn.q_proj") for model.layers.3.self_attn.q_proj.weight."""
    parts = name.removesuffix(".weight").split(".")
    if "layers" in parts:
        at = parts.index("layers")
        return f"layer {parts[at + 1]}", ".".join(parts[at + 2 :])
    return ("embedding" if "embed" in name else "output layer" if "lm_head" in name else "final norm"), parts[-1]


def change_heatmap(changes: list[TensorChange], presenter: bool = False) -> go.Figure:
    cells = [cell(c.name) for c in changes]
    rows, kinds = list(dict.fromkeys(r for r, _ in cells)), list(dict.fromkeys(k for _, k in cells))
    grid = [[None] * len(kinds) for _ in rows]
    for (row, kind), c in zip(cells, changes):
        grid[rows.index(row)][kinds.index(kind)] = 100 * c.relative_change
    text = [["" if v is None else f"{v:.2g}" for v in row] for row in grid]
    fig = go.Figure(
        go.Heatmap(
            z=grid,
            x=kinds,
            y=rows,
            text=text,
            texttemplate="%{text}" if len(kinds) * len(rows) <= 120 else None,
            colorscale="Blues",
            colorbar=dict(title="% moved"),
            hoverongaps=False,
            hovertemplate=hover("%{y}, %{x}: moved %{z:.3g}% of its size"),
        )
    )
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(tickangle=-35, type="category")
    height = 170 + 26 * len(rows) + 8 * max(len(k) for k in kinds)
    return base_layout(fig, "How far each tensor moved (% of its size)", presenter, height=height)


def loss_figure(losses: list[float], presenter: bool = False) -> go.Figure:
    fig = go.Figure()
    add_line(
        fig,
        list(range(len(losses))),
        losses,
        "loss on the sentence",
        TRAINING_COLOUR,
        "lines+markers",
        width=3,
        hovertemplate=hover("after %{x} steps: loss %{y:.3f}"),
    )
    fig.update_xaxes(title="training steps taken", dtick=1 if len(losses) <= 12 else None)
    fig.update_yaxes(title="loss (nats per token)", rangemode="tozero")
    fig.update_layout(showlegend=False)
    return base_layout(fig, "Loss on the typed sentence", presenter, height=300)


def step_time_figure(cost: StepCost, presenter: bool = False) -> go.Figure:
    fig = go.Figure()
    names = ["inference:<br>a forward pass", "training:<br>one step"]
    medians = [cost.forward.median_ms, cost.train_step.median_ms]
    fig.add_bar(
        x=[0, 1],
        y=medians,
        width=0.5,
        marker_color=[INFERENCE_COLOUR, TRAINING_COLOUR],
        marker_pattern=dict(shape=["", "/"], fillmode="overlay", fgcolor="white"),
        text=[f"{m:,.1f} ms" for m in medians],
        textposition="outside",
        name="median",
        customdata=["a forward pass", "a training step"],
        hovertemplate=hover("%{customdata}: median %{y:,.1f} ms"),
    )
    for x, times in ((0, cost.forward.times_ms), (1, cost.train_step.times_ms)):  # each repeat as a dot beside its bar
        fig.add_scatter(
            x=[x + 0.36] * len(times),
            y=times,
            mode="markers",
            marker=dict(color=PALETTE["ink"], size=7, symbol="circle-open"),
            name="each repeat",
            showlegend=x == 0,
            hovertemplate=hover("%{y:,.1f} ms"),
        )
    fig.update_xaxes(tickvals=[0, 1], ticktext=names, range=[-0.5, 1.6], tickangle=0)
    fig.update_yaxes(title="ms", rangemode="tozero")
    fig = base_layout(fig, f"Time on {cost.tokens} tokens", presenter, height=340)
    return legend_below(fig, y=-0.3, t=60, b=20)


MEMORY_PARTS = [
    ("weights", "weights", PALETTE["blue"], ""),
    ("kv_cache", "KV cache", PALETTE["sky"], "."),
    ("gradients", "gradients", PALETTE["orange"], "/"),
    ("optimizer_moments", "AdamW's two moments", PALETTE["red"], "x"),
    ("activations", "activations kept for backward", PALETTE["sand"], "-"),
]


def memory_figure(mem: Memory, presenter: bool = False) -> go.Figure:
    fig = go.Figure()
    columns = ["inference", "training"]
    for field, name, colour, pattern in MEMORY_PARTS:
        inference = getattr(mem, field) if field in ("weights", "kv_cache") else 0
        training = 0 if field == "kv_cache" else getattr(mem, field)
        values = [inference / 2**20, training / 2**20]
        fig.add_bar(
            x=columns,
            y=values,
            name=name,
            marker_color=colour,
            marker_pattern=dict(shape=pattern, fillmode="overlay", fgcolor="white"),
            hovertemplate=hover(f"%{{x}}: {name} %{{y:,.2f}} MiB"),
        )
    fig.update_layout(barmode="stack", legend_traceorder="normal")
    lift = mem.training / 2**20 * 0.05  # the totals just above their bars
    fig.add_scatter(
        x=columns,
        y=[mem.inference / 2**20 + lift, mem.training / 2**20 + lift],
        mode="text",
        text=[f"{mem.inference / 2**20:,.1f} MiB", f"{mem.training / 2**20:,.1f} MiB"],
        textposition="top center",
        showlegend=False,
        hoverinfo="skip",
    )
    fig.update_yaxes(title="MiB", rangemode="tozero", range=[0, mem.training / 2**20 * 1.15])
    fig = base_layout(fig, "Memory each needs", presenter, height=380)
    return legend_below(fig, y=-0.15, one_per_line=True, t=60, b=20)


def break_even_figure(
    training_hours: float, request_seconds: float, break_even: float, presenter: bool = False
) -> go.Figure:
    top = max(10.0, break_even * 10)
    counts = [10**e for e in range(0, 12) if 10**e <= top] + [top]
    fig = go.Figure()
    add_line(
        fig,
        counts,
        [n * request_seconds / 3600 for n in counts],
        "inference: n requests",
        INFERENCE_COLOUR,
        "lines",
        width=3,
        hovertemplate=hover("%{x:,.0f} requests: %{y:,.3g} core-hours"),
    )
    add_line(
        fig,
        [counts[0], counts[-1]],
        [training_hours, training_hours],
        "training, once",
        TRAINING_COLOUR,
        "lines",
        width=3,
        dash="dash",
        hovertemplate=hover(f"training: {training_hours:,.2f} core-hours"),
    )
    fig.add_scatter(
        x=[break_even],
        y=[training_hours],
        mode="markers+text",
        marker=dict(size=12, color=PALETTE["ink"], symbol="diamond"),
        text=[f"{break_even:,.0f} requests"],
        textposition="top left",
        name="inference has cost as much",
        hovertemplate=hover("%{x:,.0f} requests"),
    )
    fig.update_xaxes(type="log", title="requests served", dtick=1)
    fig.update_yaxes(type="log", title="core-hours of machine time", dtick=1)
    fig = base_layout(fig, "Once vs every request", presenter, height=380)
    return legend_below(fig, y=-0.25, t=60, b=20)
