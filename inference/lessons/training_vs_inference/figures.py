"""Figures for Training vs inference: pure functions from the lesson's results to Plotly figures."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

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
from inference.lessons.training_vs_inference.weights import TensorChange, layer_of

INFERENCE_COLOUR = PREFILL_COLOUR
TRAINING_COLOUR = DECODE_COLOUR


def distribution_figure(rows: list[tuple[str, float, float | None]], presenter: bool = False) -> go.Figure:
    """Next-token probabilities of a few tokens (label, before, after or None), before (pale) and after training
    (deep blue, hatched: colour is not the only signal); the first row at the top."""
    names = [label(r[0]) for r in rows][::-1]
    fig = go.Figure()
    before = [r[1] for r in rows][::-1]
    add_hbar(
        fig,
        names,
        before,
        name="before training",
        marker_color=RAW_COLOUR,
        text=[f"{p:.1%}" for p in before],
        textposition="outside",
        hovertemplate=hover("%{y}: %{x:.2%} before training"),
    )
    if any(r[2] is not None for r in rows):
        after = [r[2] or 0.0 for r in rows][::-1]
        add_hbar(
            fig,
            names,
            after,
            name="after training",
            marker_color=FINAL_COLOUR,
            marker_pattern_shape="/",
            text=[f"{p:.1%}" for p in after],
            textposition="outside",
            hovertemplate=hover("%{y}: %{x:.2%} after training"),
        )
    fig.update_layout(barmode="group", bargap=0.25)
    top = max([r[1] for r in rows] + [r[2] or 0.0 for r in rows])
    fig.update_xaxes(tickformat=".0%", range=[0, min(1.0, top * 1.25 + 0.02)], title="probability of the next token")
    fig = base_layout(fig, "The next token's probabilities", presenter, height=90 + 34 * len(rows))
    return legend_below(fig, y=-0.18 if len(rows) > 6 else -0.3, t=60, b=20)


def _kind(name: str) -> str:
    """A tensor's kind within its layer: "self_attn.q_proj" for model.layers.3.self_attn.q_proj.weight."""
    parts = name.removesuffix(".weight").split(".")
    if "layers" in parts:
        return ".".join(parts[parts.index("layers") + 2 :])
    return parts[-1]


def change_heatmap(changes: list[TensorChange], presenter: bool = False) -> go.Figure:
    """Relative change ‖Δ‖/‖W‖ of every tensor: one row per layer (embedding first), one column per kind of tensor."""
    rows = list(dict.fromkeys(layer_of(c.name) for c in changes))
    kinds = list(dict.fromkeys(_kind(c.name) for c in changes))
    grid = [[None] * len(kinds) for _ in rows]
    for c in changes:
        grid[rows.index(layer_of(c.name))][kinds.index(_kind(c.name))] = 100 * c.relative_change
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
    """The loss on the typed sentence before each training step and after the last."""
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
    fig.update_yaxes(title="cross entropy (nats per token)", rangemode="tozero")
    fig.update_layout(showlegend=False)
    return base_layout(fig, "Loss on the typed sentence", presenter, height=300)


def step_time_figure(cost: StepCost, presenter: bool = False) -> go.Figure:
    """Median time of a forward pass and of a training step (bars), every timed repeat as a dot."""
    fig = go.Figure()
    names = ["forward pass (inference)", "training step"]
    medians = [cost.forward_median_ms, cost.train_median_ms]
    fig.add_bar(
        x=names,
        y=medians,
        marker_color=[INFERENCE_COLOUR, TRAINING_COLOUR],
        marker_pattern_shape=["", "/"],
        text=[f"{m:,.1f} ms" for m in medians],
        textposition="outside",
        name="median",
        hovertemplate=hover("%{x}: median %{y:,.1f} ms"),
    )
    for name, times in zip(names, (cost.forward_ms, cost.train_step_ms)):
        fig.add_scatter(
            x=[name] * len(times),
            y=times,
            mode="markers",
            marker=dict(color=PALETTE["ink"], size=7, symbol="circle-open"),
            name="each repeat",
            showlegend=name == names[0],
            hovertemplate=hover("%{y:,.1f} ms"),
        )
    fig.update_yaxes(title="ms", rangemode="tozero")
    fig = base_layout(fig, f"One pass vs one training step on {cost.tokens} tokens", presenter, height=340)
    return legend_below(fig, y=-0.2, t=60, b=20)


MEMORY_PARTS = [
    ("weights", "weights", PALETTE["blue"], ""),
    ("kv_cache", "KV cache", PALETTE["sky"], "."),
    ("gradients", "gradients", PALETTE["orange"], "/"),
    ("optimizer_moments", "AdamW's two moments", PALETTE["red"], "x"),
    ("activations", "activations kept for backward", PALETTE["sand"], "-"),
]


def memory_figure(mem: Memory, presenter: bool = False) -> go.Figure:
    """Stacked bytes: inference (weights + KV cache) vs training (weights + gradients + moments + activations)."""
    fig = go.Figure()
    columns = ["inference", "training"]
    used = {
        "inference": {"weights", "kv_cache"},
        "training": {"weights", "gradients", "optimizer_moments", "activations"},
    }
    for field, name, colour, pattern in MEMORY_PARTS:
        values = [getattr(mem, field) / 2**20 if field in used[c] else 0.0 for c in columns]
        fig.add_bar(
            x=columns,
            y=values,
            name=name,
            marker_color=colour,
            marker_pattern_shape=pattern,
            hovertemplate=hover(f"%{{x}}: {name} %{{y:,.2f}} MiB"),
        )
    fig.update_layout(barmode="stack")
    fig.add_scatter(
        x=columns,
        y=[mem.inference / 2**20, mem.training / 2**20],
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
    """Machine time (core-hours) of n requests, against training's, on log axes; the crossing marked."""
    top = max(10.0, break_even * 10)
    counts = [10**e for e in range(0, 12) if 10**e <= top] + [top]
    fig = make_subplots()
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
