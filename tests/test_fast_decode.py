"""The lean forward passes against transformers' own forward.

One token, float32 weights: the same logits but for the order of additions inside the
matrix-vector products (within 1e-4 over 60 steps, the same greedy token every step). bfloat16
and quantized weights go through F.linear as transformers does: equal bit for bit. Several
tokens at once (a verify pass, a prompt): equal bit for bit in every precision."""

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
    """With F.linear back in place of the row sums (and the projections apart: MKL's kernel adds a
    stacked weight's rows in another order, the row sums do not, see the stacking test), the lean
    step equals `model(...)` bit for bit: norms, rotary table, cache and attention are the same
    operations in the same order."""
    monkeypatch.setattr(fast_decode, "_matvec", lambda weight, x: F.linear(x.view(1, -1), weight).view(-1))
    monkeypatch.setattr(fast_decode, "MAX_STACKED_BYTES", 0)
    monkeypatch.setattr(fast_decode, "_PLANS", fast_decode.weakref.WeakKeyDictionary())
    theirs, ours, _ = decode_both_ways(bundled.model, encode_prompt(bundled.tokenizer, "Once upon a time"), 30)
    assert torch.equal(theirs, ours)


VARIANTS = [
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
]


def variant_model(overrides: dict):
    """A random Llama with these config overrides (and its weights in `dtype`, when the variant names one)."""
    overrides = dict(overrides)
    dtype = overrides.pop("dtype", None)
    model = random_llama(**overrides)
    return model if dtype is None else model.to(dtype)


@pytest.mark.parametrize("overrides", VARIANTS)
def test_llama_variants_match_transformers(overrides):
    dtype = overrides.get("dtype")
    model = variant_model(overrides)
    assert fast_decode.supports(model)
    theirs, ours, _ = decode_both_ways(model, [1, 5, 9, 200, 17], 20)
    if dtype is None:
        assert_rounding_apart(theirs, ours)
    else:  # bfloat16 weights keep F.linear
        assert torch.equal(theirs, ours)


def test_big_weights_are_multiplied_in_row_blocks(monkeypatch):
    """Without the few-rows kernel, a weight past BLOCK_ELEMENTS (a hub model's output layer) is done block by block:
    the same numbers as in one piece, and as F.linear up to rounding."""
    generator = torch.Generator().manual_seed(0)
    weight, x = torch.randn(1000, 64, generator=generator), torch.randn(64, generator=generator)
    whole = fast_decode._row_sums(weight, x)
    monkeypatch.setattr(fast_decode, "BLOCK_ELEMENTS", 64 * 7)  # 7 rows a block; 1000 is no multiple of 7
    assert torch.equal(fast_decode._row_sums(weight, x), whole)
    assert torch.allclose(whole, torch.nn.functional.linear(x, weight), rtol=0, atol=1e-5)
    # the decode step's product (the few-rows kernel where it is built) agrees with both to rounding
    assert torch.allclose(fast_decode._matvec(weight, x), whole, rtol=0, atol=1e-5)


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


# Chunk sizes fed one after another on one cache: a prompt, verify passes of gamma + 1 = 5,
# single tokens between them and an odd chunk.
SCHEDULE = (6, 5, 1, 5, 3, 1, 1, 9, 2)


def feed_both_ways(model, tokens: list[int], schedule=SCHEDULE):
    """Feed `tokens` in chunks through `model(...)` and through `forward_logits` (every
    position kept), each with its own cache; returns both lists of [chunk, vocab] logits and the caches."""
    caches = [DynamicCache(config=model.config), DynamicCache(config=model.config)]
    theirs, ours, start = [], [], 0
    with torch.inference_mode():
        for size in schedule:
            chunk = tokens[start : start + size]
            start += size
            out = model(input_ids=torch.tensor([chunk]), cache=caches[0], use_cache=True, logits_to_keep=size)
            theirs.append(out.logits[0])
            ours.append(fast_decode.forward_logits(model, chunk, caches[1], keep=size))
    return theirs, ours, caches


def assert_chunks(theirs, ours, schedule=SCHEDULE):
    for size, a, b in zip(schedule, theirs, ours):
        assert torch.equal(a, b), f"chunk of {size} differs by {(a - b).abs().max()}"


def test_several_tokens_equal_transformers_bit_for_bit(bundled):
    """The bundled model: a prompt, verify-sized chunks and single tokens on one cache give every
    position's logits and the cache bit for bit as `model(...)`; the model is only read."""
    model = bundled.model
    before = {name: p.clone() for name, p in model.state_dict().items()}
    tokens = encode_prompt(bundled.tokenizer, "Once upon a time, there was a little girl named Lily. She")
    theirs, ours, caches = feed_both_ways(model, (tokens * 3)[: sum(SCHEDULE)])
    assert_chunks(theirs, ours)
    for a, b in zip(caches[0].layers, caches[1].layers):
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
    assert all(torch.equal(before[name], p) for name, p in model.state_dict().items())


@pytest.mark.parametrize("keep", [1, 3, 5])
def test_keep_gives_the_last_positions(bundled, keep):
    """As `logits_to_keep`: the last `keep` positions (bit for bit what transformers gives for the
    same `keep`; the output layer's kernel rounds one row apart from five, in both)."""
    model, ids = bundled.model, [3, 7, 9, 11, 40]
    with torch.inference_mode():
        want = model(input_ids=torch.tensor([ids]), logits_to_keep=keep).logits[0]
        part = fast_decode.forward_logits(model, ids, DynamicCache(config=model.config), keep=keep)
        whole = fast_decode.forward_logits(model, ids, DynamicCache(config=model.config), keep=5)
    assert part.shape == (keep, want.shape[-1]) and torch.equal(part, want)
    assert torch.allclose(part, whole[5 - keep :], rtol=0, atol=1e-5)
    with pytest.raises(ValueError):
        fast_decode.forward_logits(model, [3, 7], DynamicCache(config=model.config), keep=3)


@pytest.mark.parametrize("overrides", VARIANTS)
def test_llama_variants_several_tokens_match_transformers(overrides):
    model = variant_model(overrides)
    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 300, (sum(SCHEDULE),), generator=generator).tolist()
    theirs, ours, _ = feed_both_ways(model, tokens)
    assert_chunks(theirs, ours)


@pytest.mark.parametrize("precision", ["bfloat16", "int8", "int4"])
def test_quantized_copies_several_tokens_match_transformers(bundled, precision):
    from inference.core.quantize import quantized_copy

    model = quantized_copy(bundled.model, precision).model
    tokens = (encode_prompt(bundled.tokenizer, "One day, a girl went to the park with her mom.") * 3)[: sum(SCHEDULE)]
    theirs, ours, _ = feed_both_ways(model, tokens)
    assert_chunks(theirs, ours)


@pytest.mark.parametrize("overrides", [VARIANTS[0], VARIANTS[3]])
def test_rotary_table_rows_equal_the_rotary_module(overrides):
    """The table (grown twice past its first 256 rows) gives exactly what transformers' rotary
    module gives for each position alone."""
    model = random_llama(max_position_embeddings=1024, **overrides)
    table = fast_decode._plan(model).rope
    rotary, sign = model.model.rotary_emb, fast_decode._rotation(model.config.head_dim)[1]
    probe = torch.empty(0)
    for position in (0, 1, 17, 255, 256, 300, 511, 700, 1023):
        cos, signed_sin = table.rows(position, 1)
        want_cos, want_sin = rotary(probe, torch.tensor([[position]]))
        assert torch.equal(cos[0], want_cos[0, 0]) and torch.equal(signed_sin[0], want_sin[0, 0] * sign)


def test_stacked_projections_are_made_only_within_their_budget(bundled, monkeypatch):
    """q/k/v and gate/up are stacked for the bundled model; past the budget (a hub model) the
    one-token torch step multiplies them apart, with the same numbers (the fused C pass, which needs them stacked,
    switched off for both)."""
    monkeypatch.setenv("INFERENCE_LAB_FUSED_STEP", "0")
    model = bundled.model
    assert all(layer.qkv is not None and layer.gate_up is not None for layer in fast_decode._plan(model).layers)
    prompt = encode_prompt(bundled.tokenizer, "Once upon a time")
    _, stacked, _ = decode_both_ways(model, prompt, 10)
    monkeypatch.setattr(fast_decode, "MAX_STACKED_BYTES", 0)
    monkeypatch.setattr(fast_decode, "_PLANS", fast_decode.weakref.WeakKeyDictionary())
    assert all(layer.qkv is None and layer.gate_up is None for layer in fast_decode._plan(model).layers)
    _, apart, _ = decode_both_ways(model, prompt, 10)
    assert torch.equal(stacked, apart)


def test_forward_step_takes_transformers_path_elsewhere(gpt2):
    model, _ = gpt2
    caches = [DynamicCache(config=model.config), DynamicCache(config=model.config)]
    with torch.inference_mode():
        want = model(input_ids=torch.tensor([[1, 2, 3]]), cache=caches[0], use_cache=True, logits_to_keep=2).logits[0]
        got = fast_decode.forward_step(model, [1, 2, 3], caches[1], keep=2)
    assert torch.equal(want, got)
    with pytest.raises(ValueError):
        fast_decode.forward_logits(model, [1, 2, 3], caches[1])
