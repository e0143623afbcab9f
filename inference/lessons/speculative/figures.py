"""Figures and HTML for the Speculative decoding page: the text by who wrote each token, one
round's drafts and their tests, the residual distribution, the measured timeline against plain
decoding, the theory curve and the gamma sweep. Pure functions from data to a Plotly figure (or
an HTML string); no Streamlit here. Every token text is escaped (`style.label` for charts,
`html.escape` for chips)."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from inference.core.tokens import VISIBLE_WHITESPACE
from inference.lessons.speculative import run as spec
from inference.lessons.speculative.timing import PlainTiming
from inference.lessons.style import (
    PALETTE,
    hline,
    label,
    plain_figure,
    repr_token,
)

# Who wrote a token, on every chart and chip of this page.
ACCEPTED_COLOUR = "#3a9a5b"  # a draft token the target accepted
REJECTED_COLOUR = PALETTE["red"]  # the draft token that failed its test
UNCHECKED_COLOUR = PALETTE["light_grey"]  # drafted after a rejection: never tested
TARGET_COLOUR = PALETTE["orange"]  # the target's own token (residual draw, or bonus)
DRAFT_COLOUR = PALETTE["lavender"]  # q, the draft's probability
PROB_COLOUR = PALETTE["blue"]  # p, the target's probability
RESIDUAL_COLOUR = PALETTE["orange"]
PLAIN_COLOUR = PALETTE["blue_grey"]
VERIFY_COLOUR = PALETTE["blue"]
DRAFT_PASS_COLOUR = PALETTE["lavender"]
STATUS_COLOURS = {"accepted": ACCEPTED_COLOUR, "rejected": REJECTED_COLOUR, "unchecked": UNCHECKED_COLOUR}

CHIP_CSS = """
<style>
.spec-box { line-height: 2.3; font-size: 1.15rem; padding: 0.6rem 0.8rem; border: 1px solid #ddd;
            border-radius: 0.5rem; background: #fff; word-break: break-word; }
.spec-chip { display: inline-block; padding: 0 0.25rem; margin: 0.08rem 0.06rem; border-radius: 0.3rem;
             white-space: pre; color: #111; }
.spec-chip.prompt { background: #eceff3; color: #555; border: 1px dashed #b9c0ca; }
.spec-chip.accepted { background: #cdebd6; border-bottom: 3px solid #3a9a5b; }
.spec-chip.rejected { background: #f6d2cd; border-bottom: 3px solid #c0392b; text-decoration: line-through; }
.spec-chip.unchecked { background: #eeeeee; color: #777; text-decoration: line-through; }
.spec-chip.target { background: #fde3c8; border-bottom: 3px solid #f28e2b; }
.spec-chip.latest { outline: 2px solid #333; }
.spec-round-sep { display: inline-block; width: 2px; height: 1.2em; background: #bbb; margin: 0 0.2rem;
                  vertical-align: middle; }
.spec-legend { font-size: 0.9rem; color: #444; margin-top: 0.3rem; }
.spec-legend .spec-chip { line-height: 1.6; }
</style>
"""


def _chip(text: str, kind: str, title: str = "", latest: bool = False, token: bool = True) -> str:
    shown = text.translate(VISIBLE_WHITESPACE) if token else text  # a token's spaces are shown as ␣
    visible = html.escape(shown, quote=True).replace("↵", "↵<br>")
    extra = " latest" if latest else ""
    return f'<span class="spec-chip {kind}{extra}" title="{html.escape(title, quote=True)}">{visible}</span>'


LEGEND_HTML = (
    '<div class="spec-legend">'
    + _chip("draft, accepted", "accepted", token=False)
    + " "
    + _chip("target's own token", "target", token=False)
    + " "
    + _chip("draft, rejected", "rejected", token=False)
    + " "
    + _chip("drafted after a rejection, never checked", "unchecked", token=False)
    + " &nbsp;a bar │ separates the rounds: each round is ONE pass of the target.</div>"
)


def text_html(tokenizer, prompt_ids: list[int], rounds: list) -> str:
    """The prompt as dashed chips, then every round's new tokens: drafts the target accepted in
    green, the target's own token in orange, rounds separated by a bar."""
    parts = [CHIP_CSS, '<div class="spec-box">']
    special = set(tokenizer.all_special_ids)
    for token_id in prompt_ids:
        shown = tokenizer.convert_ids_to_tokens(token_id) if token_id in special else tokenizer.decode([token_id])
        parts.append(_chip(shown, "prompt", f"prompt token {token_id}"))
    for r in rounds:
        parts.append('<span class="spec-round-sep"></span>')
        for i, token_id in enumerate(r.new_tokens):
            own = i == len(r.new_tokens) - 1 and token_id == r.token_id and i == r.accepted
            text = (
                tokenizer.convert_ids_to_tokens(token_id)
                if token_id in special
                else (r.token_text if own else r.checks[i].text)
            )
            how = (
                {
                    "residual": "drawn from the residual max(0, p − q)",
                    "bonus": "bonus: every draft was accepted",
                    "target": "nothing was drafted: a plain step",
                }[r.token_kind]
                if own
                else "draft accepted"
            )
            parts.append(_chip(text, "target" if own else "accepted", f"round {r.index}: {how}"))
    parts.append("</div>")
    parts.append(LEGEND_HTML)
    return "".join(parts)


def round_html(record) -> str:
    """One round in a line: each drafted token by its fate, then the target's token."""
    parts = [CHIP_CSS, '<div class="spec-box">']
    if not record.checks:
        parts.append('<span style="color:#555">(nothing drafted)</span> ')
    for c in record.checks:
        parts.append(_chip(c.text, c.status, f"drafted #{c.position + 1}: {c.status}"))
    parts.append(" → ")
    parts.append(_chip(record.token_text, "target", f"the target's token ({record.token_kind})", latest=True))
    parts.append("</div>")
    return "".join(parts)


def _token_names(record) -> list[str]:
    """Axis labels on two lines (position, then the token), so neighbours never run together."""
    return [f"{c.position + 1}<br>{label(repr_token(c.text.translate(VISIBLE_WHITESPACE)))}" for c in record.checks]


def _percent(v: float) -> str:
    return f"{v:.0%}" if v >= 0.005 else f"{v:.1%}"


def _legend_below(y: float, one_per_line: bool = False) -> dict:
    """`style.legend_below`'s placement, for `style.plain_figure`."""
    return {"orientation": "v" if one_per_line else "h", "y": y, "yanchor": "top", "x": 0, "xanchor": "left"}


# The charts below are redrawn on every round: built from plain dicts (`style.plain_figure`), not through Plotly's
# validated builders (~70% of the page's script time per round). tests/test_speculative_figures.py holds each equal
# to the validated figure of the same spec.


def p_q_figure(record, greedy: bool, presenter: bool = False) -> go.Figure:
    """Each drafted token: the draft's probability q beside the target's p. Greedy runs show the
    models' probabilities at temperature 1: the rule itself only asks whether the token is the
    target's top token."""
    names = _token_names(record)
    if greedy:
        q = [c.q_raw if c.q_raw is not None else 1.0 for c in record.checks]
        p = [c.p_raw for c in record.checks]
        title = "q (draft) vs p (target), T=1"
    else:
        q, p = [c.q for c in record.checks], [c.p for c in record.checks]
        title = "q (draft) vs p (target)"
    data = [
        {
            "type": "bar",
            "x": names,
            "y": q,
            "name": "q: the draft's probability",
            "marker": {"color": DRAFT_COLOUR},
            "text": [_percent(v) for v in q],
            "textposition": "outside",
        },
        {
            "type": "bar",
            "x": names,
            "y": p,
            "name": "p: the target's probability",
            "marker": {
                "color": PROB_COLOUR,
                "line": {"color": [STATUS_COLOURS[c.status] for c in record.checks], "width": 3},
            },
            "text": [_percent(v) for v in p],
            "textposition": "outside",
        },
    ]
    layout = {
        "barmode": "group",
        "bargap": 0.3,
        "yaxis": {"tickformat": ".0%", "range": [0, 1.18], "title": {"text": "probability"}},
        "xaxis": {"tickangle": 0, "automargin": True},
    }
    legend = _legend_below(-0.3 if presenter else -0.22)
    return plain_figure(data, layout, title, presenter, height=360, legend=legend)


def acceptance_figure(record, presenter: bool = False) -> go.Figure:
    """The test itself: for each checked token the bar is min(1, p/q), the chance it passes; the
    diamond is the uniform u drawn for it. u at or under the bar: accepted."""
    checked = [c for c in record.checks if c.status != "unchecked"]
    names = _token_names(record)[: len(checked)]
    data = [
        {
            "type": "bar",
            "x": names,
            "y": [min(1.0, c.ratio) for c in checked],
            "name": "min(1, p/q): chance to accept (label: p/q)",
            "marker": {"color": [STATUS_COLOURS[c.status] for c in checked]},
            "text": [f"{c.ratio:.2f}" if c.ratio < 100 else "> 100" for c in checked],  # short: neighbours overlapped
            "textposition": "outside",
        },
        {
            "type": "scatter",
            "x": names,
            "y": [c.u for c in checked],
            "mode": "markers+text",
            "name": "u: the uniform drawn",
            "marker": {
                "symbol": "diamond",
                "size": 16,
                "color": PALETTE["ink"],
                "line": {"color": "white", "width": 1},
            },
            "text": [f"u = {c.u:.2f}" for c in checked],
            "textposition": "middle right",
        },
    ]
    layout = {"yaxis": {"range": [0, 1.18], "title": {"text": ""}}, "xaxis": {"tickangle": 0, "automargin": True}}
    legend = _legend_below(-0.3 if presenter else -0.22)
    return plain_figure(data, layout, "Accept while u ≤ p/q", presenter, height=360, legend=legend)


def residual_figure(record, presenter: bool = False) -> go.Figure:
    """At the rejection: p, q and normalise(max(0, p − q)) for the tokens that matter most; the
    target's token (drawn from the residual) is marked."""
    rows = record.residual_top[::-1]  # most likely at the top
    names = [
        ("▶ " if token_id == record.token_id else "") + label(repr_token(text.translate(VISIBLE_WHITESPACE)))
        for token_id, text, *_ in rows
    ]
    bars = {"type": "bar", "y": names, "orientation": "h"}
    data = [
        bars | {"x": [r[3] for r in rows], "name": "q (draft)", "marker": {"color": DRAFT_COLOUR}},
        bars | {"x": [r[2] for r in rows], "name": "p (target)", "marker": {"color": PROB_COLOUR}},
        bars
        | {
            "x": [r[4] for r in rows],
            "name": "residual: normalise(max(0, p − q))",
            "marker": {"color": RESIDUAL_COLOUR},
            "text": [f"{r[4]:.0%}" if r[4] > 0 else "0" for r in rows],
            "textposition": "outside",
        },
    ]
    longest = max([max(r[2], r[3], r[4]) for r in rows] + [0.01])
    layout = {
        "barmode": "group",
        "bargap": 0.2,
        "xaxis": {"tickformat": ".0%", "range": [0, longest * 1.25], "title": {"text": "probability"}},
        "yaxis": {"automargin": True},
    }
    return plain_figure(
        data,
        layout,
        "After the rejection: the target draws from what p has beyond q",
        presenter,
        height=170 + 58 * len(rows),
        legend=_legend_below(-0.12),
    )


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
    return plain_figure(data, layout, "Where the time went", presenter, height=330, legend=_legend_below(-0.5))


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
            "y": [spec.predicted_speedup(a, gamma, c, v) for a in alphas],
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
    legend = _legend_below(-0.2, one_per_line=True)
    return plain_figure(data, layout, f"Speed-up against α at γ = {gamma}", presenter, height=430, legend=legend)


TEMPERATURE_COLOURS = [PALETTE["blue"], PALETTE["orange"], PALETTE["red"], PALETTE["slate"]]


def _measured_and_predicted(table: pd.DataFrame, measured: str, predicted: str, predicted_name: str) -> list[dict]:
    """Against γ, one colour per temperature: the `measured` column thick with points, the `predicted` one dashed
    (plain trace dicts, for `style.plain_figure`: both sweep charts are redrawn on every round once measured)."""
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
    return plain_figure(data, layout, "Speed-up, by γ", presenter, height=440, legend=_legend_below(-0.2))


def sweep_alpha_figure(table: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Tokens per target pass against gamma: measured, and (1 − α^(γ+1)) / (1 − α) from the same run's α."""
    data = _measured_and_predicted(table, "tokens_per_pass", "predicted_tokens_per_pass", "formula")
    layout = {"xaxis": SWEEP_X_AXIS, "yaxis": {"title": {"text": "tokens per target pass"}, "rangemode": "tozero"}}
    title = "Tokens per target pass, by γ"
    return plain_figure(data, layout, title, presenter, height=440, legend=_legend_below(-0.2))


SIDE_COLOURS = (PALETTE["blue"], PALETTE["orange"])  # the page's target, then the other bundled target


def sweep_verify_figure(table: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """The verify pass's cost against γ, one line per target (`timing.sweep_sides`'s table; the median over the
    sweep's temperatures, which do not change a pass), beside the 1 pass Leviathan et al.'s formula assumes: why
    speculation wins on one target and loses on the other."""
    data = []
    for colour, (name, side) in zip(SIDE_COLOURS, table.groupby("target", sort=False)):
        by_gamma = side.groupby("gamma")["verify_cost"].median()
        data.append(
            {
                "type": "scatter",
                "x": by_gamma.index.to_numpy(),
                "y": by_gamma.to_numpy(),
                "mode": "lines+markers",
                "name": f"{name}<br>({side['pass_kind'].iloc[0]} a pass)",  # two lines: one was cut at 800 px
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
    return plain_figure(data, layout, title, presenter, height=400, legend=_legend_below(-0.2, one_per_line=True))


def metrics_table(metrics: list[tuple[str, str, str]]) -> pd.DataFrame:
    """The run's metrics (label, value, explanation) as a table: presenter mode shows it as HTML, which wraps."""
    return pd.DataFrame(metrics, columns=["measure", "value", "how"]).set_index("measure")


def rounds_for_display(frame: pd.DataFrame) -> pd.DataFrame:
    """The round table with readable headers and rounded times."""
    out = frame.copy()
    for col in ("draft_ms", "verify_ms", "round_ms"):
        out[col] = out[col].round(2)
    out["target_token"] = [repr_token(t.translate(VISIBLE_WHITESPACE)) for t in out["target_token"]]
    return out.rename(
        columns={
            "round": "round",
            "drafted": "drafted",
            "accepted": "accepted",
            "target_token": "target's token",
            "how": "how",
            "new_tokens": "tokens out",
            "draft_ms": "draft ms",
            "draft_passes": "draft passes",
            "verify_ms": "verify ms",
            "round_ms": "round ms",
        }
    )
