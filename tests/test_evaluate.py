"""Bits per byte: every token scored exactly once, whatever the window and stride."""

import math

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from inference.core.model_config import decoder_config_fields
from inference.training.evaluate import score_stream

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def uniform():
    """A tiny Llama whose output layer is zero: every next token costs exactly ln(10) nats."""
    config = LlamaConfig(**decoder_config_fields(10, 8, 1, 2, 1, 64, tied_embeddings=False), intermediate_size=16)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.lm_head.weight.zero_()
    return model


@pytest.mark.parametrize("window,stride", [(64, 64), (64, 32), (8, 3), (8, 8), (8, 1)])
def test_every_token_after_the_first_is_scored_once(uniform, window, stride):
    report = score_stream(uniform, list(range(10)) * 20, n_bytes=400, window=window, stride=stride)
    assert report.tokens_scored == 199
    assert report.nats_per_token == pytest.approx(math.log(10))
    assert report.bits_per_byte == pytest.approx(199 * math.log(10) / math.log(2) / 400)
