"""A chart as one sentence: what it shows and its key numbers, read from the very data the chart draws.

Every chart on every page is followed by this text (app_pages/shared/charts.py), so a screen reader, a student who
cannot tell two colours apart, or a teacher reading numbers aloud gets the same numbers as the picture."""

from __future__ import annotations

import base64

import numpy as np

MOST_POINTS = 5  # the largest values named per series: a sentence, not a table


def figure_spec(fig) -> dict:
    """The figure's plain {"data", "layout"} without building Plotly's objects when it is a PlainFigure."""
    spec = fig.__dict__.get("_plain_spec")
    if spec is not None and not fig.__dict__.get("_plain_built"):
        return spec
    return fig.to_plotly_json()


def _values(raw) -> list:
    if raw is None:
        return []
    if isinstance(raw, dict) and "bdata" in raw:  # a typed-array spec: decode it back to numbers
        dtypes = {
            "f8": "<f8",
            "f4": "<f4",
            "i4": "<i4",
            "i2": "<i2",
            "i1": "<i1",
            "u1": "<u1",
            "u2": "<u2",
            "u4": "<u4",
        }
        return list(np.frombuffer(base64.b64decode(raw["bdata"]), dtype=dtypes.get(raw["dtype"], "<f8")))
    return list(np.asarray(raw, dtype=object).ravel())


def _number(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if v != v:
            return "n/a"
        return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(value)


def _title(layout: dict) -> str:
    title = layout.get("title")
    text = title.get("text") if isinstance(title, dict) else title
    return (text or "").replace("<br>", " ").strip()


def _series(trace: dict) -> str:
    kind = trace.get("type", "scatter")
    name = (trace.get("name") or "").strip()
    orientation_h = trace.get("orientation") == "h"
    labels, numbers = (_values(trace.get("y")), _values(trace.get("x"))) if orientation_h else (
        _values(trace.get("x")), _values(trace.get("y")))  # fmt: skip
    if kind == "heatmap":
        z = np.asarray(trace.get("z") or [[0]], dtype=float)
        return f"{name or 'heatmap'}: {z.shape[0]} x {z.shape[-1]} cells from {_number(np.nanmin(z))} to {_number(np.nanmax(z))}"
    if not numbers:
        return ""
    pairs = [
        (label, n) for label, n in zip(labels or range(len(numbers)), numbers) if isinstance(n, (int, float, np.number))
    ]
    if not pairs:
        return ""
    head = f"{name}: " if name else ""
    if kind == "bar":
        top = sorted(pairs, key=lambda pair: -float(pair[1]))[:MOST_POINTS]
        return head + ", ".join(f"{label} {_number(n)}" for label, n in top)
    first, last = pairs[0], pairs[-1]
    peak = max(pairs, key=lambda pair: float(pair[1]))
    return (
        head
        + f"{len(pairs)} points from {_number(first[1])} at {first[0]} to {_number(last[1])} at {last[0]}, highest {_number(peak[1])} at {peak[0]}"
    )


def describe(fig) -> str:
    """One sentence: the chart's title, then each named series' largest values (bars) or its course (lines)."""
    spec = figure_spec(fig)
    parts = [part for part in (_series(trace) for trace in spec.get("data", [])) if part]
    title = _title(spec.get("layout", {}))
    body = "; ".join(parts) if parts else "no data yet"
    return f"{title}: {body}." if title else f"{body}."
