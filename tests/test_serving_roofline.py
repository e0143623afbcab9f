"""The roofline arithmetic: counts read from the weight file, pass costs and the bound that binds."""

import pytest

from inference.core.paths import BUNDLED_MODEL_DIR
from inference.lessons.serving.roofline import (
    Roof,
    ServedModel,
    decode_pass,
    predicted_decode_tokens_per_s,
    prefill_pass,
)

pytestmark = pytest.mark.unit

TOY = ServedModel(matmul_parameters=1000, other_parameters=10, layers=2, query_width=8, kv_width=4)


def test_counts_from_the_weight_file_match_the_loaded_model(bundled):
    """Bundled model (tied embeddings): every 2-D weight is multiplied per token; widths from q and k shapes."""
    served = ServedModel.from_safetensors(BUNDLED_MODEL_DIR / "model.safetensors")
    model = bundled.model
    assert served.matmul_parameters + served.other_parameters == sum(p.numel() for p in model.parameters())
    assert served.matmul_parameters == sum(p.numel() for p in model.parameters() if p.ndim == 2)
    config = model.config
    assert served.layers == config.num_hidden_layers
    assert served.query_width == config.num_attention_heads * config.head_dim
    assert served.kv_width == config.num_key_value_heads * config.head_dim


def test_decode_and_prefill_costs_by_hand():
    """Toy model, batch 3 at context 5: FLOPs 3 x (2000 + 4x2x8x5), bytes 4000 + 3x5x(2x2x4x4); prefill of 4."""
    cost = decode_pass(TOY, batch=3, context=5)
    assert cost.flops == 3 * (2000 + 320)
    assert cost.bytes == 4000 + 3 * 5 * 64
    prefill = prefill_pass(TOY, 4)
    assert prefill.flops == 2000 * 4 + 4 * 2 * 8 * 10  # attention over 1 + 2 + 3 + 4 positions
    assert prefill.bytes == 4000 + 4 * 64


def test_roofline_bound_switches_at_the_ridge():
    """Memory-bound below the ridge (time = bytes / bandwidth), compute-bound above it (time = FLOPs / peak)."""
    roof = Roof(bandwidth_bytes_per_s=1000.0, peak_flops=4000.0)
    assert roof.ridge_intensity == 4.0
    small = decode_pass(TOY, 1, 1)
    assert roof.bound(small) == "memory" and roof.pass_seconds(small) == pytest.approx(small.bytes / 1000)
    big = prefill_pass(TOY, 64)
    assert roof.bound(big) == "compute" and roof.pass_seconds(big) == pytest.approx(big.flops / 4000)
    assert roof.attainable_flops(1.0) == 1000.0 and roof.attainable_flops(100.0) == 4000.0


def test_predicted_decode_grows_with_batch_until_compute_binds():
    """While memory binds, batch 2 makes nearly twice the tokens of batch 1; far past the ridge, it stops growing."""
    roof = Roof(bandwidth_bytes_per_s=1e9, peak_flops=1e11)
    one, two = (predicted_decode_tokens_per_s(TOY, roof, b, 1) for b in (1, 2))
    assert 1.9 < two / one <= 2.0
    late = [predicted_decode_tokens_per_s(TOY, roof, b, 1) for b in (4096, 8192)]
    assert late[1] / late[0] == pytest.approx(1.0, rel=0.01)
