"""The Quantization page in AppTest: it opens on SmolLM2 without making a copy (issues #45/#46), the torch comparison
runs in the background and draws four precisions, a slider move re-renders from the kept result without waiting for
a model slot, and the decode-rate section sets transformers beside llama-server's kept rates and their limits."""

import time

import pytest

from app_pages.shared import models, slots
from app_pages.shared.shared_results import background_runs, shared_results
from inference.core import real_model
from inference.core.prompting import opening_prompt
from inference.core.quantize import PRECISIONS
from inference.lessons.quantization import experiments as qc
from inference.lessons.quantization import gguf, rates, tables
from inference.lessons.serving.roofline import MachineRoof, Roof
from tests.conftest import open_app_page

pytestmark = pytest.mark.page

PAGE = "app_pages/quantization.py"
BANDWIDTH = 20e9


def torch_keys() -> list:
    return [key for key in list(shared_results()) if isinstance(key, tuple) and key[0] == "quant-torch"]


@pytest.fixture(scope="module")
def compared():
    """The page on the bundled model with its torch comparison measured (a new prompt: a new key)."""
    at = open_app_page(PAGE, timeout=180)
    at.text_input(key="quant_prompt_story").set_value(f"Once upon a time, a cat {time.time_ns()}").run()
    assert not any("precision" in f.value.columns for f in at.dataframe)
    at.button(key="quant_torch").click().run()
    background_runs().wait_all(timeout=600)
    at.run()
    assert not at.exception
    return at


def test_the_comparison_draws_four_precisions_on_the_pages_prompt(compared):
    cost, quality = [f.value for f in compared.dataframe if "precision" in f.value.columns][:2]
    assert cost["precision"].tolist() == quality["precision"].tolist() == list(PRECISIONS)
    assert cost["range over rounds"].str.contains("×").all()
    assert len(compared.get("plotly_chart")) == 5  # memory, speed, KL, one step, fit heatmap
    kept = [shared_results().get(k) for k in torch_keys()]
    assert any(c is not None and c.prompt_text == compared.text_input(key="quant_prompt_story").value for c in kept)
    kv = next(f.value for f in compared.dataframe if "cache type" in f.value.columns)
    assert kv["cache type"].tolist() == list(tables.KV_TYPES)
    captions = " ".join(c.value for c in compared.caption)
    assert f"median of {qc.SPEED_ROUNDS} rounds" in captions
    assert f"{tables.RUNTIME_RESERVE_BYTES / 1e9:g} GB runtime reserve" in captions


def test_a_slider_move_reruns_from_the_kept_result_without_a_model_slot(monkeypatch, compared):
    calls = []
    monkeypatch.setattr(qc, "compare_precisions", lambda *a, **k: calls.append(1))
    held, taken = slots.generation_slots(), 0
    try:
        while held.acquire(blocking=False):
            taken += 1
        assert taken == models.limits().max_concurrent_generations
        step_slider = next(s for s in compared.slider if s.key.startswith("quant_step_"))
        step_slider.set_value(int(step_slider.proto.max)).run(timeout=60)  # waiting for a slot would time out
        assert not compared.exception and calls == []
    finally:
        for _ in range(taken):
            held.release()


def test_presenter_mode_shows_the_tables_as_html(compared):
    compared.toggle(key="presenter").set_value(True).run()
    assert not compared.exception and len(compared.table) >= 3  # bytes per width, cost, quality
    compared.toggle(key="presenter").set_value(False).run()


@pytest.fixture
def on_smollm2(monkeypatch, smollm2, tmp_path):
    monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", real_model.REAL_MODEL_NAME)
    monkeypatch.setenv("INFERENCE_LAB_CLASS_DB", str(tmp_path / "classes.sqlite3"))
    return smollm2


def test_opening_on_smollm2_draws_its_bytes_without_running_the_torch_comparison(monkeypatch, on_smollm2):
    calls, before = [], set(torch_keys())
    monkeypatch.setattr(qc, "compare_precisions", lambda *a, **k: calls.append(1))
    at = open_app_page(PAGE, timeout=120)
    assert not at.exception and at.session_state["model_source"] == real_model.REAL_MODEL_NAME
    assert calls == [] and set(torch_keys()) == before
    stored = next(f.value for f in at.dataframe if "stored as" in f.value.columns)
    assert stored["stored as"].tolist()[:4] == list(tables.WIDTHS)
    assert stored["weight bytes"].iloc[0] == 4 * tables.parameters(on_smollm2.model)
    assert at.text_input(key="quant_prompt_general").value == opening_prompt("compare", on_smollm2.info.name).text


def test_the_decode_rates_set_both_engines_beside_their_limits(monkeypatch, on_smollm2):
    """A kept GGUF result of SmolLM2 under a key no real measurement uses (POSITIONS is part of the key)."""
    monkeypatch.setattr(gguf, "POSITIONS", 987_654)
    monkeypatch.setattr(gguf, "unavailable_reason", lambda: None)
    results = {
        "f32": gguf.TypeResult("f32", 539_845_568, [50.0, 52.0], [], read_bytes=538_060_032),
        "q8_0": gguf.TypeResult("q8_0", 144_810_944, [95.0, 97.0], [], read_bytes=143_025_408),
    }
    key = ("real-gguf", gguf.REAL_TYPES, gguf.POSITIONS, gguf.DECODE_TOKENS)
    shared_results()[key] = gguf.GGUFResult("Why is the sky blue?", 40, [], "", results, 0, 64, 2)
    roof = MachineRoof(Roof(BANDWIDTH, 1e11), 2, "peak: x; bandwidth: faked", None)
    monkeypatch.setattr(rates, "measure_machine_roof", lambda: roof)
    at = open_app_page(PAGE, timeout=180)
    assert not any("share of the limit" in f.value.columns for f in at.dataframe)  # nothing measured on opening
    at.button(key="quant_rates").click().run()
    background_runs().wait_all(timeout=300)
    at.run()
    assert not at.exception
    frame = next(f.value for f in at.dataframe if "share of the limit" in f.value.columns)
    assert list(zip(frame["engine"], frame["weights"])) == [
        ("transformers", "float32"),
        ("llama-server", "f32"),
        ("llama-server", "q8_0"),
    ]
    assert frame.loc[1, "measured tokens/s"] == pytest.approx(51.0)  # the kept result's median, not measured again
    assert frame["bandwidth limit tokens/s"].tolist() == pytest.approx((BANDWIDTH / frame["bytes per token"]).tolist())
    assert f"llama-server reaches {frame.loc[1, 'share of the limit']:.0%} of it at f32" in " ".join(
        m.value for m in at.markdown
    )
