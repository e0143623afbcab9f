"""Same luck's figures and escaped HTML, from `shared_draws`' results."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from inference.core.tokens import html_token_text, prompt_tail, readable_tokens
from inference.lessons.style import (
    CHOSEN_COLOUR,
    FINAL_COLOUR,
    PALETTE,
    RAW_COLOUR,
    add_hbar,
    add_line,
    base_layout,
    hover,
    label,
    legend_below,
    repr_token,
)

A_COLOUR, B_COLOUR = FINAL_COLOUR, PALETTE["orange"]
TOP_N = 10
PROMPT_TAIL = 6  # prompt tokens a text box shows (a chat template took five lines of it), the rest counted


def parting_html(
    tokenizer, prompt_ids: list[int], ids_a: list[int], ids_b: list[int], step: int | None, side: str
) -> str:
    """One run's text: the prompt's tail in grey, the shared tokens, then this run's own, the first boxed."""
    own = ids_a if side == "A" else ids_b
    colour = "#dbe7fb" if side == "A" else "#fde3c8"
    earlier, kept = prompt_tail(prompt_ids, PROMPT_TAIL)
    prompt = (f"{earlier} … " if earlier else "") + html_token_text(tokenizer.decode(kept))
    if step is None:
        shared, rest = own, []
    else:
        shared, rest = own[:step], own[step:]
    parts = [f'<span style="color:#666">{prompt}</span>', html_token_text(tokenizer.decode(shared))]
    if rest:
        first = html_token_text(tokenizer.decode(rest[:1]))
        parts.append(f'<span style="background:{colour};outline:2px solid #c0392b;border-radius:3px">{first}</span>')
        parts.append(f'<span style="background:{colour}">{html_token_text(tokenizer.decode(rest[1:]))}</span>')
    return (
        '<div style="font-size:1.05rem;line-height:1.6;white-space:normal;border:1px solid #ddd;'
        f'border-radius:6px;padding:0.6rem 0.8rem">{"".join(parts)}</div>'
    )


def _top_union(view_a, view_b, n: int = TOP_N) -> list[int]:
    ids = []
    for view in (view_a, view_b):
        for i in range(min(view.sorted_prefix, n)):
            if view.final[i] > 0 or i < 3:
                ids.append(int(view.order[i]))
        ids.append(view.chosen_id)
    return list(dict.fromkeys(ids))[: n + 4]


def _prob_of(view, token_id: int) -> float:
    where = (view.order[: view.sorted_prefix] == token_id).nonzero()
    return float(view.final[int(where[0, 0])]) if len(where) else 0.0


def _add_final_bars(fig: go.Figure, view, ids: list[int], names: list[str], colour: str, text, **trace) -> None:
    """`view`'s final probability of each of `ids` as bars, the first on top; `text(p)` labels a bar."""
    values = [_prob_of(view, t) for t in ids][::-1]  # Plotly draws the first category at the bottom
    add_hbar(
        fig, names[::-1], values, marker_color=colour, text=[text(p) for p in values], textposition="outside", **trace
    )


def _percent_or_zero(p: float) -> str:
    return f"{p:.1%}" if p >= 0.001 else "0"


def _percent_or_cut(p: float) -> str:
    return f"{p:.1%}" if p > 0 else "✂"  # the order lesson: that order removed the token


def _by_token_layout(fig: go.Figure, title: str, x_title: str, tokens: int, presenter: bool) -> go.Figure:
    """One group of bars a token, room right of a 100% bar for its label, the legend a fixed ~80 px under the plot."""
    fig.update_layout(barmode="group", bargap=0.25)
    fig.update_xaxes(tickformat=".0%", title=x_title, range=[0, 1.16], tickvals=[0, 0.2, 0.4, 0.6, 0.8, 1])
    fig.update_yaxes(automargin=True)
    height = 170 + 34 * tokens + (40 if presenter else 0)
    plot_height = height - 150  # base_layout's margins and the legend's room
    return legend_below(base_layout(fig, title, presenter, height=height), y=-(90 if presenter else 70) / plot_height)


def final_distributions(parting, tokenizer, presenter: bool = False) -> go.Figure:
    """Both final distributions where the runs part, A's top first; each run's chosen token outlined."""
    ids = _top_union(parting.view_a, parting.view_b)
    names = [label(repr_token(t)) for t in readable_tokens(tokenizer, ids)]
    fig = go.Figure()
    for side, view, colour in (("A", parting.view_a, A_COLOUR), ("B", parting.view_b, B_COLOUR)):
        chosen = [t == view.chosen_id for t in ids[::-1]]
        outline = dict(color=["#000" if c else colour for c in chosen], width=[3 if c else 0 for c in chosen])
        trace = dict(name=f"{side} final", marker_line=outline, hovertemplate=hover("%{y}", side + " %{x:.2%}"))
        _add_final_bars(fig, view, ids, names, colour, _percent_or_zero, **trace)
    title = f"Step {parting.step}: both final distributions"
    return _by_token_layout(fig, title, "probability (0 = removed)", len(ids), presenter)


def shared_u_cdfs(parting, tokenizer, presenter: bool = False) -> go.Figure:
    """Each run's cumulative curve in its own order with the one u both drew, one above the other (side by side,
    20 rank labels a panel overlapped at 800 px)."""
    fig = make_subplots(
        rows=2,
        cols=1,
        vertical_spacing=0.3,
        subplot_titles=[f"A chose {label(parting.token_a)}", f"B chose {label(parting.token_b)}"],
    )
    sides = (("A", parting.view_a, A_COLOUR), ("B", parting.view_b, B_COLOUR))
    for col, (side, view, colour) in enumerate(sides, start=1):
        cumulative = view.cumulative_final.numpy()
        n = int(min(view.sorted_prefix, max(8, view.chosen_rank + 3, int(np.searchsorted(cumulative, 0.97)) + 1), 20))
        names = [
            f"{i + 1}. {label(repr_token(t))}"
            for i, t in enumerate(readable_tokens(tokenizer, view.order[:n].tolist()))
        ]
        fig.add_scatter(
            x=names,
            y=cumulative[:n],
            mode="lines+markers",
            line=dict(color=colour, width=3, shape="hv"),
            name=f"{side}'s cumulative curve",  # named for the chart's text: the panels' titles are not the traces'
            showlegend=False,
            row=col,
            col=1,
            hovertemplate="%{x}<br>cumulative %{y:.3f}<extra></extra>",
        )
        fig.add_hline(y=parting.u, line=dict(color=PALETTE["red"], dash="dash", width=2), row=col, col=1)
        if view.chosen_rank < n:
            fig.add_scatter(
                x=[names[view.chosen_rank]],
                y=[parting.u],
                mode="markers",
                name=f"u = {parting.u:.3f} on {side}'s curve",
                showlegend=False,
                marker=dict(color=CHOSEN_COLOUR, size=15, symbol="diamond"),
                row=col,
                col=1,
                hovertemplate=f"u = {parting.u:.3f} lands here<extra></extra>",
            )
        fig.update_xaxes(tickangle=-90, row=col, col=1)
        fig.update_yaxes(range=[0, 1.03], title="cumulative", row=col, col=1)
        fig.add_annotation(
            text=f"shared u = {parting.u:.3f}",
            xref="x domain" if col == 1 else "x2 domain",
            yref="y" if col == 1 else "y2",
            x=1.0,
            y=parting.u,
            showarrow=False,
            yshift=-14,
            xanchor="right",
            font=dict(color=PALETTE["red"]),
        )
    return base_layout(fig, "The same u on both cumulative curves", presenter, height=900 if presenter else 760)


def order_lesson_figure(lesson, tokenizer, presenter: bool = False) -> go.Figure:
    """One step's final distribution under the transformers order and under llama.cpp's, token by token."""
    views = {"transformers order": lesson.transformers, "llama.cpp order": lesson.llama_cpp}
    # the top tokens, then those around where the stricter order stops keeping them (both orders rank alike)
    wider = max(views.values(), key=lambda v: v.sorted_prefix)
    edge = min(v.kept[v.final_stage] for v in views.values())
    ids = list(dict.fromkeys(wider.order[:8].tolist() + wider.order[max(edge - 2, 8) : edge + 3].tolist()))
    names = [label(repr_token(t)) for t in readable_tokens(tokenizer, ids)]
    fig = go.Figure()
    tip = hover("%{y}", "%{x:.2%}")
    for (name, view), colour in zip(views.items(), (A_COLOUR, B_COLOUR)):
        legend = f"{name}: {view.kept[view.final_stage]:,} kept"
        _add_final_bars(fig, view, ids, names, colour, _percent_or_cut, name=legend, hovertemplate=tip)
    title = f"Step {lesson.step}: the same settings in two orders"
    return _by_token_layout(fig, title, "final probability (✂ = removed)", len(ids), presenter)


def mirostat_figure(records, side: str, presenter: bool = False) -> go.Figure:
    """Mirostat v2 step by step: each chosen token's surprise, the mu it cut at, and tau."""
    steps = [r.index for r in records]
    surprise = [-np.log2(r.prob) for r in records]
    fig = go.Figure()
    surprise_name = "observed surprise −log₂ p (bits)"
    add_line(fig, steps, surprise, surprise_name, RAW_COLOUR, "markers+lines", marker=dict(color=FINAL_COLOUR, size=7))
    mu = [r.mirostat_mu for r in records]
    add_line(fig, steps, mu, "μ (cut: surprise above it removed)", CHOSEN_COLOUR, width=3, shape="hv")
    tau = records[0].settings.mirostat_tau if records else 0
    fig.add_hline(
        y=tau,
        line=dict(color=PALETTE["red"], dash="dash"),
        annotation_text=f"τ = {tau:g}",
        annotation_position="top left",
    )
    fig.update_xaxes(title="step")
    fig.update_yaxes(title="bits", rangemode="tozero")
    fig = base_layout(fig, f"{side}: mirostat v2 surprise vs τ", presenter, height=380)
    return legend_below(fig)


def interval_figure(summary, presenter: bool = False) -> go.Figure:
    """Each statistic's mean for A and B with its bootstrap 95% interval, one panel per statistic."""
    titles = [label(t).replace(" (", "<br>(").replace(" under float32", "<br>under float32") for t in summary["label"]]
    # presenter mode: one panel a row (side by side they ran into each other at 800 px)
    rows, cols = (len(summary), 1) if presenter else (1, len(summary))
    fig = make_subplots(
        rows=rows, cols=cols, subplot_titles=titles, horizontal_spacing=0.08, vertical_spacing=0.5 / max(1, rows)
    )
    for col, row in enumerate(summary.itertuples(), start=1):
        place = dict(row=col, col=1) if presenter else dict(row=1, col=col)
        for side, colour in (("A", A_COLOUR), ("B", B_COLOUR)):
            mean, low, high = (getattr(row, f"{k}_{side.lower()}") for k in ("mean", "low", "high"))
            fig.add_scatter(
                x=[side],
                y=[mean],
                mode="markers",
                marker=dict(color=colour, size=13),
                error_y=dict(
                    type="data",
                    symmetric=False,
                    array=[high - mean],
                    arrayminus=[mean - low],
                    thickness=2.5,
                    width=10,
                    color=colour,
                ),
                showlegend=False,
                **place,
                hovertemplate=f"{side}: %{{y:.4g}} (95% interval {low:.4g} to {high:.4g})<extra></extra>",
            )
    fig.update_annotations(font_size=12 if not presenter else 18)
    title = "Mean per run, 95% intervals" if presenter else "Mean per run, with bootstrap 95% intervals"
    fig = base_layout(fig, title, presenter, height=330 * rows if presenter else 420)
    return fig.update_layout(margin=dict(t=110))


def distributions_figure(stats_a, stats_b, metric: str, title: str, presenter: bool = False) -> go.Figure:
    """One statistic's spread over the runs, A against B."""
    fig = go.Figure()
    fig.add_histogram(x=stats_a[metric], name="A", marker_color=A_COLOUR, opacity=0.65, nbinsx=20)
    fig.add_histogram(x=stats_b[metric], name="B", marker_color=B_COLOUR, opacity=0.65, nbinsx=20)
    fig.update_layout(barmode="overlay")
    fig.update_yaxes(title="runs")  # no x title: the chart's title names the statistic (it sat on the legend)
    heading = label(title).replace(" (", "<br>(") if presenter else label(title)  # cut at 800 px on one line
    fig = base_layout(fig, heading, presenter, height=360 if presenter else 300)
    return legend_below(fig, y=-0.2 if presenter else -0.15)
