"""The Sampling lab's figures: one step's distribution under each knob, every probability over the full vocabulary
(its next-token bars and cumulative curve are Generate's, `lessons/generate/figures.py`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from inference.core.tokens import readable_tokens
from inference.lessons.style import (
    FINAL_COLOUR,
    RAW_COLOUR,
    REMOVED_COLOUR,
    add_hbar,
    base_layout,
    label,
    plain_figure,
    repr_token,
)
from inference.sampling.pipeline import (
    STAGE_NAMES,
    SamplingSettings,
    display_order,
    entropy_bits,
    ranking_logits,
    stage_logits,
)
from inference.sampling.stages import apply_temperature, finite_count
from inference.sampling.step_view import StepView

TEMPERATURE_GRID = [round(0.05 * i, 2) for i in range(41)]  # 0 .. 2
TOP_P_GRID = [round(0.05 * i, 2) for i in range(1, 21)]  # 0.05 .. 1
# The live charts' own sliders, named apart from the page's (short: at 800 px a longer prefix cut the value off)
SLIDER_PREFIX = {"temperature": "this chart's T: ", "top_p": "this chart's top-p: "}


@dataclass(frozen=True)
class SliderFrames:
    """A live slider chart's frames and steps, one per value: the logits and settings alone decide them."""

    knob: str
    values: tuple[float, ...]
    names: list[str]
    frames: list[dict]
    steps: list[dict]


def slider_frames(
    logits: torch.Tensor,
    tokenizer,
    knob: str,
    values: list[float],
    fixed: SamplingSettings,
    top_n: int = 15,
    seen: torch.Tensor | None = None,
    context=None,
) -> SliderFrames:
    """Each frame: the whole pipeline of `fixed` with `knob` at the frame's value, over the full vocabulary (the
    penalty on `seen`, none without it; `context` for DRY, XTC and mirostat)."""
    seen = torch.zeros(len(logits), dtype=torch.bool) if seen is None else seen
    order = display_order(ranking_logits(logits, fixed, seen, context))[:top_n]
    names = [label(repr_token(t)) for t in readable_tokens(tokenizer, order.tolist())][::-1]  # most likely on top
    frames, steps = [], []
    for value in values:  # plain dicts, one figure built at the end: 61 frames a rerun
        settings = replace(fixed, **{knob: value})
        stages = stage_logits(logits, settings, seen, context)
        probs = stages[settings.pipeline[-1]].double().softmax(-1)
        shown = probs[order].numpy()[::-1]
        ent = float(entropy_bits(probs))
        key = f"{value:g}"
        bar = {
            "type": "bar",
            "x": shown,
            "y": names,
            "orientation": "h",
            "marker": {"color": [FINAL_COLOUR if v > 0 else REMOVED_COLOUR for v in shown]},
            "text": [f"{v:.1%}" for v in shown],
            "textposition": "outside",
        }
        title = f"{'T' if knob == 'temperature' else 'top-p'} = {value:g}: {_kept_words(stages, knob)}, {ent:.2f} bits"
        frames.append({"name": key, "data": [bar], "layout": {"title": {"text": title}}})
        steps.append(
            {
                "method": "animate",
                "label": key,
                "args": [
                    [key],
                    {"mode": "immediate", "frame": {"duration": 0, "redraw": True}, "transition": {"duration": 0}},
                ],
            }
        )
    return SliderFrames(knob, tuple(values), names, frames, steps)


def _kept_words(stages: dict[str, torch.Tensor], knob: str) -> str:
    """What the knob's stage keeps and what each later stage that cuts more leaves (not "4 kept" for min-p's cut)."""
    names = list(stages)[1:]  # the pipeline's stages in run order, after "raw"
    counts = [finite_count(stages[name]) for name in names]
    at = names.index(knob)
    later = [
        f"{STAGE_NAMES[name]} leaves {count:,}"
        for name, count, before in zip(names[at + 1 :], counts[at + 1 :], counts[at:])
        if count < before
    ]
    if not later:
        return f"{counts[-1]:,} kept"
    return ", ".join([f"{STAGE_NAMES[knob]} keeps {counts[at]:,}", *later])


def lab_table(view: StepView, logits: torch.Tensor, seen: torch.Tensor, context, tokenizer, top_n: int = 15) -> dict:
    """`view.columns` with the raw favourite always a row: pushed down by a penalty, it keeps its bar, its rank and
    a ✂ naming what cut or lowered it, instead of vanishing into "other"."""
    favourite = int(logits.argmax())
    columns = view.columns(tokenizer, top_n)
    if favourite in columns["token_id"][:-1]:
        return columns
    columns = view.columns(tokenizer, top_n - 1)
    stages = stage_logits(logits, view.settings, seen, context)
    share = {name: float(stages[name].double().softmax(-1)[favourite]) for name in view.stages}
    ranked = ranking_logits(logits, view.settings, seen, context)
    rank = int((ranked > ranked[favourite]).sum()) + 1
    lowered = [name for name in ("penalty", "dry") if name in stages and stages[name][favourite] < logits[favourite]]
    cut = next((name for name in view.stages[1:] if share[name] == 0), None)
    why = " and ".join(STAGE_NAMES[name] for name in lowered) or "a reweighting stage"
    mark = f"{STAGE_NAMES[cut]}, after the {why}" if cut else f"the {why} pushed it down"

    row = {"rank": rank, "token_id": favourite, "token": readable_tokens(tokenizer, [favourite])[0], **share}
    row |= {"final": share[view.final_stage], "removed_by": mark, "chosen": view.chosen_id == favourite}
    other = {name: max(0.0, columns[name][-1] - share[name]) for name in view.stages}
    other |= {"final": other[view.final_stage], "token": f"other ({len(view.order) - top_n:,} tokens)"}
    return {
        name: np.asarray([*values[:-1], row.get(name, np.nan), other.get(name, values[-1])],
                         dtype=object if name in ("rank", "token_id") else None)
        for name, values in columns.items()
    }  # fmt: skip


def live_slider_figure(
    logits: torch.Tensor,
    tokenizer,
    knob: str,
    values: list[float],
    start: float,
    fixed: SamplingSettings,
    top_n: int = 15,
    presenter: bool = False,
    seen: torch.Tensor | None = None,
    context=None,
    frames: SliderFrames | None = None,
) -> go.Figure:
    """Bars with their own Plotly slider over precomputed frames: they move in the browser as the thumb is dragged
    (`frames`: kept from an earlier call with the same logits and settings)."""
    made = frames or slider_frames(logits, tokenizer, knob, values, fixed, top_n, seen, context)
    start_index = int(np.argmin([abs(v - start) for v in made.values]))
    first = made.frames[start_index]
    layout = {
        "sliders": [
            {
                "active": start_index,
                "currentvalue": {"prefix": SLIDER_PREFIX[made.knob]},
                "pad": {"t": 50 if presenter else 40},
                "steps": made.steps,
            }
        ],
        # no axis title (it overlapped the slider's label); room for "100.0%" outside the longest bar
        "xaxis": {"range": [0, 1.25 if presenter else 1.08], "tickformat": ".0%", "tickvals": [0, 0.5, 1]},
        "yaxis": {"automargin": True},
    }
    title, height = first["layout"]["title"]["text"], 170 + 26 * len(made.names)
    return plain_figure(first["data"], layout, title, presenter, height=height, frames=made.frames)


def _probability_panel(fig: go.Figure, names: list[str], shown, colours, row: int, col: int, **x_axis) -> None:
    hovertemplate = "%{y}: %{x:.2%}<extra></extra>"
    add_hbar(fig, names, shown, marker_color=colours, showlegend=False, row=row, col=col, hovertemplate=hovertemplate)
    fig.update_xaxes(range=[0, 1], tickformat=".0%", row=row, col=col, **x_axis)


def temperatures_side_by_side(
    logits: torch.Tensor, tokenizer, temperatures: list[float], top_n: int = 12, presenter: bool = False
) -> go.Figure:
    order = display_order(logits)[:top_n]
    names = [label(repr_token(t)) for t in readable_tokens(tokenizer, order.tolist())][::-1]
    fig = make_subplots(
        rows=1,
        cols=len(temperatures),
        shared_yaxes=True,
        subplot_titles=[f"T = {t:g}" + (" (greedy)" if t == 0 else "") for t in temperatures],
    )
    for i, t in enumerate(temperatures):
        probs = apply_temperature(logits, t).double().softmax(-1)
        shown = probs[order].numpy()[::-1]
        _probability_panel(fig, names, shown, FINAL_COLOUR, 1, i + 1, tickvals=[0, 0.5])
    fig.update_yaxes(automargin=True)
    return base_layout(fig, "One step, each temperature", presenter, height=140 + 26 * top_n)


def draw_band(probability, draws: int):
    """Half-width of the 95% band of a share of `draws` draws at this probability: 1.96 sqrt(p (1 - p) / draws)."""
    return 1.96 * np.sqrt(np.asarray(probability) * (1 - np.asarray(probability)) / draws)


def draw_histogram(counts: pd.DataFrame, draws: int, presenter: bool = False) -> go.Figure:
    """Observed shares of `draws` seeded draws beside the computed probabilities, with their 95% band."""
    fig = go.Figure()
    names = [label(repr_token(t)) if t != "other" else t for t in counts["token"]]
    fig.add_bar(
        x=names,
        y=counts["computed"],
        name="computed (whisker: 95% band)",
        marker_color=RAW_COLOUR,
        error_y=dict(type="data", array=draw_band(counts["computed"], draws), visible=True, color="#444"),
    )
    fig.add_bar(x=names, y=counts["observed"], name="share of draws", marker_color=FINAL_COLOUR)
    fig.update_layout(barmode="group")
    fig.update_yaxes(tickformat=".0%", title="probability / share")
    # no title (the heading says it): the legend takes the top line
    fig = base_layout(fig, "", presenter, height=480 if presenter else 420)
    fig.update_layout(legend=dict(orientation="v", y=1.02, yanchor="bottom", x=0, xanchor="left"), margin=dict(t=90))
    return fig


def pipeline_figure(view, tokenizer, top_n: int = 12, presenter: bool = False) -> go.Figure:
    """The distribution after each stage, left to right, with how many tokens survive. Rows: the top_n most likely
    raw of the view's first 4 x top_n, so a token the penalty pushes down shrinks in view panel by panel."""
    rows = torch.argsort(view.probs["raw"][: max(top_n, 4 * top_n)], descending=True, stable=True)[:top_n]
    n = len(rows)
    names = [label(repr_token(t)) for t in readable_tokens(tokenizer, view.order[rows].tolist())][::-1]
    short = {
        "raw": "Raw (T=1)",
        "penalty": "Rep. penalty",
        "temperature": "Temperature",
        "top_k": "Top-k",
        "top_p": "Top-p",
        "min_p": "Min-p",
        "typical_p": "Typical-p",
        "top_n_sigma": "Top-nσ",
        "xtc": "XTC",
        "dry": "DRY",
        "mirostat": "Mirostat v2",
    }
    stages = view.stages  # "raw", then the stages in the order they ran; the last is final
    # three panels a row (two in presenter mode), titles on two lines: neighbours never run into each other
    columns = 2 if presenter else 3
    rows_needed = -(-len(stages) // columns)
    if presenter:  # projector-sized titles in half-width panels: the shortest names ("Raw", no "(final)")
        short = {**short, "raw": "Raw", "penalty": "Penalty"}
    titles = [
        f"{i + 1}. {short[s]}{' (final)' if s == stages[-1] and not presenter else ''}<br><b>{view.kept[s]:,}</b> kept"
        for i, s in enumerate(stages)
    ]
    data, layout = [], {"showlegend": False, "margin": {"t": 70}, "annotations": []}
    width, height = (1 - 0.04 * (columns - 1)) / columns, (1 - 0.32 * (rows_needed - 1) / rows_needed) / rows_needed
    for i, (stage, title) in enumerate(zip(stages, titles)):  # the grid `make_subplots(shared_yaxes=True)` lays out
        row, col, k = *divmod(i, columns), "" if i == 0 else str(i + 1)
        left, top = col * (width + 0.04), 1 - row * (height + 0.32 / rows_needed)
        shown = view.probs[stage][rows].numpy()[::-1]
        data.append(
            {
                "type": "bar",
                "y": names,
                "x": shown,
                "orientation": "h",
                "marker": {"color": [FINAL_COLOUR if v > 0 else REMOVED_COLOUR for v in shown]},
                "hovertemplate": "%{y}: %{x:.2%}<extra></extra>",
                "xaxis": f"x{k}",
                "yaxis": f"y{k}",
            }
        )
        x_axis = {"domain": [left, left + width], "anchor": f"y{k}", "range": [0, 1], "tickformat": ".0%"}
        layout[f"xaxis{k}"] = x_axis | {"tickvals": [0, 0.5]}
        first = "" if row == 0 else str(row * columns + 1)  # the row's first panel: its y axis is the row's
        shared = {"matches": f"y{first}", "showticklabels": False} if col else {}
        layout[f"yaxis{k}"] = {"domain": [top - height, top], "anchor": f"x{k}", "automargin": True} | shared
        note = {"text": title, "x": left + width / 2, "y": top, "xref": "paper", "yref": "paper", "showarrow": False}
        layout["annotations"].append(note | {"xanchor": "center", "yanchor": "bottom", "font": {"size": 16}})
    height_px = rows_needed * (130 + (30 if presenter else 24) * n)
    return plain_figure(data, layout, "", presenter, height=height_px)
