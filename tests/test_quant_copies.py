"""The four torch copies compared (`experiments`) and what the page says of them (`text`): real byte savings, a
zero-drift reference, the rounds' medians, reasons chosen by the measured direction and the cache, the shared model
left untouched."""

import dataclasses

import pandas as pd
import pytest
import torch

from inference.core.loader import encode_prompt
from inference.core.quantize import PRECISIONS, weight_bytes_by_kind
from inference.lessons.quantization import experiments as qc
from inference.lessons.quantization import tables
from inference.lessons.quantization import text as say

pytestmark = pytest.mark.unit

NEW_TOKENS = 16
ROUNDS = 3


@pytest.fixture(scope="module")
def bundled_state(bundled):
    return {name: tensor.clone() for name, tensor in bundled.model.state_dict().items()}


@pytest.fixture(scope="module")
def comparison(bundled, bundled_state):
    """The page's background measurement, its progress recorded."""
    seen = []
    ids = encode_prompt(bundled.tokenizer, "Once upon a time")
    result = qc.measure(bundled.model, bundled.tokenizer, ids, NEW_TOKENS, lambda *p: seen.append(p), shown_prompt="Hi")
    return result, seen


def test_the_measurement_reports_progress_shows_the_users_prompt_and_keeps_every_round(comparison):
    comparison, seen = comparison
    assert comparison.prompt_text == "Hi" and list(comparison.results) == list(PRECISIONS)
    assert seen[0] == (0, len(PRECISIONS), "Making the float32 copy")
    assert seen[-1][2] == "Scoring every precision against float32"
    for result in comparison.results.values():
        assert len(result.round_rates) == qc.SPEED_ROUNDS == comparison.rounds
        assert result.decode_tokens_per_s == sorted(result.round_rates)[qc.SPEED_ROUNDS // 2] > 0


def test_a_cancel_raised_by_progress_stops_the_measurement(bundled):
    def cancel_at_timing(done, total, what):
        if what.startswith("Timing"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        qc.measure(bundled.model, bundled.tokenizer, [0, 5, 9], 4, cancel_at_timing)


def test_bytes_fall_with_every_width_and_the_linear_layers_shrink_2x_and_4x_from_bf16(comparison):
    comparison, _ = comparison
    table = qc.summary_table(comparison).set_index("precision")
    sizes = [table.at[p, "weight_bytes"] for p in PRECISIONS]
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == 4
    assert table.at["float32", "size_vs_float32"] == 1.0
    assert table.at["bfloat16", "size_vs_float32"] == pytest.approx(0.5, abs=0.01)
    linear = table["linear_bytes"]
    assert 1.9 < linear["bfloat16"] / linear["int8"] <= 2.0 and 3.0 < linear["bfloat16"] / linear["int4"] < 4.2


def test_float32_has_zero_drift_and_the_copies_drift_a_little(comparison):
    comparison, _ = comparison
    table = qc.summary_table(comparison).set_index("precision")
    assert table.at["float32", "mean_kl_nats"] == 0.0 and table.at["float32", "top1_agreement"] == 1.0
    assert comparison.results["float32"].first_departure is None
    assert table.at["int8", "top1_agreement"] >= 0.9
    assert table.at["int4", "mean_kl_nats"] > table.at["bfloat16", "mean_kl_nats"] > 0
    totals = comparison.step_tops.groupby(["step", "precision"])["prob"].sum()  # top tokens + "other" = 1
    assert len(totals) == len(comparison.reference_ids) * len(PRECISIONS)
    assert totals.to_numpy() == pytest.approx(1.0, abs=1e-6)


def test_the_shared_model_is_left_unchanged(bundled, bundled_state, comparison):
    after = bundled.model.state_dict()
    assert all(torch.equal(bundled_state[name], after[name]) for name in bundled_state)
    assert all(p.dtype == torch.float32 and type(p) is torch.nn.Parameter for p in bundled.model.parameters())


def test_the_comparison_counts_the_decode_arithmetic_and_the_modules_torch_dispatches(bundled, comparison):
    comparison, _ = comparison
    assert comparison.decode_flops > bundled.info.parameters
    assert comparison.leaf_modules == qc.leaf_modules(bundled.model) > bundled.info.layers * 5


def test_first_departure_and_round_order():
    assert qc.first_departure([1, 2, 3], [1, 2, 3]) is None
    assert qc.first_departure([1, 9, 3], [1, 2, 3]) == 1 and qc.first_departure([1, 2], [1, 2, 3]) == 2
    order = list(PRECISIONS)
    assert {qc.round_order(order, r)[0] for r in range(4)} == set(order)


def test_gpt2_conv1d_layers_are_converted_then_quantized(gpt2):
    model, tokenizer = gpt2
    comparison = qc.compare_precisions(qc.quantize_all(model), tokenizer, [0, 5, 9], 4, rounds=1)
    assert comparison.conv1d_layers == comparison.results["int4"].quantized_layers == 8
    assert comparison.int4_group_size == 64  # n_embd 64: group 128 would skip every layer
    assert "Conv1D" in say.layer_notes(comparison)[0]


def test_the_speed_ratio_is_the_median_of_same_round_ratios_with_its_range():
    bf16 = _result("bfloat16", (120.0, 60.0, 150.0))  # against (100, 50, 100): ratios 1.2, 1.2, 1.5
    table = qc.summary_table(_comparison({"float32": _result("float32", (100.0, 50.0, 100.0)), "bfloat16": bf16}))
    row = table.set_index("precision").loc["bfloat16"]
    assert row["speed_vs_float32"] == pytest.approx(1.2)
    assert (row["speed_low"], row["speed_high"]) == (pytest.approx(1.2), pytest.approx(1.5))
    assert (row["rate_low"], row["rate_high"]) == (60.0, 150.0)


@pytest.mark.parametrize("fits_in_cache", [True, False])
def test_a_faster_copy_is_explained_by_memory_only_when_float32_does_not_fit_the_cache(fits_in_cache):
    """Issue #23 item 7: "moves fewer bytes" right after "the weights sit in cache" contradicted itself."""
    base = _result("float32", (100.0, 101.0, 99.0), weight=400)
    fast = _result("bfloat16", (200.0, 202.0, 198.0), weight=200)
    lines = say.speed_findings(
        _comparison({"float32": base, "bfloat16": fast}), cache_bytes=800 if fits_in_cache else 100
    )
    bf16 = next(line for line in lines if line.startswith("**bfloat16**"))
    assert "2.0x faster" in bf16 and ("2.0x fewer bytes from memory" in bf16) is not fits_in_cache
    assert ("already stay in the cache" in bf16) is fits_in_cache
    assert ("they fit" in lines[0]) is fits_in_cache


def test_a_difference_inside_the_rounds_noise_gets_no_comparison_word():
    base = _result("float32", (100.0, 60.0, 140.0))
    int8 = _result("int8", (105.0, 62.0, 150.0), weight=100)
    line = next(x for x in say.speed_findings(_comparison({"float32": base, "int8": int8}), 10) if "**int8**" in x)
    assert "about the same speed (within this machine's noise)" in line and "no fused kernel" in line


def test_the_gguf_gap_is_the_time_torch_spends_beyond_the_same_arithmetic():
    comparison = _comparison({"float32": _result("float32", (50.0,))})
    comparison = dataclasses.replace(comparison, decode_flops=11_500_000, leaf_modules=100)
    server = type("G", (), {"results": {"f32": type("T", (), {"decode_tokens_per_s": 250.0})}})
    text = say.gguf_gap(comparison, server)
    assert "20.00 ms" in text and "4.00 ms" in text and "5.0x longer" in text and "160 µs" in text
    server.results["f32"].decode_tokens_per_s = 40.0
    assert say.gguf_gap(comparison, server) == ""  # torch faster: nothing to explain


def test_the_bytes_table_is_the_parameter_count_times_each_width(bundled):
    count = tables.parameters(bundled.model)
    frame = tables.bytes_table(bundled.model, bundled.info.name)
    assert frame["weight bytes"].tolist() == [count * 4, count * 2, count, round(count / 2)]
    sentence, _ = say.bytes_sentences(frame, count)
    assert f"{count * 4 / 1e6:,.0f} MB in float32" in sentence and "8.0x fewer bytes" in sentence
    assert sum(weight_bytes_by_kind(bundled.model).values()) == count * 4


def _result(precision: str, rates: tuple[float, ...], weight: int = 2) -> qc.PrecisionResult:
    return qc.PrecisionResult(
        precision=precision,
        bytes_by_kind={"embeddings": weight // 2, "lm_head": 0, "linear": weight - weight // 2, "other": 0},
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
    steps = pd.DataFrame(
        [
            {"precision": p, "step": 0, "kl_from_reference": 0.0, "top1_agrees": True, "p_reference_token": 1.0}
            for p in results
        ]
    )
    return qc.PrecisionComparison([1], "a", [1], ["a"], results, steps, pd.DataFrame(), 64, 0, rounds=3)
