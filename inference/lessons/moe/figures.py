"""Figures for the Mixture-of-Experts page: pure functions from routing data to Plotly figures or HTML."""

from __future__ import annotations

import html
import itertools

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from inference.core.tokens import html_token_text
from inference.lessons.glossary import signed
from inference.lessons.moe.scale import DENSE_ACTIVE, DENSE_TOTAL, MOE
from inference.lessons.style import PALETTE, add_line, base_layout, hover, label, legend_below, repr_token

# One colour per expert id on every chart of the page: distinct, readable under dark text.
EXPERT_COLOURS = qualitative.Set2 + qualitative.Pastel1
NOT_KEPT_COLOUR = PALETTE["light_grey"]
UNIFORM_COLOUR = PALETTE["red"]
MODEL_COLOURS = {DENSE_ACTIVE: PALETTE["light_blue"], MOE: PALETTE["orange"], DENSE_TOTAL: PALETTE["dark_blue"]}
EARLY_COLOUR, FINAL_COLOUR = PALETTE["pale_blue"], PALETTE["blue"]


def expert_colour(expert: int) -> str:
    return EXPERT_COLOURS[expert % len(EXPERT_COLOURS)]


def _uniform(fig: go.Figure, count: int, text: str, **where) -> None:
    """The even share 1 / count, a dotted line: what a perfectly balanced router would give every expert."""
    fig.add_hline(y=1 / count, line_dash="dot", line_color=UNIFORM_COLOUR, annotation_text=text, **where)


def _chip(text: str, title: str, style: str, size: str) -> str:
    shown = html_token_text(text).replace("<br>", "") or "&nbsp;"
    return (
        f'<span class="token-chip" title="{title}" style="{style};padding:2px 3px;margin:1px;border-radius:4px;'
        f'display:inline-block;white-space:pre;font-size:{size}">{shown}</span>'
    )


def routing_chips(texts: list[str], experts, weights, pending: str | None = None, presenter: bool = False) -> str:
    """One chip per token in one layer, split in bands by the experts it went to, each as wide as that expert's
    weight (hover names them). `pending`: the last chosen token, not fed to the model yet (no routing)."""
    size = "1.6rem" if presenter else "1.05rem"
    chips = []
    for text, chosen, w in zip(texts, experts, weights):
        at = [0.0, *itertools.accumulate(w)]
        bands = ",".join(f"{expert_colour(e)} {at[i]:.1%} {at[i + 1]:.1%}" for i, e in enumerate(chosen))
        shares = ", ".join(f"expert {e}: {share:.0%}" for e, share in zip(chosen, w))
        tip = html.escape(f"{repr_token(text)} → {shares}", quote=True).replace("\n", "&#10;")
        chips.append(_chip(text, tip, f"background:linear-gradient(90deg,{bands});color:#111", size))
    if pending is not None:
        title = "chosen, fed to the model at the next step"
        chips.append(_chip(pending, title, "border:1px dashed #999;color:#555", size))
    return f'<div style="line-height:2.1">{"".join(chips)}</div>'


def expert_legend(count: int, presenter: bool = False) -> str:
    size = "1.3rem" if presenter else "0.9rem"
    items = "".join(
        f'<span style="background:{expert_colour(e)};padding:1px 8px;margin:2px;border-radius:4px;'
        f'display:inline-block;font-size:{size}">expert {e}</span>'
        for e in range(count)
    )
    return f"<div>{items}</div>"


def routing_heatmap(texts: list[str], experts, weights, probabilities, presenter: bool = False) -> go.Figure:
    """Tokens × layers, each cell coloured by the token's first-choice expert; hover: the kept experts, their weights
    and router probabilities. experts, weights [layers, tokens, k]; probabilities [layers, tokens, experts]."""
    layers, tokens, _ = experts.shape
    count = probabilities.shape[2]
    z = experts[..., 0].tolist()
    chosen_p = probabilities.gather(-1, experts).tolist()  # [layers, tokens, k]
    hover = [
        [
            f"layer {layer}, token {t} {label(repr_token(texts[t]))}<br>"
            + "<br>".join(f"expert {e}: weight {w:.2f} (router probability {p:.2f})" for e, w, p in zip(*cell))
            for t, cell in enumerate(zip(es, ws, ps))
        ]
        for layer, (es, ws, ps) in enumerate(zip(experts.tolist(), weights.tolist(), chosen_p))
    ]
    # A discrete colour scale: expert e fills [e, e + 1) / count (an expert's number is a label, not a quantity).
    scale = [[(e + edge) / count, expert_colour(e)] for e in range(count) for edge in (0, 1)]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(range(tokens)),
            y=[f"layer {i}" for i in range(layers)],
            zmin=-0.5,
            zmax=count - 0.5,
            colorscale=scale,
            text=hover,
            hovertemplate="%{text}<extra></extra>",
            xgap=1,
            ygap=1,
            colorbar=dict(tickvals=list(range(count)), ticktext=[f"expert {e}" for e in range(count)], len=0.9),
        )
    )
    # At most 20 labels (12 in presenter mode): 70 tokens' labels, one each, overlapped. Hover names every token.
    step = -(-tokens // (12 if presenter else 20))
    fig.update_xaxes(
        tickvals=list(range(0, tokens, step)),
        ticktext=[label(texts[t].strip()[:8] or "·") for t in range(0, tokens, step)],
        tickangle=-60,
        title="token (hover: both experts, weights)",
    )
    fig.update_yaxes(autorange="reversed")
    return base_layout(fig, "First-choice expert by layer", presenter, height=150 + 45 * layers)


def router_figure(probabilities: list[float], kept: list[int], weights: list[float], presenter=False) -> go.Figure:
    """Left: every expert's router probability, the kept ones coloured; right: the kept ones' renormalised weights."""
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.68, 0.32],
        horizontal_spacing=0.12,
        subplot_titles=["Every expert's probability", "Kept, renormalised"],
    )
    count = len(probabilities)
    colours = [expert_colour(e) if e in kept else NOT_KEPT_COLOUR for e in range(count)]
    fig.add_bar(
        x=[f"expert {e}" for e in range(count)],
        y=probabilities,
        marker_color=colours,
        showlegend=False,
        text=[f"{p:.0%}" for p in probabilities],
        textposition="outside",
        row=1,
        col=1,
        hovertemplate="%{x}: probability %{y:.3f}<extra></extra>",
    )
    _uniform(fig, count, f"uniform {1 / count:.0%}", row=1, col=1, annotation_position="top left")
    for e, w in zip(kept, weights):
        fig.add_bar(
            x=["mixture"],
            y=[w],
            marker_color=expert_colour(e),
            name=f"expert {e}",
            row=1,
            col=2,
            text=[f"expert {e}<br>{w:.0%}"],
            textposition="inside",
            insidetextanchor="middle",
            hovertemplate=f"expert {e}: weight {w:.3f} (probability {probabilities[e]:.3f})<extra></extra>",
        )
    fig.update_layout(barmode="stack", showlegend=False)
    fig.update_yaxes(range=[0, max(probabilities) * 1.25 + 0.02], tickformat=".0%", row=1, col=1)
    fig.update_yaxes(range=[0, 1], tickformat=".0%", row=1, col=2)
    return base_layout(fig, "", presenter, height=380)


def mixture_figure(mix, presenter: bool = False, dims: int = 24) -> go.Figure:
    """The first `dims` numbers of each kept expert's weighted output (bars) and their sum (`experts.Mixture`)."""
    experts, weights, outputs, mixture = mix.experts, mix.weights, mix.outputs, mix.mixture
    fig = go.Figure()
    x = list(range(dims))
    for e, w, out in zip(experts, weights, outputs):
        fig.add_bar(x=x, y=(w * out[:dims]).tolist(), name=f"{w:.2f} × expert {e}", marker_color=expert_colour(e))
    fig.add_scatter(
        x=x,
        y=mixture[:dims].tolist(),
        mode="markers",
        name="sum: what the layer adds",
        marker=dict(color=PALETTE["ink"], size=9, symbol="diamond"),
    )
    fig.update_layout(barmode="relative")
    fig.update_xaxes(title=f"hidden dimension (first {dims} of {len(mixture)})")
    fig = base_layout(fig, "Weighted expert outputs and their sum", presenter, height=360)
    return legend_below(fig, y=-0.25)


def load_figure(final: list[float], early, k: int, layer: int, final_label: str, presenter=False) -> go.Figure:
    """One layer: each expert's share of the picks, and early in training (`early`: the log's first row or None)."""
    count = len(final)
    x = [f"expert {e}" for e in range(count)]
    fig = go.Figure()
    if early is not None:
        name, shares = f"step {early['step']:,} (training log)", early["fractions"][layer]
        fig.add_bar(x=x, y=shares, name=name, marker_color=EARLY_COLOUR, hovertemplate=hover("%{x}: %{y:.1%}"))
    fig.add_bar(
        x=x,
        y=final,
        name=final_label,
        marker_color=[expert_colour(e) for e in range(count)],
        text=[f"{f:.0%}" for f in final],
        textposition="outside",
        hovertemplate="%{x}: %{y:.1%}<extra></extra>",
    )
    _uniform(fig, count, f"uniform share {1 / count:.1%}", annotation_position="top right")
    top = max(max(final), max(early["fractions"][layer]) if early else 0)
    fig.update_yaxes(tickformat=".0%", range=[0, top * 1.25], title="share of the picks")
    fig = base_layout(fig, f"Layer {layer}: share of the (token, slot) picks, {k} per token", presenter, height=380)
    return legend_below(fig, y=-0.15)


def balance_over_training(load_log: list[dict], presenter: bool = False) -> go.Figure:
    """At every evaluation: the busiest and the idlest expert's share, over all layers."""
    steps = [row["step"] for row in load_log]
    busiest = [max(max(layer) for layer in row["fractions"]) for row in load_log]
    idlest = [min(min(layer) for layer in row["fractions"]) for row in load_log]
    count = len(load_log[0]["fractions"][0])
    fig = go.Figure()
    for shares, name, colour in ((busiest, "busiest", PALETTE["orange"]), (idlest, "idlest", PALETTE["blue"])):
        add_line(fig, steps, shares, f"{name} expert (any layer)", colour, "lines+markers", width=3)
    _uniform(fig, count, "uniform")
    fig.update_yaxes(tickformat=".0%", rangemode="tozero", title="share of the picks")
    fig.update_xaxes(title="training step")
    fig = base_layout(fig, "How even the load was during training", presenter, height=340)
    return legend_below(fig, y=-0.3)


def _bars_per_model(table: pd.DataFrame, panels: list, colours: list[str], columns: int, spacing: float) -> go.Figure:
    """One panel per (column, title, scale) of `panels`, `columns` a row, one bar per model (`table["model"]`),
    labelled over the bar (bits per byte to three decimals, whole numbers from 100 up)."""
    fig = make_subplots(
        rows=-(-len(panels) // columns),
        cols=columns,
        horizontal_spacing=0.1,
        vertical_spacing=spacing,
        subplot_titles=[title for _, title, _ in panels],
    )
    for i, (column, _, scale) in enumerate(panels):
        values, (row, col) = table[column] * scale, divmod(i, columns)
        digits = [3 if column == "bits_per_byte" else 0 if v >= 100 else 1 if scale == 1 else 2 for v in values]
        fig.add_bar(
            x=table["model"],
            y=values,
            marker_color=colours,
            text=[f"{v:,.{d}f}" for v, d in zip(values, digits)],
            textposition="outside",
            showlegend=False,
            row=row + 1,
            col=col + 1,
            hovertemplate=hover("%{x}: %{y:,.3f}"),
        )
        fig.update_yaxes(range=[0, float(values.max()) * 1.3], row=row + 1, col=col + 1)
    return fig


def sparsity_figure(rows: pd.DataFrame, quality_title: str, presenter: bool = False) -> go.Figure:
    """Three panels, one bar per model (columns: model, total, active, bits_per_byte): what it holds, what a token
    uses, its quality (`quality_title` says which text). Decode speed is measured on the page, not stored."""
    panels = [
        ("total", "Parameters held (M)", 1e-6),
        ("active", "Parameters a token uses (M)", 1e-6),
        ("bits_per_byte", quality_title.split(" (")[0] if presenter else quality_title, 1),  # cut at 800 px
    ]
    colours = [PALETTE["orange"] if i == 0 else PALETTE["dark_blue"] for i in range(len(rows))]
    # The model names under each bar are long: one panel a row in presenter mode, three a row otherwise.
    columns = 1 if presenter else 3
    spacing = 0.2 if presenter else 0.12  # room for the slanted model names above the next panel's title
    fig = _bars_per_model(rows, panels, colours, columns, spacing)
    return base_layout(fig, "", presenter, height=(430 if presenter else 370) * (len(panels) // columns))


def experiments_figure(experiments: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Change in validation bits per byte against the model as trained, per routing experiment."""
    base = experiments["bits_per_byte"].iloc[0]
    change = experiments["bits_per_byte"] - base
    fig = go.Figure(
        go.Bar(
            x=experiments["name"],
            y=change,
            marker_color=[PALETTE["slate"] if c == 0 else PALETTE["red"] if c > 0 else PALETTE["blue"] for c in change],
            text=[signed(c, 3) for c in change],
            textposition="outside",
            customdata=[signed(c, 4) for c in change],  # Plotly's "%{y:+.4f}" prints -0.0000
            hovertemplate="%{x}: %{customdata} bits/byte<extra></extra>",
        )
    )
    fig.update_yaxes(
        title="bits/byte vs as trained", range=[min(0, float(change.min())) * 1.3, max(0.01, float(change.max())) * 1.3]
    )
    return base_layout(fig, "Quality cost of each routing change", presenter, height=360)


def moe_figure(moe: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Four panels, one bar per model: weights held, prefill, decode alone, decode in a batch."""
    batch = int(moe["batch"].iloc[0])
    panels = [
        ("weight_bytes", "Weights held (MB)", 1e-6),
        ("prefill_ms", "Prefill: ms for the prompt", 1),
        ("decode_ms_per_token", "Decode, 1 sequence: ms per token", 1),
        ("batch_ms_per_pass", f"Decode, {batch} sequences: ms per pass", 1),
    ]
    colours = [MODEL_COLOURS[m] for m in moe["model"]]
    # presenter mode: one panel a row (two a row, projector-sized panel titles ran into each other at 800 px)
    fig = _bars_per_model(moe, panels, colours, 1 if presenter else 2, 0.09 if presenter else 0.2)
    return base_layout(fig, "", presenter, height=1000 if presenter else 620)
