"""The /compare page through Streamlit's AppTest: two settings on one seed, settings in the URL,
and the many-seed comparison run from its button."""

import json
import os

import pytest
from streamlit.testing.v1 import AppTest

from app_pages.shared.shared_results import background_runs
from tests.conftest import open_app_page

pytestmark = pytest.mark.page


def measured(at) -> None:
    """A measurement runs in a background thread: wait for it to end, then draw the page again with its result."""
    background_runs().wait_all(timeout=600)
    at.run()


# the 6M storyteller's speed and token ids (SmolLM2's default: tests/test_default_model_page.py)
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")

PAGE = "app_pages/compare.py"


def open_compare(query: dict | None = None) -> AppTest:
    return open_app_page(PAGE, query, timeout=900)


def page_text(at) -> str:
    return " ".join(str(m.value) for m in at.markdown) + " ".join(str(i.value) for i in at.info)


def test_compare_page_shows_both_runs_and_where_they_part():
    """Default A (top-p) and B (min-p, llama.cpp order) run on one seed for 60 tokens and part: the page names the
    step, the texts are equal before it and differ there, and both settings are mirrored in the URL."""
    at = open_compare()
    pair = next(iter(at.session_state["cmp_pairs"].values()))
    parting = pair.parting
    assert parting is not None, "the default settings should part within 60 tokens"
    a, b = pair.trace_a.generated_ids, pair.trace_b.generated_ids
    assert a[: parting.step] == b[: parting.step] and a[parting.step] != b[parting.step]
    assert f"They part at step {parting.step}" in page_text(at) and parting.reason in page_text(at)
    assert not at.success
    assert at.query_params["b_minp"] == ["0.1"] or at.query_params["b_minp"] == "0.1"


def test_a_link_sets_both_sides_and_equal_settings_never_part():
    """A link giving A exactly B's settings (its order, top-k and seed from the URL, a bad value reported, not fatal):
    one seed, one text, and the page says they never part."""
    at = open_compare({"a_p": "1", "a_minp": "0.1", "a_order": "llama.cpp", "a_k": "3", "b_k": "3", "seed": "7",
                       "a_t": "oops"})  # fmt: skip
    assert at.session_state["cmp_b_top_k"] == 3 and at.session_state["cmp_a_order_preset"] == "llama.cpp default"
    assert at.session_state["cmp_seed"] == 7 and any("a_t=oops" in w.value for w in at.warning)
    key, pair = next(iter(at.session_state["cmp_pairs"].items()))
    assert key[3] == key[4]  # the run key holds A's settings, then B's
    assert pair.parting is None and pair.trace_a.generated_ids == pair.trace_b.generated_ids
    steps = len(pair.trace_a.records)
    assert steps > 0 and any(f"at every step ({steps} steps)" in s.value for s in at.success)
    assert "They part at step" not in page_text(at)


def chart_intervals(at, key: str) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """Per panel of the interval chart: A's and B's (low, high), read back from the figure the page sent."""
    chart = next(c for c in at.get("plotly_chart") if key in c.proto.id)
    traces = json.loads(chart.proto.spec)["data"]
    bounds = []
    for trace in traces:
        mean, error = trace["y"][0], trace["error_y"]
        bounds.append((mean - error["arrayminus"][0], mean + error["array"][0]))
    return list(zip(bounds[0::2], bounds[1::2]))


def test_many_seeds_run_from_the_button_and_show_intervals():
    """Twenty seeds per side run in the page (progress bar, generation slot); the interval chart is drawn and there
    is one verdict line for each statistic whose drawn intervals do not overlap, or the no-verdict line when none."""
    at = open_compare()
    at.select_slider(key="cmp_seeds").set_value(20).run()
    at.button(key="cmp_many").click().run()
    measured(at)
    assert not at.exception
    panels = chart_intervals(at, "cmp_intervals")
    assert all(low <= high for side in panels for low, high in side)
    # Four statistics, or three when every run reached the cap (then "tokens to the stop token" is no statistic).
    captions = " ".join(c.value for c in at.caption)
    if len(panels) == 3:
        assert "'Tokens to the stop token' is left out" in captions
        assert not [c for c in at.get("plotly_chart") if "cmp_hist_length" in c.proto.id]
    else:
        assert len(panels) == 4 and "count as" in captions
    apart = sum(a_high < b_low or b_high < a_low for (a_low, a_high), (b_low, b_high) in panels)
    verdicts = [m.value for m in at.markdown if "(95% intervals do not overlap)" in str(m.value)]
    no_verdict = [m.value for m in at.markdown if str(m.value).startswith("- No verdict")]
    assert len(verdicts) == apart
    assert len(no_verdict) == (apart == 0)
