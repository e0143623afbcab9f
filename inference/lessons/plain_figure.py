"""Charts redrawn on every Step, built from plain dicts in one go and not validated: `plain_figure` (what
`style.base_layout` and `style.legend_below` would make), `PlainFigure` (a figure kept as those dicts until
something asks for more), `subplot_grid` (a grid of panels as `make_subplots` lays it out), and `hline`/`vline`
(a line and its label as `add_hline`/`add_vline` make them).

Plotly's property machinery costs tens of milliseconds a chart on this CPU; these cost a few. Nothing is checked
as it is built, so each caller has a test that validates what it returns (`go.Figure(fig.to_dict())`).
"""

from __future__ import annotations

import base64
from copy import deepcopy
from functools import lru_cache

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from _plotly_utils.basevalidators import is_homogeneous_array
from _plotly_utils.utils import is_skipped_key, plotlyjsShortTypes, to_typed_array_spec
from plotly.subplots import make_subplots

from inference.lessons.palette import FONT, GRID_COLOUR, ZERO_LINE_COLOUR

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
    """A chart title for presenter mode: wrapped to the narrowest screen, and when that takes more than one line,
    pinned to the top of the figure (Plotly centres a title in the top margin, where extra lines ran off the top).
    Returns (the layout's `title`, the extra top margin its extra lines need)."""
    text = wrapped(title, PROJECTOR_TITLE_CHARS)
    extra_lines = text.count("<br>")
    settings = {"text": text, "font": {"size": title_size}}
    if extra_lines:
        settings |= {"yref": "container", "y": 1, "yanchor": "top", "pad": {"t": 30}}
    return settings, TITLE_LINE_PX * extra_lines


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
            axis_title = settings.get("title", {})
            axis_title = {"text": axis_title} if isinstance(axis_title, str) else axis_title
            if "text" in axis_title:
                axis_title = {**axis_title, "text": wrapped(axis_title["text"], PROJECTOR_AXIS_TITLE_CHARS)}
            settings = {**settings, "tickfont": text, "title": {**axis_title, "font": text}}
        axes[axis] = settings
    placed = {"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "right", "x": 1} | (legend or {})
    title_settings, extra_top = (
        projector_title(title, title_size) if presenter else ({"text": title, "font": {"size": title_size}}, 0)
    )
    margin = {"l": 10, "r": 20, "t": 60, "b": 40} | layout.get("margin", {})
    full = {
        **layout,
        **axes,
        "title": title_settings,
        "font": {"size": size, **FONT},
        "height": int(height * (1.35 if presenter else 1)),
        "margin": margin | {"t": margin["t"] + extra_top},
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


def vline(x: float, line: dict, text: str | None = None, side: str = "right") -> tuple[dict, dict | None]:
    """A vertical line up the plot and its label at the bottom, on the line's `side` ("right", as `fig.add_vline`
    puts it; "left" for a line near the plot's right edge, where a label on its right would run off the chart)."""
    shape = {"type": "line", "xref": "x", "x0": x, "x1": x, "yref": "y domain", "y0": 0, "y1": 1, "line": line}
    if text is None:
        return shape, None
    anchor = "left" if side == "right" else "right"
    note = {"text": text, "showarrow": False, "xref": "x", "x": x, "xanchor": anchor, "yref": "y domain", "y": 0}
    return shape, note | {"yanchor": "bottom"}
