"""The Quantization page's decode-rate section on SmolLM2 (issue #45): its button times the real model's decode step
in transformers; the table and chart then hold that row, llama-server's rows from the GGUF measurement kept for the
page (a fake one here, under its own key, so no llama-server runs), and each row's bandwidth limit and share. The
machine's bandwidth is faked too: a separate process measuring it takes seconds and is the roofline's own test."""

import pytest

from app_pages.shared.shared_results import background_runs, shared_results
from inference.core import real_model
from inference.lessons.quantization import rates, real_gguf
from inference.lessons.serving.roofline import MachineRoof, Roof
from tests.conftest import open_app_page

pytestmark = pytest.mark.page

PAGE = "app_pages/quantization.py"
BANDWIDTH = 20e9


@pytest.fixture
def fake_server_rates(monkeypatch):
    """A kept GGUF result of SmolLM2 under a key no real measurement uses (POSITIONS is part of the key)."""
    monkeypatch.setattr(real_gguf, "POSITIONS", 987_654)
    monkeypatch.setattr(real_gguf, "unavailable_reason", lambda: None)
    results = {
        "f32": real_gguf.TypeResult("f32", 539_845_568, [50.0, 52.0], [], read_bytes=538_060_032),
        "q8_0": real_gguf.TypeResult("q8_0", 144_810_944, [95.0, 97.0], [], read_bytes=143_025_408),
    }
    kept = real_gguf.RealGGUFResult("Why is the sky blue?", 40, [], "", results, 0, 64, 2)
    key = ("real-gguf", real_gguf.REAL_TYPES, real_gguf.POSITIONS, real_gguf.DECODE_TOKENS)
    shared_results()[key] = kept
    monkeypatch.setattr(
        rates, "measure_machine_roof", lambda: MachineRoof(Roof(BANDWIDTH, 1e11), 2, "peak: x; bandwidth: faked", None)
    )
    return kept


def test_the_section_measures_transformers_and_sets_both_engines_beside_their_limits(
    monkeypatch, smollm2, tmp_path, fake_server_rates
):
    monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", real_model.REAL_MODEL_NAME)
    monkeypatch.setenv("INFERENCE_LAB_CLASS_DB", str(tmp_path / "classes.sqlite3"))
    at = open_app_page(PAGE, timeout=180)
    assert not any("share of the limit" in f.value.columns for f in at.dataframe)  # nothing measured on opening
    at.button(key="quant_rates").click().run()
    assert not at.exception
    background_runs().wait_all(timeout=300)
    at.run()
    assert not at.exception
    frame = next(f.value for f in at.dataframe if "share of the limit" in f.value.columns)
    assert list(zip(frame["engine"], frame["weights"])) == [
        ("transformers", "float32"),
        ("llama-server", "f32"),
        ("llama-server", "q8_0"),
    ]
    assert frame.loc[0, "bytes per token"] == 4 * sum(p.numel() for p in smollm2.model.parameters())
    assert frame.loc[1, "measured tokens/s"] == pytest.approx(51.0)  # the kept result's median, not measured again
    assert frame["bandwidth limit tokens/s"].tolist() == pytest.approx((BANDWIDTH / frame["bytes per token"]).tolist())
    text = " ".join(m.value for m in at.markdown)
    share = frame.loc[1, "share of the limit"]
    assert f"llama-server reaches {share:.0%} of it at f32" in text
    assert "20.0 GB/s" in text
    assert any("Decode rate vs the bandwidth limit" in str(c.proto.spec) for c in at.get("plotly_chart"))
