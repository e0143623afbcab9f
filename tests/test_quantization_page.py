"""The Quantization page in AppTest: the torch comparison runs in the background and draws four precisions, a
slider move re-renders from the kept result without a model slot; on SmolLM2 (issues #45/#46) it opens without
making a copy, and the decode-rate section sets transformers beside llama-server's kept rates and their limits."""

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


def torch_keys() -> set:
    return {key for key in list(shared_results()) if isinstance(key, tuple) and key[0] == "quant-torch"}


def test_the_comparison_draws_four_precisions_and_a_slider_move_needs_no_model_slot(monkeypatch):
    at = open_app_page(PAGE, timeout=180)
    at.text_input(key="quant_prompt_story").set_value(f"Once upon a time, a cat {time.time_ns()}").run()
    assert not any("precision" in f.value.columns for f in at.dataframe)
    at.button(key="quant_torch").click().run()
    background_runs().wait_all(timeout=600)
    at.run()
    assert not at.exception
    cost, quality = [f.value for f in at.dataframe if "precision" in f.value.columns][:2]
    assert cost["precision"].tolist() == quality["precision"].tolist() == list(PRECISIONS)
    assert len(at.get("plotly_chart")) == 5  # memory, speed, KL, one step, fit heatmap
    kv = next(f.value for f in at.dataframe if "cache type" in f.value.columns)
    assert kv["cache type"].tolist() == list(tables.KV_TYPES)
    assert f"median of {qc.SPEED_ROUNDS} rounds" in " ".join(c.value for c in at.caption)

    calls = []
    monkeypatch.setattr(qc, "measure", lambda *a, **k: calls.append(1))
    held, taken = slots.generation_slots(), 0
    try:
        while held.acquire(blocking=False):
            taken += 1
        assert taken == models.limits().max_concurrent_generations
        step_slider = next(s for s in at.slider if s.key.startswith("quant_step_"))
        step_slider.set_value(int(step_slider.proto.max)).run(timeout=60)  # waiting for a slot would time out
        assert not at.exception and calls == []
    finally:
        for _ in range(taken):
            held.release()
    at.toggle(key="presenter").set_value(True).run()
    assert not at.exception and len(at.table) >= 3  # bytes per width, cost, quality as HTML tables


def test_on_smollm2_nothing_runs_on_opening_and_the_rates_sit_beside_their_limits(monkeypatch, smollm2, tmp_path):
    monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", real_model.REAL_MODEL_NAME)
    monkeypatch.setenv("INFERENCE_LAB_CLASS_DB", str(tmp_path / "classes.sqlite3"))
    # a kept GGUF result of SmolLM2 under a key no real measurement uses (POSITIONS is part of the key)
    monkeypatch.setattr(gguf, "POSITIONS", 987_654)
    monkeypatch.setattr(gguf, "unavailable_reason", lambda: None)
    results = {
        "f32": gguf.TypeResult("f32", 539_845_568, [50.0, 52.0], [], read_bytes=538_060_032),
        "q8_0": gguf.TypeResult("q8_0", 144_810_944, [95.0, 97.0], [], read_bytes=143_025_408),
    }
    key = ("real-gguf", gguf.REAL_TYPES, gguf.POSITIONS, gguf.DECODE_TOKENS)
    shared_results()[key] = gguf.GGUFResult("Why is the sky blue?", 40, [], "", results, 0, 64, 2)
    monkeypatch.setattr(rates, "measure_machine_roof", lambda: MachineRoof(Roof(20e9, 1e11), 2, "bandwidth: x", None))
    before = torch_keys()
    at = open_app_page(PAGE, timeout=180)
    assert not at.exception and torch_keys() == before
    stored = next(f.value for f in at.dataframe if "stored as" in f.value.columns)
    assert stored["weight bytes"].iloc[0] == 4 * tables.parameters(smollm2.model)
    assert at.text_input(key="quant_prompt_general").value == opening_prompt("compare", smollm2.info.name).text
    assert not any("share of the limit" in f.value.columns for f in at.dataframe)
    at.button(key="quant_rates").click().run()
    background_runs().wait_all(timeout=300)
    at.run()
    frame = next(f.value for f in at.dataframe if "share of the limit" in f.value.columns)
    assert frame["weights"].tolist() == ["float32", "f32", "q8_0"]
    assert frame.loc[1, "measured tokens/s"] == pytest.approx(51.0)  # the kept result's median, not measured again
    assert frame["bandwidth limit tokens/s"].tolist() == pytest.approx((20e9 / frame["bytes per token"]).tolist())
    said = " ".join(m.value for m in at.markdown)
    assert f"llama-server reaches {frame.loc[1, 'share of the limit']:.0%} of it at f32" in said
