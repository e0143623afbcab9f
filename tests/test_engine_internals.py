"""Inside the engine, the arithmetic: KV bytes per token from each ggml type's block layout, the first requests'
plan and the prefill FLOPs a cache hit saves, the cached-input price, the predicted chunked-prefill stalls and how
measured stalls are counted, the KL divergence / top-1 agreement used for KV precision, the prompts (filler, or real
English on SmolLM2), and comparison words taken from the measurements."""

import math

import pandas as pd
import pytest
import torch

from inference.core.measuring import filler_prompt
from inference.lessons.engine_internals import chunked_prefill, kv_precision, prefix_cache, served, text
from inference.lessons.serving import request_trace
from inference.lessons.serving.roofline import ServedModel, prefill_pass

pytestmark = pytest.mark.unit

# The server's own line for the bundled model (6 layers, 4 KV heads x 32) with a q8_0 cache of 16,384 cells.
KV_LOG_LINE = (
    "llama_kv_cache: size =   25.50 MiB ( 16384 cells,   6 layers,  1/1 seqs), K (q8_0):   12.75 MiB, "
    "V (q8_0):   12.75 MiB"
)


@pytest.mark.parametrize(
    ("ggml_type", "bytes_per_32_values"), [("f32", 128), ("f16", 64), ("bf16", 64), ("q8_0", 34), ("q4_0", 18)]
)
def test_bytes_per_value_follow_the_block_layout(ggml_type, bytes_per_32_values):
    """q8_0 is one f16 scale and 32 int8 (34 bytes per 32 values), q4_0 one f16 scale and 16 bytes of nibbles."""
    assert kv_precision.bytes_per_value(ggml_type) * 32 == bytes_per_32_values


def test_kv_bytes_per_token_is_layers_times_a_key_row_and_a_value_row_of_whole_blocks():
    # bundled model: 6 layers, 4 KV heads x head dim 32 = 128 values per row
    assert kv_precision.kv_bytes_per_token(6, 128, "f32") == 6 * 2 * 128 * 4 == 6144
    assert kv_precision.kv_bytes_per_token(6, 128, "f16") == 3072
    assert kv_precision.kv_bytes_per_token(6, 128, "q8_0") == 6 * 2 * 4 * 34 == 1632
    assert kv_precision.kv_bytes_per_token(6, 128, "q4_0") == 6 * 2 * 4 * 18 == 864
    assert kv_precision.kv_bytes_per_token(6, 128, "q8_0", "f16") == 6 * (4 * 34 + 256)
    with pytest.raises(ValueError, match="multiple"):
        kv_precision.row_bytes("q4_0", 48)
    with pytest.raises(ValueError, match="q3_k"):
        kv_precision.bytes_per_value("q3_k")


def test_the_servers_kv_cache_line_gives_bytes_per_token_pinned_to_one_whole_number():
    """Printed with two decimals over 16,384 cells, K's bytes per token are known to 0.32 bytes: under half a byte."""
    reported = kv_precision.reported_cache("noise\n" + KV_LOG_LINE + "\nmore noise")
    assert (reported.cells, reported.layers, reported.type_k, reported.type_v) == (16384, 6, "q8_0", "q8_0")
    assert reported.bytes_per_token == kv_precision.kv_bytes_per_token(6, 128, "q8_0")
    assert kv_precision.reported_cache("no cache here") is None
    assert reported.cells == kv_precision.BYTES_CHECK_CELLS and reported.resolution_bytes_per_token < 0.5
    assert reported.agrees_with(6, 128)
    assert not reported.agrees_with(6, 96) and not reported.agrees_with(5, 128)


SMALL = ServedModel(matmul_parameters=1_000_000, other_parameters=0, layers=4, query_width=256, kv_width=64)


def test_a_cold_prefill_costs_what_the_roofline_counts_and_a_hit_saves_the_cached_tokens_own_prefill():
    """Cold minus warm = the prefill of the cached prefix alone (attention over positions 1..C)."""
    assert prefix_cache.prefill_flops(SMALL, 300) == pytest.approx(prefill_pass(SMALL, 300).flops)
    saved = prefix_cache.prefill_flops_saved(SMALL, prompt_tokens=600, cached_tokens=512)
    assert saved == pytest.approx(prefix_cache.prefill_flops(SMALL, 512))
    assert saved == pytest.approx(2 * 1_000_000 * 512 + 4 * 4 * 256 * 512 * 513 / 2)
    assert prefix_cache.prefill_flops_saved(SMALL, 600, 0) == 0


def test_cached_input_is_billed_at_the_discounted_price():
    assert prefix_cache.input_cost(1_000_000, 0, 3.0, 0.9) == pytest.approx(3.0)
    assert prefix_cache.input_cost(0, 1_000_000, 3.0, 0.9) == pytest.approx(0.3)
    with pytest.raises(ValueError, match="cached_discount"):
        prefix_cache.input_cost(1, 1, 1.0, 1.5)


@pytest.mark.parametrize(
    ("prompt", "n_batch", "decoding", "stalls"), [(400, 64, 2, 7), (512, 256, 0, 2), (513, 256, 0, 3), (500, 128, 2, 4)]
)
def test_predicted_stalls_are_the_iterations_that_carry_a_chunk(prompt, n_batch, decoding, stalls):
    assert chunked_prefill.predicted_stalls(prompt, n_batch, decoding) == stalls
    chunks = chunked_prefill.chunk_sizes(prompt, n_batch, decoding)
    assert len(chunks) == stalls and sum(chunks) == prompt and max(chunks) == n_batch - decoding
    with pytest.raises(ValueError, match="n_batch"):
        chunked_prefill.predicted_stalls(100, 2, 2)


def _run(times, first_s=1.0, prompt_ms=300.0, n_batch=64):
    """A newcomer of 300 tokens sent at 0.6 s; co-tenants usually 10 ms apart."""
    usual = [0.01] * len(times)
    return chunked_prefill.StallRun(n_batch, n_batch, len(times), 300, 0.6, first_s, prompt_ms, 300, times, usual)


def test_stalls_are_the_cotenant_tokens_that_arrive_during_the_newcomers_prefill():
    """Prefill from 0.7 s to 1.0 s in three chunks: tokens every 10 ms before, at 0.8, 0.9 and 1.0 s (the last
    one with the newcomer's first token), then every 10 ms again. The token at the prefill's start is not a stall."""
    before = [0.5 + 0.01 * i for i in range(21)]  # ... 0.70
    during = [0.8, 0.9, 1.0001]
    after = [1.0101 + 0.01 * i for i in range(5)]
    run = _run([before + during + after, [t + 0.002 for t in before + during + after]])
    assert run.stalls() == [3, 3] and run.measured == 3
    assert run.stalled_gaps(0) == pytest.approx([0.1, 0.1, 0.1001])
    assert run.longest_gap_s() == pytest.approx(0.1001)


def test_kl_is_zero_for_the_same_distribution_and_matches_torch_otherwise():
    gen = torch.Generator().manual_seed(0)
    ref = torch.randn(5, 50, generator=gen).log_softmax(-1)
    other = (ref + 0.3 * torch.randn(5, 50, generator=gen)).log_softmax(-1)
    kl, top1 = kv_precision.kl_and_top1(ref, ref)
    assert kl.abs().max() < 1e-12 and bool(top1.all())
    kl, _ = kv_precision.kl_and_top1(ref, other)
    expected = torch.nn.functional.kl_div(other.double(), ref.double(), log_target=True, reduction="none").sum(-1)
    assert torch.allclose(kl, expected)
    ref = torch.tensor([[0.0, -math.inf]])  # tokens the reference gives no probability add nothing
    other = torch.tensor([[math.log(0.5), math.log(0.5)]])
    kl, _ = kv_precision.kl_and_top1(ref, other)
    assert kl.item() == pytest.approx(math.log(2))


def test_a_prompts_plan_is_its_kv_bytes_and_the_cold_and_warm_prefill_flops():
    plan = prefix_cache.request_plan(SMALL, context=2048, prefix_tokens=512, own_tokens=16, requests=4)
    assert plan.prompt_tokens == 528 and plan.kv_bytes_per_token == 4 * 2 * 64 * 4
    assert plan.kv_bytes == 528 * 2048
    assert plan.cold_flops == pytest.approx(prefix_cache.prefill_flops(SMALL, 528))
    saved = prefix_cache.prefill_flops_saved(SMALL, prompt_tokens=528, cached_tokens=512)
    assert plan.warm_flops == pytest.approx(plan.cold_flops - saved)


def test_the_plan_sentence_shows_token_text_literally():
    plan = prefix_cache.request_plan(SMALL, context=2048, prefix_tokens=512, own_tokens=16, requests=3)
    said = text.plan_sentence(plan, "tiny", ["␣**b**", "<script>", "`x`"])
    assert f"{plan.kv_bytes / 2**20:,.1f} MiB" in said and f"{1 - plan.warm_flops / plan.cold_flops:.0%} less" in said
    assert "<script>" not in said and "**b**" not in said and "`" not in said  # token text is no syntax


def test_comparison_words_come_from_the_measurements():
    """Warm requests against the cold one, and the largest batch setting against the smallest: "about the same"
    when the spreads overlap."""
    table = pd.DataFrame(
        {
            "cache": [False, False, False, True, True, True],
            "ttft_ms": [400.0, 410.0, 390.0, 400.0, 100.0, 95.0],
            "evaluated_tokens": [136, 136, 136, 136, 8, 8],
            "cached_tokens": [0, 0, 0, 0, 128, 128],
        }
    )
    assert "4.1x faster" in text.prefix_verdict(table)
    before = [0.5 + 0.01 * i for i in range(21)]
    small = _run([before + [0.8, 0.9, 1.0001]], n_batch=64)
    large = _run([before + [0.9001]], first_s=0.9, prompt_ms=200.0, n_batch=512)
    assert text.trade_title([small, small]).endswith(
        "newcomer about the same (within this machine's noise), stalls about the same (within this machine's noise)"
    )
    assert text.trade_title([small, large]).endswith("the newcomer 1.3x sooner, stalls 2.0x longer")


def test_the_bundled_model_is_served_with_filler_prompts_and_the_real_one_with_real_english(smollm2):
    bundled, real = served.engine_model(served.BUNDLED), served.engine_model(served.REAL)
    assert bundled.name == "storyteller-llama-6m" and not bundled.timing_only
    assert prefix_cache.prompt_start(bundled, 512) is None and prefix_cache.prompt_opening(bundled, 512) is None
    assert prefix_cache.prompt_ids(bundled)(12, 7) == filler_prompt(4096, 12, 7)
    assert (real.layers, real.kv_width, real.vocab) == (30, 3 * 64, 49_152)
    assert prefix_cache.prompt_ids(real) is request_trace.text_ids
    assert prefix_cache.prompt_opening(real, 256) and len(prefix_cache.prompt_start(real, 256)) == 8
    random = served.engine_model(served.models.RANDOM)  # the fallback: SmolLM2's shape, our vocabulary
    assert (random.layers, random.kv_width, random.vocab, random.timing_only) == (30, 192, 4096, True)
