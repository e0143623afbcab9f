"""The constrained-decoding page's figures and the text coloured by Z_t: pure functions, data -> Figure / HTML."""

from __future__ import annotations

import html

import plotly.graph_objects as go
import torch

from inference.core.tokens import counted_runs, readable_token, readable_tokens
from inference.lessons.glossary import plural
from inference.lessons.style import (
    CHIP_CSS,
    CHOSEN_COLOUR,
    FINAL_COLOUR,
    PALETTE,
    REMOVED_COLOUR,
    base_layout,
    chip_text,
    decade_ticks,
    hover,
    label,
    legend_below,
    probability_colour,
    probability_legend,
    probability_text_colour,
    repr_token,
    tick_step,
)


def text_by_fight(tokenizer, records, steps) -> str:
    """Generated tokens as chips coloured by Z_t (the model's own mass on what the format allowed):
    deep blue where the format asked what the model wanted anyway, pale red where it forced it."""
    parts = [CHIP_CSS, '<div class="token-box">']
    for record, step in zip(records, steps):
        tip = html.escape(
            f"step {step.index}: {plural(step.allowed, 'token')} allowed, Z = {step.allowed_mass:.2%}", quote=True
        )
        colour, text_colour = probability_colour(step.allowed_mass), probability_text_colour(step.allowed_mass)
        shown = (
            chip_text(record.token_text)
            if record.token_text
            else html.escape(readable_token(tokenizer, record.token_id))
        )
        parts.append(
            f'<span class="token-chip" tabindex="0" title="{tip}" style="background:{colour};color:{text_colour}">'
            f"{shown}</span>"
        )
    parts.append("</div>")
    legend = probability_legend((0.001, 0.1, 0.5, 0.99))
    parts.append(
        f'<div class="token-legend">Chip colour = Z<sub>t</sub>, the model\'s mass on the allowed tokens: {legend}</div>'
    )
    return "".join(parts)


def step_bars(tokenizer, logits: torch.Tensor, allowed: torch.Tensor, chosen: int, presenter: bool, top_n: int = 12):
    """One step: the model's most likely tokens (raw, T = 1) and the most likely allowed ones, each bar
    coloured by whether the format allowed it, the drawn token marked."""
    probs = logits.double().softmax(-1)
    wanted = probs.topk(top_n).indices.tolist()
    allowed_ids = allowed.nonzero().squeeze(-1)
    best_allowed = allowed_ids[probs[allowed_ids].argsort(descending=True)[:top_n]].tolist()
    ids = list(dict.fromkeys(wanted + best_allowed + [chosen]))
    ids.sort(key=lambda t: -float(probs[t]))
    names = [label(repr_token(counted_runs(t))) for t in readable_tokens(tokenizer, ids)]
    colours = [CHOSEN_COLOUR if t == chosen else FINAL_COLOUR if bool(allowed[t]) else REMOVED_COLOUR for t in ids]
    status = ["drawn" if t == chosen else "allowed" if bool(allowed[t]) else "removed by the mask" for t in ids]
    values = [float(probs[t]) for t in ids]
    fig = go.Figure(
        go.Bar(
            x=values[::-1],
            y=[f"{n} " for n in names[::-1]],
            orientation="h",
            marker_color=colours[::-1],
            text=[f"{v:.2%}" for v in values[::-1]],
            textposition="outside",
            customdata=status[::-1],
            hovertemplate=hover("%{y}", "model: %{x:.3%}", "%{customdata}"),
        )
    )
    # two lines: on one, at 800 px in presenter mode, it spilled past the chart beside long token labels
    fig.update_xaxes(title="the model's probability<br>(T = 1, before the mask)", tickformat=".0%")
    fig.update_yaxes(type="category")
    base_layout(fig, "The model's favourites and the allowed ones", presenter, 90 + 24 * len(ids))
    fig.update_layout(showlegend=False, margin=dict(r=60))
    return fig


def fight_over_run(steps, presenter: bool):
    """Z_t per step on a log axis, and how many tokens the format allowed."""
    x = [s.index for s in steps]
    masses = [max(s.allowed_mass, 1e-12) for s in steps]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=x,
            y=masses,
            mode="lines+markers",
            name="Z_t: the model's mass on the allowed tokens",
            line_color=FINAL_COLOUR,
            customdata=[f"{plural(s.allowed, 'token')} allowed" for s in steps],  # "1 token", never "1 tokens"
            hovertemplate=hover("step %{x}", "Z = %{y:.3g}", "%{customdata}"),
        )
    )
    fig.update_yaxes(title="Z_t (log scale)", exponentformat="power", **decade_ticks(masses))
    fig.update_xaxes(title="step", dtick=tick_step(len(x), presenter), range=[-0.5, max(x) + 0.5])
    base_layout(fig, "How hard the format fights the model, step by step", presenter, 320)
    return legend_below(fig, y=-0.3, b=90)


def cost_per_step(steps, records, presenter: bool):
    """Per step: the mask's time next to the forward pass's, both measured."""
    x = [s.index for s in steps]
    fig = go.Figure()
    forward_us, mask_us = [r.forward_ms * 1000 for r in records], [s.mask_us for s in steps]
    fig.add_trace(go.Bar(x=x, y=forward_us, name="forward pass", marker_color=PALETTE["pale_blue"]))
    fig.add_trace(go.Bar(x=x, y=mask_us, name="computing the mask", marker_color=CHOSEN_COLOUR))
    fig.update_layout(barmode="group")
    fig.update_yaxes(title="µs (log scale)", **decade_ticks([v for v in forward_us + mask_us if v > 0] or [1]))
    fig.update_xaxes(title="step", dtick=tick_step(len(x), presenter))
    base_layout(fig, "Time per step: the mask beside the forward pass", presenter, 320)
    return legend_below(fig, y=-0.3, b=90)


def strategy_bars(cost, presenter: bool):
    """Median µs per step of the two strategies, measured on the run's own states."""
    names = ["mask the whole vocabulary", "sample first, check, resample if invalid"]
    values = [cost.mask_all_us_p50, cost.sample_first_us_p50]
    fig = go.Figure(
        go.Bar(
            x=values,
            y=names,
            orientation="h",
            marker_color=[FINAL_COLOUR, CHOSEN_COLOUR],
            text=[f"{v:,.0f} µs" for v in values],
            textposition="outside",
            hovertemplate=hover("%{y}", "%{x:,.0f} µs per step (median)"),
        )
    )
    fig.update_xaxes(title="µs per step, median (mask and draw)")
    base_layout(fig, "Two ways to apply the format", presenter, 200)
    fig.update_layout(showlegend=False, margin=dict(r=80))
    return fig
