"""What every chart shares: the palette, the base layout, legend placement, token labels, and the trace
helpers (`add_line`, `add_hbar`, `hover`) for the labelled lines and bars most charts draw.

Every figure module imports this one (and compute modules), never another page's figure
module: a colour or a layout rule is defined here once.
"""

from __future__ import annotations

import base64
import html
import math
from copy import deepcopy
from functools import lru_cache

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from _plotly_utils.basevalidators import is_homogeneous_array
from _plotly_utils.utils import is_skipped_key, plotlyjsShortTypes, to_typed_array_spec
from plotly.subplots import make_subplots

from inference.core.tokens import VISIBLE_WHITESPACE, html_token_text

FONT = dict(family="Inter, Segoe UI, sans-serif")
GRID_COLOUR = "#eeeeee"
ZERO_LINE_COLOUR = "#cccccc"

# The one palette, built on Okabe and Ito's eight colours (blue, orange, vermillion, sky blue, bluish green, yellow,
# reddish purple, black), which stay apart for the common colour-vision deficiencies and on a washed-out projector.
# Pages name their colours after what they mean (below), from these; where two meanings meet on one chart (kept,
# filtered, chosen) they also differ by a label, marker or pattern (STATUS_PATTERN), never by colour alone.
PALETTE = {
    "blue": "#0072B2",  # Okabe-Ito blue
    "orange": "#E69F00",  # Okabe-Ito orange
    "red": "#D55E00",  # Okabe-Ito vermillion
    "green": "#009E73",  # Okabe-Ito bluish green
    "purple": "#CC79A7",  # Okabe-Ito reddish purple
    "yellow": "#F0E442",  # Okabe-Ito yellow
    "pale_blue": "#a9cde6",  # Okabe-Ito blue, light: the raw distribution behind the final one
    "light_blue": "#8cc3ea",
    "blue_grey": "#9aa9bf",
    "sky": "#56B4E9",  # Okabe-Ito sky blue
    "dark_blue": "#005587",
    "navy": "#003f66",
    "lavender": "#e2b9d3",  # Okabe-Ito reddish purple, light
    "sand": "#f3d27a",
    "slate": "#7f8c8d",
    "light_grey": "#d9d9d9",
    "ink": "#333",
    "grey": "#666",
    "dark_grey": "#444",
}
# Small (fits easily) to none holds it: blue through yellow to vermillion, a scale that keeps its order in lightness
# and along the blue-yellow axis that deuteranopia and protanopia keep (the classic green-to-red one folds in two).
FIT_SCALE = ["#0072B2", "#56B4E9", "#a9dcf4", "#F0E442", "#E69F00", "#D55E00"]

# A next-token distribution, on every chart that shows one.
RAW_COLOUR = PALETTE["pale_blue"]  # the model's probability, T=1, no filters
FINAL_COLOUR = PALETTE["blue"]  # after every setting: what the draw uses
CHOSEN_COLOUR = PALETTE["orange"]  # the token drawn
REMOVED_COLOUR = PALETTE["light_grey"]  # cut by a filter
CUTOFF_COLOUR = PALETTE["red"]  # the top-p line
# Kept, filtered and chosen bars differ by pattern too (Plotly's marker.pattern.shape), and by their labels.
STATUS_PATTERN = {"kept": "", "chosen": "", "removed": "/"}
STATUS_COLOUR = {"kept": FINAL_COLOUR, "chosen": CHOSEN_COLOUR, "removed": REMOVED_COLOUR}

# The two phases of a generation (Prefill vs decode, Cost).
PREFILL_COLOUR = PALETTE["blue"]
DECODE_COLOUR = PALETTE["orange"]

# Small grey text (captions, status lines, a chart's text, the keys line) at WCAG AA's 4.5:1 or more: 6.0:1 on white,
# 5.3:1 on the sidebar's #f0f2f6. Streamlit's own caption grey (#828180) is 3.9:1.
TEXT_GREY = "#5f6169"

# A chip's background by probability: pale orange (unlikely) through cream and light blue to Okabe-Ito's deep blue
# (near certain), a blue-orange scale that colour-blind readers see in the same order (the tooltip gives the number).
# It steps at 0.6 from a light blue under black text to a blue under white text: a smooth blend passes through
# blues where neither text colour reaches 4.5:1.
_CHIP_STOPS = (0.0, 0.2, 0.6, 0.6 + 1e-9, 1.0)
_CHIP_RGB = np.array([[248, 200, 160], [255, 244, 214], [140, 195, 234], [0, 114, 178], [0, 79, 124]])


def status_marker(statuses) -> dict:
    """A bar trace's `marker` for kept / chosen / removed bars (one status per bar): colour and pattern."""
    return {
        "color": [STATUS_COLOUR[s] for s in statuses],
        "pattern": {"shape": [STATUS_PATTERN[s] for s in statuses], "fgcolor": "#555", "size": 6},
    }


def probability_colour(p: float) -> str:
    """Chip colour for a probability: pale orange (unlikely) to deep blue (near certain)."""
    p = min(max(p, 0.0), 1.0)
    rgb = [np.interp(p, _CHIP_STOPS, _CHIP_RGB[:, channel]) for channel in range(3)]
    return "#" + "".join(f"{int(round(c)):02x}" for c in rgb)


def relative_luminance(colour: str) -> float:
    """WCAG 2's relative luminance of a #rrggbb colour."""
    channels = [int(colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast_ratio(a: str, b: str) -> float:
    """WCAG 2's contrast ratio of two #rrggbb colours (1 to 21; small text needs 4.5 for AA)."""
    la, lb = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def probability_text_colour(p: float) -> str:
    """Text on a `probability_colour` background: white or near-black, whichever contrasts more."""
    background = probability_colour(p)
    return "#ffffff" if contrast_ratio(background, "#ffffff") > contrast_ratio(background, "#111111") else "#111111"


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
        fig.update_layout(legend_font=text, hoverlabel_font=text, title_font_size=title_size)
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
    """The figure `base_layout` and `legend_below` would make, built from plain dicts in one go and not validated.

    For the charts redrawn on every Step: Plotly's property machinery (`add_*`, `update_*`, validation) cost ~40 ms
    a chart on this CPU, ten times the chart's data. Nothing here is checked as it is built, so each caller has a
    test that validates what it returns (`go.Figure(fig.to_dict())` raises on a wrong property).
    `layout` holds the chart's own settings (axes as "xaxis"/"yaxis" dicts, "shapes", "annotations", ...);
    `legend` the legend's placement (default: at the top right, as `base_layout`); `frames` a Plotly slider's frames.
    A grid of subplots gives its axes as "xaxis2", "yaxis2", ... (`subplot_grid` makes them as `make_subplots` does)."""
    size = 20 if presenter else 13
    title_size = size + (6 if presenter else 3)
    grid = {"gridcolor": GRID_COLOUR, "zerolinecolor": ZERO_LINE_COLOUR}
    text = {"size": size}
    axes = {}
    subplot_axes = [key for key in layout if key.startswith(("xaxis", "yaxis")) and key not in ("xaxis", "yaxis")]
    for axis in ("xaxis", "yaxis", *subplot_axes):  # every axis, as base_layout's update_xaxes/update_yaxes
        settings = {**layout.get(axis, {}), **grid}
        if presenter:
            settings = {**settings, "tickfont": text, "title": {**settings.get("title", {}), "font": text}}
        axes[axis] = settings
    placed = {"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "right", "x": 1} | (legend or {})
    full = {
        **layout,
        **axes,
        "title": {"text": title, "font": {"size": title_size}},
        "font": {"size": size, **FONT},
        "height": int(height * (1.35 if presenter else 1)),
        "margin": {"l": 10, "r": 20, "t": 60, "b": 40} | layout.get("margin", {}),
        "plot_bgcolor": "white",
        "legend": placed | ({"font": text} if presenter else {}),
    }
    if presenter:  # as base_layout: the Streamlit theme ignores layout.font (streamlit issue #7955)
        full["hoverlabel"] = {"font": text}
        if "annotations" in layout:  # (as base_layout: no empty list where the chart has none)
            full["annotations"] = [{**a, "font": text} for a in layout["annotations"]]
    traces = []
    for trace in data:
        if trace.get("type") == "bar" and trace.get("textposition") == "outside":  # as base_layout, for value labels
            trace = {**trace, "constraintext": "none", "cliponaxis": False, "textfont": {"size": size - 2}}
        if presenter:
            trace = {**trace, "textfont": {"size": size - 2}}
        traces.append(trace)
    return PlainFigure({"data": traces, "layout": full} | ({"frames": frames} if frames else {}))


@lru_cache(maxsize=4)
def _template_dict(name: str) -> dict:
    """A registered template as the plain dict `go.Figure` puts into `layout.template` (shared: never mutated)."""
    return pio.templates[name].to_plotly_json()


_PLAIN_VALUES = (str, int, float, bool, type(None))


def _typed_array(value) -> object:
    """Plotly's `to_typed_array_spec(deepcopy(value))`. A numpy array of a type plotly.js reads as it is (float64,
    int32, ...) is encoded here directly: Plotly's own path first converts it through narwhals and a read-only copy,
    ~0.25 ms an array, six arrays a Generate Step. Anything else (int64, which Plotly narrows; pandas; lists) goes
    to Plotly's function."""
    if type(value) is np.ndarray and value.size and value.dtype.isnative and (short := plotlyjsShortTypes.get(
        value.dtype.name)):  # fmt: skip
        spec = {"dtype": short, "bdata": base64.b64encode(np.ascontiguousarray(value)).decode("ascii")}
        if value.ndim > 1:
            spec["shape"] = str(value.shape)[1:-1]
        return spec
    return to_typed_array_spec(deepcopy(value))


def _copy_as_plotly(obj, convert: bool = True):
    """`deepcopy(obj)` then Plotly's `convert_to_base64` (numpy arrays that are dict values, outside the keys it
    skips, as typed-array specs), in one walk that copies dicts and lists itself and never inspects a plain number or
    string: Plotly's walk asks `is_homogeneous_array` of every value, ~0.5 ms a chart here (a unit test holds the
    result equal to `deepcopy` + `convert_to_base64`)."""
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if type(value) in _PLAIN_VALUES:
                out[key] = value
            elif convert and not is_skipped_key(key) and is_homogeneous_array(value):
                out[key] = _typed_array(value)
            else:
                out[key] = _copy_as_plotly(value, convert and not is_skipped_key(key))
        return out
    if isinstance(obj, list):
        return [value if type(value) in _PLAIN_VALUES else _copy_as_plotly(value, convert) for value in obj]
    if isinstance(obj, tuple):
        return tuple(_copy_as_plotly(value, convert) for value in obj)
    return obj if type(obj) in _PLAIN_VALUES else deepcopy(obj)


class PlainFigure(go.Figure):
    """A figure held as the plain dicts it was made from, until something asks for more than its dict.

    `st.plotly_chart` asks a figure only for `to_dict()`. A `go.Figure`, even unvalidated, first builds Plotly's
    property objects and applies the default template, and `to_dict` deep-copies them all again: 3-4 ms a chart on
    this CPU, on every Step. Here `to_dict` returns what `go.Figure(spec, _validate=False).to_dict()` would (a unit
    test holds the equality), with the template copied from the registry once. Anything else (`.layout`, `.data`,
    `update_*`, `to_plotly_json` after a change) builds the real figure in place first, so callers and tests see an
    ordinary `go.Figure`."""

    def __init__(self, spec: dict):  # noqa: D107 (the real __init__ runs on first use, in __getattr__)
        template = pio.templates.default
        object.__setattr__(self, "_plain_spec", spec)
        object.__setattr__(self, "_plain_template", template if isinstance(template, str) else None)

    def __getattr__(self, name: str):
        """Only reached for what the instance lacks: the real figure's state, which is built now, once."""
        state = self.__dict__
        if name.startswith("__") or "_plain_spec" not in state or state.get("_plain_built"):
            raise AttributeError(name)
        state["_plain_built"] = True
        go.Figure.__init__(self, deepcopy(state["_plain_spec"]), _validate=False)
        return getattr(self, name)

    def to_dict(self) -> dict:
        state = self.__dict__
        spec = state["_plain_spec"]
        if (
            state.get("_plain_built")
            or state["_plain_template"] is None
            or "template" in spec["layout"]
            or ("frames" in spec and not _typed_frames(spec["frames"]))
        ):
            return self._built_figure_dict()  # (an untyped frame trace gets its type from Plotly: left to it)
        res = {"data": _copy_as_plotly(spec["data"]), "layout": _copy_as_plotly(spec["layout"])}
        if "frames" in spec:  # the Sampling lab's live charts: 67 ms a chart through go.Figure, 3 ms here
            res["frames"] = _copy_as_plotly(spec["frames"])
        res["layout"]["template"] = _template_dict(state["_plain_template"])
        return res

    def _built_figure_dict(self) -> dict:
        self.layout  # noqa: B018 (builds the real figure if it is not built yet)
        return go.Figure.to_dict(self)


@lru_cache(maxsize=32)
def _subplot_grid(rows: int, cols: int, panels: int, horizontal_spacing: float, vertical_spacing: float) -> tuple:
    """`make_subplots`' layout for a grid with shared y axes and a title per panel, and each panel's axis names:
    made by Plotly once per grid shape, then reused as plain dicts (never mutated: `subplot_grid` copies)."""
    fig = make_subplots(
        rows=rows,
        cols=cols,
        shared_yaxes=True,
        horizontal_spacing=horizontal_spacing,
        vertical_spacing=vertical_spacing,
        subplot_titles=[f"panel {i}" for i in range(panels)],
    )
    for i in range(panels):
        row, col = divmod(i, cols)
        fig.add_bar(x=[0], y=["a"], row=row + 1, col=col + 1)
    spec = fig.to_plotly_json()
    layout = {key: value for key, value in spec["layout"].items() if key != "template"}
    return layout, tuple((trace["xaxis"], trace["yaxis"]) for trace in spec["data"])


def subplot_grid(
    titles: list[str], cols: int, horizontal_spacing: float, vertical_spacing: float
) -> tuple[dict, list[tuple[str, str]]]:
    """A grid of len(titles) panels, `cols` a row, y axes shared along a row, as `make_subplots` lays it out:
    (layout with the axes and the titles, each panel's (xaxis, yaxis) names for its traces). For `plain_figure`:
    `make_subplots` with `add_*`/`update_*` took ~75 ms for the Sampling lab's six panels on every slider move."""
    rows = -(-len(titles) // cols)
    layout, refs = _subplot_grid(rows, cols, len(titles), horizontal_spacing, vertical_spacing)
    layout = deepcopy(layout)
    for note, title in zip(layout["annotations"], titles):
        note["text"] = title
    return layout, list(refs)


def axis_key(ref: str) -> str:
    """A trace's axis name ("x2") as its layout key ("xaxis2")."""
    return ref[0] + "axis" + ref[1:]


def _typed_frames(frames: list) -> bool:
    """Frames whose every trace names its type, and with only the keys a Plotly frame has: `go.Figure` would give
    them back as they are (a unit test holds this)."""
    allowed = {"name", "data", "layout", "group", "traces", "baseframe"}
    return all(
        isinstance(frame, dict)
        and frame.keys() <= allowed
        and all(isinstance(trace, dict) and "type" in trace for trace in frame.get("data", []))
        for frame in frames
    )


def hline(y: float, line: dict, text: str | None = None, position: str = "bottom right") -> tuple[dict, dict | None]:
    """A horizontal line across the plot and its label, as `fig.add_hline` makes them: (shape, annotation)."""
    shape = {"type": "line", "xref": "x domain", "x0": 0, "x1": 1, "yref": "y", "y0": y, "y1": y, "line": line}
    if text is None:
        return shape, None
    vertical, horizontal = position.split()
    note = {"text": text, "showarrow": False, "xref": "x domain", "yref": "y", "y": y}
    note |= {"x": 1, "xanchor": "right"} if horizontal == "right" else {"x": 0, "xanchor": "left"}
    note["yanchor"] = "top" if vertical == "bottom" else "bottom"
    return shape, note


def vline(x: float, line: dict, text: str | None = None) -> tuple[dict, dict | None]:
    """A vertical line up the plot and its label at the bottom right, as `fig.add_vline` makes them."""
    shape = {"type": "line", "xref": "x", "x0": x, "x1": x, "yref": "y domain", "y0": 0, "y1": 1, "line": line}
    if text is None:
        return shape, None
    note = {"text": text, "showarrow": False, "xref": "x", "x": x, "xanchor": "left", "yref": "y domain", "y": 0}
    return shape, note | {"yanchor": "bottom"}


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
.token-legend span { display: inline-block; width: 2.2rem; height: 0.8rem; border-radius: 0.2rem;
                     vertical-align: middle; }
</style>
"""


def chip_text(text: str) -> str:
    """What a chip shows: the token's characters with whitespace made visible, escaped.
    A newline shows as ↵ and then really breaks the line, so the text keeps its shape."""
    return html_token_text(text.translate(VISIBLE_WHITESPACE)).replace("↵", "↵<br>")
