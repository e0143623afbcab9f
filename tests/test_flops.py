"""FLOPs of a forward pass, counted from the model and checked against hand arithmetic."""

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from inference.core.flops import FlopCount

pytestmark = pytest.mark.unit


def test_bundled_model_prefill_flops_by_hand(bundled):
    """6 layers of q, k, v, o, gate, up, down; attention over 1..P positions; output layer once per pass."""
    info, hidden = bundled.info, 256
    count = FlopCount.of(bundled.model)
    inter = bundled.model.config.intermediate_size
    per_layer = hidden * hidden * 2 + hidden * (info.kv_heads * info.head_dim) * 2 + 3 * hidden * inter
    assert count.matmul_weights == info.layers * per_layer
    assert count.output_weights == hidden * info.vocab_size
    prompt = 10
    attention = info.layers * 2 * 2 * info.heads * info.head_dim * sum(range(1, prompt + 1))
    assert count.prefill(prompt) == 2 * count.matmul_weights * prompt + attention + 2 * count.output_weights
    # one decode step with 10 tokens before it attends to 11 positions
    assert (
        count.decode(10)
        == 2 * count.matmul_weights + info.layers * 4 * info.heads * info.head_dim * 11 + 2 * hidden * info.vocab_size
    )


def test_gpt2_conv1d_layers_are_counted_and_the_tied_output_layer_is_not_a_layer():
    """GPT-2's Conv1D matrices count as matrix products; its output layer (tied) only once per pass."""
    config = GPT2Config(n_layer=2, n_head=4, n_embd=64, n_positions=32, vocab_size=100)
    with torch.device("meta"):
        model = GPT2LMHeadModel(config)
    count = FlopCount.of(model)
    assert count.matmul_weights == 2 * (64 * 192 + 64 * 64 + 64 * 256 + 256 * 64)
    assert count.output_weights == 100 * 64
