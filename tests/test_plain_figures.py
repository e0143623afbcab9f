"""The charts redrawn on every Step are built from plain dicts without Plotly's validation (`plain_figure.plain_figure`):
each must equal what Plotly's own builders make (the oracle: `add_*`, `base_layout`, `legend_below`) and pass
Plotly's validation when checked."""

import base64
import json

import numpy as np
import plotly.graph_objects as go
import pytest

from inference.core.loader import encode_prompt
from inference.core.run import new_trace
from inference.lessons.generate.figures import cumulative_curve, next_token_bars
from inference.lessons.plain_figure import hline, plain_figure, vline
from inference.lessons.style import base_layout, legend_below
from inference.sampling.pipeline import SamplingSettings
from inference.sampling.step_view import step_view

pytestmark = pytest.mark.unit


def values(array) -> list[float]:
    """A trace's array as numbers (Plotly writes numpy arrays as base64 "bdata")."""
    if isinstance(array, dict) and "bdata" in array:
        return list(np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"]))
    return list(array)


def validated(fig: go.Figure) -> dict:
    """The figure through Plotly's validation (raises on a wrong property), as JSON, without the template."""
    out = json.loads(go.Figure(fig.to_dict()).to_json())
    out["layout"].pop("template", None)
    return out


@pytest.mark.parametrize("presenter", [False, True])
def test_a_plain_figure_equals_the_one_plotlys_builders_make(presenter):
    built = go.Figure()
    built.add_bar(y=["a", "b"], x=[0.2, 0.8], orientation="h", name="bars", text=["20%", "80%"], textposition="outside")
    built.add_scatter(x=[1, 2], y=[0.5, 0.9], mode="lines", name="line")
    built.add_hline(y=0.9, line=dict(dash="dash"), annotation_text="top", annotation_position="bottom right")
    built.add_hline(y=0.1, line=dict(width=1.5), annotation_text="low", annotation_position="top left")
    built.add_vline(x=1.5, line=dict(dash="dot"), annotation_text="cut", annotation_position="bottom right")
    built.update_xaxes(title="x", range=[0, 3])
    built = legend_below(base_layout(built, "Title", presenter, height=300), y=-0.1)

    lines = [
        hline(0.9, {"dash": "dash"}, "top"),
        hline(0.1, {"width": 1.5}, "low", "top left"),
        vline(1.5, {"dash": "dot"}, "cut"),
    ]
    bars = {"type": "bar", "y": ["a", "b"], "x": [0.2, 0.8], "orientation": "h", "name": "bars"}
    data = [bars | {"text": ["20%", "80%"], "textposition": "outside"}]
    data.append({"type": "scatter", "x": [1, 2], "y": [0.5, 0.9], "mode": "lines", "name": "line"})
    layout = {
        "shapes": [shape for shape, _ in lines],
        "annotations": [note for _, note in lines],
        "xaxis": {"title": {"text": "x"}, "range": [0, 3]},
    }
    legend = {"orientation": "h", "y": -0.1, "yanchor": "top", "x": 0, "xanchor": "left"}
    plain = plain_figure(data, layout, "Title", presenter, height=300, legend=legend)
    assert validated(plain) == validated(built)


@pytest.fixture(scope="module")
def step(bundled):
    model, tokenizer = bundled.model, bundled.tokenizer
    trace = new_trace(model, tokenizer, encode_prompt(tokenizer, "Once upon a time"), 20, 1)
    for _ in range(3):
        trace.step(SamplingSettings())
    return trace, tokenizer, trace.peek()


@pytest.mark.parametrize(
    "settings",
    [SamplingSettings(temperature=0.7, top_p=0.9), SamplingSettings(temperature=0.0), SamplingSettings(top_p=1.0)],
    ids=["top-p", "greedy", "no top-p"],
)
@pytest.mark.parametrize("u", [0.3, 0.999999], ids=["u on the chart", "u off the chart"])
@pytest.mark.parametrize("presenter", [False, True], ids=["normal", "presenter"])
def test_the_step_charts_pass_plotlys_validation_and_show_the_step(step, settings, u, presenter):
    trace, tokenizer, logits = step
    view = step_view(logits, settings, trace.seen_now(), u=u)
    table = view.table(tokenizer, top_n=20)
    bars = next_token_bars(table, presenter)
    validated(bars)
    # Generate passes the table's columns, not the frame: the same figure
    assert next_token_bars(view.columns(tokenizer, top_n=20), presenter).to_dict() == bars.to_dict()
    assert values(bars.to_dict()["data"][1]["x"]) == pytest.approx(list(table["final"].iloc[::-1]))
    curve = cumulative_curve(view, tokenizer, settings.top_p, presenter)
    validated(curve)
    layout, shown = curve.to_dict()["layout"], len(values(curve.to_dict()["data"][0]["x"]))
    notes = " ".join(a["text"] for a in layout["annotations"])
    assert ("top-p = 0.9" in notes) == (settings.top_p < 1)
    assert ("off this chart" in notes) == (not settings.greedy and view.chosen_rank >= shown)


@pytest.mark.parametrize("presenter", [False, True], ids=["normal", "presenter"])
def test_the_live_slider_figure_passes_plotlys_validation_with_a_frame_per_value(step, presenter):
    from inference.lessons.sampling_lab.figures import TOP_P_GRID, live_slider_figure

    trace, tokenizer, logits = step
    settings = SamplingSettings(temperature=0.7, top_k=30)
    fig = live_slider_figure(logits, tokenizer, "top_p", TOP_P_GRID, 0.9, settings, presenter=presenter)
    checked = go.Figure(fig.to_dict())  # raises on a wrong property, frames included
    assert [f.name for f in checked.frames] == [f"{v:g}" for v in TOP_P_GRID]
    assert checked.layout.sliders[0].active == TOP_P_GRID.index(0.9)
    assert checked.layout.title.text == checked.frames[TOP_P_GRID.index(0.9)].layout.title.text
    assert checked.layout.title.text.startswith("top-p = 0.9: ")


def pipeline_figure_through_plotly(view, tokenizer, top_n: int = 12, presenter: bool = False) -> go.Figure:
    """The oracle: the Sampling lab's pipeline figure as it was built through `make_subplots` and Plotly's
    `add_*`/`update_*` (~75 ms a slider move), before `pipeline_figure` moved to plain dicts."""
    import torch
    from plotly.subplots import make_subplots

    from inference.core.tokens import readable_tokens
    from inference.lessons.style import FINAL_COLOUR, REMOVED_COLOUR, label, repr_token

    rows = torch.argsort(view.probs["raw"][: max(top_n, 4 * top_n)], descending=True, stable=True)[:top_n]
    n = len(rows)
    names = [label(repr_token(t)) for t in readable_tokens(tokenizer, view.order[rows].tolist())][::-1]
    short = {"raw": "Raw (T=1)", "penalty": "Rep. penalty", "temperature": "Temperature", "top_k": "Top-k"}
    short |= {"top_p": "Top-p", "min_p": "Min-p", "typical_p": "Typical-p", "top_n_sigma": "Top-nσ", "xtc": "XTC"}
    short |= {"dry": "DRY", "mirostat": "Mirostat v2"}
    stages = view.stages
    columns = 2 if presenter else 3
    rows_needed = -(-len(stages) // columns)
    if presenter:
        short = {**short, "raw": "Raw", "penalty": "Penalty"}
    titles = [
        f"{i + 1}. {short[s]}{' (final)' if s == stages[-1] and not presenter else ''}<br><b>{view.kept[s]:,}</b> kept"
        for i, s in enumerate(stages)
    ]
    fig = make_subplots(rows=rows_needed, cols=columns, shared_yaxes=True, horizontal_spacing=0.04,
                        vertical_spacing=0.32 / rows_needed, subplot_titles=titles)  # fmt: skip
    for i, stage in enumerate(stages):
        shown = view.probs[stage][rows].numpy()[::-1]
        colours = [FINAL_COLOUR if v > 0 else REMOVED_COLOUR for v in shown]
        row, col = divmod(i, columns)
        fig.add_bar(y=names, x=shown, orientation="h", marker_color=colours, showlegend=False, row=row + 1,
                    col=col + 1, hovertemplate="%{y}: %{x:.2%}<extra></extra>")  # fmt: skip
        fig.update_xaxes(range=[0, 1], tickformat=".0%", row=row + 1, col=col + 1, tickvals=[0, 0.5])
    fig.update_yaxes(automargin=True)
    fig = base_layout(fig, "", presenter, height=rows_needed * (130 + (30 if presenter else 24) * n))
    fig.update_layout(margin=dict(t=70))
    return fig


@pytest.mark.parametrize("presenter", [False, True], ids=["normal", "presenter"])
@pytest.mark.parametrize(
    "settings",
    [
        SamplingSettings(temperature=0.7, top_p=0.9),  # four stages: one row of three and one
        SamplingSettings(temperature=1.2, top_k=40, top_p=0.8, min_p=0.05, repetition_penalty=1.3),  # six
        SamplingSettings(temperature=0.0),
    ],
    ids=["top-p", "every-filter", "greedy"],
)
def test_the_pipeline_figure_equals_the_one_make_subplots_builds(step, settings, presenter):
    from inference.lessons.sampling_lab.figures import pipeline_figure

    trace, tokenizer, logits = step
    view = step_view(logits, settings, trace.seen_now())
    plain = pipeline_figure(view, tokenizer, presenter=presenter)
    assert validated(plain) == validated(pipeline_figure_through_plotly(view, tokenizer, presenter=presenter))
    assert len(plain.to_dict()["data"]) == len(view.stages)
