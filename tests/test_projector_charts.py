"""Charts at projector size: Plotly never wraps a title nor thins ticks it was given, so presenter mode wraps long
titles and axis titles itself and labels only as many ticks as fit the narrowest chart (800x1000, sidebar open).
The browser test (tests/test_narrow_presenter_browser.py) checks the drawn result; these check the rules."""

import plotly.graph_objects as go
import pytest

from inference.lessons.style import PROJECTOR_TITLE_CHARS, base_layout, decade_ticks, plain_figure, tick_step, wrapped

pytestmark = pytest.mark.unit

LONG = "Rank of the next token in each layer's lens (1 = top guess)"


def test_wrapped_breaks_at_spaces_within_the_width_and_keeps_every_word():
    lines = wrapped(LONG, 34).split("<br>")
    assert len(lines) == 2 and all(len(line) <= 34 for line in lines)
    assert " ".join(lines) == LONG
    assert wrapped("short", 34) == "short"
    assert wrapped("one<br>two and more words than fit", 5) == "one<br>two and more words than fit"  # its own breaks
    assert wrapped("Supercalifragilistic word", 10) == "Supercalifragilistic<br>word"  # a long word stays whole


def test_base_layout_wraps_a_long_title_in_presenter_mode_only_and_makes_room_for_it():
    def figure(presenter: bool) -> go.Figure:
        fig = go.Figure(go.Bar(x=[1, 2], y=[3, 4]))
        fig.update_xaxes(title="the model's probability (T = 1, before the mask)")
        return base_layout(fig, LONG, presenter, 300)

    normal, projected = figure(False), figure(True)
    assert normal.layout.title.text == LONG and "<br>" not in normal.layout.xaxis.title.text
    assert projected.layout.title.text.count("<br>") == 1
    assert all(len(line) <= PROJECTOR_TITLE_CHARS for line in projected.layout.title.text.split("<br>"))
    assert projected.layout.title.yanchor == "top"  # pinned: Plotly centred the extra line above the figure's top
    assert projected.layout.margin.t > normal.layout.margin.t
    assert "<br>" in projected.layout.xaxis.title.text


def test_plain_figure_wraps_as_base_layout_does():
    fig = plain_figure([], {"xaxis": {"title": {"text": LONG}}}, LONG, True, 300).to_dict()["layout"]
    assert fig["title"]["text"].count("<br>") == 1 and fig["xaxis"]["title"]["text"].count("<br>") == 1
    assert fig["margin"]["t"] > 60
    plain = plain_figure([], {}, LONG, False, 300).to_dict()["layout"]
    assert plain["title"]["text"] == LONG and plain["margin"]["t"] == 60


@pytest.mark.parametrize(("count", "presenter", "step"), [(8, True, 1), (10, True, 2), (23, True, 5), (31, True, 5),
                                                          (16, False, 1), (31, False, 2), (200, True, 50)])  # fmt: skip
def test_tick_step_labels_at_most_what_fits(count, presenter, step):
    assert tick_step(count, presenter) == step
    assert -(-count // step) <= (8 if presenter else 16)


def test_decade_ticks_label_powers_of_ten_only_and_thin_them_past_six_decades():
    assert decade_ticks([0.04]) == {"type": "log", "dtick": 1}
    assert decade_ticks([1e-12, 0.5]) == {"type": "log", "dtick": 2}
