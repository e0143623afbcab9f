"""The Speculative page's per-round charts are built from plain dicts (`plain_figure.plain_figure`), not Plotly's validated
builders: each must send Streamlit what Plotly's own builders made of the same data (the oracle below: `add_*`,
`base_layout`, `legend_below`, as the page built them before), and pass Plotly's validation unchanged."""

import base64
import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import plotly.tools
import pytest

from inference.core.loader import encode_prompt, load_model
from inference.core.run import GREEDY
from inference.core.tokens import VISIBLE_WHITESPACE
from inference.lessons.speculative import figures as spec_fig
from inference.lessons.speculative import run as spec
from inference.lessons.speculative import speed_figures, summary
from inference.lessons.speculative.comparison import compare
from inference.lessons.speculative.drafters import ModelDrafter, PromptLookupDrafter
from inference.lessons.speculative.figures import (
    DRAFT_COLOUR,
    DRAFT_PASS_COLOUR,
    PLAIN_COLOUR,
    PROB_COLOUR,
    RESIDUAL_COLOUR,
    STATUS_COLOURS,
    TARGET_COLOUR,
    VERIFY_COLOUR,
)
from inference.lessons.speculative.sweep import sweep
from inference.lessons.style import PALETTE, add_line, base_layout, label, legend_below, repr_token
from inference.sampling.pipeline import SamplingSettings

pytestmark = pytest.mark.unit

PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside"
REPEATS = "The cat sat on the mat. The cat sat on the mat. The cat sat on the mat. The cat"


def sent(fig) -> dict:
    """What `st.plotly_chart` sends for a figure (its to_dict through plotly.io.to_json), read back."""
    figure = plotly.tools.return_figure_from_figure_or_data(fig, validate_figure=True)
    return json.loads(pio.to_json(figure, validate=False))


def validated(fig) -> dict:
    """The figure's dict through Plotly's validation (raises on a wrong property), as sent."""
    return sent(go.Figure(fig.to_dict()))


# -- the oracle: the charts as Plotly's builders made them ----------------------------------------------------------


def built_names(record) -> list[str]:
    return [f"{c.position + 1}<br>{label(repr_token(c.text.translate(VISIBLE_WHITESPACE)))}" for c in record.checks]


def percent(values) -> list[str]:
    return [f"{v:.0%}" if v >= 0.005 else f"{v:.1%}" for v in values]


def built_p_q(record, greedy, presenter):
    names = built_names(record)
    if greedy:
        q = [c.q_raw if c.q_raw is not None else 1.0 for c in record.checks]
        p, title = [c.p_raw for c in record.checks], "q (draft) vs p (target), T=1"
    else:
        q, p, title = [c.q for c in record.checks], [c.p for c in record.checks], "q (draft) vs p (target)"
    fig = go.Figure()
    fig.add_bar(
        x=names,
        y=q,
        name="q: the draft's probability",
        marker_color=DRAFT_COLOUR,
        text=percent(q),
        textposition="outside",
    )
    fig.add_bar(
        x=names,
        y=p,
        name="p: the target's probability",
        marker_color=PROB_COLOUR,
        marker_line=dict(color=[STATUS_COLOURS[c.status] for c in record.checks], width=3),
        text=percent(p),
        textposition="outside",
    )
    fig.update_layout(barmode="group", bargap=0.3)
    fig.update_yaxes(tickformat=".0%", range=[0, 1.18], title="probability")
    fig.update_xaxes(tickangle=0, automargin=True)
    return legend_below(base_layout(fig, title, presenter, height=360), y=-0.3 if presenter else -0.22)


def built_acceptance(record, presenter):
    checked = [c for c in record.checks if c.status != "unchecked"]
    names = built_names(record)[: len(checked)]
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
        marker=dict(symbol="diamond", size=16, color=PALETTE["ink"], line=dict(color="white", width=1)),
        text=[f"u = {c.u:.2f}" for c in checked],
        textposition="middle right",
    )
    fig.update_yaxes(range=[0, 1.18], title="")
    fig.update_xaxes(tickangle=0, automargin=True)
    return legend_below(base_layout(fig, "Accept while u ≤ p/q", presenter, height=360), y=-0.3 if presenter else -0.22)


def built_residual(record, presenter):
    rows = record.residual_top[::-1]
    names = [
        ("▶ " if token_id == record.token_id else "") + label(repr_token(text.translate(VISIBLE_WHITESPACE)))
        for token_id, text, *_ in rows
    ]
    fig = go.Figure()
    fig.add_bar(y=names, x=[r[3] for r in rows], orientation="h", name="q (draft)", marker_color=DRAFT_COLOUR)
    fig.add_bar(y=names, x=[r[2] for r in rows], orientation="h", name="p (target)", marker_color=PROB_COLOUR)
    fig.add_bar(
        y=names,
        x=[r[4] for r in rows],
        orientation="h",
        name="residual: normalise(max(0, p − q))",
        marker_color=RESIDUAL_COLOUR,
        text=[f"{r[4]:.0%}" if r[4] > 0 else "0" for r in rows],
        textposition="outside",
    )
    longest = max([max(r[2], r[3], r[4]) for r in rows] + [0.01])
    fig.update_layout(barmode="group", bargap=0.2)
    fig.update_xaxes(tickformat=".0%", range=[0, longest * 1.25], title="probability")
    fig.update_yaxes(automargin=True)
    title = "After the rejection: the target draws from what p has beyond q"
    return legend_below(base_layout(fig, title, presenter, height=170 + 58 * len(rows)), y=-0.12)


def built_timeline(rounds, plain, presenter):
    fig = go.Figure()
    segments = {"draft pass": [], "verify pass (target)": [], "sampling, bookkeeping": []}
    clock = 0.0
    for r in rounds:
        other = max(0.0, r.round_ms - sum(r.draft_ms) - r.verify_ms)
        for ms in r.draft_ms:
            segments["draft pass"].append((clock, ms, f"round {r.index}: draft pass {ms:.2f} ms"))
            clock += ms
        verify = f"round {r.index}: verify {r.verify_positions} positions, {r.verify_ms:.2f} ms, "
        segments["verify pass (target)"].append((clock, r.verify_ms, verify + f"{len(r.new_tokens)} token(s) out"))
        clock += r.verify_ms
        segments["sampling, bookkeeping"].append((clock, other, f"round {r.index}: {other:.2f} ms"))
        clock += other
    colours = {
        "draft pass": DRAFT_PASS_COLOUR,
        "verify pass (target)": VERIFY_COLOUR,
        "sampling, bookkeeping": PALETTE["light_grey"],
    }
    bar = dict(orientation="h", marker_line=dict(color="white", width=0.5), hoverinfo="text")
    for name, items in segments.items():
        if items:
            fig.add_bar(
                y=["speculative"] * len(items),
                x=[i[1] for i in items],
                base=[i[0] for i in items],
                name=name,
                marker_color=colours[name],
                hovertext=[i[2] for i in items],
                **bar,
            )
    fig.add_bar(
        y=["plain decoding"] * len(plain.step_ms),
        x=plain.step_ms,
        base=np.concatenate([[0.0], np.cumsum(plain.step_ms)[:-1]]),
        name="plain: one target pass per token",
        marker_color=PLAIN_COLOUR,
        hovertext=[f"token {i}: {ms:.2f} ms" for i, ms in enumerate(plain.step_ms)],
        **bar,
    )
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(title="ms since the start (measured)", rangemode="tozero")
    fig.update_yaxes(categoryorder="array", categoryarray=["plain decoding", "speculative"], automargin=True)
    return legend_below(base_layout(fig, "Where the time went", presenter, height=330), y=-0.5)


def built_theory(gamma, cost_ratio, verify_cost, alpha, measured_speedup, presenter):
    alphas = np.linspace(0, 1, 101)
    fig = go.Figure()
    curves = [
        (f"c = {cost_ratio:.2f}, verify 1 pass", cost_ratio, 1.0, "solid"),
        (f"c = {cost_ratio:.2f}, verify {verify_cost:.2f} (measured)", cost_ratio, verify_cost, "dash"),
        ("c = 1: draft as slow as target", 1.0, 1.0, "dot"),
    ]
    for name, c, v, dash in curves:
        y = [summary.predicted_speedup(a, gamma, c, v) for a in alphas]
        fig.add_scatter(x=alphas, y=y, mode="lines", name=name, line=dict(dash=dash, width=3 if dash == "solid" else 2))
    fig.add_hline(
        y=1,
        line=dict(color=PALETTE["red"], width=2),
        annotation_text="below: SLOWER than plain",
        annotation_position="top left",
    )
    if alpha is not None and measured_speedup is not None:
        fig.add_scatter(
            x=[alpha],
            y=[measured_speedup],
            mode="markers+text",
            name="this run, measured",
            marker=dict(size=16, color=TARGET_COLOUR, symbol="star"),
            text=[f"measured {measured_speedup:.2f}×  "],
            textposition="middle left" if alpha > 0.5 else "middle right",
        )
    speed_figures.mark_coinciding(fig)
    fig.update_xaxes(title="α = accepted ÷ checked", range=[0, 1.02])
    fig.update_yaxes(title="speed-up (×)", rangemode="tozero")
    title = f"Speed-up against α at γ = {gamma}"
    return legend_below(base_layout(fig, title, presenter, height=430), y=-0.2, one_per_line=True, b=10)


def built_sweep(table, measured, predicted, predicted_name, y_title, title, presenter, break_even):
    fig = go.Figure()
    for colour, (t, rows) in zip(speed_figures.TEMPERATURE_COLOURS, table.groupby("temperature", sort=True)):
        at_t = f"T = {t:g}, "
        add_line(
            fig, rows["gamma"], rows[measured], at_t + "measured", colour, "lines+markers", width=3, marker=dict(size=9)
        )
        add_line(fig, rows["gamma"], rows[predicted], at_t + predicted_name, colour, dash="dash")
    speed_figures.mark_coinciding(fig)
    fig.update_xaxes(title="γ: tokens drafted per round", dtick=1)
    if break_even:
        line = dict(color=PALETTE["red"], width=2)
        fig.add_hline(y=1, line=line, annotation_text="break-even", annotation_position="bottom right")
    fig.update_yaxes(title=y_title, rangemode="tozero")
    return legend_below(base_layout(fig, title, presenter, height=440), y=-0.2)


# -- real runs -------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(bundled):
    """A sampled run with rejections and residual draws, a greedy one (draft model) and a prompt-lookup one."""
    draft = load_model(str(spec.BUNDLED_DRAFT_DIR))
    target, tokenizer = bundled.model, bundled.tokenizer
    made = []
    for drafter, prompt, settings, gamma in (
        (ModelDrafter(draft.model, draft.tokenizer), PROMPT, SamplingSettings(temperature=1.0), 6),
        (ModelDrafter(draft.model, draft.tokenizer), PROMPT, GREEDY, 4),
        (PromptLookupDrafter(spec.vocabulary_rows(target)), REPEATS, GREEDY, 4),
    ):
        run = spec.new_run(target, tokenizer, drafter, encode_prompt(tokenizer, prompt), 24, gamma=gamma, seed=3)
        list(run.run(settings))
        made.append((run, settings, compare(run, settings)))
    sampled = made[0][0].rounds
    assert any(r.residual_top for r in sampled) and any(r.checked < r.drafted for r in sampled)  # every chart drawn
    assert made[2][0].rounds[0].checks and made[2][0].rounds[0].checks[0].q_raw is None  # lookup: no draft q
    return made


PRESENTER = pytest.mark.parametrize("presenter", [False, True], ids=["normal", "presenter"])


@PRESENTER
def test_each_rounds_charts_send_what_plotlys_builders_made(runs, presenter):
    drawn = 0
    for run, settings, _ in runs:
        for record in map(run.with_t1_probabilities, run.rounds):  # as the page draws them
            pairs = []
            if record.checks:
                pairs.append(
                    (
                        spec_fig.p_q_figure(record, settings.greedy, presenter),
                        built_p_q(record, settings.greedy, presenter),
                    )
                )
                if record.checked and not settings.greedy:
                    pairs.append((spec_fig.acceptance_figure(record, presenter), built_acceptance(record, presenter)))
            if record.residual_top:
                pairs.append((spec_fig.residual_figure(record, presenter), built_residual(record, presenter)))
            for plain, built in pairs:
                assert sent(plain) == sent(built)
                assert validated(plain) == sent(plain)
                drawn += 1
    assert drawn > 10


@PRESENTER
def test_the_timeline_and_theory_send_what_plotlys_builders_made(runs, presenter):
    for run, _, result in runs:
        for rounds in (run.rounds, run.rounds[:1]):
            plain = speed_figures.timeline_figure(rounds, result.plain, presenter)
            assert sent(plain) == sent(built_timeline(rounds, result.plain, presenter))
            assert validated(plain) == sent(plain)
        measured = (result.cost_ratio or 0.0, result.verify_cost, result.summary.acceptance_rate)
        for args in (
            (run.gamma, *measured, result.measured_speedup),
            (4, 1.0, 1.0, 0.6, 0.9),  # c = 1: two curves coincide with the third
            (4, 0.1, 1.0, 0.3, 1.4),  # verify = 1: the measured-verify curve is the first
            (1, 0.0, 1.3, None, None),  # no α yet: no point for this run
        ):
            plain = speed_figures.theory_figure(*args, presenter)
            assert sent(plain) == sent(built_theory(*args, presenter))
            assert validated(plain) == sent(plain)


@pytest.fixture(scope="module")
def sweep_table(bundled):
    """A small real sweep (γ 1-3, greedy and T = 0.8, 6 tokens each): the page's sweep charts read only its columns."""
    draft = load_model(str(spec.BUNDLED_DRAFT_DIR))
    ids = encode_prompt(bundled.tokenizer, PROMPT)
    return sweep(
        bundled.model,
        bundled.tokenizer,
        lambda: ModelDrafter(draft.model, draft.tokenizer),
        ids,
        6,
        gammas=(1, 2, 3),
        temperatures=(0.0, 0.8),
    )


@PRESENTER
def test_the_sweep_charts_send_what_plotlys_builders_made(sweep_table, presenter):
    speed = speed_figures.sweep_figure(sweep_table, presenter)
    columns = ("measured_speedup", "predicted_speedup_measured_verify", "predicted")
    built = built_sweep(sweep_table, *columns, "speed-up over plain decoding (×)", "Speed-up, by γ", presenter, True)
    assert sent(speed) == sent(built)
    assert validated(speed) == sent(speed)
    tokens = speed_figures.sweep_alpha_figure(sweep_table, presenter)
    columns = ("tokens_per_pass", "predicted_tokens_per_pass", "formula")
    title = "Tokens per target pass, by γ"
    assert sent(tokens) == sent(built_sweep(sweep_table, *columns, "tokens per target pass", title, presenter, False))
    assert validated(tokens) == sent(tokens)
    assert len(sent(tokens)["data"]) == 4  # two temperatures, measured and predicted each


@PRESENTER
def test_the_verify_cost_chart_sends_what_plotlys_builders_made(sweep_table, presenter):
    """One line per target (the median over temperatures at each γ), the formula's 1 pass dotted: built by hand
    with Plotly's validated builders, it sends the same figure."""
    sides = pd.concat(
        [
            sweep_table.assign(target="dense", weight_bytes=23_300_000),
            sweep_table.assign(target="moe", weight_bytes=65_600_000, verify_cost=sweep_table["verify_cost"] / 2),
        ]
    )
    plain = speed_figures.sweep_verify_figure(sides, presenter)
    built = go.Figure()
    for colour, (name, side) in zip(speed_figures.SIDE_COLOURS, sides.groupby("target", sort=False)):
        by_gamma = side.groupby("gamma")["verify_cost"].median()
        weights = f"{side['weight_bytes'].iloc[0] / 1e6:.1f} MB of weights"
        add_line(built, by_gamma.index, by_gamma, f"{name}<br>({weights})", colour, "lines+markers", width=3,
                 marker=dict(size=9))  # fmt: skip
    line = dict(color=PALETTE["red"], width=2, dash="dot")
    built.add_hline(
        y=1, line=line, annotation_text="1 pass: the formula's assumption", annotation_position="bottom right"
    )
    built.update_xaxes(title="γ: tokens drafted per round", dtick=1)
    built.update_yaxes(title="verify pass ÷ one-token pass", rangemode="tozero")
    title = "Verify pass cost, by γ"
    built = legend_below(base_layout(built, title, presenter, height=400), y=-0.2, one_per_line=True)
    assert sent(plain) == sent(built)
    assert validated(plain) == sent(plain)
    dense = sent(plain)["data"][0]
    gammas = np.frombuffer(base64.b64decode(dense["x"]["bdata"]), dtype=dense["x"]["dtype"])
    assert dense["name"] == "dense<br>(23.3 MB of weights)" and gammas.tolist() == [1, 2, 3]  # temperatures folded
