"""Rules every chart keeps: a caption from the one vocabulary (Measured, Computed exactly, Simulated, Published,
Illustrative); kept, cut and chosen tokens told apart by more than colour; at projector size, titles wrapped, text
set larger, value labels whole and only as many ticks labelled as fit. (The browser test
tests/test_pages_browser.py checks the drawn result.)"""

import ast

import numpy as np
import plotly.graph_objects as go
import pytest

from app_pages.shared.captions import CAPTION_KINDS, caption
from inference.lessons.generate.figures import next_token_bars
from inference.lessons.style import base_layout, decade_ticks, tick_step
from tests.conftest import PROJECT_ROOT

pytestmark = pytest.mark.unit

FIVE = {"measured", "exact", "simulated", "published", "illustrative"}


def caption_kinds(path) -> list[tuple[int, object]]:
    """(line, kind) of every shared `caption(...)` call; kind is None when it is not a literal."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call) or not node.args or isinstance(node.args[0], ast.Starred):
            continue  # a Starred (kind, text) is made at run time: caption() checks it
        func = node.func
        if not (
            (isinstance(func, ast.Name) and func.id == "caption")
            or (
                isinstance(func, ast.Attribute) and func.attr == "caption" and getattr(func.value, "id", "") == "common"
            )
        ):
            continue  # st.caption / column.caption are Streamlit's own small text
        first = node.args[0]
        for option in [first.body, first.orelse] if isinstance(first, ast.IfExp) else [first]:
            found.append((node.lineno, option.value if isinstance(option, ast.Constant) else None))
    return found


def test_every_caption_uses_one_of_the_five_kinds():
    assert set(CAPTION_KINDS) == FIVE
    calls = [(p.name, *c) for p in sorted((PROJECT_ROOT / "app_pages").glob("*.py")) for c in caption_kinds(p)]
    assert len(calls) > 20  # the pages do caption their charts
    assert [call for call in calls if call[2] not in FIVE] == []
    with pytest.raises(ValueError, match="caption kind"):
        caption("data", "an old tag")


TABLE = {
    "token": np.array([" Paris", " the", " London", "other (3 tokens)"], dtype=object),
    "rank": np.array([1.0, 2.0, 3.0, np.nan]),
    "chosen": np.array([False, True, False, False]),
    "removed_by": np.array(["", "", "top_p", ""], dtype=object),
    "raw": np.array([0.6, 0.25, 0.1, 0.05]),
    "final": np.array([0.7, 0.3, 0.0, 0.0]),
}


def test_cut_and_chosen_tokens_are_hatched_and_marked_not_only_coloured():
    raw, final = next_token_bars(TABLE).to_dict()["data"]
    hatched = [name for name, shape in zip(raw["y"], raw["marker"]["pattern"]["shape"]) if shape]
    assert len(hatched) == 1 and "London" in hatched[0] and "✂" in hatched[0]
    assert final["marker"]["pattern"]["shape"] == ["", "/", "", ""]  # least likely first
    assert any(name.startswith("▶") and "the" in name for name in final["y"])


@pytest.mark.parametrize("presenter, size", [(False, 11), (True, 18)])
def test_bar_value_labels_keep_their_size_and_fit(presenter, size):
    """Plotly would shrink an outside label to the bar's thickness and clip it at the axis end."""
    fig = next_token_bars(TABLE, presenter)
    labelled = [t for t in fig.data if t.text is not None]
    assert labelled and all(t.constraintext == "none" and t.cliponaxis is False for t in labelled)
    assert all(t.textfont.size == size for t in labelled)
    assert fig.layout.xaxis.range[1] >= 0.7 * 1.2


LONG = "Rank of the next token in each layer's lens (1 = top guess)"


def test_presenter_mode_wraps_titles_and_sets_the_text_size_itself():
    """Streamlit's chart theme ignores layout.font and Plotly never wraps a title: presenter mode does both."""

    def figure(presenter: bool) -> go.Figure:
        fig = go.Figure(go.Bar(x=[1, 2], y=[3, 4], text=["a", "b"]))
        fig.add_annotation(text="note", x=1, y=3)
        fig.update_xaxes(title="the model's probability (T = 1, before the mask)")
        return base_layout(fig, LONG, presenter, 300)

    normal, big = figure(False), figure(True)
    assert normal.layout.title.text == LONG and "<br>" not in normal.layout.xaxis.title.text
    assert normal.layout.xaxis.tickfont.size is None  # normal mode keeps the theme's own sizes
    lines = big.layout.title.text.split("<br>")
    assert len(lines) == 2 and " ".join(lines) == LONG and "<br>" in big.layout.xaxis.title.text
    assert big.layout.title.yanchor == "top" and big.layout.margin.t > normal.layout.margin.t
    assert big.layout.xaxis.tickfont.size == big.layout.legend.font.size == big.layout.annotations[0].font.size == 20


@pytest.mark.parametrize(("count", "presenter", "step"), [(8, True, 1), (10, True, 2), (31, True, 5),
                                                          (16, False, 1), (31, False, 2), (200, True, 50)])  # fmt: skip
def test_tick_step_labels_at_most_what_fits(count, presenter, step):
    assert tick_step(count, presenter) == step
    assert -(-count // step) <= (8 if presenter else 16)


def test_decade_ticks_label_powers_of_ten_only_and_thin_them_past_six_decades():
    assert decade_ticks([0.04]) == {"type": "log", "dtick": 1}
    assert decade_ticks([1e-12, 0.5]) == {"type": "log", "dtick": 2}
