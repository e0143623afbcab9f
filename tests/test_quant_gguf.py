"""GGUF types measured on llama-server, the Quantization page's one GGUF path (needs llama-server; SmolLM2's rows
need its wheel too): the loaded model's f32 GGUF predicts torch float32's tokens."""

import pytest
import torch

from inference.core.quantize import teacher_forced_logits
from inference.lessons.quantization import gguf
from tests.engine_servers import require_llama_server

pytestmark = pytest.mark.engine


def test_smollm2s_ggufs_measured_on_llama_server(smollm2):
    require_llama_server()
    frame = gguf.table(gguf.measure(types=("f32", "Q4_1"), positions=4, decode_tokens=8, rounds=1))
    assert frame.loc[1, "file bytes"] == gguf.real_model.GGUF_BYTES < frame.loc[0, "file bytes"] / 5
    assert (frame["decode tokens/s"] > 0).all()
    # Q4_1 holds the very weights f32 was written from: the same top token at every position, a tiny KL
    assert frame.loc[1, "same top-1 as f32"] == 1.0 and frame.loc[1, "mean KL from f32 (nats)"] < 1e-2


def test_the_loaded_models_f32_gguf_predicts_torch_float32s_tokens(bundled):
    """The conversion keeps the weights: f32's top token at every position is torch's; q4_K_M is smaller and drifts."""
    require_llama_server()
    ids = bundled.tokenizer("Once upon a time", add_special_tokens=False)["input_ids"]
    result = gguf.measure(
        ids, ("f32", "q4_K_M"), None, "Once upon a time", 6, 8, 1, vocab=bundled.model.config.vocab_size
    )
    frame = gguf.table(result)
    assert frame.loc[1, "size vs f32"] < 0.3 and frame.loc[1, "mean KL from f32 (nats)"] > 0
    logits = teacher_forced_logits(bundled.model, ids + result.reference_ids)[len(ids) - 1 : -1]
    f32_top = [max(p, key=p.get) for p in result.results["f32"].top]
    assert f32_top == torch.argmax(logits, dim=-1).tolist()[: len(f32_top)]
