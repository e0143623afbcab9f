"""The memory-bound model for serving: a public model's shape with our vocabulary and seeded random weights."""

import json

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from inference.lessons.serving import random_model
from inference.lessons.serving.random_model import LlamaShape, public_shape, shape_from_public_entry

pytestmark = pytest.mark.unit

TINY = LlamaShape(
    "Tiny test",
    layers=2,
    hidden=64,
    heads=4,
    kv_heads=2,
    head_dim=16,
    mlp_width=128,
    tied_embeddings=True,
    vocab_size=4096,
)


def test_smollm2_135m_shape_is_solved_from_its_published_parameter_count():
    """SmolLM2-135M: MLP width 1,536 with tied embeddings reproduces the published 134,515,008 parameters."""
    shape = public_shape("SmolLM2-135M", vocab_size=49152)
    assert (shape.layers, shape.hidden, shape.heads, shape.kv_heads, shape.mlp_width) == (30, 576, 9, 3, 1536)
    assert shape.tied_embeddings and shape.parameters() == 134_515_008


def test_shape_parameter_count_equals_transformers_model():
    """Our count of the 4,096-vocabulary copy equals a transformers LlamaForCausalLM built from its config."""
    shape = public_shape("SmolLM2-135M", vocab_size=4096)
    with torch.device("meta"):
        model = LlamaForCausalLM(LlamaConfig(**shape.hf_config(0, 0)))
    assert sum(p.numel() for p in model.parameters()) == shape.parameters()


def test_models_that_are_not_plain_llama_are_refused():
    """An MoE entry, or a parameter count no Llama layout explains: a ValueError naming the model."""
    entries = {e["name"]: e for e in json.loads(random_model.PUBLIC_MODELS_FILE.read_text())}
    with pytest.raises(ValueError, match="Mixtral"):
        shape_from_public_entry(entries["Mixtral-8x7B"], 4096)
    odd = dict(entries["SmolLM2-135M"], parameters=entries["SmolLM2-135M"]["parameters"] + 7)
    with pytest.raises(ValueError, match="fits no Llama layout"):
        shape_from_public_entry(odd, 4096)


def test_random_folder_is_seeded_loads_in_transformers_and_says_timing_only(tmp_path):
    """Same seed, same weights (another seed differs); transformers loads it; its card says random weights."""
    a = random_model.build_hf_folder(TINY, seed=5, folder=tmp_path / "a")
    b = random_model.build_hf_folder(TINY, seed=5, folder=tmp_path / "b")
    c = random_model.build_hf_folder(TINY, seed=6, folder=tmp_path / "c")
    wa, wb, wc = (load_file(str(f / "model.safetensors")) for f in (a, b, c))
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not torch.equal(wa["model.layers.0.mlp.up_proj.weight"], wc["model.layers.0.mlp.up_proj.weight"])
    model = AutoModelForCausalLM.from_pretrained(a)
    assert sum(p.numel() for p in model.parameters()) == TINY.parameters()
    assert torch.equal(model.lm_head.weight, wa["model.embed_tokens.weight"])  # tied
    assert random_model.LABEL in (a / "README.md").read_text()
    assert (a / "tokenizer.json").read_bytes() == (random_model.BUNDLED_MODEL_DIR / "tokenizer.json").read_bytes()
