"""Presenter mode (larger text for a projector): the charts' text really is set larger. (Every page opens in presenter
mode: tests/test_every_page_every_model.py.)"""

import pytest

from tests.conftest import APP_FILE

pytestmark = pytest.mark.page


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


def test_generate_folds_its_settings_in_presenter_mode_and_names_every_one_acting_on_the_draw():
    """Presenter mode folds Generate's settings into one closed section (its sliders do not run) and a line under it
    names the temperature and every knob away from 'off', whose values still reach the draw."""
    from streamlit.testing.v1 import AppTest

    from inference.lessons.sampling_lab.knobs import MORE

    xtc = next(knob for knob in MORE if knob.field == "xtc_probability")
    at = AppTest.from_file(APP_FILE, default_timeout=300)
    at.session_state["presenter"] = True
    at.session_state["gen_temperature"] = 0.35
    at.session_state["gen_xtc_probability"] = 0.5
    at.session_state["gen_mirostat_tau"] = 4.0  # mirostat is off: its τ acts on nothing and is not named
    at.run()
    assert not at.exception
    assert not [s for s in at.slider if s.key == "gen_temperature"]  # folded away
    line = next(c.value for c in at.caption if c.value.startswith("Now:"))
    assert "temperature 0.35" in line and f"{xtc.label} 0.5" in line and "seed 0" in line
    assert "top-p 0.9" in line  # Generate's opening top-p
    assert "τ" not in line and "tau" not in line.lower() and "top-k" not in line  # top-k at its 'off' value 0


def test_same_luck_folds_both_sides_settings_in_presenter_mode_and_names_what_each_draws_with():
    """Presenter mode folds Same luck's seed, length and both sides' settings into one closed section (their sliders
    do not run); its lines name what both runs share and each side's model and knobs, which still reach the draws:
    the two texts, the page's first result, come right after."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP_FILE, default_timeout=300)
    at.session_state["presenter"] = True
    at.session_state["cmp_b_temperature"] = 1.7
    at.run()
    at.switch_page("app_pages/compare.py").run()
    assert not at.exception
    assert not [s for s in at.slider if s.key and s.key.startswith("cmp_")]  # folded away
    lines = next(c.value for c in at.caption if c.value.startswith("Now:")).split("  \n")
    assert lines[0].startswith("Now:") and "seed 0 (shared)" in lines[0]
    assert lines[1].startswith("**A**:") and "temperature 0.8" in lines[1] and "top-p 0.95" in lines[1]
    assert lines[2].startswith("**B**:") and "temperature 1.7" in lines[2] and "min-p 0.1" in lines[2]
    assert "stage order: llama.cpp default" in lines[2] and "stage order" not in lines[1]  # B: llama.cpp's order
    pair = next(iter(at.session_state["cmp_pairs"].values()))
    assert pair.trace_b.records[0].settings.temperature == 1.7  # the folded value drew B's text
