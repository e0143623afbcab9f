"""The model picker's list: every complete folder in assets/models, one line each from its own files."""

import json

import pytest

from inference.core.bundled import bundled_models
from inference.core.paths import BUNDLED_MODEL_NAME

pytestmark = pytest.mark.unit


def test_bundled_list_starts_with_the_default_model_and_reads_its_meta():
    models = bundled_models()
    first = models[0]
    meta = json.loads((first.folder / "training_meta.json").read_text())["stats"]
    assert first.name == BUNDLED_MODEL_NAME and first.source == ""
    assert (
        first.line
        == f"dense Llama; {meta['parameters'] / 1e6:.1f}M parameters; {meta['heldout_bits_per_byte']:.2f} bits/byte held-out"
    )


def test_a_moe_folder_is_described_by_its_experts_and_incomplete_folders_are_left_out(tmp_path):
    moe, partial = tmp_path / "some-moe", tmp_path / "still-training"
    moe.mkdir(), partial.mkdir()
    (moe / "config.json").write_text(json.dumps({"num_local_experts": 8, "num_experts_per_tok": 2}))
    (moe / "model.safetensors").write_bytes(b"")
    (moe / "training_meta.json").write_text(json.dumps({"preset": "moe", "stats": {"parameters": 16_400_000}}))
    (partial / "training_log.csv").write_text("step\n")
    models = bundled_models(tmp_path)
    assert [(m.name, m.line) for m in models] == [
        ("some-moe", "Mixture of Experts: 8 experts, 2 per token; 16.4M parameters")
    ]
    assert models[0].source == str(moe)
