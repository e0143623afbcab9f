"""The Quantization page in Streamlit's AppTest: it runs, shows all four precisions, and a
slider move re-renders from the cached comparison without measuring again."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from inference.core.quantize import PRECISIONS
from inference.lessons.quantization import experiments as quant_compare

pytestmark = pytest.mark.page

APP_FILE = str(Path(__file__).resolve().parent.parent / "app.py")


def open_quantization_page() -> AppTest:
    """The page with its torch comparison measured: the button starts it in the background (or finds it kept)."""
    from app_pages.shared.shared_results import background_runs

    at = AppTest.from_file(APP_FILE, default_timeout=180)
    at.run()
    at.switch_page("app_pages/quantization.py").run()
    at.button(key="quant_torch").click().run()
    background_runs().wait_all(timeout=600)
    at.run()
    return at


def test_quantization_page_runs_and_its_tables_show_four_precisions():
    """No exception, and the cost and quality tables have one row per precision, float32 first."""
    at = open_quantization_page()
    assert not at.exception
    frames = [f.value for f in at.dataframe if "precision" in f.value.columns]  # AppTest does not expose their keys
    cost, quality = frames[0], frames[1]
    assert cost["precision"].tolist() == quality["precision"].tolist() == list(PRECISIONS)
    assert len(at.get("plotly_chart")) == 5  # memory, speed, KL, one step, fit heatmap


def test_moving_the_step_slider_does_not_rerun_the_comparison(monkeypatch):
    """Slider moves only re-render: compare_precisions is not called again."""
    at = open_quantization_page()
    calls = []
    original = quant_compare.compare_precisions
    monkeypatch.setattr(quant_compare, "compare_precisions", lambda *a, **k: calls.append(1) or original(*a, **k))
    step_slider = next(s for s in at.slider if s.key.startswith("quant_step_"))
    step_slider.set_value(int(step_slider.proto.max)).run()
    assert not at.exception
    assert calls == []


def test_a_slider_move_on_a_cached_comparison_never_waits_for_a_model_slot():
    """With every model slot of the server taken by others, moving a slider still reruns at once."""
    from app_pages.shared import models, slots

    at = open_quantization_page()
    slots = slots.generation_slots()
    taken = 0
    try:
        while slots.acquire(blocking=False):
            taken += 1
        assert taken == models.limits().max_concurrent_generations
        step_slider = next(s for s in at.slider if s.key.startswith("quant_step_"))
        step_slider.set_value(int(step_slider.proto.max)).run(timeout=60)  # waiting for a slot would time out
        assert not at.exception
    finally:
        for _ in range(taken):
            slots.release()


def test_the_page_shows_the_kv_cache_types_the_runtime_reserve_and_the_speed_spread():
    """Issue #27: the KV cache types beside the weights, for the loaded model; issue #23 item 7: the fit keeps a
    named reserve, and the speed is a median of rounds with its range on the page."""
    from inference.lessons.engine_internals import kv_precision
    from inference.lessons.quantization.fit import RUNTIME_RESERVE_BYTES

    at = open_quantization_page()
    assert not at.exception
    kv = next(frame.value for frame in at.dataframe if "cache type" in frame.value.columns)
    assert kv["cache type"].tolist() == ["f32", "f16", "q8_0", "q4_0"]
    # the loaded model's shape: the bundled model's, or SmolLM2-135M-Instruct's where the sidebar starts with it
    shapes = {kv_precision.kv_bytes_per_token(6, 4 * 32, "q8_0"), kv_precision.kv_bytes_per_token(30, 3 * 64, "q8_0")}
    assert kv["bytes per token"].iloc[2] in shapes
    captions = " ".join(c.value for c in at.caption)
    assert f"median of {quant_compare.SPEED_ROUNDS} rounds" in captions
    assert f"{RUNTIME_RESERVE_BYTES / 1e9:g} GB runtime reserve" in captions
    cost = next(f.value for f in at.dataframe if "precision" in f.value.columns)
    assert cost["range over rounds"].str.contains("×").all()
    assert any("widest spread" in m.value for m in at.markdown)


def test_presenter_mode_shows_the_tables_as_html_in_the_presenter_font():
    at = open_quantization_page()
    at.toggle(key="presenter").set_value(True).run()
    assert not at.exception
    assert len(at.table) >= 3  # the bytes per width, cost and quality as st.table, whose text follows the presenter CSS
