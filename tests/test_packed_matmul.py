"""The products of the one-call C pass (`packed_matmul.c`, weights packed in panels of 16 outputs) against F.linear,
and the property speculative greedy decoding rests on: a row's numbers do not depend on how many rows the pass has
(a verify pass's rows equal one-token steps bit for bit), nor on whether AVX-512 or AVX2 computed them."""

import pytest
import torch
import torch.nn.functional as F
from transformers import DynamicCache

from inference.core import fast_decode, fused_step, small_matmul
from inference.core.loader import encode_prompt

pytestmark = pytest.mark.unit

SHAPES = [(512, 256), (4096, 256), (256, 768), (37, 13), (16, 1), (200, 33)]  # 37, 200: a part panel; 13, 33: odd k


@pytest.fixture(autouse=True)
def kernel_built():
    if not small_matmul.available():
        pytest.skip(f"kernel unavailable here: {small_matmul.unavailable()}")
    yield
    small_matmul.use_avx512(True)  # the default, whatever a test switched


def weights_and_rows(shape, rows, seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator), torch.randn(rows, shape[1], generator=generator)


def test_packing_puts_sixteen_outputs_side_by_side():
    weight = torch.arange(37 * 3, dtype=torch.float32).view(37, 3)
    packed = small_matmul.pack(weight)
    assert packed.shape == (3, 3, 16) and packed.is_contiguous()
    assert torch.equal(packed[1, 2], weight[16:32, 2])  # panel 1, input 2: outputs 16-31
    assert torch.equal(packed[2, :, :5].T, weight[32:]) and not packed[2, :, 5:].any()  # zero rows pad the last


@pytest.mark.parametrize("avx512", [True, False])
@pytest.mark.parametrize("shape", SHAPES)
def test_products_equal_f_linear_to_float_rounding(shape, avx512):
    small_matmul.use_avx512(avx512)
    for rows in range(1, small_matmul.MAX_ROWS + 1):
        weight, x = weights_and_rows(shape, rows, seed=rows * 1000 + shape[1])
        got = small_matmul.packed_linear(x, small_matmul.pack(weight), shape[0])
        # |x| |w| ~ 1, K terms summed in order: rounding grows like sqrt(K) * 2^-24 times the terms' size
        assert torch.allclose(got, F.linear(x, weight), rtol=1e-5, atol=2e-5 * shape[1] ** 0.5)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_rows_numbers_do_not_depend_on_the_row_count_or_the_registers(shape):
    """Each of 8 rows alone, then within every pass of 1-8 rows, with AVX-512 (where the CPU has it) and AVX2:
    one set of bits. F.linear (MKL) does not promise this: its blocking changes with the row count."""
    weight, x = weights_and_rows(shape, small_matmul.MAX_ROWS, seed=shape[0])
    packed = small_matmul.pack(weight)
    alone = torch.cat([small_matmul.packed_linear(x[i : i + 1], packed, shape[0]) for i in range(len(x))])
    for avx512 in (True, False):
        small_matmul.use_avx512(avx512)
        for rows in range(1, small_matmul.MAX_ROWS + 1):
            for start in range(0, small_matmul.MAX_ROWS - rows + 1, rows):
                got = small_matmul.packed_linear(x[start : start + rows], packed, shape[0])
                assert torch.equal(got, alone[start : start + rows]), (avx512, rows, start)


def test_more_rows_than_it_unrolls_is_refused():
    packed = small_matmul.pack(torch.zeros(4, 16))
    for rows in (0, small_matmul.MAX_ROWS + 1):
        with pytest.raises(ValueError, match="1 to 8 rows"):
            small_matmul.packed_linear(torch.zeros(rows, 16), packed, 4)


def test_a_verify_pass_rows_equal_one_token_steps_bit_for_bit(bundled):
    """Why speculative greedy decoding writes plain greedy decoding's text by construction: the target's verify
    pass of 2-8 tokens gives, at every position, the very logits (and keys and values) the one-token steps give."""
    model = bundled.model
    plan = fast_decode._plan(model)
    prompt = encode_prompt(bundled.tokenizer, "Once upon a time, there was a little girl named Lily.")
    following = encode_prompt(bundled.tokenizer, " She loved to play outside in the sun with her dog")
    for size in range(2, small_matmul.MAX_ROWS + 1):
        chunk = following[:size]
        caches = [DynamicCache(config=model.config), DynamicCache(config=model.config)]
        for cache in caches:
            fast_decode.forward_logits(model, prompt, cache)
        steps = torch.stack([fast_decode.decode_logits(model, token, caches[0]) for token in chunk])
        assert plan.fused_for(caches[1]) is not None
        verify = fused_step.forward(plan.fused_for(caches[1]), plan.embed, plan.rope, chunk, caches[1], size)
        assert torch.equal(verify, steps), size
        for one, many in zip(caches[0].layers, caches[1].layers):
            assert torch.equal(one.keys, many.keys) and torch.equal(one.values, many.values)


def test_a_verify_pass_longer_than_the_kernels_rows_goes_in_chunks_equal_to_one_token_steps(bundled):
    """γ from 8 up: 9-17 tokens after a cache that holds text run as fused passes of at most 8, keeping any number of
    the last positions, with the one-token steps' very logits and cache; a prompt (an empty cache) keeps
    transformers' own path, as plain decoding's prefill does."""
    model = bundled.model
    prompt = encode_prompt(bundled.tokenizer, "Once upon a time, there was a little girl named Lily.")
    following = encode_prompt(
        bundled.tokenizer, " She loved to play outside in the sun with her dog and her cat every day"
    )
    calls, real = [], fused_step.forward
    for size, keep in [(9, 9), (9, 1), (12, 5), (17, 17), (16, 8)]:
        chunk = following[:size]
        caches = [DynamicCache(config=model.config), DynamicCache(config=model.config)]
        for cache in caches:
            fast_decode.forward_logits(model, prompt, cache)
        steps = torch.stack([fast_decode.decode_logits(model, token, caches[0]) for token in chunk])
        calls.clear()
        fused_step.forward = lambda *args: calls.append(len(args[3])) or real(*args)
        try:
            verify = fast_decode.few_tokens_logits(model, chunk, caches[1], keep)
        finally:
            fused_step.forward = real
        assert calls == [len(chunk[i : i + 8]) for i in range(0, size, 8)]
        assert torch.equal(verify, steps[size - keep :]), (size, keep)
        for one, many in zip(caches[0].layers, caches[1].layers):
            assert torch.equal(one.keys, many.keys) and torch.equal(one.values, many.values)
    empty = DynamicCache(config=model.config)
    want = model(input_ids=torch.tensor([prompt]), use_cache=True, logits_to_keep=3).logits[0]
    assert torch.equal(fast_decode.few_tokens_logits(model, prompt, empty, 3), want)  # bit for bit, not chunked
