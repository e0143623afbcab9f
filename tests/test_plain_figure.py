"""`PlainFigure` gives Streamlit the very dict an unvalidated `go.Figure` would, and is a whole figure otherwise."""

import copy
import pickle

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from inference.lessons.plain_figure import PlainFigure, plain_figure

pytestmark = pytest.mark.unit

SPEC = {
    "data": [
        {"type": "bar", "x": np.arange(4), "y": [0.5, 0.25, 0.125, 0.125], "marker": {"color": ["#2a6fdb"] * 4}},
        {"type": "scatter", "x": [0, 1], "y": np.array([1.0, 2.0]), "mode": "lines"},
    ],
    "layout": {"title": {"text": "a chart"}, "xaxis": {"range": [0, 3]}, "shapes": [{"type": "line", "x0": 0}]},
}
WITH_FRAMES = SPEC | {"frames": [{"name": "f0", "data": [{"y": [1, 2]}]}]}


def test_to_dict_equals_an_unvalidated_figure_under_each_default_template():
    before = pio.templates.default
    try:
        for name in ("plotly", "simple_white", None):
            pio.templates.default = name
            assert (
                PlainFigure(copy.deepcopy(SPEC)).to_dict() == go.Figure(copy.deepcopy(SPEC), _validate=False).to_dict()
            )
    finally:
        pio.templates.default = before


def test_frames_whose_traces_are_typed_are_copied_not_built():
    """The Sampling lab's live charts: 41 frames, each trace with its type (67 ms a chart through `go.Figure`)."""
    frame = {"type": "bar", "x": np.array([0.5, 0.25]), "y": ["a", "b"], "marker": {"color": ["#2a6fdb", "#ddd"]}}
    spec = SPEC | {
        "frames": [
            {"name": "0", "data": [frame], "layout": {"title": {"text": "T = 0"}}},
            {"name": "1", "data": [frame | {"x": np.array([0.1, 0.9])}], "traces": [0]},
        ]
    }
    before = pio.templates.default
    try:
        for name in ("plotly", "simple_white", None):
            pio.templates.default = name
            figure = PlainFigure(copy.deepcopy(spec))
            assert figure.to_dict() == go.Figure(copy.deepcopy(spec), _validate=False).to_dict()
            assert bool(figure.__dict__.get("_plain_built")) == (name is None)  # copied unless no template
    finally:
        pio.templates.default = before
    untyped = PlainFigure(copy.deepcopy(WITH_FRAMES))
    assert untyped.to_dict() == go.Figure(copy.deepcopy(WITH_FRAMES), _validate=False).to_dict()
    assert untyped.__dict__.get("_plain_built")  # Plotly decides an untyped frame trace's type


def test_the_shared_template_is_not_changed_by_a_caller_of_to_dict():
    first = PlainFigure(copy.deepcopy(SPEC)).to_dict()
    first["data"][0]["y"][0] = 99
    first["layout"]["title"]["text"] = "changed"
    again = PlainFigure(copy.deepcopy(SPEC)).to_dict()
    assert again == go.Figure(copy.deepcopy(SPEC), _validate=False).to_dict()


def test_it_becomes_a_real_figure_when_asked_for_more_than_its_dict():
    fig = PlainFigure(copy.deepcopy(SPEC))
    assert fig.layout.title.text == "a chart"
    fig.update_layout(height=321)
    assert fig.to_dict()["layout"]["height"] == 321
    assert go.Figure(fig.to_dict()).layout.height == 321  # and it validates
    assert isinstance(copy.deepcopy(fig), go.Figure)
    assert pickle.loads(pickle.dumps(fig)).to_dict() == fig.to_dict()


def test_plain_figure_validates_as_plotly_json():
    fig = plain_figure([{"type": "bar", "x": [1, 2], "y": [3, 4]}], {"xaxis": {"title": {"text": "x"}}}, "T", True, 300)
    assert go.Figure(fig.to_dict()).layout.title.text == "T"  # go.Figure raises on a wrong property


def test_its_copy_is_deepcopy_then_plotlys_typed_arrays():
    """`_copy_as_plotly` against what it replaces, on arrays in data, in nested dicts, in lists (left as arrays), under
    a key Plotly skips, numpy scalars and tuples; and the copy shares nothing that can change with the spec."""
    from _plotly_utils.utils import convert_to_base64

    from inference.lessons.plain_figure import _copy_as_plotly

    spec = {
        "data": [
            {
                "x": np.arange(3),
                "y": [np.float64(0.5), 1, None, "a"],
                "marker": {"color": np.array([1.5, 2.5])},
                "customdata": [np.arange(2), (1, np.arange(2))],
                # the dtypes `_typed_array` encodes itself, and those it leaves to Plotly (int64, big-endian, empty)
                "z": np.arange(6, dtype=np.float32).reshape(2, 3),
                "text": np.arange(10.0)[::3],  # not contiguous
                "ids": np.array([1, 2], dtype=np.int32),
                "width": np.array([3, 4], dtype=np.uint8),
                "base": np.array([1.0, 2.0], dtype=">f8"),
                "offset": np.array([], dtype=np.float64),
                "xperiod": np.array([2**40, 1]),
            }
        ],  # fmt: skip
        "layout": {"xaxis": {"range": np.array([0.0, 3.0])}, "layers": [{"z": np.arange(2)}], "t": (1, 2)},
    }
    want = copy.deepcopy(spec)
    convert_to_base64(want)
    got = _copy_as_plotly(spec)
    assert pio.to_json(got, validate=False) == pio.to_json(want, validate=False)
    assert got["data"][0]["x"] == want["data"][0]["x"] and isinstance(got["layout"]["xaxis"]["range"], np.ndarray)
    got["data"][0]["y"][0] = 99
    got["layout"]["xaxis"]["range"][0] = 7
    assert spec["data"][0]["y"][0] == 0.5 and spec["layout"]["xaxis"]["range"][0] == 0.0
