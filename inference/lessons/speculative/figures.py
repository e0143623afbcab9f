"""Figures and HTML for the Speculative decoding page's rounds: the text by who wrote each token, one round's drafts
and their tests, the residual distribution, and the run's tables. Pure functions from data to a Plotly figure (or an
HTML string); no Streamlit here. The timeline, theory and sweep charts are in `speed_figures`. Every token text is
escaped (`style.label` for charts, `html.escape` for chips)."""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go

from inference.core import tokens
from inference.core.tokens import VISIBLE_WHITESPACE
from inference.lessons import glossary
from inference.lessons.style import (
    PALETTE,
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
.spec-chip.unchecked { background: #eeeeee; color: #555; text-decoration: line-through; }
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
    + " &nbsp;a bar │ separates the rounds: each round is ONE pass of the target. "
    + html.escape(f"␣ {glossary.explain('␣')}.")
    + "</div>"
)


# The text shows the prompt's last tokens (the Prompt box above holds it whole): the first round stays on the first
# screen at 800 px, and on a projector.
PROMPT_TAIL, PRESENTER_PROMPT_TAIL = 8, 4


def text_html(tokenizer, prompt_ids: list[int], rounds: list, prompt_tail: int | None = None) -> str:
    """The prompt as dashed chips, then every round's new tokens: drafts the target accepted in
    green, the target's own token in orange, rounds separated by a bar. With `prompt_tail`, a longer
    prompt shows only its last `prompt_tail` tokens after one chip counting the earlier ones."""
    parts = [CHIP_CSS, '<div class="spec-box">']
    special = set(tokenizer.all_special_ids)
    earlier, prompt_ids = tokens.prompt_tail(prompt_ids, prompt_tail) if prompt_tail is not None else ("", prompt_ids)
    if earlier:
        parts.append(_chip(earlier, "prompt", token=False))
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
    shown = {tokenizer.convert_ids_to_tokens(t) for t in [*prompt_ids, *(t for r in rounds for t in r.new_tokens)]}
    for term in (t for t in glossary.TERMS if t.startswith("<|") and t in shown):  # a special token, explained
        parts.append(f'<div class="spec-legend">{html.escape(f"{term}: {glossary.explain(term)}.")}</div>')
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


def legend_below_at(y: float, one_per_line: bool = False) -> dict:
    """`style.legend_below`'s placement, for `plain_figure.plain_figure`."""
    return {"orientation": "v" if one_per_line else "h", "y": y, "yanchor": "top", "x": 0, "xanchor": "left"}


# The charts below are redrawn on every round: built from plain dicts (`plain_figure.plain_figure`), not through Plotly's
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
    legend = legend_below_at(-0.3 if presenter else -0.22)
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
    legend = legend_below_at(-0.3 if presenter else -0.22)
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
        legend=legend_below_at(-0.12),
    )


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
