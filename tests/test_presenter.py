"""Presenter mode (larger text for a projector) on every page: each page and its charts
render without an exception, and the charts' text really is set larger."""

import pytest

from tests.conftest import APP_FILE

pytestmark = pytest.mark.page

PAGES = [
    "app_pages/generate.py",
    "app_pages/sampling.py",
    "app_pages/prefill-decode.py",
    "app_pages/kv-cache.py",
    "app_pages/quantization.py",
    "app_pages/cost.py",
]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_in_presenter_mode(page):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP_FILE, default_timeout=300)
    at.session_state["presenter"] = True
    at.run()
    at.switch_page(page).run()
    assert not at.exception
    assert at.toggle(key="presenter").value is True


def test_presenter_figures_set_their_text_size():
    """Streamlit's chart theme ignores layout.font, so presenter sizes go on axes, legend
    and annotations themselves."""
    import plotly.graph_objects as go

    from inference.lessons.style import base_layout

    fig = go.Figure(go.Bar(x=[1, 2], y=[3, 4], text=["a", "b"]))
    fig.add_annotation(text="note", x=1, y=3)
    big, normal = base_layout(go.Figure(fig), "t", True, 300), base_layout(go.Figure(fig), "t", False, 300)
    assert big.layout.xaxis.tickfont.size == big.layout.legend.font.size == big.layout.annotations[0].font.size == 20
    assert normal.layout.xaxis.tickfont.size is None  # normal mode keeps the theme's own sizes


def test_bar_value_labels_keep_their_size_and_fit():
    """Plotly would shrink an outside bar label to the bar's thickness and clip it at the
    axis end: labels keep the text size, and the axis leaves room right of the longest bar."""
    import pandas as pd

    from inference.lessons.generate.figures import next_token_bars

    table = pd.DataFrame(
        {
            "token": ["a", "b", "other"],
            "rank": [0, 1, None],
            "raw": [0.8, 0.15, 0.05],
            "min_p": [0.874, 0.126, 0.0],
            "final": [0.874, 0.126, 0.0],
            "chosen": [False, True, False],
            "removed_by": ["", "", ""],
        }
    )
    for presenter, size in ((False, 11), (True, 18)):
        fig = next_token_bars(table, presenter)
        labelled = [t for t in fig.data if t.text is not None]
        assert labelled and all(t.constraintext == "none" and t.cliponaxis is False for t in labelled)
        assert all(t.textfont.size == size for t in labelled)
        assert fig.layout.xaxis.range[1] >= 0.874 * 1.2
