"""Figures and HTML for the Quantization page: pure functions from data to a Plotly figure or an HTML string. Token
text is escaped: Plotly reads a small HTML subset in labels."""

from __future__ import annotations

import html
import math

import pandas as pd
import plotly.graph_objects as go

from inference.core.quantize import PRECISIONS
from inference.core.tokens import html_token_text
from inference.lessons.quantization.rates import LLAMA_SERVER, TRANSFORMERS
from inference.lessons.style import FIT_SCALE, PALETTE, base_layout, hover, label, legend_below

PRECISION_COLOURS = {p: PALETTE[c] for p, c in zip(PRECISIONS, ("navy", "sky", "orange", "red"))}
KINDS = {  # weight_bytes_by_kind keys in stacking order: label (short: a legend column at 800 px is ~200 px), colour
    "embeddings": ("embeddings (tied lm_head)", PALETTE["blue_grey"]),
    "lm_head": ("lm_head (untied)", PALETTE["lavender"]),
    "linear": ("linear (attention, MLP)", PALETTE["blue"]),
    "other": ("norms, biases", PALETTE["sand"]),
}
DEPARTURE_COLOUR = PALETTE["orange"]


def _end_labels(fig: go.Figure, y, x, text) -> None:
    """Each row's label right of `x` (its bar, whisker or limit), so no bar crosses its number."""
    fig.add_scatter(y=y, x=x, text=text, mode="text", showlegend=False, hoverinfo="skip", textposition="middle right")


def memory_bars(comparison, presenter: bool = False) -> go.Figure:
    """Measured weight bytes per precision, stacked by kind of tensor, largest at the top."""
    results = list(comparison.results.values())[::-1]  # Plotly draws the first category at the bottom
    names = [r.precision for r in results]
    reference_bytes = comparison.results["float32"].weight_bytes
    fig = go.Figure()
    for kind, (name, colour) in KINDS.items():
        megabytes = [r.bytes_by_kind[kind] / 1e6 for r in results]
        if any(megabytes):
            tip = "%{y}: %{x:,.2f} MB<extra>" + name + "</extra>"
            fig.add_bar(y=names, x=megabytes, orientation="h", name=name, marker_color=colour, hovertemplate=tip)
    totals = [r.weight_bytes / 1e6 for r in results]
    _end_labels(
        fig,
        names,
        totals,
        [f"  {mb:,.1f} MB ({r.weight_bytes / reference_bytes:.2f}×)" for mb, r in zip(totals, results)],
    )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title="MB", range=[0, max(totals) * 2.2])  # room for the labels in a half-width column
    return legend_below(base_layout(fig, "Weight memory", presenter, height=380), y=-0.25)  # below: 3 long names


def speed_bars(summary: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Measured decode tokens per second per precision (the median round), with the ratio to float32 and, as a
    whisker, the slowest and fastest round."""
    rows = summary.iloc[::-1]
    fig = go.Figure()
    fig.add_bar(
        y=rows["precision"],
        x=rows["decode_tokens_per_s"],
        orientation="h",
        showlegend=False,
        marker_color=[PRECISION_COLOURS[p] for p in rows["precision"]],
        error_x=dict(
            type="data",
            symmetric=False,
            array=(rows["rate_high"] - rows["decode_tokens_per_s"]).clip(lower=0),
            arrayminus=(rows["decode_tokens_per_s"] - rows["rate_low"]).clip(lower=0),
            color=PALETTE["ink"],
            thickness=1.5,
        ),
        hovertemplate="%{y}: %{x:,.1f} tokens/s (median round)<extra></extra>",
    )
    ratios = zip(rows["decode_tokens_per_s"], rows["speed_vs_float32"])
    _end_labels(fig, rows["precision"], rows["rate_high"], [f"  {rate:,.0f} ({ratio:.2f}×)" for rate, ratio in ratios])
    fig.update_xaxes(title="decode tokens/s", range=[0, rows["rate_high"].max() * 1.9])
    return base_layout(fig, "Decode speed on this CPU", presenter, height=380)


def kl_over_steps(comparison, presenter: bool = False) -> go.Figure:
    """KL from float32 at every step, log scale (float32's own 0 is not drawn), an ✕ where the top token differs."""
    steps = comparison.steps
    tokens = [label(t) for t in comparison.reference_tokens]
    fig = go.Figure()
    for precision in comparison.results:
        if precision == "float32":
            continue
        rows = steps[steps["precision"] == precision]
        colour = PRECISION_COLOURS[precision]
        fig.add_scatter(
            x=rows["step"],
            y=rows["kl_from_reference"],
            mode="lines+markers",
            name=precision,
            line=dict(color=colour, width=2.5),
            marker=dict(size=5),
            customdata=[[tokens[s], p] for s, p in zip(rows["step"], rows["p_reference_token"])],
            hovertemplate=f"{precision}, step %{{x}} ('%{{customdata[0]}}')<br>KL %{{y:.2e}} nats"
            "<br>p(float32 token) %{customdata[1]:.1%}<extra></extra>",
        )
        disagree = rows[~rows["top1_agrees"]]
        if len(disagree):
            fig.add_scatter(
                x=disagree["step"],
                y=disagree["kl_from_reference"],
                mode="markers",
                name=f"{precision}: top token differs",
                hoverinfo="skip",
                marker=dict(symbol="x", size=14, color=colour, line=dict(width=1, color="black")),
            )
    # Whole decades only, one labelled gridline each: minor log ticks ("2 3 4 5") clutter a projector.
    drawn = steps.loc[(steps["precision"] != "float32") & (steps["kl_from_reference"] > 0), "kl_from_reference"]
    decades = [math.floor(math.log10(drawn.min())), math.ceil(math.log10(drawn.max()))] if len(drawn) else [-8, 0]
    fig.update_yaxes(
        type="log",
        title="KL from float32 (nats)",
        exponentformat="power",
        dtick=1,
        range=[decades[0], max(decades[1], decades[0] + 1)],
    )
    # presenter mode: shorter titles and the legend under the plot (at 800 px the title and the axis title were
    # cut, and the legend sat on the title)
    fig.update_xaxes(title="step (float32's greedy text)" if presenter else "step (position in float32's greedy text)")
    title = "Drift from float32,<br>step by step" if presenter else "Drift from float32's next-token distribution"
    fig = base_layout(fig, title, presenter, height=400)
    if presenter:
        fig.update_layout(margin=dict(t=110))
        legend_below(fig, y=-0.3)
    return fig


def step_distributions(comparison, step: int, presenter: bool = False) -> go.Figure:
    """float32's top tokens at one step and every precision's probability of them, the rest as "other"."""
    tops = comparison.step_tops[comparison.step_tops["step"] == step]
    chosen = comparison.reference_ids[step]
    reference_rows = tops[tops["precision"] == "float32"].sort_values("rank", ascending=False)
    names = [
        ("▶ " if token_id == chosen else "") + (f"{rank}. '{label(token)}'" if token_id >= 0 else "other")
        for rank, token_id, token in zip(reference_rows["rank"], reference_rows["token_id"], reference_rows["token"])
    ]
    fig = go.Figure()
    for precision in comparison.results:
        rows = tops[tops["precision"] == precision].sort_values("rank", ascending=False)
        fig.add_bar(
            y=names,
            x=rows["prob"],
            orientation="h",
            name=precision,
            marker_color=PRECISION_COLOURS[precision],
            hovertemplate=f"{precision}: %{{y}} %{{x:.2%}}<extra></extra>",
        )
    fig.update_layout(barmode="group", bargap=0.2, bargroupgap=0.05)
    # Scale to the named tokens: when "other" holds most of the mass (a flat distribution)
    # its bars run off the edge, and its share is written there instead.
    named_max = tops.loc[tops["token_id"] >= 0, "prob"].max()
    other_share = float(reference_rows.loc[reference_rows["token_id"] < 0, "prob"].iloc[0])
    axis_max = min(1.0, named_max * 1.25)
    if other_share > axis_max:
        fig.add_annotation(
            x=axis_max,
            y="other",
            xanchor="right",
            showarrow=False,
            bgcolor="white",
            text=f"other: {other_share:.1%} (float32), bars cut ▸",
        )
    fig.update_xaxes(tickformat=".0%" if axis_max > 0.1 else ".1%", title="probability", range=[0, axis_max])
    fig.update_yaxes(automargin=True)
    height = 170 + 34 * len(names)
    # legend under the axis: at the top right it ran into the title at 800 px
    return legend_below(base_layout(fig, f"Step {step}: next-token probabilities", presenter, height), y=-90 / height)


def _card(row, left: bool = False) -> str:
    """'A100' or '18×H200' (short, legible in a cell at 800 px), and what it has left when `left`."""
    if not isinstance(row["fits_on"], str):
        return f"{row['largest_needed']}×{row['largest'].split()[0]}"
    return f"{row['fits_on'].split()[0]}, {row['left_gb']:,.1f} GB left" if left else row["fits_on"].split()[0]


def fit_heatmap(fit: pd.DataFrame, labels: list[str], presenter: bool = False) -> go.Figure:
    """Models × bits per weight: weight GB and the smallest card that holds it (`labels`, smallest first: green to
    red, none holds it)."""
    order = fit.drop_duplicates("model").sort_values("parameters")["model"].tolist()
    bits = sorted(fit["bits"].unique(), reverse=True)
    cells = [[fit[(fit["model"] == m) & (fit["bits"] == b)].iloc[0] for b in bits] for m in order]
    z = [[labels.index(c["fits_on"]) if c["fits_on"] in labels else len(labels) for c in row] for row in cells]
    # GB and the card only: with "x GB left" too, Plotly shrank the text to ~8 px at 800 px (left: in the hover)
    text = [[f"{c['weight_gb']:,.{0 if c['weight_gb'] >= 100 else 1}f}<br>{_card(c)}" for c in row] for row in cells]
    tips = [
        [f"{c['model']} at {c['bits']:g} bits: {c['weight_gb']:,.2f} GB of weights; {_card(c, True)}" for c in row]
        for row in cells
    ]
    steps = len(labels) + 1  # one flat band of colour per card
    colourscale = [((i + edge) / steps, colour) for i, colour in enumerate(FIT_SCALE[-steps:]) for edge in (0, 1)]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[f"{b}" for b in bits],  # "bits per weight" is the axis title: short ticks stay level at 800 px
            y=order,
            text=text,
            texttemplate="%{text}",
            customdata=tips,
            hovertemplate=hover("%{customdata}"),
            colorscale=colourscale,
            zmin=-0.5,
            zmax=len(labels) + 0.5,
            showscale=False,
            xgap=2,
            ygap=2,  # each cell names its card: a colour bar would only take room
        )
    )
    fig.update_yaxes(autorange="reversed", automargin=True)
    fig.update_xaxes(side="top", title="bits per weight", tickangle=0, type="category")  # "32" is a label
    fig = base_layout(fig, "GB of weights → smallest card", presenter, height=130 + 42 * len(order))
    # the title at the very top, the axis title and ticks under it: both sit in the top margin
    fig.update_layout(margin=dict(t=150 if presenter else 115), title=dict(y=0.995, yanchor="top", yref="container"))
    if presenter:  # smaller than the other charts' 18-20 px: "18×H200" must fit a cell of ~65 px at 800 px
        fig.update_traces(textfont_size=14)
        fig.update_yaxes(tickfont_size=16)
    return fig


def greedy_text_html(heading: str, prompt_text: str, result, presenter: bool = False) -> str:
    """A box with a heading (inside, so boxes side by side line up), the prompt, then `result`'s greedy tokens: the
    first that differs from float32's highlighted, everything after it (a different path) in italics."""
    departure = len(result.greedy_tokens) if result.first_departure is None else result.first_departure
    size = "1.35rem" if presenter else "1.02rem"
    parts = [
        f'<div style="font-size:{size};line-height:1.6;border:1px solid #ddd;border-radius:0.5rem;'
        f'padding:0.6rem 0.8rem;background:#fff;white-space:pre-wrap;word-break:break-word">',
        '<div style="font-weight:600;font-size:0.92em;border-bottom:1px solid #eee;margin-bottom:0.3rem">'
        f"{html.escape(heading)}</div>",
        f'<span style="color:#666">{html_token_text(prompt_text)}</span>',
    ]
    for step, token in enumerate(result.greedy_tokens):
        text = html_token_text(token)
        if step == departure:
            parts.append(
                f'<mark style="background:{DEPARTURE_COLOUR};color:#000;border-radius:0.2rem;'
                f'padding:0 0.1rem" title="step {step}: first token that differs from float32">{text}</mark>'
            )
        elif step > departure:
            parts.append(f'<i style="color:#8a4b08">{text}</i>')
        else:
            parts.append(text)
    parts.append("</div>")
    return "".join(parts)


def step_context_html(comparison, step: int, presenter: bool = False, tail_chars: int = 90) -> str:
    """The end of the text the model has read at `step`, then the token float32 chose there."""
    read = comparison.prompt_text + "".join(comparison.results["float32"].greedy_tokens[:step])
    shown = ("…" if len(read) > tail_chars else "") + read[-tail_chars:]
    size = "1.3rem" if presenter else "1rem"
    return (
        f'<div style="font-size:{size}">Text read so far: <span style="color:#555">{html_token_text(shown)}</span> '
        f'→ float32 chose <b style="background:#e6eefb;padding:0 0.2rem;border-radius:0.2rem">'
        f"'{html_token_text(comparison.reference_tokens[step])}'</b></div>"
    )


# colour and pattern: the two engines differ by more than colour
ENGINE_STYLE = {TRANSFORMERS: (PALETTE["orange"], "/"), LLAMA_SERVER: (PALETTE["blue"], "")}


def rates_bars(frame: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """One horizontal bar per engine and format (most bytes on top), its limit a tall tick on the same row, and
    the share of the limit written beside each bar."""
    rows = frame[frame["measured tokens/s"].notna()].iloc[::-1]  # Plotly draws the first row at the bottom
    between = "<br>" if presenter else " · "  # presenter: two lines, its large text leaves a narrow plot at 800 px
    labels = [f"{e}{between}{w}" for e, w in zip(rows["engine"], rows["weights"])]
    fig = go.Figure()
    for engine, (colour, pattern) in ENGINE_STYLE.items():
        mine = rows["engine"] == engine
        if not mine.any():
            continue
        fig.add_bar(
            y=[label for label, keep in zip(labels, mine) if keep],
            x=rows.loc[mine, "measured tokens/s"],
            orientation="h",
            name=f"{engine}, measured",
            marker=dict(color=colour, pattern=dict(shape=pattern, fillmode="overlay", fgcolor="white", solidity=0.3)),
            hovertemplate="%{y}: %{x:,.1f} tokens/s measured<extra></extra>",
        )
    fig.add_scatter(
        y=labels,
        x=rows["bandwidth limit tokens/s"],
        mode="markers",
        name="bandwidth limit of its bytes",
        marker=dict(symbol="line-ns-open", size=26 if presenter else 20, color=PALETTE["ink"], line=dict(width=3)),
        hovertemplate="%{y}: limit %{x:,.1f} tokens/s<extra></extra>",
    )
    right = rows[["measured tokens/s", "bandwidth limit tokens/s"]].max(axis=1)
    shares = zip(rows["measured tokens/s"], rows["bandwidth limit tokens/s"], rows["share of the limit"])
    _end_labels(  # presenter: the share alone (the table beside it has the rates)
        fig,
        labels,
        right,
        [f"  {s:.0%}" if presenter else f"  {r:,.0f} of {lim:,.0f} ({s:.0%})" for r, lim, s in shares],
    )
    fig.update_xaxes(title="decode tokens/s", range=[0, float(right.max()) * (1.3 if presenter else 1.6)])
    fig.update_yaxes(categoryorder="array", categoryarray=labels)  # not by trace: the same bytes stay side by side
    fig.update_layout(barmode="overlay")
    height = 120 + (72 if presenter else 52) * len(rows)
    return legend_below(base_layout(fig, "Decode rate vs the bandwidth limit", presenter, height))
