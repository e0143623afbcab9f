"""Class mode's two charts: the coming step's top tokens, and the class's guesses beside the model's
probabilities once the draw is made. Pure functions from the published JSON state to a Figure."""

from __future__ import annotations

import plotly.graph_objects as go

from inference.lessons.classroom.session import OFFERED
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


def _bars(fig: go.Figure, names, values, name: str, colour, hover_value: str, text: list[str] | None = None) -> None:
    """One series of bars, `hover_value` beside the token on hover; `text`, when given, written outside each bar."""
    outside = {} if text is None else dict(text=text, textposition="outside")
    add_hbar(fig, names, values, name=name, marker_color=colour, hovertemplate=hover("%{y}", hover_value), **outside)


def _grouped(fig: go.Figure, x_title: str, title: str, presenter: bool, bars: int, bar_px: int, frame_px: int):
    """Both charts' bars side by side per token on a percentage axis, `bar_px` pixels per token and `frame_px` for
    the title and axis; the legend under the axis title."""
    fig.update_layout(barmode="group", bargap=0.25)
    # room right of the longest bar for its outside label (at 800 px in presenter mode "43.0%" was cut)
    longest = max((max(trace.x, default=0) for trace in fig.data), default=0) or 1
    fig.update_xaxes(tickformat=".0%", title=x_title, range=[0, longest * (1.3 if presenter else 1.15)])
    base_layout(fig, title, presenter, height=frame_px + bar_px * bars)
    if "<br>" in title:
        fig.update_layout(margin=dict(t=110 if presenter else 80))  # a two-line title ran into the first bar
    # a fixed distance in pixels under the plot, below the axis title (a fraction of the plot sat on it)
    return legend_below(fig, y=-(80 if presenter else 60) / (bar_px * bars))


def choices_chart(choices: list[dict], presenter: bool = False, title: str | None = None) -> go.Figure:
    """The coming step's most likely tokens: the model's own probability (T = 1, no filters) and the one the
    draw uses after the teacher's settings."""
    rows = list(reversed(choices))  # Plotly draws the first bar at the bottom
    names = [repr_token(label(c["label"])) for c in rows]
    raw, final = [c["raw"] for c in rows], [c["final"] for c in rows]
    fig = go.Figure()
    _bars(fig, names, raw, "model (T = 1, no filters)", RAW_COLOUR, "model: %{x:.2%}")
    text = [f"{p:.1%}" for p in final]
    _bars(
        fig, names, final, "after the settings (what the draw uses)", FINAL_COLOUR, "after the settings: %{x:.2%}", text
    )
    title = title or "What the model could write next"
    return _grouped(fig, "probability", title, presenter, bars=len(rows), bar_px=26, frame_px=80)


def reveal_chart(reveal: dict, presenter: bool = False) -> go.Figure:
    """For each offered token: the share of the class that picked it and the probability the model gave it;
    the drawn token marked."""
    rows = list(reversed(reveal["rows"]))
    chosen = [r["id"] == reveal["chosen_id"] for r in rows]
    names = [
        ("➜ " if drawn else "")
        + repr_token(label(r["label"]))
        + (f" · rank {r['rank']:,}" if r.get("rank", 0) > OFFERED else "")
        for r, drawn in zip(rows, chosen)
    ]
    shares, probs = [r["share"] for r in rows], [r["model_prob"] for r in rows]
    answers = [f"{r['answers']}" if r["answers"] else "" for r in rows]
    fig = go.Figure()
    guessed = reveal.get("guessed", True)
    if guessed:  # a draw without opened guessing has no class to show
        class_name = f"the class ({reveal['answers']} answer{'s' * (reveal['answers'] != 1)})"
        _bars(fig, names, shares, class_name, CLASS_COLOUR, "class: %{x:.0%}", answers)
    colours = [CHOSEN_COLOUR if drawn else FINAL_COLOUR for drawn in chosen]
    _bars(fig, names, probs, "the model", colours, "model: %{x:.2%}", [f"{p:.1%}" for p in probs])
    # two lines in presenter mode: at 800 px one line was cut at "…the model's pro"
    head = "The class's guesses" if guessed else "Where the draw landed"
    title = f"{head}<br>and the model's probabilities" if presenter else f"{head} and the model's probabilities"
    return _grouped(fig, "share of the class / probability", title, presenter, bars=len(rows), bar_px=30, frame_px=100)
