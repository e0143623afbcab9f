"""Figure builders for the Generate and Sampling pages: pure functions from data to a
`plotly.graph_objects.Figure`. No Streamlit here.

Token labels go through `label`: Plotly reads a small HTML subset in text (<b>, <a>, <br>),
so token text is escaped and always shows as the characters it is.
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from inference.sampling import SamplingSettings, apply_temperature, apply_top_p, entropy_bits
from inference.tokens import readable_tokens

RAW_COLOUR = "#b8c4d6"
FINAL_COLOUR = "#2a6fdb"
CHOSEN_COLOUR = "#f28e2b"
REMOVED_COLOUR = "#d9d9d9"
CUTOFF_COLOUR = "#c0392b"
FONT = dict(family="Inter, Segoe UI, sans-serif")


def label(text: str) -> str:
    """Token text safe for Plotly: escaped, so '<b>' shows as '<b>', never as bold."""
    return html.escape(text, quote=False)


def base_layout(fig: go.Figure, title: str, presenter: bool, height: int) -> go.Figure:
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
    fig.update_xaxes(gridcolor="#eeeeee", zerolinecolor="#cccccc")
    fig.update_yaxes(gridcolor="#eeeeee", zerolinecolor="#cccccc")
    # Plotly shrinks a bar's outside label to the bar's thickness (7 px on a thin bar) and
    # clips it at the axis end: keep value labels at the text size, past the axis if needed.
    fig.for_each_trace(lambda trace: trace.update(constraintext="none", cliponaxis=False, textfont_size=size - 2)
                       if trace.type == "bar" and trace.textposition == "outside" else None)
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


def next_token_bars(table: pd.DataFrame, presenter: bool = False, title: str = "Next-token probabilities") -> go.Figure:
    """Top-N tokens (most likely at the top): the raw probability (T=1, no filters) beside
    the final one the draw uses. Removed tokens keep their raw bar and are greyed; the
    chosen token is orange; the last bar is the rest of the vocabulary ("other")."""
    rows = table.iloc[::-1]  # Plotly draws the first category at the bottom
    names = []
    for _, r in rows.iterrows():
        mark = "▶ " if r["chosen"] and pd.notna(r["rank"]) else ""
        cut = f"  ✂ {r['removed_by'].replace('_', '-')}" if r["removed_by"] else ""
        prefix = f"{int(r['rank'])}. " if pd.notna(r["rank"]) else ""
        names.append(f"{mark}{prefix}{label(repr_token(r['token']) if pd.notna(r['rank']) else r['token'])}{cut}")
    final_colours = [
        CHOSEN_COLOUR if (r["chosen"] and pd.notna(r["rank"])) else (REMOVED_COLOUR if r["removed_by"] else FINAL_COLOUR)
        for _, r in rows.iterrows()
    ]
    fig = go.Figure()
    fig.add_bar(y=names, x=rows["raw"], orientation="h", name="raw (T=1, no filters)", marker_color=RAW_COLOUR,
                hovertemplate="%{y}<br>raw %{x:.2%}<extra></extra>")
    fig.add_bar(y=names, x=rows["min_p"], orientation="h", name="final (after all settings)", marker_color=final_colours,
                text=[f"{v:.1%}" if v >= 0.001 else "" for v in rows["min_p"]], textposition="outside",
                hovertemplate="%{y}<br>final %{x:.2%}<extra></extra>")
    fig.update_layout(barmode="group", bargap=0.25, bargroupgap=0.05)
    longest = max(float(rows["raw"].max()), float(rows["min_p"].max()), 0.01)
    # Room right of the longest bar for its value label.
    fig.update_xaxes(tickformat=".0%", title="probability", range=[0, longest * (1.3 if presenter else 1.2)])
    fig.update_yaxes(automargin=True)
    fig = base_layout(fig, title, presenter, height=150 + 24 * len(rows))
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.1, xanchor="left", x=0))
    return fig


def repr_token(text: str) -> str:
    return f"'{text}'"


def cumulative_curve(view, tokenizer, top_p: float, presenter: bool = False, max_rank: int | None = None) -> go.Figure:
    """Cumulative probability by rank: the curve top-p cuts (before top-p), the final
    curve the draw walks, the top-p line and cutoff, and where u landed."""
    before = view.cumulative_before_top_p.numpy()
    final = view.cumulative_final.numpy()
    if max_rank is None:
        reach = int(np.searchsorted(before, 0.995)) + 1
        max_rank = int(min(len(before), max(10, reach, view.chosen_rank + 3, view.nucleus_size + 3), 200))
    ranks = np.arange(1, max_rank + 1)
    fig = go.Figure()
    fig.add_scatter(x=ranks, y=before[:max_rank], mode="lines", name="before top-p", line=dict(color=RAW_COLOUR, width=3),
                    hovertemplate="rank %{x}<br>cumulative %{y:.3f}<extra></extra>")
    fig.add_scatter(x=ranks, y=final[:max_rank], mode="lines", name="final (draw walks this)", line=dict(color=FINAL_COLOUR, width=3, shape="hv"),
                    hovertemplate="rank %{x}<br>cumulative %{y:.3f}<extra></extra>")
    if top_p < 1:
        fig.add_hline(y=top_p, line=dict(color=CUTOFF_COLOUR, dash="dash"), annotation_text=f"top-p = {top_p:g}",
                      annotation_position="bottom right")
        fig.add_vline(x=view.nucleus_size + 0.5, line=dict(color=CUTOFF_COLOUR, dash="dot"),
                      annotation_text=f"nucleus: {view.nucleus_size} tokens", annotation_position="bottom right")
    if view.u is not None and not view.settings.greedy and view.chosen_rank >= max_rank:
        fig.add_hline(y=view.u, line=dict(color=CHOSEN_COLOUR, width=1.5),
                      annotation_text=f"u = {view.u:.3f} lands at rank {view.chosen_rank + 1:,}, off this chart",
                      annotation_position="top left")
    elif view.u is not None and not view.settings.greedy:
        chosen = readable_tokens(tokenizer, [view.chosen_id])[0]
        fig.add_hline(y=view.u, line=dict(color=CHOSEN_COLOUR, width=1.5))
        fig.add_scatter(x=[view.chosen_rank + 1], y=[view.u], mode="markers+text", name="the draw",
                        marker=dict(color=CHOSEN_COLOUR, size=14, symbol="diamond"),
                        text=[f"u = {view.u:.3f} → {label(repr_token(chosen))}"], textposition="middle right",
                        hovertemplate="u %{y:.4f} lands on rank %{x}<extra></extra>")
    fig.update_xaxes(title="rank (most likely first)", range=[0.5, max_rank + 0.5])
    fig.update_yaxes(title="cumulative probability", range=[0, 1.03])
    fig = base_layout(fig, "Cumulative probability and the draw", presenter, height=440)
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.22, xanchor="left", x=0))
    return fig


def probability_colour(p: float) -> str:
    """Chip colour for a probability: pale (unlikely) to deep blue (near certain)."""
    p = min(max(p, 0.0), 1.0)
    light, dark = np.array([255, 236, 210]), np.array([42, 111, 219])
    low = np.array([250, 200, 200])
    rgb = low + (light - low) * (p / 0.2) if p < 0.2 else light + (dark - light) * ((p - 0.2) / 0.8)
    return "#%02x%02x%02x" % tuple(int(c) for c in rgb)


def step_frame_for_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The step table shown under Generate: one row per generated token."""
    if frame.empty:
        return frame
    return pd.DataFrame({
        "step": frame["step"],
        "token": frame["token"].map(lambda t: t.replace("\n", "↵")),
        "probability": frame["prob"].round(4),
        "model probability (T=1)": frame["raw_prob"].round(4),
        "rank": frame["rank"],
        "entropy (bits)": frame["entropy_bits"].round(3),
        "tokens kept": frame["tokens_kept"],
        "u": frame["u"].round(4),
        "forward ms": frame["forward_ms"].round(2),
        "phase": frame["phase"],
    })


# -- Sampling lab ----------------------------------------------------------------------

def _top_tokens(logits: torch.Tensor, n: int):
    order = torch.sort(logits, descending=True, stable=True).indices
    return order[:n]


TEMPERATURE_GRID = [round(0.05 * i, 2) for i in range(41)]  # 0 .. 2
TOP_P_GRID = [round(0.05 * i, 2) for i in range(1, 21)]  # 0.05 .. 1


def live_slider_figure(logits: torch.Tensor, tokenizer, knob: str, values: list[float], start: float,
                       fixed: SamplingSettings, top_n: int = 15, presenter: bool = False) -> go.Figure:
    """A bar chart with its own Plotly slider over precomputed frames (temperature or
    top-p), so it moves while the thumb is dragged with no server round trip. Each frame
    is computed exactly over the full vocabulary; the other knob stays at `fixed`."""
    order = _top_tokens(logits, top_n)
    names = [label(repr_token(t)) for t in readable_tokens(tokenizer, order.tolist())][::-1]  # most likely on top
    frames, steps = [], []
    for value in values:
        t = value if knob == "temperature" else fixed.temperature
        p = value if knob == "top_p" else fixed.top_p
        scaled = apply_temperature(logits, t)
        probs = apply_top_p(scaled, p).double().softmax(-1)
        shown = probs[order].numpy()[::-1]
        kept = int((probs > 0).sum())
        ent = float(entropy_bits(probs))
        colours = [FINAL_COLOUR if v > 0 else REMOVED_COLOUR for v in shown]
        key = f"{value:g}"
        frames.append(go.Frame(
            name=key,
            data=[go.Bar(x=shown, y=names, orientation="h", marker_color=colours,
                         text=[f"{v:.1%}" for v in shown], textposition="outside")],
            layout=go.Layout(title_text=f"{'T' if knob == 'temperature' else 'top-p'} = {value:g}: {kept:,} kept, {ent:.2f} bits"),
        ))
        steps.append(dict(method="animate", label=key,
                          args=[[key], dict(mode="immediate", frame=dict(duration=0, redraw=True), transition=dict(duration=0))]))
    start_index = int(np.argmin([abs(v - start) for v in values]))
    first = frames[start_index]
    fig = go.Figure(data=first.data, frames=frames, layout=first.layout)
    fig.update_layout(
        sliders=[dict(active=start_index, currentvalue=dict(prefix=f"{knob.replace('_', '-')}: "), pad=dict(t=40), steps=steps)],
    )
    fig.update_xaxes(range=[0, 1.08], tickformat=".0%", title="probability")
    fig.update_yaxes(automargin=True)
    base_layout(fig, first.layout.title.text, presenter, height=170 + 26 * len(names))
    return fig


def temperatures_side_by_side(logits: torch.Tensor, tokenizer, temperatures: list[float], top_n: int = 12,
                              presenter: bool = False) -> go.Figure:
    from plotly.subplots import make_subplots

    order = _top_tokens(logits, top_n)
    names = [label(repr_token(t)) for t in readable_tokens(tokenizer, order.tolist())][::-1]
    fig = make_subplots(rows=1, cols=len(temperatures), shared_yaxes=True,
                        subplot_titles=[f"T = {t:g}" + (" (greedy)" if t == 0 else "") for t in temperatures])
    for i, t in enumerate(temperatures):
        probs = apply_temperature(logits, t).double().softmax(-1)
        shown = probs[order].numpy()[::-1]
        fig.add_bar(x=shown, y=names, orientation="h", marker_color=FINAL_COLOUR, showlegend=False,
                    row=1, col=i + 1, hovertemplate="%{y}: %{x:.2%}<extra></extra>")
        fig.update_xaxes(range=[0, 1], tickformat=".0%", row=1, col=i + 1)
    fig.update_yaxes(automargin=True)
    return base_layout(fig, "The same step at different temperatures", presenter, height=140 + 26 * top_n)


def draw_histogram(counts: pd.DataFrame, presenter: bool = False) -> go.Figure:
    """Observed share of N seeded draws next to the computed final probabilities."""
    fig = go.Figure()
    names = [label(repr_token(t)) if t != "other" else t for t in counts["token"]]
    fig.add_bar(x=names, y=counts["computed"], name="computed probability", marker_color=RAW_COLOUR)
    fig.add_bar(x=names, y=counts["observed"], name="share of draws", marker_color=FINAL_COLOUR)
    fig.update_layout(barmode="group")
    fig.update_yaxes(tickformat=".0%", title="probability / share")
    return base_layout(fig, "Sampled vs computed", presenter, height=420)


def pipeline_figure(view, tokenizer, top_n: int = 12, presenter: bool = False) -> go.Figure:
    """The distribution after each stage, left to right, with how many tokens survive."""
    from plotly.subplots import make_subplots

    from inference.sampling import STAGES

    n = min(top_n, len(view.order))
    names = [label(repr_token(t)) for t in readable_tokens(tokenizer, view.order[:n].tolist())][::-1]
    short = {"raw": "Raw (T=1)", "penalty": "Rep. penalty", "temperature": "Temperature",
             "top_k": "Top-k", "top_p": "Top-p", "min_p": "Min-p (final)"}
    # Two rows of three: each panel stays wide enough to read on a laptop screen.
    fig = make_subplots(rows=2, cols=3, shared_yaxes=True, horizontal_spacing=0.04, vertical_spacing=0.16,
                        subplot_titles=[f"{i + 1}. {short[s]}: <b>{view.kept[s]:,}</b> kept" for i, s in enumerate(STAGES)])
    for i, stage in enumerate(STAGES):
        shown = view.probs[stage][:n].numpy()[::-1]
        colours = [FINAL_COLOUR if v > 0 else REMOVED_COLOUR for v in shown]
        row, col = divmod(i, 3)
        fig.add_bar(x=shown, y=names, orientation="h", marker_color=colours, showlegend=False, row=row + 1, col=col + 1,
                    hovertemplate="%{y}: %{x:.2%}<extra></extra>")
        fig.update_xaxes(range=[0, 1], tickvals=[0, 0.5], tickformat=".0%", row=row + 1, col=col + 1)
    fig.update_yaxes(automargin=True)
    fig = base_layout(fig, "", presenter, height=2 * (110 + 24 * n))
    fig.update_layout(margin=dict(t=50))
    return fig
