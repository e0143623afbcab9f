"""A count of one reads "1 client", "1 bar": no "1 clients" on screen (#46 item 6)."""

import pytest

from inference.lessons.chart_text import describe
from inference.lessons.serving.capacity import Capacity, CapacityComparison, capacity_figure

pytestmark = pytest.mark.unit


def test_one_client_and_many_clients_on_the_capacity_chart():
    one = Capacity(slots=1, clients=1, tokens_in_window=100, window_s=2.0, mean_context=20.0, failures=0)
    many = Capacity(slots=4, clients=4, tokens_in_window=300, window_s=2.0, mean_context=20.0, failures=0)
    names = capacity_figure(CapacityComparison(one, many, 60.0, 200.0)).to_dict()["data"][0]["x"]
    assert list(names) == ["1 slot, 1 client", "4 slots, 4 clients"]


def test_a_one_bar_gantt_reads_one_bar():
    import plotly.graph_objects as go

    fig = go.Figure(go.Bar(x=[2.0], base=[1.0], y=["request 1"], orientation="h", name="decode"))
    assert "1 bar " in describe(fig) and "1 bars" not in describe(fig)
