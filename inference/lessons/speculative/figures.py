"""The Speculative page's figures and HTML, pure functions of data: the text by who wrote each token, one round's
tests and residual, the measured timeline, the theory curve and the sweep. Token text is escaped (`label`, `html`)."""

from __future__ import annotations

import html
from itertools import combinations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from inference.core import tokens
from inference.core.machine import describe_bytes
from inference.core.tokens import VISIBLE_WHITESPACE
from inference.lessons import glossary
from inference.lessons.speculative.comparison import predicted_speedup
from inference.lessons.style import PALETTE, base_layout, label, legend_below, repr_token

ACCEPTED_COLOUR, REJECTED_COLOUR, UNCHECKED_COLOUR = "#3a9a5b", PALETTE["red"], PALETTE["light_grey"]
TARGET_COLOUR, DRAFT_COLOUR, PROB_COLOUR = PALETTE["orange"], PALETTE["lavender"], PALETTE["blue"]
STATUS_COLOURS = {"accepted": ACCEPTED_COLOUR, "rejected": REJECTED_COLOUR, "unchecked": UNCHECKED_COLOUR}
TEMPERATURE_COLOURS = [PALETTE["blue"], PALETTE["orange"], PALETTE["red"], PALETTE["slate"]]
SIDE_COLOURS = (PALETTE["blue"], PALETTE["orange"])  # the page's target, then the other bundled target
BREAK_EVEN = {"color": PALETTE["red"], "width": 2}
SWEEP_X_AXIS = {"title": {"text": "γ: tokens drafted per round"}, "dtick": 1}
# The text shows the prompt's last tokens (the Prompt box holds it whole): the first round stays on the first screen.
PROMPT_TAIL, PRESENTER_PROMPT_TAIL = 8, 4

CHIP_CSS = """
<style>
.spec-box { line-height: 2.3; font-size: 1.15rem; padding: 0.6rem 0.8rem; border: 1px solid #ddd;
            border-radius: 0.5rem; background: #fff; word-break: break-word; }
.spec-chip { display: inline-block; padding: 0 0.25rem; margin: 0.08rem 0.06rem; border-radius: 0.3rem;
             white-space: pre; color: #111; }
.spec-chip.prompt { background: #eceff3; color: #555; border: 1px dashed #b9c0ca; }
.spec-chip.accepted { background: #cdebd6; border-bottom: 3px solid #3a9a5b; }
.spec-chip.rejected { background: #f6d2cd; border-bottom: 3px solid #c0392b; text-decoration: line-through; }
.spec-chip.unchecked { background: #eeeeee; color: #555; text-decoration: line-through; }
.spec-chip.target { background: #fde3c8; border-bottom: 3px solid #f28e2b; }
.spec-chip.latest { outline: 2px solid #333; }
.spec-round-sep { display: inline-block; width: 2px; height: 1.2em; background: #bbb; margin: 0 0.2rem;
                  vertical-align: middle; }
.spec-legend { font-size: 0.9rem; color: #444; margin-top: 0.3rem; }
.spec-legend .spec-chip { line-height: 1.6; }
</style>
"""
HOW = {
    "residual": "drawn from the residual max(0, p − q)",
    "bonus": "bonus: every draft was accepted",
    "target": "nothing was drafted: a plain step",
}


def _chip(text: str, kind: str, title: str = "", latest: bool = False, token: bool = True) -> str:
    shown = text.translate(VISIBLE_WHITESPACE) if token else text  # a token's spaces are shown as ␣
    visible = html.escape(shown, quote=True).replace("↵", "↵<br>")
    return f'<span class="spec-chip {kind}{" latest" if latest else ""}" title="{html.escape(title)}">{visible}</span>'


LEGEND_HTML = (
    '<div class="spec-legend">'
    + " ".join(
        _chip(text, kind, token=False)
        for text, kind in (
            ("draft, accepted", "accepted"),
            ("target's own token", "target"),
            ("draft, rejected", "rejected"),
            ("drafted after a rejection, never checked", "unchecked"),
        )
    )
    + " &nbsp;a bar │ separates the rounds: each round is ONE pass of the target. "
    + html.escape(f"␣ {glossary.explain('␣')}.")
    + "</div>"
)


def text_html(tokenizer, prompt_ids: list[int], rounds: list, prompt_tail: int | None = None) -> str:
    """The prompt (its last `prompt_tail` tokens after a chip counting the rest) as dashed chips, then every round's
    new tokens: accepted drafts green, the target's own token orange, rounds separated by a bar."""
    special = set(tokenizer.all_special_ids)
    shown = lambda t, text: tokenizer.convert_ids_to_tokens(t) if t in special else text  # noqa: E731
    earlier, prompt_ids = tokens.prompt_tail(prompt_ids, prompt_tail) if prompt_tail is not None else ("", prompt_ids)
    parts = [CHIP_CSS, '<div class="spec-box">'] + ([_chip(earlier, "prompt", token=False)] if earlier else [])
    parts += [_chip(shown(t, tokenizer.decode([t])), "prompt", f"prompt token {t}") for t in prompt_ids]
    for r in rounds:
        parts.append('<span class="spec-round-sep"></span>')
        for i, token_id in enumerate(r.new_tokens):
            own = i == len(r.new_tokens) - 1 and token_id == r.token_id and i == r.accepted
            how = HOW[r.token_kind] if own else "draft accepted"
            text = shown(token_id, r.token_text if own else r.checks[i].text)
            parts.append(_chip(text, "target" if own else "accepted", f"round {r.index}: {how}"))
    parts += ["</div>", LEGEND_HTML]
    seen = {tokenizer.convert_ids_to_tokens(t) for t in [*prompt_ids, *(t for r in rounds for t in r.new_tokens)]}
    for term in (t for t in glossary.TERMS if t.startswith("<|") and t in seen):  # a special token, explained
        parts.append(f'<div class="spec-legend">{html.escape(f"{term}: {glossary.explain(term)}.")}</div>')
    return "".join(parts)


def round_html(record) -> str:
    """One round in a line: each drafted token by its fate, then the target's token."""
    parts = [CHIP_CSS, '<div class="spec-box">']
    if not record.checks:
        parts.append('<span style="color:#555">(nothing drafted)</span> ')
    parts += [_chip(c.text, c.status, f"drafted #{c.position + 1}: {c.status}") for c in record.checks]
    parts += [" → ", _chip(record.token_text, "target", f"the target's token ({record.token_kind})", latest=True)]
    return "".join(parts + ["</div>"])


def _token_names(record) -> list[str]:
    """Axis labels on two lines (position, then the token), so neighbours never run together."""
    return [f"{c.position + 1}<br>{label(repr_token(c.text.translate(VISIBLE_WHITESPACE)))}" for c in record.checks]


def _percent(v: float) -> str:
    return f"{v:.0%}" if v >= 0.005 else f"{v:.1%}"


def _finish(fig: go.Figure, title: str, presenter: bool, height: int, y: float, one_per_line=False) -> go.Figure:
    return legend_below(base_layout(fig, title, presenter, height), y, one_per_line)


def p_q_figure(record, greedy: bool, presenter: bool = False) -> go.Figure:
    """Each drafted token: the draft's q beside the target's p (greedy runs: both at temperature 1, since the rule
    only asks whether the token is the target's top token)."""
    names, checks = _token_names(record), record.checks
    if greedy:
        q, p = [1.0 if c.q_raw is None else c.q_raw for c in checks], [c.p_raw for c in checks]
    else:
        q, p = [c.q for c in checks], [c.p for c in checks]
    outline = {"color": [STATUS_COLOURS[c.status] for c in checks], "width": 3}
    fig = go.Figure(layout={"barmode": "group", "bargap": 0.3})
    for values, name, marker in (
        (q, "q: the draft's probability", {"color": DRAFT_COLOUR}),
        (p, "p: the target's probability", {"color": PROB_COLOUR, "line": outline}),
    ):
        fig.add_bar(x=names, y=values, name=name, marker=marker, text=[_percent(v) for v in values], textposition="outside")  # fmt: skip
    fig.update_yaxes(tickformat=".0%", range=[0, 1.18], title_text="probability")
    fig.update_xaxes(tickangle=0, automargin=True)
    title = "q (draft) vs p (target)" + (", T=1" if greedy else "")
    return _finish(fig, title, presenter, 360, -0.3 if presenter else -0.22)


def acceptance_figure(record, presenter: bool = False) -> go.Figure:
    """For each checked token the bar is min(1, p/q), its chance to pass, the diamond the uniform u drawn for it."""
    checked = [c for c in record.checks if c.status != "unchecked"]
    names = _token_names(record)[: len(checked)]
    fig = go.Figure()
    fig.add_bar(
        x=names,
        y=[min(1.0, c.ratio) for c in checked],
        name="min(1, p/q): chance to accept (label: p/q)",
        marker_color=[STATUS_COLOURS[c.status] for c in checked],
        text=[f"{c.ratio:.2f}" if c.ratio < 100 else "> 100" for c in checked],
        textposition="outside",
    )
    fig.add_scatter(
        x=names,
        y=[c.u for c in checked],
        mode="markers+text",
        name="u: the uniform drawn",
        marker={"symbol": "diamond", "size": 16, "color": PALETTE["ink"], "line": {"color": "white", "width": 1}},
        text=[f"u = {c.u:.2f}" for c in checked],
        textposition="middle right",
    )
    fig.update_yaxes(range=[0, 1.18])
    fig.update_xaxes(tickangle=0, automargin=True)
    return _finish(fig, "Accept while u ≤ p/q", presenter, 360, -0.3 if presenter else -0.22)


def residual_figure(record, presenter: bool = False) -> go.Figure:
    """At the rejection: p, q and normalise(max(0, p − q)) for the tokens that matter most; ▶ the token drawn."""
    rows = record.residual_top[::-1]  # most likely at the top
    names = [
        ("▶ " if token_id == record.token_id else "") + label(repr_token(text.translate(VISIBLE_WHITESPACE)))
        for token_id, text, *_ in rows
    ]
    fig = go.Figure(layout={"barmode": "group", "bargap": 0.2})
    for column, name, colour in (
        (3, "q (draft)", DRAFT_COLOUR),
        (2, "p (target)", PROB_COLOUR),
        (4, "residual: normalise(max(0, p − q))", TARGET_COLOUR),
    ):
        text = [f"{r[4]:.0%}" if r[4] > 0 else "0" for r in rows] if column == 4 else None
        fig.add_bar(y=names, x=[r[column] for r in rows], orientation="h", name=name, marker_color=colour, text=text,
                    textposition="outside")  # fmt: skip
    longest = max([max(r[2], r[3], r[4]) for r in rows] + [0.01])
    fig.update_xaxes(tickformat=".0%", range=[0, longest * 1.25], title_text="probability")
    fig.update_yaxes(automargin=True)
    title = "After the rejection: the target draws from what p has beyond q"
    return _finish(fig, title, presenter, 170 + 58 * len(rows), -0.12)


def timeline_figure(rounds: list, plain, presenter: bool = False) -> go.Figure:
    """Measured wall time end to end: the run's draft and verify passes (and what a round spends between them), above
    plain decoding of the same tokens."""
    pieces = []  # (row, legend name, ms, hover)
    for r in rounds:
        pieces += [("speculative", "draft pass", ms, f"round {r.index}: draft pass {ms:.2f} ms") for ms in r.draft_ms]
        verify = f"round {r.index}: verify {r.verify_positions} positions, {r.verify_ms:.2f} ms, "
        pieces.append(("speculative", "verify pass (target)", r.verify_ms, f"{verify}{len(r.new_tokens)} token(s) out"))
        other = max(0.0, r.round_ms - sum(r.draft_ms) - r.verify_ms)
        pieces.append(("speculative", "sampling, bookkeeping", other, f"round {r.index}: {other:.2f} ms"))
    bars = pd.DataFrame(pieces, columns=["row", "name", "ms", "hover"])
    bars["start"] = bars["ms"].cumsum() - bars["ms"]
    plain_bars = pd.DataFrame(
        {"row": "plain decoding", "name": "plain: one target pass per token", "ms": plain.step_ms}
    )
    plain_bars["hover"] = [f"token {i}: {ms:.2f} ms" for i, ms in enumerate(plain.step_ms)]
    plain_bars["start"] = plain_bars["ms"].cumsum() - plain_bars["ms"]
    colours = {
        "draft pass": DRAFT_COLOUR,
        "verify pass (target)": PROB_COLOUR,
        "sampling, bookkeeping": UNCHECKED_COLOUR,
    }
    fig = go.Figure(layout={"barmode": "overlay"})
    for name, rows in pd.concat([bars, plain_bars]).groupby("name", sort=False):
        fig.add_bar(
            y=rows["row"], x=rows["ms"], base=rows["start"], orientation="h", name=name, hovertext=rows["hover"],
            hoverinfo="text", marker={"color": colours.get(name, PALETTE["blue_grey"]), "line": {"color": "white", "width": 0.5}},
        )  # fmt: skip
    fig.update_xaxes(title_text="ms since the start (measured)", rangemode="tozero")
    fig.update_yaxes(categoryorder="array", categoryarray=["plain decoding", "speculative"], automargin=True)
    return _finish(fig, "Where the time went", presenter, 330, -0.5)  # legend clear of the axis title


def coinciding_names(lines: list[tuple[str, list, list]], tolerance: float = 0.01) -> list[str]:
    """Each line's (name, x, y) legend name; a line drawn over an earlier one (same x, every y within `tolerance` of
    the lines' span) says which line it hides, rather than naming a curve nobody can see."""
    ys = [pd.to_numeric(pd.Series(list(y), dtype="object"), errors="coerce").to_numpy(float) for _, _, y in lines]
    span = max([float(np.nanmax(y) - np.nanmin(y)) for y in ys if np.isfinite(y).any()] + [0.0]) or 1.0
    names = [name for name, _, _ in lines]
    for i, j in combinations(range(len(lines)), 2):
        same = list(lines[i][1]) == list(lines[j][1]) and np.isfinite(ys[i]).any()
        same = same and np.array_equal(np.isfinite(ys[i]), np.isfinite(ys[j]))
        if same and "(coincides" not in names[j] and np.nanmax(np.abs(ys[i] - ys[j])) <= tolerance * span:
            names[j] = f"{names[j]} (coincides with {lines[i][0]})"
    return names


def _mark_coinciding(fig: go.Figure) -> go.Figure:
    lines = [t for t in fig.data if t.type == "scatter" and t.mode and "lines" in t.mode]
    for line, name in zip(lines, coinciding_names([(t.name, t.x, t.y) for t in lines])):
        line.name = name
    return fig


def theory_figure(gamma, cost_ratio, verify_cost, alpha, measured_speedup, presenter: bool = False) -> go.Figure:
    """Predicted speed-up against α at this γ: the formula at the measured c, the same with the measured verify cost,
    and a draft as slow as the target (c = 1); the run's own point. Under the line at 1, speculation loses."""
    alphas = np.linspace(0, 1, 101)
    curves = [  # short names: longer ones were cut at 800 px in presenter mode
        (f"c = {cost_ratio:.2f}, verify 1 pass", cost_ratio, 1.0, "solid"),
        (f"c = {cost_ratio:.2f}, verify {verify_cost:.2f} (measured)", cost_ratio, verify_cost, "dash"),
        ("c = 1: draft as slow as target", 1.0, 1.0, "dot"),
    ]
    fig = go.Figure()
    for name, c, v, dash in curves:
        y, line = (
            [predicted_speedup(a, gamma, c, v) for a in alphas],
            {"dash": dash, "width": 3 if dash == "solid" else 2},
        )
        fig.add_scatter(x=alphas, y=y, mode="lines", name=name, line=line)
    if alpha is not None and measured_speedup is not None:
        fig.add_scatter(
            x=[alpha],
            y=[measured_speedup],
            mode="markers+text",
            name="this run, measured",
            marker={"size": 16, "color": TARGET_COLOUR, "symbol": "star"},
            text=[f"measured {measured_speedup:.2f}×  "],
            textposition="middle left" if alpha > 0.5 else "middle right",  # stays inside the plot
        )
    fig.add_hline(1, line=BREAK_EVEN, annotation_text="below: SLOWER than plain", annotation_position="top left")
    fig.update_xaxes(title_text="α = accepted ÷ checked", range=[0, 1.02])
    fig.update_yaxes(title_text="speed-up (×)", rangemode="tozero")
    fig = _finish(_mark_coinciding(fig), f"Speed-up against α at γ = {gamma}", presenter, 430, -0.2, True)
    return fig.update_layout(margin_b=10)


def _sweep_lines(table: pd.DataFrame, measured: str, predicted: str, predicted_name: str) -> go.Figure:
    """Against γ, one colour per temperature: the `measured` column thick with points, `predicted` dashed."""
    fig = go.Figure()
    for colour, (t, rows) in zip(TEMPERATURE_COLOURS, table.groupby("temperature", sort=True)):
        gammas = rows["gamma"].to_numpy()
        line = {"color": colour, "width": 3}
        fig.add_scatter(x=gammas, y=rows[measured].to_numpy(), mode="lines+markers", name=f"T = {t:g}, measured",
                        line=line, marker={"size": 9})  # fmt: skip
        fig.add_scatter(x=gammas, y=rows[predicted].to_numpy(), mode="lines", name=f"T = {t:g}, {predicted_name}",
                        line={"color": colour, "dash": "dash"})  # fmt: skip
    fig.update_xaxes(**SWEEP_X_AXIS)
    return _mark_coinciding(fig)


def sweep_figure(table: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Speed-up against γ at each temperature: measured, and predicted from the same run's α and costs."""
    fig = _sweep_lines(table, "measured_speedup", "predicted_speedup_measured_verify", "predicted")
    fig.add_hline(1, line=BREAK_EVEN, annotation_text="break-even", annotation_position="bottom right")
    fig.update_yaxes(title_text="speed-up over plain decoding (×)", rangemode="tozero")
    return _finish(fig, "Speed-up, by γ", presenter, 440, -0.2)


def sweep_alpha_figure(table: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Tokens per target pass against γ: counted, and (1 − α^(γ+1)) / (1 − α) from the same run's α."""
    fig = _sweep_lines(table, "tokens_per_pass", "predicted_tokens_per_pass", "formula")
    fig.update_yaxes(title_text="tokens per target pass", rangemode="tozero")
    return _finish(fig, "Tokens per target pass, by γ", presenter, 440, -0.2)


def sweep_verify_figure(table: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """The verify pass's cost against γ, one line per target (median over the temperatures), beside the 1 pass the
    formula assumes: why speculation wins on one target and loses on the other, or on both."""
    fig = go.Figure()
    for colour, (name, side) in zip(SIDE_COLOURS, table.groupby("target", sort=False)):
        by_gamma = side.groupby("gamma")["verify_cost"].median()
        weights = describe_bytes(int(side["weight_bytes"].iloc[0]))
        fig.add_scatter(x=by_gamma.index.to_numpy(), y=by_gamma.to_numpy(), mode="lines+markers",
                        name=f"{name}<br>({weights} of weights)", line={"color": colour, "width": 3}, marker={"size": 9})  # fmt: skip
    note = {"annotation_text": "1 pass: the formula's assumption", "annotation_position": "bottom right"}
    fig.add_hline(1, line=BREAK_EVEN | {"dash": "dot"}, **note)
    fig.update_xaxes(**SWEEP_X_AXIS)
    fig.update_yaxes(title_text="verify pass ÷ one-token pass", rangemode="tozero")
    return _finish(fig, "Verify pass cost, by γ", presenter, 400, -0.2, True)


def rounds_for_display(frame: pd.DataFrame) -> pd.DataFrame:
    """The round table with readable headers and rounded times."""
    out = frame.round({"draft_ms": 2, "verify_ms": 2, "round_ms": 2})
    out["target_token"] = [repr_token(t.translate(VISIBLE_WHITESPACE)) for t in out["target_token"]]
    names = {"target_token": "target's token", "new_tokens": "tokens out", "draft_passes": "draft passes", "gamma": "γ"}
    return out.rename(columns=names | {c: c.replace("_ms", " ms") for c in ("draft_ms", "verify_ms", "round_ms")})
