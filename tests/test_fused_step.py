"""The one-call C forward pass (`inference.core.fused_step`) against transformers' forward: logits and KV cache to
float rounding (within 1e-4, the same argmax), for one token and for verify-sized chunks, on the bundled models, on
Llama variants (multi-head, grouped, multi-query, llama3 rotary) and after a crop (Back); and where it cannot compute
exactly (bfloat16, another cache layer, switched off) the torch paths run instead."""

import threading

import pytest
import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicSlidingWindowLayer

from inference.core import fast_decode, fused_step, small_matmul
from inference.core.loader import encode_prompt, load_model
from tests.test_fast_decode import VARIANTS, assert_rounding_apart, decode_both_ways, variant_model

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def kernel_built():
    if not small_matmul.available():
        pytest.skip(f"kernel unavailable here: {small_matmul.unavailable()}")


@pytest.fixture
def fused_calls(monkeypatch):
    """The token counts of every fused pass run during the test."""
    calls, real = [], fused_step.forward
    monkeypatch.setattr(fused_step, "forward", lambda *args: calls.append(len(args[3])) or real(*args))
    return calls


def test_the_bundled_models_decode_through_it(bundled, fused_calls):
    draft = load_model("assets/models/storyteller-draft-1m")
    for loaded in (bundled, draft):
        assert fast_decode._plan(loaded.model).fused is not None
        before = len(fused_calls)
        theirs, ours, caches = decode_both_ways(loaded.model, encode_prompt(loaded.tokenizer, "Once upon a time"), 40)
        assert fused_calls[before:] == [1] * 40
        assert_rounding_apart(theirs, ours)
        for a, b in zip(caches[0].layers, caches[1].layers):
            assert a.keys.shape == b.keys.shape
            assert torch.allclose(a.keys, b.keys, rtol=0, atol=1e-4)
            assert torch.allclose(a.values, b.values, rtol=0, atol=1e-4)


@pytest.mark.parametrize("overrides", [v for v in VARIANTS if "dtype" not in v])
def test_llama_variants_through_it(overrides, fused_calls):
    model = variant_model(overrides)
    theirs, ours, _ = decode_both_ways(model, [1, 5, 9, 200, 17], 20)
    assert fused_calls == [1] * 20
    assert_rounding_apart(theirs, ours)


def test_chunks_of_every_size_and_keep_after_a_crop(bundled):
    """A verify pass of 1 to 8 tokens keeping any number of positions, on a cache cropped as Back and a rejected
    speculation crop it (a strided view of the old tensors)."""
    model = bundled.model
    tokens = encode_prompt(bundled.tokenizer, "Once upon a time, there was a little girl named Lily. She loved to") * 4
    caches = [DynamicCache(config=model.config), DynamicCache(config=model.config)]
    with torch.inference_mode():
        model(input_ids=torch.tensor([tokens[:5]]), cache=caches[0], use_cache=True)
        fast_decode.forward_logits(model, tokens[:5], caches[1])
        start = 5
        for size, keep in [(1, 1), (2, 1), (3, 3), (4, 2), (5, 5), (6, 1), (7, 4), (8, 8)]:
            chunk = tokens[start : start + size]
            want = model(input_ids=torch.tensor([chunk]), cache=caches[0], use_cache=True, logits_to_keep=keep).logits[
                0
            ]
            got = fused_step.forward(
                fast_decode._plan(model).fused,
                model.model.embed_tokens.weight,
                fast_decode._plan(model).rope,
                chunk,
                caches[1],
                keep,
            )
            assert got.shape == want.shape == (keep, model.config.vocab_size)
            assert torch.allclose(want, got, rtol=0, atol=1e-4) and torch.equal(want.argmax(-1), got.argmax(-1))
            for cache in caches:
                cache.crop(-(size // 2))  # leaves a strided view behind
            start += size
        assert not caches[1].layers[0].keys.is_contiguous()
        for token in tokens[start : start + 5]:
            want = model(input_ids=torch.tensor([[token]]), cache=caches[0], use_cache=True).logits[0, -1]
            got = fast_decode.decode_logits(model, token, caches[1])
            assert torch.allclose(want, got, rtol=0, atol=1e-4)
    assert caches[0].get_seq_length() == caches[1].get_seq_length()


def test_what_it_cannot_compute_exactly_takes_the_torch_paths(bundled, fused_calls, monkeypatch):
    """bfloat16 weights (F.linear, bit for bit), a cache layer that is not a plain concatenation, and the switch."""
    half = variant_model({"dtype": torch.bfloat16})
    assert fast_decode._plan(half).fused is None
    model = bundled.model
    sliding = DynamicCache(config=model.config)
    sliding.layers[0] = DynamicSlidingWindowLayer(sliding_window=64)
    assert not fused_step.takes_cache(sliding, model.config.num_hidden_layers)
    monkeypatch.setenv("INFERENCE_LAB_FUSED_STEP", "0")
    theirs, ours, _ = decode_both_ways(model, [1, 5, 9], 5)
    assert fused_calls == []
    assert_rounding_apart(theirs, ours)


def test_sessions_stepping_at_once_get_their_own_numbers(bundled):
    """ctypes lets go of the GIL during the pass: two threads stepping the same model on their own caches get what
    each gets alone (the pass's scratch memory is its own)."""
    model = bundled.model
    prompts = [[1, 5, 9, 200], [7, 300, 12, 40, 41, 42]]

    def run(prompt, out):
        cache = DynamicCache(config=model.config)
        fast_decode.forward_logits(model, prompt, cache)
        token, rows = prompt[-1], []
        for _ in range(30):
            rows.append(fast_decode.decode_logits(model, token, cache))
            token = int(rows[-1].argmax())
        out.append(torch.stack(rows))

    alone = []
    for prompt in prompts:
        run(prompt, alone)
    together = [[], []]
    threads = [threading.Thread(target=run, args=(prompt, out)) for prompt, out in zip(prompts, together)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(torch.equal(a, b[0]) for a, b in zip(alone, together))


def test_a_model_whose_tensors_moved_falls_back_instead_of_reading_freed_memory(fused_calls):
    """Models are never changed here, but if a caller swaps a parameter's memory (as `model.to(...)` does in place),
    the C pass would read the old address: it notices and the torch path runs on the new tensors."""
    model = variant_model({})
    decode_both_ways(model, [1, 5, 9], 2)
    assert fused_calls == [1, 1]
    with torch.no_grad():
        model.model.norm.weight.data = model.model.norm.weight.data * 1.5  # new memory, new numbers
    theirs, ours, _ = decode_both_ways(model, [1, 5, 9], 3)
    assert fused_calls == [1, 1]
    assert_rounding_apart(theirs, ours)
