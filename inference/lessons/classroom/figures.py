"""Class mode's two charts from the published JSON state: the coming step's top tokens, and the class's guesses
beside the model's probabilities once the draw is made."""

from __future__ import annotations

import plotly.graph_objects as go

from inference.lessons.classroom.teacher import OFFERED
from inference.lessons.style import CHOSEN_COLOUR, FINAL_COLOUR, RAW_COLOUR, base_layout, hover, label, legend_below
from inference.lessons.style import repr_token as quoted

CLASS_COLOUR = "#2e8b57"  # green: the class, apart from the model's blues


def _bars(fig: go.Figure, names, series, x_title: str, title: str, presenter: bool, bar_px: int, frame_px: int):
    """Grouped horizontal bars per token (`series`: name, values, colour, hover, outside text) on a percentage
    axis, `bar_px` pixels per token and `frame_px` for the title and axis; the legend under the axis title."""
    for name, values, colour, hover_value, text in series:
        fig.add_bar(y=names, x=values, orientation="h", name=name, marker_color=colour, text=text,
                    textposition="outside", hovertemplate=hover("%{y}", hover_value))  # fmt: skip
    longest = max((max(values, default=0) for _, values, *_ in series), default=0) or 1
    # room right of the longest bar for its label (at 800 px in presenter mode "43.0%" was cut)
    fig.update_layout(barmode="group", bargap=0.25)
    fig.update_xaxes(tickformat=".0%", title=x_title, range=[0, longest * (1.3 if presenter else 1.15)])
    base_layout(fig, title, presenter, height=frame_px + bar_px * len(names))
    if "<br>" in title:
        fig.update_layout(margin=dict(t=110 if presenter else 80))  # a two-line title ran into the first bar
    # a fixed distance in pixels under the plot, below the axis title
    return legend_below(fig, y=-(80 if presenter else 60) / (bar_px * len(names)))


def choices_chart(choices: list[dict], presenter: bool = False, title: str | None = None) -> go.Figure:
    """The coming step's top tokens: the model's own probability (T = 1, no filters) and the one the draw uses."""
    rows = choices[::-1]  # Plotly draws the first bar at the bottom
    names = [quoted(label(c["label"])) for c in rows]
    raw, final = [c["raw"] for c in rows], [c["final"] for c in rows]
    series = [
        ("model (T = 1, no filters)", raw, RAW_COLOUR, "model: %{x:.2%}", None),
        ("after the settings (what the draw uses)", final, FINAL_COLOUR, "after the settings: %{x:.2%}",
         [f"{p:.1%}" for p in final]),
    ]  # fmt: skip
    title = title or "What the model could write next"
    return _bars(go.Figure(), names, series, "probability", title, presenter, bar_px=26, frame_px=80)


def reveal_chart(reveal: dict, presenter: bool = False) -> go.Figure:
    """Per offered token the share of the class that picked it and the model's probability; the drawn one marked."""
    rows = reveal["rows"][::-1]
    chosen = [r["id"] == reveal["chosen_id"] for r in rows]
    names = [
        ("➜ " if drawn else "")
        + quoted(label(r["label"]))
        + (f" · rank {r['rank']:,}" if r.get("rank", 0) > OFFERED else "")
        for r, drawn in zip(rows, chosen)
    ]
    probs = [r["model_prob"] for r in rows]
    colours = [CHOSEN_COLOUR if drawn else FINAL_COLOUR for drawn in chosen]
    series = [("the model", probs, colours, "model: %{x:.2%}", [f"{p:.1%}" for p in probs])]
    guessed = reveal.get("guessed", True)
    if guessed:  # a draw without opened guessing has no class to show
        answers = f"the class ({reveal['answers']} answer{'s' * (reveal['answers'] != 1)})"
        texts = [f"{r['answers']}" if r["answers"] else "" for r in rows]
        series.insert(0, (answers, [r["share"] for r in rows], CLASS_COLOUR, "class: %{x:.0%}", texts))
    head = "The class's guesses" if guessed else "Where the draw landed"
    # two lines in presenter mode: at 800 px one line was cut at "…the model's pro"
    title = f"{head}{'<br>' if presenter else ' '}and the model's probabilities"
    return _bars(go.Figure(), names, series, "share of the class / probability", title, presenter, 30, 100)
