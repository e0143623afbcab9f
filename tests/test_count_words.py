"""A count of one reads "1 client", "1 bar": no "1 clients" on screen (#46 item 6)."""

import pytest

from inference.lessons.chart_text import describe

pytestmark = pytest.mark.unit


def test_a_one_bar_gantt_reads_one_bar():
    import plotly.graph_objects as go

    fig = go.Figure(go.Bar(x=[2.0], base=[1.0], y=["request 1"], orientation="h", name="decode"))
    assert "1 bar " in describe(fig) and "1 bars" not in describe(fig)
