"""A chart as one sentence: what it shows and its key numbers, read from the very data the chart draws.

Every chart on every page is followed by this text (app_pages/shared/charts.py), so a screen reader, a student who
cannot tell two colours apart, or a teacher reading numbers aloud gets the same numbers as the picture. The numbers
are written as the chart's axis writes them: percentages where its value axis is in percent, the unit its axis title
names in brackets ("time (ms)": 7.2 ms), three significant digits, never "1.1e-16"."""

from __future__ import annotations

import base64
import re

import numpy as np

MOST_POINTS = 5  # the largest values named for a chart of one series: a sentence, not a table
MOST_POINTS_EACH = 3  # ... and for each series of a chart of several
MOST_SERIES = 4  # series named before "and N more"
FRACTION_TITLES = ("probability", "share", "cumulative", "cumulative probability")  # a 0-1 axis written as percent
# A short axis title ending in one of these is itself the unit ("tokens/s", "GB", "decode tokens").
UNIT_WORDS = {"s", "ms", "µs", "us", "B", "kB", "MB", "GB", "TB", "bytes", "tokens", "bits", "nats", "FLOPs", "W", "$"}
_TAG = re.compile(r"<[^>]+>")
_TYPED = {"f8": "<f8", "f4": "<f4", "i4": "<i4", "i2": "<i2", "i1": "<i1", "u1": "<u1", "u2": "<u2", "u4": "<u4"}


def _values(raw) -> list:
    if raw is None:
        return []
    if isinstance(raw, dict) and "bdata" in raw:  # Plotly's typed-array spec of a numpy array: back to numbers
        return list(np.frombuffer(base64.b64decode(raw["bdata"]), dtype=_TYPED.get(raw["dtype"], "<f8")))
    return list(np.asarray(raw, dtype=object).ravel())


def _plain(text) -> str:
    """Text without Plotly's HTML subset (<b>, <br>, <sup>) and without the entities `style.label` escaped."""
    text = _TAG.sub(" ", str(text or "")).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return " ".join(text.split())


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def number(value, percent: bool = False, unit: str = "") -> str:
    """A value as the chart's axis writes it: `percent` as 77.3% (<0.1% for a sliver), else three significant digits
    with thousands separators and no exponent down to 0.001; `unit` after it."""
    if not _is_number(value):
        return _plain(value)
    v = float(value)
    if v != v:
        return "n/a"
    if percent:
        return "0%" if abs(v) < 5e-7 else ("<0.1%" if abs(v) < 0.001 else f"{v:.1%}".replace("100.0%", "100%"))
    if v == 0:
        text = "0"
    elif abs(v) >= 1000:
        text = f"{v:,.0f}"
    elif abs(v) >= 0.001:
        text = f"{v:.3g}"
    else:
        mantissa, exponent = f"{v:.2e}".split("e")
        text = f"{float(mantissa):g} × 10^{int(exponent)}"
    if not unit:
        return text
    return f"{text} × {unit}" if unit[0].isdigit() else f"{text} {unit}"  # "1,342 × 10⁹ bytes"


def _axis(layout: dict, trace: dict, letter: str) -> dict:
    ref = trace.get(f"{letter}axis", letter)  # "x2" for a subplot's trace
    axis = layout.get(f"{letter}axis{ref[1:]}") or {}
    return axis if isinstance(axis, dict) else {}


def _axis_title(axis: dict) -> str:
    title = axis.get("title")
    return _plain(title.get("text") if isinstance(title, dict) else title)


def _unit(title: str) -> str:
    """The unit an axis title names: a short title that is one ("GB (10⁹ bytes, log scale)": GB, "tokens/s"), else
    its last bracket when that is a unit ("time (ms)": ms, "loss (nats per token)"), else a unit the title starts
    with ("ms since the start (measured)": ms). A bracket that says something else ("(log)", "(batch)",
    "(0 = prefill)") is no unit."""
    bare = _bare(title)
    words = bare.split()
    if 0 < len(words) <= 3 and ("/" in words[-1] or words[-1] in UNIT_WORDS):
        return bare
    found = re.findall(r"\(([^()]{1,24})\)\s*$", title)
    if found:
        unit = found[-1].replace("log scale", "").strip(" ,")
        if len(unit.split()) <= 3 and "=" not in unit and any(w in UNIT_WORDS or "/" in w for w in unit.split()):
            return unit
    if len(words) > 1 and words[0] in UNIT_WORDS and words[1] in ("since", "per", "of", "from"):
        return words[0]
    return ""


def _bare(title: str) -> str:
    """An axis title without its bracket: "rank (most likely first)" is "rank"."""
    return re.sub(r"\s*\([^()]*\)\s*$", "", title).strip() or title


def _is_percent(axis: dict, title: str) -> bool:
    return "%" in str(axis.get("tickformat", "")) or title.strip().lower() in FRACTION_TITLES


def _title(layout: dict) -> str:
    title = layout.get("title")
    return _plain(title.get("text") if isinstance(title, dict) else title)


def _on_axis(label, axis_title: str, unit: str = "") -> str:
    """A numbered category read with its axis's name ("layer 3", "arrival time 0.14 s"; an equation axis "α = 0.5"),
    a word or an axis without a title alone."""
    if not (axis_title and _is_number(label)):
        return number(label)
    name = _bare(axis_title)
    if " = " in name:  # "α = accepted ÷ checked"
        return f"{name.split(' = ')[0]} = {number(label, unit=unit)}"
    return f"{name} {number(label, unit=unit)}"


def _series(trace: dict, layout: dict, most: int, fallback_name: str = "") -> str:
    """One trace: its name, then its largest values (bars) or its course (lines, markers)."""
    kind = trace.get("type", "scatter")
    name = _plain(trace.get("name")) or fallback_name
    head = f"{name}: " if name else ""
    if kind == "heatmap":
        return head + _heatmap(trace, layout)
    horizontal = trace.get("orientation") == "h"
    label_letter, value_letter = ("y", "x") if horizontal else ("x", "y")
    labels, values = _values(trace.get(label_letter)), _values(trace.get(value_letter))
    value_axis, label_axis = _axis(layout, trace, value_letter), _axis(layout, trace, label_letter)
    value_title, label_title = _axis_title(value_axis), _axis_title(label_axis)
    percent = _is_percent(value_axis, value_title)
    unit = "" if percent else _unit(value_title)
    numeric_labels = bool(labels) and all(_is_number(label) for label in labels)

    label_unit = _unit(label_title) if label_title != _bare(label_title) else ""

    def where(label) -> str:  # an axis of numbers names each ("rank 2"); one with words among them, none
        return _on_axis(label, label_title if numeric_labels else "", label_unit)

    pairs = [(label, v) for label, v in zip(labels or range(len(values)), values) if _is_number(v) and v == v]
    if not pairs:
        return ""
    if kind == "bar" and trace.get("base") is not None:  # bars from a start to an end (a Gantt chart)
        starts = [float(b) for b in _values(trace.get("base")) if _is_number(b)]
        ends = [start + float(v) for start, (_, v) in zip(starts, pairs)]
        span = f"from {number(min(starts), percent, unit)} to {number(max(ends), percent, unit)}" if starts else ""
        each = ""
        if len(pairs) > 1:  # how long one bar is: the median, as a pass or a request's time is read off the chart
            each = f", {number(float(np.median([float(v) for _, v in pairs])), percent, unit)} each (median)"
        return f"{head}{len(pairs)} {'bar' if len(pairs) == 1 else 'bars'} {span}".rstrip() + each
    if kind == "bar":
        top = sorted(pairs, key=lambda pair: -float(pair[1]))
        shown = [pair for pair in top if number(pair[1], percent) not in ("0", "0%")] or top
        colon = ":" if numeric_labels else ""
        return head + ", ".join(f"{where(label)}{colon} {number(v, percent, unit)}" for label, v in shown[:most])
    if len(pairs) == 1:
        label, v = pairs[0]
        return f"{head}{number(v, percent, unit)} at {where(label)}"
    (first_label, first), (last_label, last) = pairs[0], pairs[-1]
    if kind == "scatter" and len(pairs) == 2 and first_label == last_label and "markers" not in trace.get("mode", ""):
        return f"{head}a vertical line at {where(first_label)}"  # a marker (a threshold's P), not a course of values
    peak_label, peak = max(pairs, key=lambda pair: float(pair[1]))
    course = f"{len(pairs)} points from {number(first, percent, unit)} at {where(first_label)} to "
    course += f"{number(last, percent, unit)} at {where(last_label)}"
    if peak not in (first, last):
        course += f", highest {number(peak, percent, unit)} at {where(peak_label)}"
    return head + course


def _heatmap(trace: dict, layout: dict) -> str:
    """A grid: its size, then its highest and lowest cell with their row and column. The value is the cell's own
    number where the chart writes one in it (a colour on a log scale is not the number), with the colour bar's title."""
    z = np.asarray(trace.get("z") or [[0]], dtype=float)
    rows, cols = _axis_title(_axis(layout, trace, "y")), _axis_title(_axis(layout, trace, "x"))
    by = f" ({_bare(rows)} by {_bare(cols)})" if rows and cols else ""
    size = f"{z.shape[0]} × {z.shape[-1]} cells{by}"
    written = np.asarray(trace.get("text") or [], dtype=object)
    values = z
    if written.shape == z.shape and all(_is_number(v) for v in written.ravel()):
        values = written.astype(float)
    if np.isnan(values).all():
        return size
    bar_title = (trace.get("colorbar") or {}).get("title")  # the cells' unit ("rank", "% moved")
    unit = _plain(bar_title.get("text") if isinstance(bar_title, dict) else bar_title)
    row_labels, col_labels = _values(trace.get("y")), _values(trace.get("x"))

    def where(labels: list, i: int, axis_title: str) -> str:
        return _on_axis(labels[i] if i < len(labels) else i, axis_title)

    def cell(index) -> str:
        r, c = np.unravel_index(index, values.shape)
        value = number(values[r, c]) + (f" {unit}" if unit else "")
        return f"{value} at {where(row_labels, r, rows)}, {where(col_labels, c, cols)}"

    return f"{size}; highest {cell(np.nanargmax(values))}, lowest {cell(np.nanargmin(values))}"


def describe(fig) -> str:
    """One sentence: the chart's title, then each series' largest values (bars) or its course (lines); unnamed
    series of a grid of subplots take their panel's title."""
    spec = fig.to_plotly_json()
    layout = spec.get("layout", {}) or {}
    traces = [trace for trace in spec.get("data", []) if trace.get("visible", True) is not False]
    panels = [_plain(note.get("text")) for note in layout.get("annotations", []) or [] if isinstance(note, dict)]
    unnamed = [trace for trace in traces if not _plain(trace.get("name"))]
    panel_names = panels if len(unnamed) > 1 and len(panels) == len(unnamed) else []
    most = MOST_POINTS if len(traces) == 1 else MOST_POINTS_EACH
    parts, panel = [], iter(panel_names)
    for trace in traces:
        fallback = next(panel, "") if panel_names and not _plain(trace.get("name")) else ""
        part = _series(trace, layout, most, fallback)
        if part:
            parts.append(part)
    if len(parts) > MOST_SERIES:
        parts = parts[:MOST_SERIES] + [f"and {len(parts) - MOST_SERIES} more series"]
    title = _title(layout)
    body = "; ".join(parts) if parts else "no data yet"
    return f"{title}: {body}." if title else f"{body[0].upper()}{body[1:]}."
