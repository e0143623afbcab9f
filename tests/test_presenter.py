"""Presenter mode folds a page's settings into one closed section and a line under it names the values acting on
the draw, which still reach it."""

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import APP_FILE

pytestmark = pytest.mark.page


def presenter_app(**state) -> AppTest:
    at = AppTest.from_file(APP_FILE, default_timeout=300)
    at.session_state["presenter"] = True
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def now_line(at) -> str:
    return next(c.value for c in at.caption if c.value.startswith("Now:"))


def test_generate_names_every_setting_acting_on_the_draw():
    from inference.lessons.sampling_lab.knobs import MORE

    xtc = next(knob for knob in MORE if knob.field == "xtc_probability")
    at = presenter_app(gen_temperature=0.35, gen_xtc_probability=0.5, gen_mirostat_tau=4.0)  # mirostat is off
    assert not at.exception
    assert not [s for s in at.slider if s.key == "gen_temperature"]  # folded away
    line = now_line(at)
    assert "0.35" in line and f"{xtc.label} 0.5" in line
    assert "τ" not in line and "top-k" not in line  # knobs at 'off' are not named


def test_same_luck_names_each_sides_settings_and_the_folded_value_draws():
    at = presenter_app(cmp_b_temperature=1.7)
    at.switch_page("app_pages/compare.py").run()
    assert not at.exception
    assert not [s for s in at.slider if s.key and s.key.startswith("cmp_")]  # folded away
    shared, a, b = now_line(at).split("  \n")
    assert "1.7" in b and "1.7" not in a
    pair = next(iter(at.session_state["cmp_pairs"].values()))
    assert pair.trace_b.records[0].settings.temperature == 1.7
