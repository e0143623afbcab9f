"""Quantized copies: really smaller, the original untouched, KL computed right, skips reported."""

import math

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from inference.core import quantize as q

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def llama():
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=512,
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=2,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=128,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def gpt2():
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=512, n_embd=128, n_layer=2, n_head=4, n_positions=64)
    return GPT2LMHeadModel(config).eval()


@pytest.fixture(scope="module")
def llama_copies(llama):
    return {precision: q.quantized_copy(llama, precision) for precision in q.PRECISIONS}


@pytest.fixture(scope="module")
def token_ids():
    return torch.randint(0, 512, (24,), generator=torch.Generator().manual_seed(1)).tolist()


def test_int8_and_int4_copies_shrink_linear_weights_and_hold_torchao_tensors(llama_copies):
    """int8 linear weights are ~2x smaller than bf16, int4 ~4x (scales included), as torchao tensors."""
    bf16 = q.weight_bytes_by_kind(llama_copies["bfloat16"].model)["linear"]
    int8 = q.weight_bytes_by_kind(llama_copies["int8"].model)["linear"]
    int4 = q.weight_bytes_by_kind(llama_copies["int4"].model)["linear"]
    assert 1.9 < bf16 / int8 <= 2.0
    assert 3.0 < bf16 / int4 < 4.2
    assert q.weight_bytes_by_kind(llama_copies["float32"].model)["linear"] == 2 * bf16
    for precision in ("int8", "int4"):
        copy = llama_copies[precision]
        layers = [m for name, m in copy.model.named_modules() if isinstance(m, torch.nn.Linear) and name != "lm_head"]
        assert copy.quantized_linear_layers == len(layers) == 14  # 2 layers x (4 attention + 3 MLP)
        assert all(q.is_quantized_tensor(m.weight) for m in layers)
        assert [s.name for s in copy.skipped_layers] == ["lm_head"]
        assert "tied lm_head" in copy.skipped_layers[0].reason


def test_tied_lm_head_stays_tied_and_counted_once(llama_copies):
    """The tied lm_head keeps sharing the (unquantized) embedding, and its bytes count once."""
    for copy in llama_copies.values():
        model = copy.model
        assert model.lm_head.weight is model.model.embed_tokens.weight
        kinds = q.weight_bytes_by_kind(model)
        assert kinds["lm_head"] == 0
    fp32 = llama_copies["float32"].model
    assert sum(q.weight_bytes_by_kind(fp32).values()) == 4 * sum(
        p.numel() for p in fp32.parameters()
    )  # parameters() dedups ties


def test_original_model_is_unchanged_and_still_float32(llama):
    """Quantizing makes a copy: every tensor of the shared original stays bit-for-bit equal."""
    before = {name: t.clone() for name, t in llama.state_dict().items()}
    for precision in q.PRECISIONS:
        q.quantized_copy(llama, precision)
    after = llama.state_dict()
    assert before.keys() == after.keys()
    assert all(torch.equal(before[name], after[name]) for name in before)
    assert all(p.dtype == torch.float32 and type(p) is torch.nn.Parameter for p in llama.parameters())
    assert all(b.dtype == torch.float32 for b in llama.buffers())


def test_kl_matches_a_hand_computed_case():
    """KL(P||Q) for P=(1/2,1/2), Q=(1/4,3/4) is 1/2 ln 2 + 1/2 ln(2/3)."""
    ref = torch.log(torch.tensor([[0.5, 0.5], [0.9, 0.1]]))
    other = torch.log(torch.tensor([[0.25, 0.75], [0.9, 0.1]])) + 3.0  # a shift changes nothing
    table = q.compare_to_reference(ref, other, reference_tokens=[1, 0])
    expected = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    assert table["kl_from_reference"][0] == pytest.approx(expected, rel=1e-6)
    assert table["kl_from_reference"][1] == pytest.approx(0.0, abs=1e-7)
    assert table["p_reference_token"].tolist() == pytest.approx([0.75, 0.9])
    # row 0: the reference's argmax is a tie resolved to token 0, the other's is token 1
    assert table["top1_agrees"].tolist() == [False, True]


def test_bf16_int8_int4_stay_close_to_float32(llama, llama_copies, token_ids):
    """Small KL from float32, growing as bits drop (top-1 is meaningless on a random model); float32 against itself
    is exactly 0."""
    ref = q.teacher_forced_logits(llama, token_ids)
    assert ref.shape == (len(token_ids), 512) and (q.compare_to_reference(ref, ref)["kl_from_reference"] == 0).all()
    kl = {}
    for precision in ("bfloat16", "int8", "int4"):
        logits = q.teacher_forced_logits(llama_copies[precision].model, token_ids)
        assert torch.isfinite(logits).all()
        table = q.compare_to_reference(ref, logits, token_ids[1:] + [0])
        kl[precision] = table["kl_from_reference"].mean()
    assert kl["bfloat16"] < 1e-3 and kl["int8"] < 1e-3 and kl["int4"] < 1e-2
    assert kl["bfloat16"] < kl["int4"] and kl["int8"] < kl["int4"]


def test_int4_skips_layers_whose_width_the_group_size_does_not_divide():
    """A layer with 96 inputs and group size 64 is skipped and reported, the others quantized."""
    model = torch.nn.Sequential(torch.nn.Linear(128, 96), torch.nn.Linear(96, 32))
    copy = q.quantized_copy(model, "int4", group_size=64)
    assert copy.quantized_linear_layers == 1
    assert [(s.name, "not divisible by group size 64" in s.reason) for s in copy.skipped_layers] == [("1", True)]
    assert copy.model(torch.randn(2, 128, dtype=torch.bfloat16)).shape == (2, 32)
    with pytest.raises(ValueError, match="group_size"):
        q.quantized_copy(model, "int4", group_size=100)


def test_gpt2_conv1d_layers_are_reported_as_skipped(gpt2, token_ids):
    """GPT-2's Conv1D layers are not nn.Linear: listed as skipped, and the model still runs."""
    copy = q.quantized_copy(gpt2, "int8")
    names = {s.name: s.reason for s in copy.skipped_layers}
    conv1d = [
        f"transformer.h.{i}.{m}" for i in range(2) for m in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
    ]
    assert all("Conv1D" in names[name] for name in conv1d)
    assert "tied lm_head" in names["lm_head"]
    assert copy.quantized_linear_layers == 0
    assert torch.isfinite(q.teacher_forced_logits(copy.model, token_ids)).all()


def test_every_precision_returns_a_new_model_sharing_no_tensor_with_the_original(llama, llama_copies):
    """Even the float32 copy is a new model: writing to it could never reach the shared original."""
    original = {p.data_ptr() for p in llama.parameters()}
    for copy in llama_copies.values():
        assert copy.model is not llama
        parts = [part for p in copy.model.parameters() for part in q.tensor_parts(p)]
        assert not original & {part.data_ptr() for part in parts}
        assert copy.seconds > 0


def test_quantizing_leaves_process_wide_inductor_settings_alone(llama):
    """torchao would switch on global inductor options; the app's shared process must not change."""
    import torch._inductor.config as inductor_config

    before = inductor_config.coordinate_descent_tuning, inductor_config.force_fuse_int_mm_with_mul
    q.quantized_copy(llama, "int8")
    q.quantized_copy(llama, "int4")
    assert (inductor_config.coordinate_descent_tuning, inductor_config.force_fuse_int_mm_with_mul) == before


@pytest.mark.parametrize("group_size", [32, 64, 128])
def test_int4_overhead_equals_the_scale_and_zero_bytes_of_the_copy(llama, group_size):
    """Scales and zero points: one bf16 scale and zero per group, 4 bytes per group of g weights = 8/g of the int4 bytes."""
    copy = q.quantized_copy(llama, "int4", group_size=group_size)
    overhead = q.quantization_overhead(copy.model)
    layers = [m for m in copy.model.modules() if isinstance(m, torch.nn.Linear) and q.is_quantized_tensor(m.weight)]
    weights = sum(m.in_features * m.out_features for m in layers)
    assert overhead.value_bytes == weights // 2
    assert overhead.scale_bytes == weights // group_size * 4
    assert overhead.fraction == pytest.approx(8 / group_size)  # 6.25% at 128, 12.5% at 64, 25% at 32
    # and they are part of the bytes the page reports for the copy; a plain model stores none
    assert q.weight_bytes_by_kind(copy.model)["linear"] == overhead.value_bytes + overhead.scale_bytes
    assert q.quantization_overhead(llama) == q.QuantizationOverhead(0, 0)
