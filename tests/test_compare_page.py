"""The /compare page through Streamlit's AppTest: two settings on one seed, settings in the URL,
and the many-seed comparison run from its button."""

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import APP_FILE

pytestmark = pytest.mark.page

PAGE = "app_pages/compare.py"


def open_compare(query: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP_FILE, default_timeout=900)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.switch_page(PAGE).run()
    assert not at.exception
    return at


def page_text(at) -> str:
    return " ".join(str(m.value) for m in at.markdown) + " ".join(str(i.value) for i in at.info)


def test_compare_page_shows_both_runs_and_where_they_part():
    """Default A (top-p) and B (min-p, llama.cpp order) run on one seed; the page names the step
    where they part or says they never do, and mirrors both settings in the URL."""
    at = open_compare()
    pair = next(iter(at.session_state["cmp_pairs"].values()))
    text = page_text(at)
    if pair.parting is None:
        assert "Same seed, same text" in " ".join(s.value for s in at.success)
    else:
        assert f"They part at step {pair.parting.step}" in text
        assert pair.trace_a.generated_ids[: pair.parting.step] == pair.trace_b.generated_ids[: pair.parting.step]
    assert at.query_params["b_minp"] == ["0.1"] or at.query_params["b_minp"] == "0.1"


def test_settings_and_model_come_back_from_the_url():
    """A shared link reopens B's top-k, order and seed; a bad value is reported, not fatal."""
    at = open_compare({"b_k": "3", "b_order": "transformers", "seed": "7", "a_t": "oops"})
    assert at.session_state["cmp_b_top_k"] == 3
    assert at.session_state["cmp_b_order_preset"] == "transformers"
    assert at.session_state["cmp_seed"] == 7
    assert any("a_t=oops" in w.value for w in at.warning)


def test_many_seeds_run_from_the_button_and_show_intervals():
    """Twenty seeds per side run in the page (progress bar, generation slot) and the interval chart
    and a verdict line (or the no-verdict line) appear."""
    at = open_compare()
    at.select_slider(key="cmp_seeds").set_value(20).run()
    at.button(key="cmp_many").click().run()
    assert not at.exception
    text = page_text(at)
    assert "95% intervals" in text or "No verdict" in text
    assert any("cmp_intervals" in chart.proto.id for chart in at.get("plotly_chart"))


def test_another_visitors_model_does_not_decide_the_model_list():
    """Two sessions on different bundled models: each is offered every other model with its vocabulary, never
    itself as "another model" (the list was cached by vocabulary size alone while it read the session's model)."""
    moe = open_compare()
    moe.radio(key="model_bundled_pick").set_value("storyteller-moe-16m").run()
    assert not moe.exception
    dense = open_compare()
    for at, own, other in (
        (moe, "storyteller-moe-16m", "storyteller-llama-6m"),
        (dense, "storyteller-llama-6m", "storyteller-moe-16m"),
    ):
        options = list(at.selectbox(key="cmp_model_A").options)
        assert options.count(f"{own} · float32") == 1, options
        assert options.count(f"{other} · float32") == 1, options
        assert "storyteller-draft-1m · float32" in options
