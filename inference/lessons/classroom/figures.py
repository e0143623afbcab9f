"""Class mode's two charts: the coming step's top tokens, and the class's guesses beside the model's
probabilities once the draw is made. Pure functions from the published JSON state to a Figure."""

from __future__ import annotations

import plotly.graph_objects as go

from inference.lessons.style import (
    CHOSEN_COLOUR,
    FINAL_COLOUR,
    RAW_COLOUR,
    add_hbar,
    base_layout,
    hover,
    label,
    legend_below,
    repr_token,
)

CLASS_COLOUR = "#2e8b57"  # green: the class, apart from the model's blues


def _grouped(fig: go.Figure, x_title: str, title: str, presenter: bool, height: int) -> None:
    """Both charts' bars side by side per token on a percentage axis."""
    fig.update_layout(barmode="group", bargap=0.25)
    # room right of the longest bar for its outside label (at 800 px in presenter mode "43.0%" was cut)
    longest = max((max(trace.x, default=0) for trace in fig.data), default=0) or 1
    fig.update_xaxes(tickformat=".0%", title=x_title, range=[0, longest * (1.3 if presenter else 1.15)])
    base_layout(fig, title, presenter, height=height)
    if "<br>" in title:
        fig.update_layout(margin=dict(t=110 if presenter else 80))  # a two-line title ran into the first bar


def choices_chart(choices: list[dict], presenter: bool = False, title: str | None = None) -> go.Figure:
    """The coming step's most likely tokens: the model's own probability (T = 1, no filters) and the one the
    draw uses after the teacher's settings."""
    rows = list(reversed(choices))  # Plotly draws the first bar at the bottom
    names = [repr_token(label(c["label"])) for c in rows]
    fig = go.Figure()
    add_hbar(
        fig,
        names,
        [c["raw"] for c in rows],
        name="model (T = 1, no filters)",
        marker_color=RAW_COLOUR,
        hovertemplate=hover("%{y}", "model: %{x:.2%}"),
    )
    add_hbar(
        fig,
        names,
        [c["final"] for c in rows],
        name="after the settings (what the draw uses)",
        marker_color=FINAL_COLOUR,
        text=[f"{c['final']:.1%}" for c in rows],
        textposition="outside",
        hovertemplate=hover("%{y}", "after the settings: %{x:.2%}"),
    )
    _grouped(fig, "probability", title or "What the model could write next", presenter, height=80 + 26 * len(rows))
    return legend_below(fig, y=-(80 if presenter else 60) / (26 * len(rows)))  # under the axis title, in pixels


def reveal_chart(reveal: dict, presenter: bool = False) -> go.Figure:
    """For each offered token: the share of the class that picked it and the probability the model gave it;
    the drawn token marked."""
    rows = list(reversed(reveal["rows"]))
    names = [("➜ " if r["id"] == reveal["chosen_id"] else "") + repr_token(label(r["label"])) for r in rows]
    fig = go.Figure()
    add_hbar(
        fig,
        names,
        [r["share"] for r in rows],
        name=f"the class ({reveal['answers']} answers)",
        marker_color=CLASS_COLOUR,
        text=[f"{r['answers']}" if r["answers"] else "" for r in rows],
        textposition="outside",
        hovertemplate=hover("%{y}", "class: %{x:.0%}"),
    )
    add_hbar(
        fig,
        names,
        [r["model_prob"] for r in rows],
        name="the model",
        marker_color=[CHOSEN_COLOUR if r["id"] == reveal["chosen_id"] else FINAL_COLOUR for r in rows],
        text=[f"{r['model_prob']:.1%}" for r in rows],
        textposition="outside",
        hovertemplate=hover("%{y}", "model: %{x:.2%}"),
    )
    # two lines in presenter mode: at 800 px one line was cut at "…the model's pro"
    title = (
        "The class's guesses<br>and the model's probabilities"
        if presenter
        else "The class's guesses and the model's probabilities"
    )
    _grouped(fig, "share of the class / probability", title, presenter, height=100 + 30 * len(rows))
    # a fixed distance in pixels under the plot, below the axis title (a fraction of the plot sat on it)
    return legend_below(fig, y=-(80 if presenter else 60) / (30 * len(rows)))
