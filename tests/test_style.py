"""inference/lessons/style.py: `plain_figure` skips Plotly's validation for speed; what it sends must not change."""

import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from inference.lessons.style import plain_figure

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("presenter", [False, True])
def test_plain_figure_sends_the_json_of_a_validated_figure(presenter):
    """The JSON st.plotly_chart sends (`to_dict`, then `to_json`) equals that of the same figure built with Plotly's
    validation: numpy arrays, outside bar labels, shapes and annotations included."""
    data = [
        {
            "type": "bar",
            "x": np.array([0.7, 0.2]),
            "y": ["' Paris'", "' the'"],
            "orientation": "h",
            "text": ["70%", "20%"],
            "textposition": "outside",
            "marker": {"color": ["#1f77b4", "#aaaaaa"]},
        },
        {"type": "scatter", "x": np.arange(3), "y": np.array([0.1, 0.5, 0.9]), "mode": "lines", "name": "cumulative"},
    ]
    layout = {
        "xaxis": {"title": {"text": "probability"}, "tickformat": ".0%"},
        "yaxis": {"autorange": "reversed"},
        "shapes": [{"type": "line", "x0": 0.5, "x1": 0.5, "y0": 0, "y1": 1, "yref": "paper"}],
        "annotations": [{"text": "u = 0.42", "x": 0.5, "y": 1, "yref": "paper", "showarrow": False}],
    }
    fast = plain_figure(data, layout, "Next token", presenter, 300)
    checked = go.Figure(fast.to_dict())  # the same dicts through Plotly's validation
    assert json.loads(pio.to_json(fast.to_dict(), validate=False)) == json.loads(pio.to_json(checked.to_dict()))
