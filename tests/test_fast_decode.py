"""The lean decode step against transformers' own forward.

float32 weights: the same logits but for the order of additions inside the matrix-vector
products (within 1e-4 over 60 steps, the same greedy token every step). bfloat16 and
quantized weights go through F.linear as transformers does: equal bit for bit."""

import pytest
import torch
import torch.nn.functional as F
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

from inference.core import fast_decode
from inference.core.loader import encode_prompt

pytestmark = pytest.mark.unit


def random_llama(**overrides):
    settings = dict(
        vocab_size=300,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    settings.update(overrides)
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**settings)).eval()


def decode_both_ways(model, prompt: list[int], steps: int):
    """Greedy steps fed the same tokens through `model(...)` and through `decode_logits`,
    each with its own cache; returns both logits stacks and both caches."""
    caches = [DynamicCache(config=model.config), DynamicCache(config=model.config)]
    with torch.inference_mode():
        first = model(input_ids=torch.tensor([prompt]), cache=caches[0], use_cache=True).logits[0, -1]
        model(input_ids=torch.tensor([prompt]), cache=caches[1], use_cache=True)
        theirs, ours, token = [], [], int(first.argmax())
        for _ in range(steps):
            theirs.append(model(input_ids=torch.tensor([[token]]), cache=caches[0], use_cache=True).logits[0, -1])
            ours.append(fast_decode.decode_logits(model, token, caches[1]))
            token = int(theirs[-1].argmax())
    return torch.stack(theirs), torch.stack(ours), caches


def assert_rounding_apart(theirs: torch.Tensor, ours: torch.Tensor):
    """Equal up to float32 rounding (logits here reach ~18), and the same greedy token at every step."""
    assert torch.allclose(theirs, ours, rtol=0, atol=1e-4)
    assert torch.equal(theirs.argmax(-1), ours.argmax(-1))


def test_bundled_model_logits_match_transformers(bundled):
    """60 decode steps of the shipped model: every logit and every cached key and value."""
    model = bundled.model
    assert fast_decode.supports(model)
    before = {name: p.clone() for name, p in model.state_dict().items()}
    theirs, ours, caches = decode_both_ways(model, encode_prompt(bundled.tokenizer, "Once upon a time"), 60)
    assert_rounding_apart(theirs, ours)
    assert fast_decode._plan(model).lm_head.by_rows and fast_decode._plan(model).layers[0].down.by_rows
    for a, b in zip(caches[0].layers, caches[1].layers):
        assert torch.allclose(a.keys, b.keys, rtol=0, atol=1e-4) and torch.allclose(
            a.values, b.values, rtol=0, atol=1e-4
        )
    assert all(torch.equal(before[name], p) for name, p in model.state_dict().items())  # only read


def test_everything_but_the_row_sums_is_transformers_own_arithmetic(bundled, monkeypatch):
    """With F.linear back in place of the row sums, the lean step equals `model(...)` bit for
    bit: norms, rotary embedding, cache and attention are the same operations in the same order."""
    monkeypatch.setattr(fast_decode, "_matvec", lambda weight, x: F.linear(x.view(1, -1), weight).view(-1))
    theirs, ours, _ = decode_both_ways(bundled.model, encode_prompt(bundled.tokenizer, "Once upon a time"), 30)
    assert torch.equal(theirs, ours)


@pytest.mark.parametrize(
    "overrides",
    [
        {},  # grouped-query attention, 2 query heads per K/V head
        {"num_key_value_heads": 4},  # plain multi-head attention
        {"num_key_value_heads": 1, "head_dim": 32},  # multi-query, head_dim set apart from hidden/heads
        {
            "rope_parameters": {
                "rope_type": "llama3",
                "rope_theta": 10000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 32,
            }
        },
        {"tie_word_embeddings": True, "rms_norm_eps": 1e-5},
        {"dtype": torch.bfloat16},
    ],
)
def test_llama_variants_match_transformers(overrides):
    dtype = overrides.pop("dtype", None)
    model = random_llama(**overrides)
    if dtype is not None:
        model = model.to(dtype)
    assert fast_decode.supports(model)
    theirs, ours, _ = decode_both_ways(model, [1, 5, 9, 200, 17], 20)
    if dtype is None:
        assert_rounding_apart(theirs, ours)
    else:  # bfloat16 weights keep F.linear
        assert torch.equal(theirs, ours)


def test_big_weights_are_multiplied_in_row_blocks(monkeypatch):
    """A weight past BLOCK_ELEMENTS (a hub model's output layer) is done block by block:
    the same numbers as in one piece, and as F.linear up to rounding."""
    generator = torch.Generator().manual_seed(0)
    weight, x = torch.randn(1000, 64, generator=generator), torch.randn(64, generator=generator)
    whole = fast_decode._matvec(weight, x)
    monkeypatch.setattr(fast_decode, "BLOCK_ELEMENTS", 64 * 7)  # 7 rows a block; 1000 is no multiple of 7
    assert torch.equal(fast_decode._matvec(weight, x), whole)
    assert torch.allclose(whole, torch.nn.functional.linear(x, weight), rtol=0, atol=1e-5)


def test_other_models_take_transformers_own_path(gpt2):
    """Anything it cannot reproduce exactly is refused, and the engine uses model(...)."""
    assert not fast_decode.supports(gpt2[0])
    assert not fast_decode.supports(random_llama(attention_bias=True))
    assert not fast_decode.supports(random_llama(hidden_act="gelu"))
    assert not fast_decode.supports(
        random_llama(rope_parameters={"rope_type": "dynamic", "rope_theta": 1e4, "factor": 2.0})
    )
    eager = random_llama()
    eager.config._attn_implementation = "eager"
    assert not fast_decode.supports(eager)
    training = random_llama().train()
    assert not fast_decode.supports(training)


@pytest.mark.parametrize("precision", ["bfloat16", "int8", "int4"])
def test_quantized_copies_match_transformers(bundled, precision):
    """torchao's quantized weights stay inside nn.Linear, and F.linear dispatches on them
    exactly as nn.Linear.forward does: the quantized copies take the lean path too, with
    the same logits as their own transformers forward."""
    from inference.core.quantize import quantized_copy

    model = quantized_copy(bundled.model, precision).model
    assert fast_decode.supports(model)
    assert not fast_decode._plan(model).layers[0].q.by_rows  # F.linear, as in transformers
    theirs, ours, _ = decode_both_ways(model, encode_prompt(bundled.tokenizer, "One day, a girl"), 20)
    assert torch.equal(theirs, ours)
