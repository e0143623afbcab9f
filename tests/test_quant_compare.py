"""The four-precision comparison: real byte savings, a zero-drift reference, fluent quantized
text, honest speed notes, and the shared model left untouched."""

import dataclasses
import math

import pytest
import torch

from inference.core.loader import encode_prompt
from inference.core.quantize import PRECISIONS, linear_weight_bytes
from inference.lessons.quantization import experiments as qc
from inference.lessons.quantization import text as quant_text

pytestmark = pytest.mark.unit

NEW_TOKENS = 24
ROUNDS = 3


@pytest.fixture(scope="module")
def bundled_state(bundled):
    """The bundled model's tensors before anything below runs."""
    return {name: tensor.clone() for name, tensor in bundled.model.state_dict().items()}


@pytest.fixture(scope="module")
def copies(bundled, bundled_state):
    return qc.quantize_all(bundled.model)


@pytest.fixture(scope="module")
def comparison(bundled, copies):
    prompt_ids = encode_prompt(bundled.tokenizer, "Once upon a time")
    return qc.compare_precisions(copies, bundled.tokenizer, prompt_ids, NEW_TOKENS, rounds=ROUNDS)


def test_int8_and_int4_linear_storage_shrinks_about_2x_and_4x_versus_bf16(copies):
    """Read from the tensors: int8 linear weights are ~2x smaller than bf16, int4 ~4x (scales included)."""
    bf16 = linear_weight_bytes(copies["bfloat16"].model)
    assert 1.9 < bf16 / linear_weight_bytes(copies["int8"].model) <= 2.0
    assert 3.0 < bf16 / linear_weight_bytes(copies["int4"].model) < 4.2
    assert linear_weight_bytes(copies["float32"].model) == 2 * bf16


def test_total_weight_bytes_fall_with_every_step_down_in_precision(comparison):
    """float32 > bfloat16 > int8 > int4 in measured bytes, and float32's size ratio is exactly 1."""
    table = qc.summary_table(comparison).set_index("precision")
    sizes = [table.at[p, "weight_bytes"] for p in PRECISIONS]
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == 4
    assert table.at["float32", "size_vs_float32"] == 1.0
    assert table.at["bfloat16", "size_vs_float32"] == pytest.approx(0.5, abs=0.01)


def test_float32_row_has_zero_kl_and_full_agreement(comparison):
    """The reference compared with itself: KL exactly 0, top-1 agreement 1, greedy text identical."""
    row = qc.summary_table(comparison).set_index("precision").loc["float32"]
    assert row["mean_kl_nats"] == 0.0
    assert row["top1_agreement"] == 1.0
    assert comparison.results["float32"].first_departure is None


def test_quantized_greedy_text_stays_close_to_float32(comparison):
    """int8 keeps almost every top token and its greedy text follows float32's for a while;
    int4 drifts more than bf16 (checked loosely: the bundled model may be a provisional one)."""
    table = qc.summary_table(comparison).set_index("precision")
    assert table.at["int8", "top1_agreement"] >= 0.9
    departure = comparison.results["int8"].first_departure
    assert departure is None or departure >= 4
    assert table.at["int4", "mean_kl_nats"] > table.at["bfloat16", "mean_kl_nats"] > 0
    assert all(len(r.greedy_tokens) == len(r.greedy_ids) > 0 for r in comparison.results.values())


def test_every_precision_gets_a_measured_decode_speed(comparison):
    """Each precision has a positive decode tokens/s from its own timed greedy run."""
    rates = [r.decode_tokens_per_s for r in comparison.results.values()]
    assert list(comparison.results) == list(PRECISIONS)
    assert all(rate > 0 and math.isfinite(rate) for rate in rates)


def test_step_distributions_cover_the_whole_vocabulary(comparison):
    """At every step, each precision's top tokens plus "other" add up to 1 (full-vocabulary softmax)."""
    totals = comparison.step_tops.groupby(["step", "precision"])["prob"].sum()
    assert len(totals) == len(comparison.reference_ids) * len(PRECISIONS)
    assert totals.to_numpy() == pytest.approx(1.0, abs=1e-6)


def test_comparison_leaves_the_shared_model_unchanged(bundled, bundled_state, comparison):
    """Quantizing and measuring only ever call the cached model: every tensor is bit-for-bit equal."""
    after = bundled.model.state_dict()
    assert bundled_state.keys() == after.keys()
    assert all(torch.equal(bundled_state[name], after[name]) for name in bundled_state)
    assert all(p.dtype == torch.float32 and type(p) is torch.nn.Parameter for p in bundled.model.parameters())


def test_first_departure_is_the_first_differing_step_or_none():
    """Identical runs never depart; a different token or an earlier stop departs where it happens."""
    assert qc.first_departure([1, 2, 3], [1, 2, 3]) is None
    assert qc.first_departure([1, 9, 3], [1, 2, 3]) == 1
    assert qc.first_departure([1, 2], [1, 2, 3]) == 2


def test_speed_findings_call_a_slower_precision_slower_and_say_why(comparison):
    """A precision well under float32's speed is reported as slower, with the int8 reason."""
    reference = comparison.results["float32"]
    slow_int8 = _scaled(comparison.results["int8"], reference, 0.5)
    slowed = dataclasses.replace(comparison, results={**comparison.results, "int8": slow_int8})
    int8_lines = [line for line in quant_text.speed_findings(slowed) if line.startswith("**int8**")]
    assert len(int8_lines) == 1 and "slower" in int8_lines[0] and "no fused kernel" in int8_lines[0]
    assert any("GPU" in line for line in quant_text.speed_findings(slowed))


def test_speed_findings_say_every_precision_runs_transformers_forward(comparison):
    """No private kernel: the page says every copy runs through transformers' forward, and why a quantized kernel
    can still lose on one token at a time."""
    said = [line for line in quant_text.speed_findings(comparison) if "transformers' own forward" in line]
    assert len(said) == 1 and "torchao" in said[0] and "C code" not in said[0]


def test_gpt2_conv1d_layers_are_converted_then_quantized(gpt2):
    """GPT-2's Conv1D layers are not nn.Linear: the copies convert them, so int8/int4 really apply."""
    model, tokenizer = gpt2
    comparison = qc.compare_precisions(qc.quantize_all(model), tokenizer, [0, 5, 9], 6, rounds=1)
    assert comparison.conv1d_layers == 8  # 2 blocks x (c_attn, c_proj, c_fc, mlp c_proj)
    assert comparison.results["int8"].quantized_layers == 8
    assert comparison.results["int4"].quantized_layers == 8
    assert comparison.int4_group_size == 64  # n_embd 64: group 128 would skip every layer
    assert "Conv1D" in quant_text.layer_notes(comparison)[0]


def test_benchmark_rows_give_bytes_and_tokens_per_second_per_precision(bundled):
    """One row per precision with measured bytes and decode speed, for the bench script."""
    rows = qc.benchmark_rows(
        bundled.model, bundled.tokenizer, encode_prompt(bundled.tokenizer, "The cat"), max_new_tokens=8, rounds=1
    )
    assert [row["precision"] for row in rows] == list(PRECISIONS)
    assert all(row["weight_bytes"] > 0 and row["decode_tokens_per_s"] > 0 for row in rows)


def test_every_round_is_kept_and_the_speed_shown_is_their_median(comparison):
    """Each precision keeps one rate per timed round; the figure is the median round, not the best."""
    for result in comparison.results.values():
        assert len(result.round_rates) == ROUNDS == comparison.rounds
        assert result.decode_tokens_per_s == sorted(result.round_rates)[ROUNDS // 2]


def test_the_speed_ratio_is_the_median_of_same_round_ratios_with_its_range():
    """Rounds pair each precision with float32's run of the same round: the table's ratio is the median of those
    pairs and the range their extremes (a slow round for both cancels)."""
    reference = _result("float32", (100.0, 50.0, 100.0))
    bf16 = _result("bfloat16", (120.0, 60.0, 150.0))  # ratios 1.2, 1.2, 1.5
    comparison = _comparison({"float32": reference, "bfloat16": bf16})
    row = qc.summary_table(comparison).set_index("precision").loc["bfloat16"]
    assert row["speed_vs_float32"] == pytest.approx(1.2)
    assert (row["speed_low"], row["speed_high"]) == (pytest.approx(1.2), pytest.approx(1.5))
    assert (row["rate_low"], row["rate_high"]) == (60.0, 150.0)
    assert "1.20× and 1.50×" in quant_text.speed_spread(qc.summary_table(comparison))


def test_the_round_order_rotates_so_each_precision_takes_every_place():
    order = list(PRECISIONS)
    firsts = {qc.round_order(order, r)[0] for r in range(len(order))}
    assert firsts == set(order)
    assert all(sorted(qc.round_order(order, r)) == sorted(order) for r in range(7))


@pytest.mark.parametrize("fits_in_cache", [True, False])
def test_a_faster_precision_is_explained_by_bytes_from_memory_only_when_float32_does_not_fit_the_cache(
    comparison, fits_in_cache
):
    """Issue #23 item 7: "moves fewer bytes" right after "the weights sit in cache" contradicted itself."""
    reference = comparison.results["float32"]
    fast = _scaled(comparison.results["bfloat16"], reference, 2.0)
    faster = dataclasses.replace(comparison, results={**comparison.results, "bfloat16": fast})
    cache = reference.weight_bytes * (2 if fits_in_cache else 0.25)
    lines = quant_text.speed_findings(faster, cache_bytes=int(cache))
    bf16 = next(line for line in lines if line.startswith("**bfloat16**"))
    assert "faster" in bf16
    assert ("from memory per token" in bf16) is not fits_in_cache
    assert ("already stay in the cache" in bf16) is fits_in_cache
    assert ("they fit" in lines[0]) is fits_in_cache  # the sentence before says the same about the cache


def test_a_copy_that_fits_the_cache_where_float32_does_not_is_said_so(comparison):
    reference, int4 = comparison.results["float32"], comparison.results["int4"]
    cache = (reference.weight_bytes + int4.weight_bytes) // 2
    int4_line = next(line for line in quant_text.speed_findings(comparison, cache) if line.startswith("**int4**"))
    assert "fit in the" in int4_line and "where float32's" in int4_line


def test_the_gguf_speed_gap_is_explained_from_the_measured_times():
    """llama-server 5x faster than torch on the same f32 weights: the extra time per torch token, per module."""
    text = quant_text.gguf_speed_explanation(50.0, 250.0, 11_500_000, 100)
    assert "20.00 ms" in text and "4.00 ms" in text and "5.0×" in text  # 1000/50, 1000/250
    assert "16.00 ms" in text and "80%" in text and "160 µs" in text and "11.5 million FLOPs" in text
    assert quant_text.gguf_speed_explanation(250.0, 50.0, 1, 1) is None  # torch faster: nothing to explain


def test_the_comparison_counts_the_decode_arithmetic_and_the_modules_torch_dispatches(bundled, comparison):
    assert comparison.decode_flops > 2 * bundled.info.parameters * 0.5
    assert comparison.leaf_modules == qc.leaf_modules(bundled.model) > bundled.info.layers * 5


def _scaled(result, reference, factor: float):
    """`result` timed at `factor` x float32's speed in every round (the page's ratio is the rounds' median)."""
    return dataclasses.replace(
        result,
        decode_tokens_per_s=reference.decode_tokens_per_s * factor,
        round_rates=tuple(rate * factor for rate in reference.round_rates),
    )


def _result(precision: str, rates: tuple[float, ...]) -> qc.PrecisionResult:
    return qc.PrecisionResult(
        precision=precision,
        bytes_by_kind={"embeddings": 1, "lm_head": 0, "linear": 1, "other": 0},
        quantize_seconds=None,
        decode_tokens_per_s=qc.median_rate(rates),
        greedy_ids=[1],
        greedy_tokens=["a"],
        first_departure=None,
        quantized_layers=0,
        skipped_layers=[],
        round_rates=rates,
    )


def _comparison(results: dict) -> qc.PrecisionComparison:
    import pandas as pd

    steps = pd.DataFrame(
        [
            {"precision": p, "step": 0, "kl_from_reference": 0.0, "top1_agrees": True, "p_reference_token": 1.0}
            for p in results
        ]
    )
    return qc.PrecisionComparison([1], "a", [1], ["a"], results, steps, pd.DataFrame(), 64, 0, rounds=3)
