"""What every chart shares: the palette (kept in `palette`, every name of it importable from here), the base
layout, legend placement, token labels, the trace helpers (`add_line`, `add_hbar`, `hover`) for the labelled
lines and bars most charts draw, `plain_figure` (a figure from trace and layout dicts, with the base layout), and
the token chips' CSS.

Every figure module imports this one (and compute modules), never another page's figure
module: a colour or a layout rule is defined here once.
"""

from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go

from inference.core.tokens import VISIBLE_WHITESPACE, html_token_text

# Every figure module takes its colours from here with its layout: the palette's names, re-exported.
from inference.lessons.palette import (  # noqa: F401
    CHOSEN_COLOUR,
    CUTOFF_COLOUR,
    DECODE_COLOUR,
    FINAL_COLOUR,
    FIT_SCALE,
    FONT,
    GRID_COLOUR,
    PALETTE,
    PREFILL_COLOUR,
    RAW_COLOUR,
    REMOVED_COLOUR,
    STATUS_COLOUR,
    STATUS_PATTERN,
    TEXT_GREY,
    ZERO_LINE_COLOUR,
    contrast_ratio,
    probability_colour,
    probability_text_colour,
    relative_luminance,
    status_marker,
)

# Plotly never wraps a title: at 800x1000 in presenter mode, with the sidebar open, a chart is ~457 px wide and a
# 26 px title fits ~36 characters on a line, a 20 px axis title ~40 (less where long tick labels narrow the plot).
PROJECTOR_TITLE_CHARS = 34
PROJECTOR_AXIS_TITLE_CHARS = 36
TITLE_LINE_PX = 32  # one more 26 px title line, in the top margin


def wrapped(text: str, chars: int) -> str:
    """`text` on lines of at most `chars` characters where it has spaces to break at, joined by Plotly's <br>;
    unchanged when it fits or already has its own breaks."""
    if not text or len(text) <= chars or "<br>" in text:
        return text
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > chars:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "<br>".join([*lines, line])


def projector_title(title: str, title_size: int) -> tuple[dict, int]:
    """A title for presenter mode, wrapped to the narrowest screen and, past one line, pinned to the top of the
    figure (Plotly centres a title in the top margin, where extra lines ran off the top): (the layout's `title`,
    the extra top margin its extra lines need)."""
    text = wrapped(title, PROJECTOR_TITLE_CHARS)
    extra_lines = text.count("<br>")
    settings = {"text": text, "font": {"size": title_size}}
    if extra_lines:
        settings |= {"yref": "container", "y": 1, "yanchor": "top", "pad": {"t": 30}}
    return settings, TITLE_LINE_PX * extra_lines


def label(text: str) -> str:
    """Token text safe for Plotly: escaped, so '<b>' shows as '<b>', never as bold (Plotly
    reads a small HTML subset in text: <b>, <a>, <br>)."""
    return html.escape(text, quote=False)


def repr_token(text: str) -> str:
    """A token in quotes, so a leading space or an empty-looking token stays visible."""
    return f"'{text}'"


def base_layout(fig: go.Figure, title: str, presenter: bool, height: int) -> go.Figure:
    """Title, fonts, height, margins, white plot and a legend at the top right; in presenter
    mode every text larger."""
    size = 20 if presenter else 13
    title_size = size + (6 if presenter else 3)
    fig.update_layout(
        title=dict(text=title, font=dict(size=title_size)),
        font=dict(size=size, **FONT),
        height=int(height * (1.35 if presenter else 1)),
        margin=dict(l=10, r=20, t=60, b=40),
        plot_bgcolor="white",
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1),
    )
    fig.update_xaxes(gridcolor=GRID_COLOUR, zerolinecolor=ZERO_LINE_COLOUR)
    fig.update_yaxes(gridcolor=GRID_COLOUR, zerolinecolor=ZERO_LINE_COLOUR)
    # Plotly shrinks a bar's outside label to the bar's thickness (7 px on a thin bar) and
    # clips it at the axis end: keep value labels at the text size, past the axis if needed.
    fig.for_each_trace(
        lambda trace: (
            trace.update(constraintext="none", cliponaxis=False, textfont_size=size - 2)
            if trace.type == "bar" and trace.textposition == "outside"
            else None
        )
    )
    if presenter:
        # st.plotly_chart's Streamlit theme ignores layout.font (streamlit issue #7955): a
        # projector needs every text's size set where the theme does not override it.
        text = dict(size=size)
        fig.update_xaxes(tickfont=text, title_font=text)
        fig.update_yaxes(tickfont=text, title_font=text)
        fig.for_each_xaxis(_wrap_axis_title)
        fig.for_each_yaxis(_wrap_axis_title)
        title_settings, extra_top = projector_title(title, title_size)
        fig.update_layout(legend_font=text, hoverlabel_font=text, title=title_settings)
        fig.update_layout(margin_t=fig.layout.margin.t + extra_top)
        fig.update_annotations(font_size=size)  # subplot titles and notes on the chart
        fig.update_traces(textfont_size=size - 2)
    return fig


def plain_figure(
    data: list[dict],
    layout: dict,
    title: str,
    presenter: bool,
    height: int,
    legend: dict | None = None,
    frames: list[dict] | None = None,
) -> go.Figure:
    """The figure `base_layout` would make, as one `go.Figure(data, layout)`: for charts redrawn on every Step, where
    base_layout's `update_*` calls cost ~25 ms a chart on this CPU, three times the figure itself. `layout` holds the
    chart's own settings (axes as "xaxis"/"yaxis" dicts, "shapes", "annotations", "margin"); `legend` its placement
    (default: at the top right, as base_layout); `frames` a Plotly slider's frames."""
    size = 20 if presenter else 13
    title_size = size + (6 if presenter else 3)
    text = {"size": size}
    full = dict(layout)
    for axis in [key for key in layout if key.startswith(("xaxis", "yaxis"))] or ["xaxis", "yaxis"]:
        settings = {**layout.get(axis, {}), "gridcolor": GRID_COLOUR, "zerolinecolor": ZERO_LINE_COLOUR}
        if presenter:
            axis_title = settings.get("title", {})
            if "text" in axis_title:
                axis_title = {**axis_title, "text": wrapped(axis_title["text"], PROJECTOR_AXIS_TITLE_CHARS)}
            settings |= {"tickfont": text, "title": {**axis_title, "font": text}}
        full[axis] = settings
    title_settings, extra_top = (
        projector_title(title, title_size) if presenter else ({"text": title, "font": {"size": title_size}}, 0)
    )
    margin = {"l": 10, "r": 20, "t": 60, "b": 40} | layout.get("margin", {})
    placed = {"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "right", "x": 1} | (legend or {})
    full |= {
        "title": title_settings,
        "font": {"size": size, **FONT},
        "height": int(height * (1.35 if presenter else 1)),
        "margin": margin | {"t": margin["t"] + extra_top},
        "plot_bgcolor": "white",
        "legend": placed | ({"font": text} if presenter else {}),
    }
    if presenter:  # as base_layout: the Streamlit theme ignores layout.font (streamlit issue #7955)
        full["hoverlabel"] = {"font": text}
        if "annotations" in layout:
            full["annotations"] = [{**a, "font": text} for a in layout["annotations"]]
    traces = []
    for trace in data:
        if trace.get("type") == "bar" and trace.get("textposition") == "outside":  # as base_layout, for value labels
            trace = {**trace, "constraintext": "none", "cliponaxis": False, "textfont": {"size": size - 2}}
        traces.append({**trace, "textfont": {"size": size - 2}} if presenter else trace)
    # Built from plain dicts that are already Plotly's JSON: skipping Plotly's per-property validation here halves a
    # Step's chart cost (3.8 -> 0.7 ms a chart; the JSON sent is identical: tests/test_style.py).
    return go.Figure(data=traces, layout=full, frames=frames, _validate=False)


def hline(y: float, line: dict, text: str | None = None, position: str = "bottom right") -> tuple[dict, dict | None]:
    """A horizontal line across the plot and its label, as `fig.add_hline` makes them: (shape, annotation)."""
    shape = {"type": "line", "xref": "x domain", "x0": 0, "x1": 1, "yref": "y", "y0": y, "y1": y, "line": line}
    if text is None:
        return shape, None
    vertical, horizontal = position.split()
    note = {"text": text, "showarrow": False, "xref": "x domain", "yref": "y", "y": y}
    note |= {"x": 1, "xanchor": "right"} if horizontal == "right" else {"x": 0, "xanchor": "left"}
    return shape, note | {"yanchor": "top" if vertical == "bottom" else "bottom"}


def tick_step(count: int, presenter: bool) -> int:
    """The step (1, 2, 5, 10, ...) between labelled ticks so that `count` positions' labels fit the narrowest chart
    (~457 px at 800 px with the sidebar open, ~310 px of it the plot) with room between them: 8 labels at presenter
    mode's 20 px, 16 at 13 px (12 two-digit labels at 20 px ran together as "101214161820")."""
    fits = 8 if presenter else 16
    step = next((step for step in (1, 2, 5, 10, 20, 50, 100) if count <= fits * step), None)
    return step or math.ceil(count / fits)


def decade_ticks(values) -> dict:
    """A log axis labelled at powers of ten only, every decade or every other one past six (Plotly's own choice on
    a short range labels 2, 3, ... 9 inside each decade, which overlap at projector size)."""
    low, high = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    return {"type": "log", "dtick": 1 if high - low <= 6 else 2}


def _wrap_axis_title(axis) -> None:
    """An axis title set before `base_layout`, wrapped for presenter mode (Plotly never wraps one)."""
    if axis.title.text:
        axis.title.text = wrapped(axis.title.text, PROJECTOR_AXIS_TITLE_CHARS)


def legend_below(fig: go.Figure, y: float = -0.22, one_per_line: bool = False, **margin) -> go.Figure:
    """Legend under the plot from its left edge, `y` (in plot heights) below it; one entry per
    line where a row of long names would not fit. `margin` (t=, b=) adjusts the margins."""
    fig.update_layout(legend=dict(orientation="v" if one_per_line else "h", y=y, yanchor="top", x=0, xanchor="left"))
    if margin:
        fig.update_layout(margin=margin)
    return fig


def legend_below_in_column(fig: go.Figure) -> go.Figure:
    """Legend for a chart in a half-width column: under the plot, one entry per line (at the
    top, it would cover the title)."""
    return legend_below(fig, one_per_line=True, t=50, b=20)


def hover(*lines: str) -> str:
    """A hover template: `lines` one under the other, without the trace-name box Plotly adds beside it."""
    return "<br>".join(lines) + "<extra></extra>"


def add_line(
    fig: go.Figure,
    x,
    y,
    name: str | None,
    colour: str,
    mode: str = "lines",
    width: float | None = None,
    dash: str | None = None,
    shape: str | None = None,
    **trace,
) -> go.Figure:
    """A named line (with markers if `mode` says so) in one colour; `width`, `dash` and `shape` ("hv": steps) style
    the line, `trace` goes to `add_scatter` as it is (hovertemplate, marker, row and col...)."""
    style = {"width": width, "dash": dash, "shape": shape}
    line = {"color": colour} | {key: value for key, value in style.items() if value is not None}
    return fig.add_scatter(x=x, y=y, mode=mode, name=name, line=line, **trace)


def add_hbar(fig: go.Figure, names, values, **trace) -> go.Figure:
    """Horizontal bars: one per name (Plotly draws the first name at the bottom), `values` their lengths."""
    return fig.add_bar(y=names, x=values, orientation="h", **trace)


def log_ticks(values) -> dict:
    """Axis settings for a log axis over `values`: ticks at 1, 2 and 5 times each power of ten in their range,
    written in full (Plotly's own log ticks label every digit, or only the powers of ten)."""
    finite = [float(v) for v in np.ravel(values) if np.isfinite(v) and v > 0]
    if not finite:
        return {}
    low, high = math.floor(math.log10(min(finite))), math.ceil(math.log10(max(finite)))
    ticks = [m * 10.0**e for e in range(low, high + 1) for m in (1, 2, 5)]
    ticks = [t for t in ticks if min(finite) / 2 <= t <= max(finite) * 2]
    return dict(tickvals=ticks, ticktext=[f"{t:,.10g}" for t in ticks])


# Token chips, shared by the pages that draw a run's text as chips (Generate, Constrained decoding).
CHIP_CSS = """
<style>
.token-box { line-height: 2.3; font-size: 1.15rem; padding: 0.6rem 0.8rem; border: 1px solid #ddd;
             border-radius: 0.5rem; background: #fff; word-break: break-word; }
.token-chip { display: inline-block; padding: 0 0.25rem; margin: 0.08rem 0.06rem; border-radius: 0.3rem;
              white-space: pre; position: relative; cursor: help; color: #111; }
.token-chip.prompt { background: #eceff3; color: #555; border: 1px dashed #b9c0ca; }
.token-chip.special { font-family: monospace; font-size: 0.8em; background: #444; color: #fff; }
.token-chip .tip { visibility: hidden; position: absolute; z-index: 10; left: 0; top: 2.1em; min-width: 13rem;
                   background: #222; color: #fff; font-size: 0.85rem; line-height: 1.35; padding: 0.45rem 0.6rem;
                   border-radius: 0.35rem; white-space: pre; text-align: left; font-family: monospace; }
.token-chip:hover .tip, .token-chip:focus .tip { visibility: visible; }
.token-legend { font-size: 0.85rem; color: #555; margin-top: 0.3rem; }
.token-status { font-size: 0.875rem; color: #5f6169; margin-top: 0.5rem; }
.token-legend .legend-item { white-space: nowrap; }
.token-legend .legend-item + .legend-item { margin-left: 0.6rem; }
.token-legend .swatch { display: inline-block; width: 2.2rem; height: 0.8rem; border-radius: 0.2rem;
                        vertical-align: middle; }
</style>
"""


def probability_legend(probabilities) -> str:
    """The chips' colour legend: a swatch of each probability's colour with its percentage, the two kept on one line
    (where the line broke between them, "99%" stood alone under the last swatch)."""
    return "".join(
        f'<span class="legend-item"><span class="swatch" style="background:{probability_colour(p)}"></span> '
        f"{p:.0%}</span>"
        for p in probabilities
    )


def chip_text(text: str) -> str:
    """What a chip shows: the token's characters with whitespace made visible, escaped.
    A newline shows as ↵ and then really breaks the line, so the text keeps its shape."""
    return html_token_text(text.translate(VISIBLE_WHITESPACE)).replace("↵", "↵<br>")


def quartile_bars(summary, measure: str) -> dict:
    """Asymmetric error bars from the median down to the first quartile and up to the third."""
    return dict(
        type="data",
        symmetric=False,
        array=summary[f"{measure}_q3"] - summary[measure],
        arrayminus=summary[measure] - summary[f"{measure}_q1"],
        thickness=1.5,
        width=5,
    )
