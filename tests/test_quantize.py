"""Quantized copies (core/quantize.py): really smaller, the original untouched, the KL right, every skip reported."""

import math

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from inference.core import quantize as q
from inference.core.model_config import decoder_config_fields

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def llama():
    torch.manual_seed(0)
    config = LlamaConfig(**decoder_config_fields(512, 256, 2, 8, 4, 128), intermediate_size=768)  # tied embeddings
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def copies(llama):
    return {precision: q.quantized_copy(llama, precision) for precision in q.PRECISIONS}


def test_int8_and_int4_shrink_the_linear_weights_and_leave_the_tied_head_alone(llama, copies):
    """int8 linear weights ~2x smaller than bf16, int4 ~4x (scales included); the tied lm_head stays the embedding."""
    linear = {p: q.weight_bytes_by_kind(c.model)["linear"] for p, c in copies.items()}
    assert linear["float32"] == 2 * linear["bfloat16"]
    assert 1.9 < linear["bfloat16"] / linear["int8"] <= 2.0 and 3.0 < linear["bfloat16"] / linear["int4"] < 4.2
    assert copies["float32"].model is llama and q.weight_bytes(llama) == 4 * sum(p.numel() for p in llama.parameters())
    for precision in ("int8", "int4"):
        copy = copies[precision]
        assert copy.quantized_linear_layers == 14  # 2 layers x (4 attention + 3 MLP)
        assert [(s.name, "tied lm_head" in s.reason) for s in copy.skipped_layers] == [("lm_head", True)]
        assert copy.model.lm_head.weight is copy.model.model.embed_tokens.weight
        assert q.weight_bytes_by_kind(copy.model)["lm_head"] == 0
        assert q.is_quantized_tensor(copy.model.model.layers[0].mlp.up_proj.weight)


def test_quantizing_leaves_the_original_and_the_process_settings_unchanged(llama):
    """The shared model stays bit-for-bit float32; torchao would switch on global inductor options."""
    import torch._inductor.config as inductor

    before = {name: t.clone() for name, t in llama.state_dict().items()}
    settings = inductor.coordinate_descent_tuning, inductor.force_fuse_int_mm_with_mul
    for precision in q.PRECISIONS:
        copy = q.quantized_copy(llama, precision)
        if precision != "float32":
            shared = {p.data_ptr() for p in llama.parameters()}
            assert not shared & {part.data_ptr() for p in copy.model.parameters() for _, part in q.tensor_parts(p)}
    assert all(torch.equal(before[name], t) for name, t in llama.state_dict().items())
    assert all(p.dtype == torch.float32 and type(p) is torch.nn.Parameter for p in llama.parameters())
    assert all(b.dtype == torch.float32 for b in llama.buffers())
    assert (inductor.coordinate_descent_tuning, inductor.force_fuse_int_mm_with_mul) == settings


def test_kl_matches_a_hand_computed_case():
    """KL(P||Q) for P=(1/2,1/2), Q=(1/4,3/4) is 1/2 ln 2 + 1/2 ln(2/3); a shift of the logits changes nothing."""
    ref = torch.log(torch.tensor([[0.5, 0.5], [0.9, 0.1]]))
    other = torch.log(torch.tensor([[0.25, 0.75], [0.9, 0.1]])) + 3.0
    table = q.compare_to_reference(ref, other, [1, 0])
    assert table["kl_from_reference"][0] == pytest.approx(0.5 * math.log(2) + 0.5 * math.log(2 / 3), rel=1e-6)
    assert table["kl_from_reference"][1] == pytest.approx(0.0, abs=1e-7)
    assert table["p_reference_token"].tolist() == pytest.approx([0.75, 0.9])
    assert table["top1_agrees"].tolist() == [False, True]  # row 0: a tie resolved to token 0 against token 1


def test_drift_from_float32_grows_as_bits_drop(llama, copies):
    ids = torch.randint(0, 512, (24,), generator=torch.Generator().manual_seed(1)).tolist()
    ref = q.teacher_forced_logits(llama, ids)
    assert ref.shape == (24, 512) and (q.compare_to_reference(ref, ref, ids)["kl_from_reference"] == 0).all()
    kl = {
        p: q.compare_to_reference(ref, q.teacher_forced_logits(copies[p].model, ids), ids)["kl_from_reference"].mean()
        for p in ("bfloat16", "int8", "int4")
    }
    assert kl["bfloat16"] < 1e-3 and kl["int8"] < 1e-3 and kl["int4"] < 1e-2
    assert max(kl["bfloat16"], kl["int8"]) < kl["int4"]


def test_int4_skips_a_layer_whose_width_the_group_size_does_not_divide():
    model = torch.nn.Sequential(torch.nn.Linear(128, 96), torch.nn.Linear(96, 32))
    assert q.int4_group_size(model) == 32
    copy = q.quantized_copy(model, "int4", group_size=64)
    assert copy.quantized_linear_layers == 1
    assert [(s.name, "not divisible by group size 64" in s.reason) for s in copy.skipped_layers] == [("1", True)]
    assert copy.model(torch.randn(2, 128, dtype=torch.bfloat16)).shape == (2, 32)
    with pytest.raises(ValueError, match="group_size"):
        q.quantized_copy(model, "int4", group_size=100)


def test_gpt2_conv1d_layers_are_converted_then_quantized():
    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=512, n_embd=64, n_layer=2, n_head=4, n_positions=64)).eval()
    assert q.int4_group_size(gpt2) == 64  # n_embd 64: group 128 would skip every layer
    copy = q.quantized_copy(gpt2, "int4")
    assert copy.quantized_linear_layers == 8 and [s.name for s in copy.skipped_layers] == ["lm_head"]
    assert torch.isfinite(q.teacher_forced_logits(copy.model, [0, 5, 9])).all()


@pytest.mark.parametrize("group_size", [32, 128])
def test_int4_overhead_is_a_bf16_scale_and_zero_per_group(llama, group_size):
    """4 bytes per group of g weights = 8/g of the int4 bytes, and part of the bytes the page reports."""
    copy = q.quantized_copy(llama, "int4", group_size=group_size)
    overhead = q.quantization_overhead(copy.model)
    layers = [m for m in copy.model.modules() if isinstance(m, torch.nn.Linear) and q.is_quantized_tensor(m.weight)]
    weights = sum(m.in_features * m.out_features for m in layers)
    assert (overhead.value_bytes, overhead.scale_bytes) == (weights // 2, weights // group_size * 4)
    assert overhead.fraction == pytest.approx(8 / group_size)
    assert q.weight_bytes_by_kind(copy.model)["linear"] == overhead.value_bytes + overhead.scale_bytes
    assert q.quantization_overhead(llama) == q.QuantizationOverhead(0, 0)
