"""The sentence under every chart (inference/lessons/chart_text.describe): read from the figure's own data, written
as its axes write it (percent, units), short, and never in exponent notation."""

import numpy as np
import plotly.graph_objects as go
import pytest

from inference.lessons.chart_text import describe, number
from inference.lessons.palette import contrast_ratio, probability_colour, probability_text_colour, status_marker
from inference.lessons.style import plain_figure

pytestmark = pytest.mark.unit


def test_bars_on_a_percent_axis_read_as_percentages_largest_first():
    """A probability axis (tickformat %) gives '77.3%', the largest bars first, and leaves out the zeros."""
    fig = go.Figure(go.Bar(x=[0.065, 0.773, 0.0, 0.0004], y=["' the'", "' Paris'", "' a'", "' an'"], orientation="h"))
    fig.update_layout(title="Next token", xaxis_tickformat=".0%")
    text = describe(fig)
    assert text == "Next token: ' Paris' 77.3%, ' the' 6.5%, ' an' <0.1%."


def test_a_value_axis_unit_follows_every_number():
    """'time (ms)' on the value axis: each number carries ms; three significant digits; thousands separated."""
    fig = go.Figure(go.Bar(x=["prefill", "decode"], y=[1234.567, 7.23456]))
    fig.update_layout(title="Pass time", yaxis_title="time (ms)")
    assert describe(fig) == "Pass time: prefill 1,235 ms, decode 7.23 ms."


def test_a_line_reads_as_its_course_with_the_category_axis_named():
    """A line: how many points, first and last (at 'step N', the bracket of the axis title dropped), its peak."""
    fig = go.Figure(go.Scatter(x=[0, 1, 2, 3], y=[1.0, 5.0, 2.0, 3.0], name="KV cache"))
    fig.update_layout(xaxis_title="step (0 = prefill)", yaxis_title="size (kB)")
    text = describe(fig)
    assert text == "KV cache: 4 points from 1 kB at step 0 to 3 kB at step 3, highest 5 kB at step 1."


def test_a_vertical_marker_line_reads_as_where_it_stands():
    """A threshold drawn as a vertical line (Prefill vs decode's "80% of best") is a place, not a course of values:
    it read "2 points from 0 tokens at P 128 to 426 tokens at P 128"."""
    fig = go.Figure(go.Scatter(x=[128, 128], y=[0, 426], name="80% of best, P = 128", mode="lines"))
    fig.update_layout(title="Tokens per second", xaxis_title="prompt tokens P (log)", yaxis_title="tokens per second")
    assert describe(fig) == "Tokens per second: 80% of best, P = 128: a vertical line at prompt tokens P 128."


def test_tiny_and_huge_numbers_have_no_exponent_notation():
    assert number(1.1e-16, percent=True) == "0%"
    assert number(2.78e-4) == "2.78 × 10^-4"
    assert number(1342.2) == "1,342"
    assert number(0.999999, percent=True) == "100%"
    assert number(1342.2, unit="10⁹ bytes") == "1,342 × 10⁹ bytes"
    assert "e-" not in number(3.3e-9, unit="s")


def test_unnamed_panels_take_their_subplot_titles():
    """A grid of subplots (Sampling lab's stages) names each series by its panel's title."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=["T = 0.3", "T = 1.5"])
    fig.add_bar(x=["a", "b"], y=[0.9, 0.1], row=1, col=1, showlegend=False)
    fig.add_bar(x=["a", "b"], y=[0.6, 0.4], row=1, col=2, showlegend=False)
    fig.update_yaxes(tickformat=".0%")
    assert describe(fig) == "T = 0.3: a 90.0%, b 10.0%; T = 1.5: a 60.0%, b 40.0%."


def test_a_gantt_chart_reads_as_its_span_and_its_bars_median_length():
    fig = go.Figure(go.Bar(y=["r1", "r2", "r3"], x=[2.0, 3.0, 1.0], base=[0.5, 1.0, 2.0], orientation="h"))
    fig.update_layout(title="Requests", xaxis_title="time (s)")
    assert describe(fig) == "Requests: 3 bars from 0.5 s to 4 s, 2 s each (median)."


def test_a_figure_of_numpy_arrays_is_read_back_with_its_title_s_html_dropped():
    """numpy arrays (Plotly's typed arrays) are read back as numbers, the title's HTML dropped."""
    data = [{"type": "bar", "x": np.array([0.25, 0.75]), "y": ["x", "y"], "orientation": "h", "name": "final"}]
    fig = plain_figure(data, {"xaxis": {"tickformat": ".0%"}}, "Step 3 <sup>u = 0.42</sup>", False, 200)
    assert describe(fig) == "Step 3 u = 0.42: final: y 75.0%, x 25.0%."


def test_the_next_token_chart_of_generate_reads_its_own_numbers():
    """The real chart of a step: its sentence names the chosen token's final probability, as the bar's label does."""
    from inference.lessons.generate.figures import next_token_bars

    table = {
        "token": np.array([" Paris", " the", "other (3 tokens)"], dtype=object),
        "rank": np.array([1.0, 2.0, np.nan]),
        "chosen": np.array([True, False, False]),
        "removed_by": np.array(["", "top_p", ""], dtype=object),
        "raw": np.array([0.7, 0.2, 0.1]),
        "final": np.array([1.0, 0.0, 0.0]),
    }
    text = describe(next_token_bars(table))
    assert text.endswith("final (after all settings): ▶ 1. ' Paris' 100%.")
    assert "raw (T=1, no filters): ▶ 1. ' Paris' 70.0%, 2. ' the' ✂ top-p 20.0%, other (3 tokens) 10.0%" in text


def test_many_series_are_cut_to_a_sentence():
    fig = go.Figure([go.Bar(x=["a", "b", "c", "d"], y=[1, 2, 3, 4], name=f"s{i}") for i in range(7)])
    text = describe(fig)
    assert text.count("s") >= 4 and "and 3 more series" in text
    assert text.count(",") < 20


def test_chip_text_contrasts_at_every_probability():
    """Every chip's text is at least 4.5:1 on its background (WCAG AA), from p = 0 to 1."""
    worst = min(contrast_ratio(probability_colour(p / 200), probability_text_colour(p / 200)) for p in range(201))
    assert worst >= 4.5


def test_kept_filtered_and_chosen_bars_differ_by_pattern_as_well_as_colour():
    marker = status_marker(["kept", "removed", "chosen"])
    assert len(set(marker["color"])) == 3
    assert marker["pattern"]["shape"][1] != marker["pattern"]["shape"][0]


def test_an_axis_bracket_is_a_unit_only_when_it_names_one():
    from inference.lessons.chart_text import _unit

    assert _unit("time since the prompt arrived (ms)") == "ms"
    assert _unit("loss (nats per token)") == "nats per token"
    assert _unit("GB (10⁹ bytes, log scale)") == "GB"  # was "1,342 × 10⁹ bytes"
    assert _unit("KV cache (kB)") == "kB"
    assert _unit("ms since the start (measured)") == "ms"  # the Speculative page's timeline read "7.02 measured"
    assert _unit("µs per step, median (mask and draw)") == "µs"
    assert _unit("ms (log scale)") == "ms"
    assert _unit("tokens in the cache (log)") == ""  # not "5 log"
    assert _unit("requests decoding together (batch)") == ""
    assert _unit("step (0 = prefill)") == ""


def test_a_gantt_in_ms_reads_its_unit_from_a_title_that_starts_with_it():
    fig = go.Figure(go.Bar(y=["run"], x=[5.0], base=[2.0], orientation="h", name="verify"))
    fig.update_layout(title="Where the time went", xaxis_title="ms since the start (measured)")
    assert describe(fig) == "Where the time went: verify: 1 bar from 2 ms to 7 ms."


def test_a_numeric_axis_named_by_an_equation_reads_as_its_symbol():
    fig = go.Figure(go.Scatter(x=[0.0, 0.5, 1.0], y=[1.0, 1.4, 2.9], name="γ = 2"))
    fig.update_layout(title="Speed-up", xaxis_title="α = accepted ÷ checked")
    assert describe(fig) == "Speed-up: γ = 2: 3 points from 1 at α = 0 to 2.9 at α = 1."


def test_a_heatmap_names_its_highest_and_lowest_cell_with_the_number_written_in_it():
    """A grid said "31 × 16 cells, from 0 to 4.69": the log of a rank, not a number on the chart. The cells' own
    text is the value where the chart writes one; the colour bar's title is its unit; rows and columns are named."""
    fig = go.Figure(
        go.Heatmap(
            z=[[0.0, 2.0], [1.0, 0.3]],
            text=[[1, 100], [10, 2]],
            x=["cat", "sat"],
            y=[0, 1],
            colorbar=dict(title="rank"),
        )
    )
    fig.update_layout(title="Ranks", yaxis_title="layer (0 = embeddings)")
    assert describe(fig) == "Ranks: 2 × 2 cells; highest 100 rank at layer 0, sat, lowest 1 rank at layer 0, cat."
    plain = go.Figure(
        go.Heatmap(z=[[0.5, 0.25]], x=["q_proj", "k_proj"], y=["layer 3"], colorbar=dict(title="% moved"))
    )
    assert (
        describe(plain)
        == "1 × 2 cells; highest 0.5 % moved at layer 3, q_proj, lowest 0.25 % moved at layer 3, k_proj."
    )
