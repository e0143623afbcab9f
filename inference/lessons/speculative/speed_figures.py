"""Figures of the Speculative decoding page that time a run: the measured timeline against plain decoding, the theory
curve, and the sweep over γ and temperature (on each target). Pure functions from data to a Plotly figure; no
Streamlit here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from inference.core.machine import describe_bytes
from inference.lessons.speculative.comparison import PlainTiming
from inference.lessons.speculative.figures import (
    DRAFT_PASS_COLOUR,
    PLAIN_COLOUR,
    TARGET_COLOUR,
    VERIFY_COLOUR,
    legend_below_at,
)
from inference.lessons.speculative.summary import predicted_speedup
from inference.lessons.style import PALETTE, hline, plain_figure


def weights_label(side: pd.DataFrame) -> str:
    """A sweep side's weights as a chart names them: '23.3 MB of weights'."""
    return f"{describe_bytes(int(side['weight_bytes'].iloc[0]))} of weights"


COINCIDE_TOLERANCE = 0.01  # of the tallest line's span: closer than this, one line hides the other on screen


def coinciding_names(lines: list[tuple[str, list, list]], tolerance: float = COINCIDE_TOLERANCE) -> list[str]:
    """Each line's (name, x, y) legend name: a line drawn over an earlier one (same x, every y within `tolerance` of
    the lines' span) would leave a legend entry for a curve nobody can see, so its name says which line it hides."""
    ys = [pd.to_numeric(pd.Series(y, dtype="object"), errors="coerce").to_numpy(float) for _, _, y in lines]
    finite = [y[np.isfinite(y)] for y in ys]
    span = max([float(y.max() - y.min()) for y in finite if len(y)] + [0.0]) or 1.0
    names = [name for name, _, _ in lines]
    for j, (_, x, _) in enumerate(lines):
        for i in range(j):
            same_x = len(lines[i][1]) == len(x) and list(lines[i][1]) == list(x)
            if not same_x or np.isfinite(ys[i]).sum() == 0:
                continue
            gap = np.abs(ys[i] - ys[j])
            if np.array_equal(np.isfinite(ys[i]), np.isfinite(ys[j])) and np.nanmax(gap) <= tolerance * span:
                names[j] = f"{names[j]} (coincides with {lines[i][0]})"
                break
    return names


def mark_coinciding(fig: go.Figure, tolerance: float = COINCIDE_TOLERANCE) -> go.Figure:
    """`coinciding_names` on a figure's lines."""
    lines = [t for t in fig.data if t.type == "scatter" and t.mode and "lines" in t.mode]
    for line, name in zip(lines, coinciding_names([(t.name, t.x, t.y) for t in lines], tolerance)):
        line.name = name
    return fig


def _mark_coinciding_traces(data: list[dict], tolerance: float = COINCIDE_TOLERANCE) -> None:
    """`coinciding_names` on plain trace dicts (renamed in place)."""
    lines = [t for t in data if t.get("type") == "scatter" and "lines" in t.get("mode", "")]
    for line, name in zip(lines, coinciding_names([(t["name"], t["x"], t["y"]) for t in lines], tolerance)):
        line["name"] = name


def timeline_figure(rounds: list, plain: PlainTiming, presenter: bool = False) -> go.Figure:
    """Measured wall time, end to end: the speculative run's draft passes and verify passes (and
    the sampling and bookkeeping between them), above plain decoding of the same tokens."""
    spec_row, plain_row = "speculative", "plain decoding"
    segments = {"draft pass": [], "verify pass (target)": [], "sampling, bookkeeping": []}
    clock = 0.0
    for r in rounds:
        other = max(0.0, r.round_ms - sum(r.draft_ms) - r.verify_ms)
        for ms in r.draft_ms:
            segments["draft pass"].append((clock, ms, f"round {r.index}: draft pass {ms:.2f} ms"))
            clock += ms
        segments["verify pass (target)"].append(
            (
                clock,
                r.verify_ms,
                f"round {r.index}: verify {r.verify_positions} positions, {r.verify_ms:.2f} ms, "
                f"{len(r.new_tokens)} token(s) out",
            )
        )
        clock += r.verify_ms
        segments["sampling, bookkeeping"].append((clock, other, f"round {r.index}: {other:.2f} ms"))
        clock += other
    colours = {
        "draft pass": DRAFT_PASS_COLOUR,
        "verify pass (target)": VERIFY_COLOUR,
        "sampling, bookkeeping": PALETTE["light_grey"],
    }
    bars = {"type": "bar", "orientation": "h", "hoverinfo": "text"}
    data = [
        bars
        | {
            "y": [spec_row] * len(items),
            "x": [i[1] for i in items],
            "base": [i[0] for i in items],
            "name": name,
            "marker": {"color": colours[name], "line": {"color": "white", "width": 0.5}},
            "hovertext": [i[2] for i in items],
        }
        for name, items in segments.items()
        if items
    ]
    starts = np.concatenate([[0.0], np.cumsum(plain.step_ms)[:-1]])
    data.append(
        bars
        | {
            "y": [plain_row] * len(plain.step_ms),
            "x": plain.step_ms,
            "base": starts.tolist(),  # a list, as Plotly's validated `base` sends it (not a typed array)
            "name": "plain: one target pass per token",
            "marker": {"color": PLAIN_COLOUR, "line": {"color": "white", "width": 0.5}},
            "hovertext": [f"token {i}: {ms:.2f} ms" for i, ms in enumerate(plain.step_ms)],
        }
    )
    layout = {
        "barmode": "overlay",
        "xaxis": {"title": {"text": "ms since the start (measured)"}, "rangemode": "tozero"},
        "yaxis": {"categoryorder": "array", "categoryarray": [plain_row, spec_row], "automargin": True},
    }
    # legend clear of the axis title (they overlapped at 800 px)
    return plain_figure(data, layout, "Where the time went", presenter, height=330, legend=legend_below_at(-0.5))


def theory_figure(
    gamma: int,
    cost_ratio: float,
    verify_cost: float,
    alpha: float | None,
    measured_speedup: float | None,
    presenter: bool = False,
) -> go.Figure:
    """Predicted speed-up against the acceptance rate alpha for this gamma: Leviathan et al.'s
    formula at the measured draft cost c, the same with the measured verify cost, and a draft
    as expensive as the target (c = 1). Under the line at 1, speculation loses."""
    alphas = np.linspace(0, 1, 101)
    curves = [
        # short names: at 800 px in presenter mode longer ones were cut (the caption says these are the formula)
        (f"c = {cost_ratio:.2f}, verify 1 pass", cost_ratio, 1.0, "solid"),
        (f"c = {cost_ratio:.2f}, verify {verify_cost:.2f} (measured)", cost_ratio, verify_cost, "dash"),
        ("c = 1: draft as slow as target", 1.0, 1.0, "dot"),
    ]
    data = [
        {
            "type": "scatter",
            "x": alphas,
            "y": [predicted_speedup(a, gamma, c, v) for a in alphas],
            "mode": "lines",
            "name": name,
            "line": {"dash": dash, "width": 3 if dash == "solid" else 2},
        }
        for name, c, v, dash in curves
    ]
    break_even = hline(1, {"color": PALETTE["red"], "width": 2}, "below: SLOWER than plain", "top left")
    if alpha is not None and measured_speedup is not None:
        data.append(
            {
                "type": "scatter",
                "x": [alpha],
                "y": [measured_speedup],
                "mode": "markers+text",
                "name": "this run, measured",
                "marker": {"size": 16, "color": TARGET_COLOUR, "symbol": "star"},
                "text": [f"measured {measured_speedup:.2f}×  "],
                "textposition": "middle left" if alpha > 0.5 else "middle right",  # stays inside the plot
            }
        )
    _mark_coinciding_traces(data)
    layout = {
        "shapes": [break_even[0]],
        "annotations": [break_even[1]],
        "xaxis": {"title": {"text": "α = accepted ÷ checked"}, "range": [0, 1.02]},
        "yaxis": {"title": {"text": "speed-up (×)"}, "rangemode": "tozero"},
        "margin": {"b": 10},
    }
    legend = legend_below_at(-0.2, one_per_line=True)
    return plain_figure(data, layout, f"Speed-up against α at γ = {gamma}", presenter, height=430, legend=legend)


TEMPERATURE_COLOURS = [PALETTE["blue"], PALETTE["orange"], PALETTE["red"], PALETTE["slate"]]


def _measured_and_predicted(table: pd.DataFrame, measured: str, predicted: str, predicted_name: str) -> list[dict]:
    """Against γ, one colour per temperature: the `measured` column thick with points, the `predicted` one dashed
    (plain trace dicts, for `plain_figure.plain_figure`: both sweep charts are redrawn on every round once measured)."""
    data = []
    for colour, (t, rows) in zip(TEMPERATURE_COLOURS, table.groupby("temperature", sort=True)):
        at_t, gammas = f"T = {t:g}, ", rows["gamma"].to_numpy()
        line = {"type": "scatter", "x": gammas}
        data.append(
            line
            | {
                "y": rows[measured].to_numpy(),
                "mode": "lines+markers",
                "name": at_t + "measured",
                "line": {"color": colour, "width": 3},
                "marker": {"size": 9},
            }
        )
        data.append(
            line
            | {
                "y": rows[predicted].to_numpy(),
                "mode": "lines",
                "name": at_t + predicted_name,
                "line": {"color": colour, "dash": "dash"},
            }
        )
    _mark_coinciding_traces(data)
    return data


SWEEP_X_AXIS = {"title": {"text": "γ: tokens drafted per round"}, "dtick": 1}


def sweep_figure(table: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Speed-up against gamma at each temperature: measured (solid, points) and predicted from the
    same run's alpha and measured costs (dashed)."""
    data = _measured_and_predicted(table, "measured_speedup", "predicted_speedup_measured_verify", "predicted")
    shape, note = hline(1, {"color": PALETTE["red"], "width": 2}, "break-even", "bottom right")
    layout = {
        "shapes": [shape],
        "annotations": [note],
        "xaxis": SWEEP_X_AXIS,
        "yaxis": {"title": {"text": "speed-up over plain decoding (×)"}, "rangemode": "tozero"},
    }
    return plain_figure(data, layout, "Speed-up, by γ", presenter, height=440, legend=legend_below_at(-0.2))


def sweep_alpha_figure(table: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Tokens per target pass against gamma: measured, and (1 − α^(γ+1)) / (1 − α) from the same run's α."""
    data = _measured_and_predicted(table, "tokens_per_pass", "predicted_tokens_per_pass", "formula")
    layout = {"xaxis": SWEEP_X_AXIS, "yaxis": {"title": {"text": "tokens per target pass"}, "rangemode": "tozero"}}
    title = "Tokens per target pass, by γ"
    return plain_figure(data, layout, title, presenter, height=440, legend=legend_below_at(-0.2))


SIDE_COLOURS = (PALETTE["blue"], PALETTE["orange"])  # the page's target, then the other bundled target


def sweep_verify_figure(table: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """The verify pass's cost against γ, one line per target (`sweep.sweep_sides`'s table; the median over the
    sweep's temperatures, which do not change a pass), beside the 1 pass Leviathan et al.'s formula assumes: why
    speculation wins on one target and loses on the other, or on both."""
    data = []
    for colour, (name, side) in zip(SIDE_COLOURS, table.groupby("target", sort=False)):
        by_gamma = side.groupby("gamma")["verify_cost"].median()
        data.append(
            {
                "type": "scatter",
                "x": by_gamma.index.to_numpy(),
                "y": by_gamma.to_numpy(),
                "mode": "lines+markers",
                "name": f"{name}<br>({weights_label(side)})",  # two lines: one was cut at 800 px
                "line": {"color": colour, "width": 3},
                "marker": {"size": 9},
            }
        )
    shape, note = hline(1, {"color": PALETTE["red"], "width": 2, "dash": "dot"}, "1 pass: the formula's assumption")
    layout = {
        "shapes": [shape],
        "annotations": [note],
        "xaxis": SWEEP_X_AXIS,
        "yaxis": {"title": {"text": "verify pass ÷ one-token pass"}, "rangemode": "tozero"},
    }
    title = "Verify pass cost, by γ"  # short: a longer title ran under the chart's toolbar at 800 px
    return plain_figure(data, layout, title, presenter, height=400, legend=legend_below_at(-0.2, one_per_line=True))
