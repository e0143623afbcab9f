"""Quantization opens fast on the default model (issues #45/#46): the page draws its lesson and a first result
(the weights' bytes at each width) without making, timing or scoring torch's copies; those run in the background
from a button, on the model's opening prompt, and their sections draw once the run is done."""

import time

import pytest

from app_pages.shared.shared_results import background_runs, shared_results
from inference.core import real_model
from inference.core.prompting import opening_prompt
from inference.lessons.quantization import experiments as qc
from inference.lessons.quantization import first_screen
from tests.conftest import open_app_page

pytestmark = pytest.mark.page

PAGE = "app_pages/quantization.py"


def torch_keys() -> list:
    return [key for key in list(shared_results()) if isinstance(key, tuple) and key[0] == "quant-torch"]


def test_opening_on_smollm2_draws_without_running_the_torch_comparison(monkeypatch, smollm2, tmp_path):
    """No copy is quantized or timed during the draw: compare_precisions is not called, no run is started, nothing
    is kept under the comparison's key, and the first table (bytes per width, the wheel's file) is there."""
    monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", real_model.REAL_MODEL_NAME)
    monkeypatch.setenv("INFERENCE_LAB_CLASS_DB", str(tmp_path / "classes.sqlite3"))
    calls = []
    original = qc.compare_precisions
    monkeypatch.setattr(qc, "compare_precisions", lambda *a, **k: calls.append(1) or original(*a, **k))
    before = set(torch_keys())
    start = time.perf_counter()
    at = open_app_page(PAGE, timeout=120)
    seconds = time.perf_counter() - start
    assert not at.exception and at.session_state["model_source"] == real_model.REAL_MODEL_NAME
    assert calls == [] and set(torch_keys()) == before
    assert all(run is None for run in (background_runs().get(k) for k in torch_keys() if k not in before))
    assert at.button(key="quant_torch") and not at.button(key="quant_torch").disabled
    stored = next(f.value for f in at.dataframe if "stored as" in f.value.columns)
    assert stored["stored as"].tolist()[:4] == list(first_screen.WIDTHS)
    assert stored["weight bytes"].iloc[0] == 4 * first_screen.parameters(smollm2.model)
    assert at.text_input(key="quant_prompt_general").value == opening_prompt("compare", smollm2.info.name).text
    print(f"Quantization drew on SmolLM2 in {seconds:.1f} s (AppTest, machine shared with other work)")


def test_the_comparison_runs_in_the_background_and_its_sections_draw_when_done():
    """On the storyteller: the button starts a background run; once it ends, a rerun shows the four precisions
    compared on the page's prompt."""
    at = open_app_page(PAGE, timeout=180)
    at.text_input(key="quant_prompt_story").set_value(f"Once upon a time, a cat {time.time_ns()}").run()  # a new key
    assert not any("precision" in f.value.columns for f in at.dataframe)
    at.button(key="quant_torch").click().run()
    assert not at.exception
    background_runs().wait_all(timeout=600)
    at.run()
    assert not at.exception
    cost = next(f.value for f in at.dataframe if "precision" in f.value.columns)
    assert cost["precision"].tolist() == ["float32", "bfloat16", "int8", "int4"]
    prompt = at.text_input(key="quant_prompt_story").value
    kept = [shared_results().get(k) for k in torch_keys()]
    assert any(c is not None and c.prompt_text == prompt for c in kept)
