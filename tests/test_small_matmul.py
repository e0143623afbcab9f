"""The few-rows kernel (`inference.core.small_matmul`) against F.linear, and the speculative pass built on it
(`fast_decode.few_tokens_logits`) against transformers: logits to float rounding (within 1e-4, the same argmax at
every position, the cache within 1e-4), as a one-token step's; and where the kernel is not used, bit for bit."""

import copy
import os

import pytest
import torch
import torch.nn.functional as F
from transformers import DynamicCache

from inference.core import fast_decode, fused_step, small_matmul
from inference.core.forward import FastDecodeForward
from inference.core.loader import encode_prompt
from tests.test_fast_decode import decode_both_ways

pytestmark = pytest.mark.unit

IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def test_the_kernel_builds_where_the_project_runs():
    """Its two CPUs (Intel Xeon, AMD EPYC) have AVX2 and FMA and CI installs a C compiler: a kernel that silently
    fell back there would leave the speculative figures measuring F.linear."""
    if not IN_CI and not small_matmul.available():
        pytest.skip(f"few-rows kernel unavailable here: {small_matmul.unavailable()}")
    assert small_matmul.available(), small_matmul.unavailable()
    assert small_matmul.unavailable() is None


@pytest.mark.parametrize("rows", range(1, small_matmul.MAX_ROWS + 1))
@pytest.mark.parametrize("shape", [(512, 256), (4096, 256), (256, 768), (37, 13)])  # 13: a tail after 8 lanes
def test_products_equal_f_linear_to_float_rounding(rows, shape):
    if not small_matmul.available():
        pytest.skip(small_matmul.unavailable())
    generator = torch.Generator().manual_seed(rows * 1000 + shape[1])
    weight = torch.randn(shape, generator=generator)
    x = torch.randn(1, rows, shape[1], generator=generator)
    want, got = F.linear(x, weight), small_matmul.linear(x, weight)
    assert got.shape == want.shape == (1, rows, shape[0])
    # |x| |w| ~ 1, K terms: rounding grows like sqrt(K) * 2^-24 times the terms' size
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-5 * shape[1] ** 0.5)


def test_what_it_cannot_compute_is_refused():
    """More rows than it unrolls, another dtype or a strided weight (its pointer walk would read the wrong numbers)."""
    if not small_matmul.available():
        pytest.skip(small_matmul.unavailable())
    with pytest.raises(ValueError, match="1 to 8 rows"):
        small_matmul.linear(torch.zeros(small_matmul.MAX_ROWS + 1, 16), torch.zeros(4, 16))
    with pytest.raises(ValueError, match="contiguous float32"):
        small_matmul.linear(torch.zeros(2, 16), torch.zeros(16, 4).T)
    with pytest.raises(ValueError, match="contiguous float32"):
        small_matmul.linear(torch.zeros(2, 16, dtype=torch.bfloat16), torch.zeros(4, 16, dtype=torch.bfloat16))


def feed_both(model, prompt: list[int], chunks: list[list[int]]):
    """The prompt, then each chunk, through transformers and through `few_tokens_logits` (each its own cache)."""
    caches = [DynamicCache(config=model.config), DynamicCache(config=model.config)]
    theirs, ours = [], []
    with torch.inference_mode():
        model(input_ids=torch.tensor([prompt]), cache=caches[0], use_cache=True)
        fast_decode.forward_logits(model, prompt, caches[1])
        for chunk in chunks:
            out = model(input_ids=torch.tensor([chunk]), cache=caches[0], use_cache=True, logits_to_keep=len(chunk))
            theirs.append(out.logits[0])
            ours.append(fast_decode.few_tokens_logits(model, chunk, caches[1], keep=len(chunk)))
    return theirs, ours, caches


def test_a_verify_pass_equals_transformers_to_float_rounding(bundled):
    """The bundled model: verify-sized chunks (2 to 8 tokens) on one cache."""
    if not small_matmul.available():
        pytest.skip(small_matmul.unavailable())
    model = bundled.model
    tokens = encode_prompt(bundled.tokenizer, "Once upon a time, there was a little girl named Lily. She loved to") * 3
    sizes, start, chunks = (5, 2, 8, 5, 3), 6, []
    for size in sizes:
        chunks.append(tokens[start : start + size])
        start += size
    assert [len(chunk) for chunk in chunks] == list(sizes)
    theirs, ours, caches = feed_both(model, tokens[:6], chunks)
    for a, b in zip(theirs, ours):
        assert not torch.equal(a, b)  # the kernel ran: its additions in another order round differently
        assert torch.allclose(a, b, rtol=0, atol=1e-4)
        assert torch.equal(a.argmax(-1), b.argmax(-1))
    for a, b in zip(caches[0].layers, caches[1].layers):
        assert torch.allclose(a.keys, b.keys, rtol=0, atol=1e-4) and torch.allclose(
            a.values, b.values, rtol=0, atol=1e-4
        )


def test_without_the_kernel_a_pass_is_transformers_bit_for_bit(bundled, monkeypatch):
    monkeypatch.setattr(small_matmul, "_state", {"why": "switched off for this test"})
    model = bundled.model
    tokens = encode_prompt(bundled.tokenizer, "Once upon a time, there was a little girl")
    theirs, ours, _ = feed_both(model, tokens[:4], [tokens[4:9], tokens[9:11]])
    assert all(torch.equal(a, b) for a, b in zip(theirs, ours))


def test_long_passes_and_other_precisions_stay_bit_for_bit(bundled):
    """A prompt of more tokens than the kernel takes, and bfloat16 weights, keep transformers' F.linear; more tokens
    after a cache that holds text (a verify pass at γ >= 8) go in fused chunks: to float rounding, as a verify pass."""
    model = bundled.model
    tokens = encode_prompt(bundled.tokenizer, "Once upon a time, there was a little girl named Lily. She loved")
    with torch.inference_mode():
        want = model(input_ids=torch.tensor([tokens[:12]]), use_cache=True, logits_to_keep=12).logits[0]
        got = fast_decode.few_tokens_logits(model, tokens[:12], DynamicCache(config=model.config), keep=12)
    assert torch.equal(want, got)
    theirs, ours, _ = feed_both(model, tokens[:3], [tokens[3:15]])
    assert torch.allclose(theirs[0], ours[0], rtol=0, atol=1e-4)
    assert torch.equal(theirs[0].argmax(-1), ours[0].argmax(-1))
    half = copy.deepcopy(model).to(torch.bfloat16)  # a copy: the shared fixture's model is never changed
    theirs, ours, _ = feed_both(half, tokens[:3], [tokens[3:8]])
    assert torch.equal(theirs[0], ours[0])


def test_the_fast_forward_feeds_speculative_passes_through_it(bundled, monkeypatch):
    """`FastDecodeForward.few_tokens` takes the one-call C pass (`fused_step`, the kernel's products) for a few tokens,
    and `logits` (a prompt) never does."""
    if not small_matmul.available():
        pytest.skip(small_matmul.unavailable())
    calls = []
    real = fused_step.forward
    monkeypatch.setattr(fused_step, "forward", lambda *args: calls.append(len(args[3])) or real(*args))
    forward = FastDecodeForward(bundled.model, bundled.tokenizer)
    tokens = encode_prompt(bundled.tokenizer, "Once upon a time, there was a little girl")
    forward.logits(tokens[:6])
    assert calls == []
    forward.few_tokens(tokens[6:11], keep=5)
    assert calls == [5]


@pytest.mark.parametrize("kernel", [True, False])
def test_a_decode_step_equals_transformers_to_rounding_with_or_without_the_kernel(bundled, monkeypatch, kernel):
    """The one-token step's products: the kernel where it is built, row sums where not; both within 1e-4 of
    transformers over 30 greedy steps, the same token every step."""
    if kernel and not small_matmul.available():
        pytest.skip(small_matmul.unavailable())
    if not kernel:
        monkeypatch.setattr(small_matmul, "_state", {"why": "switched off for this test"})
    theirs, ours, _ = decode_both_ways(bundled.model, encode_prompt(bundled.tokenizer, "Once upon a time"), 30)
    assert torch.allclose(theirs, ours, rtol=0, atol=1e-4)
    assert torch.equal(theirs.argmax(-1), ours.argmax(-1))
