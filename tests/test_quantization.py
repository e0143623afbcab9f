"""The Quantization lesson: the four torch copies compared on the bundled model, the GGUF table, the decode rate
three ways, the fit and KV tables, and the sentences that quote them (comparison words from `measuring.compare`)."""

import math
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from inference.bench import real_gguf as bench
from inference.core.calculator import DEFAULT_BITS, GB, fit_table, load_accelerators, load_public_models
from inference.core.loader import encode_prompt
from inference.core.measuring import Timing
from inference.core.quantize import PRECISIONS
from inference.lessons.quantization import experiments as qc
from inference.lessons.quantization import figures, gguf, rates, tables
from inference.lessons.quantization import text as say

pytestmark = pytest.mark.unit
MB = 1_000_000


@pytest.fixture(scope="module")
def measured(bundled):
    """The page's background measurement on the bundled model, its progress recorded and the model checked after."""
    before = {name: t.clone() for name, t in bundled.model.state_dict().items()}
    seen = []
    ids = encode_prompt(bundled.tokenizer, "Once upon a time")
    result = qc.measure(bundled.model, bundled.tokenizer, ids, 12, lambda *p: seen.append(p), "Hi", rounds=3)
    assert all(torch.equal(before[name], t) for name, t in bundled.model.state_dict().items())
    return result, seen


def test_the_comparison_keeps_every_round_and_reports_its_progress(measured):
    comparison, seen = measured
    assert comparison.prompt_text == "Hi" and list(comparison.results) == list(PRECISIONS)
    assert seen[0] == (0, 4, "Making the float32 copy") and seen[-1][2] == "Scoring every precision against float32"
    for result in comparison.results.values():
        assert len(result.round_rates) == comparison.rounds == 3
        assert result.decode_tokens_per_s == sorted(result.round_rates)[1] > 0


def test_bytes_fall_with_every_width_and_float32_has_zero_drift(bundled, measured):
    comparison, _ = measured
    table = qc.summary_table(comparison).set_index("precision")
    sizes = table["weight_bytes"].tolist()
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == 4
    assert table.at["bfloat16", "size_vs_float32"] == pytest.approx(0.5, abs=0.01)
    assert table.at["float32", "mean_kl_nats"] == 0.0 and table.at["float32", "top1_agreement"] == 1.0
    assert table.at["int4", "mean_kl_nats"] > table.at["bfloat16", "mean_kl_nats"] > 0
    assert comparison.results["float32"].first_departure is None
    totals = comparison.step_tops.groupby(["step", "precision"])["prob"].sum()  # top tokens + "other" = 1
    assert len(totals) == len(comparison.reference_ids) * 4 and totals.to_numpy() == pytest.approx(1.0, abs=1e-6)
    assert comparison.decode_flops > bundled.info.parameters and comparison.leaf_modules > bundled.info.layers * 5
    assert "linear layers quantized" in say.layer_notes(comparison)[0]


def result(precision: str, rates: tuple, weight: int = 2) -> qc.PrecisionResult:
    return qc.PrecisionResult(
        precision, {"embeddings": 0, "lm_head": 0, "linear": weight, "other": 0}, None, rates, ["a"], None
    )


def comparison_of(*results, **fields) -> qc.PrecisionComparison:
    rows = [
        {"precision": r.precision, "step": 0, "kl_from_reference": 0.0, "top1_agrees": True, "p_reference_token": 1.0}
        for r in results
    ]
    base = qc.PrecisionComparison(
        [1], "a", [1], ["a"], {r.precision: r for r in results}, pd.DataFrame(rows), None, 64, 0, 3
    )
    return base.__class__(**{**base.__dict__, **fields})


def test_first_departure_and_the_speed_ratio_as_the_median_of_same_round_ratios():
    assert qc.first_departure([1, 2, 3], [1, 2, 3]) is None
    assert qc.first_departure([1, 9, 3], [1, 2, 3]) == 1 and qc.first_departure([1, 2], [1, 2, 3]) == 2
    bf16 = result("bfloat16", (120.0, 60.0, 150.0))  # against (100, 50, 100): ratios 1.2, 1.2, 1.5
    row = (
        qc.summary_table(comparison_of(result("float32", (100.0, 50.0, 100.0)), bf16))
        .set_index("precision")
        .loc["bfloat16"]
    )
    assert (row["speed_vs_float32"], row["speed_low"], row["speed_high"]) == pytest.approx((1.2, 1.2, 1.5))
    assert (row["rate_low"], row["rate_high"]) == (60.0, 150.0)


@pytest.mark.parametrize("fits_in_cache", [True, False])
def test_a_faster_copy_is_explained_by_memory_only_when_float32_does_not_fit_the_cache(fits_in_cache):
    """Issue #23 item 7: "moves fewer bytes" right after "the weights sit in cache" contradicted itself."""
    both = comparison_of(result("float32", (100.0, 101.0, 99.0), 400), result("bfloat16", (200.0, 202.0, 198.0), 200))
    lines = say.speed_findings(both, cache_bytes=800 if fits_in_cache else 100)
    bf16 = next(line for line in lines if line.startswith("**bfloat16**"))
    assert "2.0x faster" in bf16 and ("2.0x fewer bytes from memory" in bf16) is not fits_in_cache
    assert ("already stay in the cache" in bf16) is fits_in_cache


def test_a_difference_inside_the_rounds_noise_gets_no_comparison_word():
    both = comparison_of(result("float32", (100.0, 60.0, 140.0)), result("int8", (105.0, 62.0, 150.0), 1))
    line = next(x for x in say.speed_findings(both, 10) if "**int8**" in x)
    assert "about the same speed (within this machine's noise)" in line


def test_the_gguf_gap_is_the_time_torch_spends_beyond_the_same_arithmetic():
    torch_run = comparison_of(result("float32", (50.0,)), decode_flops=11_500_000, leaf_modules=100)
    server = SimpleNamespace(results={"f32": SimpleNamespace(decode_tokens_per_s=250.0)})
    text = say.gguf_gap(torch_run, server)
    assert "20.00 ms" in text and "4.00 ms" in text and "5.0x longer" in text and "160 µs" in text
    server.results["f32"].decode_tokens_per_s = 40.0
    assert say.gguf_gap(torch_run, server) == ""  # torch faster: nothing to explain


def test_the_bytes_table_is_the_parameter_count_times_each_width(bundled):
    count = tables.parameters(bundled.model)
    frame = tables.bytes_table(bundled.model, bundled.info.name)
    assert frame["weight bytes"].tolist() == [count * 4, count * 2, count, round(count / 2)]
    assert "8.0x fewer bytes" in say.bytes_sentences(frame, count)[0]


# -- llama-server's GGUF rows ---------------------------------------------------------------------------------


def gguf_result(rates_by_type: dict, tops=None, answers=None) -> gguf.GGUFResult:
    sizes = {"f32": 500 * MB, "q8_0": 143 * MB, "q4_K_M": 105 * MB, "Q4_1": 98 * MB}
    tops, answers = tops or {}, answers or {}
    results = {
        t: gguf.TypeResult(t, sizes[t] + 1_800_000, r, tops.get(t, []), answers.get(t, [1]), "x", sizes[t])
        for t, r in rates_by_type.items()
    }
    return gguf.GGUFResult("Why?", 30, [1], "The sky is blue.", results, 4, 64, 2)


def test_coarse_kl_is_zero_for_equal_lists_and_a_lower_bound_of_the_full_kl():
    p, q = {1: 0.7, 2: 0.2, 3: 0.1}, {1: 0.5, 2: 0.3, 3: 0.2}
    full = sum(p[t] * math.log(p[t] / q[t]) for t in p)
    assert gguf.coarse_kl(p, dict(p)) == pytest.approx(0.0, abs=1e-12) and gguf.coarse_kl(p, q) == pytest.approx(full)
    assert 0 <= gguf.coarse_kl(p, {1: 0.5, 2: 0.3}) <= full + 1e-12  # token 3 merged into "other" on both sides


def test_the_gguf_table_and_sentences_come_from_the_measurement():
    same, other = [{5: 0.9, 6: 0.1}] * 4, [{5: 0.8, 6: 0.2}] * 3 + [{6: 0.6, 5: 0.4}]
    measured = gguf_result(
        {"f32": [50.0, 52.0], "q8_0": [96.0, 98.0], "q4_K_M": [90.0, 94.0], "Q4_1": [95.0, 95.0]},
        {"f32": same, "q8_0": other, "q4_K_M": other, "Q4_1": same},
        {"f32": [1, 2, 3], "q8_0": [1, 2, 4], "q4_K_M": [1, 2, 4], "Q4_1": [1, 2, 3]},
    )
    frame = gguf.table(measured)
    assert frame["speed vs f32"].tolist()[:2] == pytest.approx([1.0, 97 / 51])
    assert frame.loc[1, "same top-1 as f32"] == 0.75 and frame.loc[3, "mean KL from f32 (nats)"] == pytest.approx(0)
    said = say.gguf_sentences(measured, frame)
    assert "q8_0 97 tokens/s (1.9x faster than f32)" in said["speed"] and "busy" not in said["speed"]
    assert "Q4_1 gave the same tokens" in said["answer"] and "q8_0, q4_K_M departed" in said["answer"]


def test_a_busy_machine_is_named_and_one_token_per_second_is_singular():
    """#46: f32 at 1 token/s, a 35x speed-up from 5.5x fewer bytes, rounds far apart: the sentence says busy."""
    busy = gguf_result({"f32": [0.6, 1.4], "q8_0": [30.0, 34.0], "q4_K_M": [31.0, 33.0], "Q4_1": [34.0, 36.0]})
    speed = say.gguf_sentences(busy, gguf.table(busy))["speed"]
    assert "machine was busy" in speed and "1 token/s" in speed and "f32 differed by 133%" in speed


def test_gguf_bytes_read_per_token_leave_the_header_out_and_an_untied_table(tmp_path):
    import numpy as np
    from gguf import GGUFWriter

    def write(path, untied: bool):
        writer = GGUFWriter(str(path), "llama")
        writer.add_string("tokenizer.note", "x" * 10_000)  # header bytes, not read per token
        for name in ("token_embd.weight", "output.weight") if untied else ("token_embd.weight",):
            writer.add_tensor(name, np.zeros((100, 8), dtype=np.float32))
        writer.add_tensor("blk.0.ffn_up.weight", np.zeros((8, 8), dtype=np.float32))
        writer.write_header_to_file(), writer.write_kv_data_to_file(), writer.write_tensors_to_file(), writer.close()
        return path

    tied = write(tmp_path / "tied.gguf", untied=False)
    assert gguf.bytes_read_per_token(tied) == (100 * 8 + 8 * 8) * 4 < tied.stat().st_size
    assert gguf.bytes_read_per_token(write(tmp_path / "untied.gguf", untied=True)) == (8 * 8 + 100 * 8) * 4


def test_the_bench_returns_nothing_with_a_reason_without_llama_server(monkeypatch, capsys):
    monkeypatch.setattr(gguf.llamacpp, "is_built", lambda: False)
    assert bench.real_gguf_figures() == {} and "llama-server is not built" in capsys.readouterr().out


# -- the decode rate three ways --------------------------------------------------------------------------------


def fake_rate(step_ms: float, weights: int, bandwidth: float, cache: int | None, quartiles=(0.9, 1.1)):
    timing = Timing((step_ms * quartiles[0], step_ms, step_ms * quartiles[1]), 3, "one decode step")
    return rates.TransformersRate(
        "SmolLM2", "float32", weights, timing, 1, rates.Bandwidth(bandwidth, 2, "a sum"), cache, "Test CPU 9000"
    )


def test_the_limit_is_bytes_over_bandwidth_and_the_sentences_quote_both_engines():
    rate = fake_rate(50.0, 500 * MB, 25e9, 32 * 2**20)
    servers = gguf_result({"f32": [40.0], "q8_0": [80.0]})
    frame = rates.table(rate, servers)
    assert frame["weights"].tolist() == ["float32", "f32", "q8_0"]  # most bytes first
    assert frame["bandwidth limit tokens/s"].tolist() == pytest.approx((25e9 / frame["bytes per token"]).tolist())
    assert frame.loc[0, "measured tokens/s"] == 20.0 and frame["fits in cache"].tolist() == ["no"] * 3
    gap = say.rates_sentences(frame, rate, servers, False)["gap"]
    assert "at most 50 tokens/s" in gap and "llama-server reaches 80% of it at f32 (40 tokens/s)" in gap
    assert "q8_0 reads 143 MB per token" in gap and "above its limit" not in gap
    assert (
        "llama-server q8_0 80 tokens/s of a 175 tokens/s limit (46%)"
        in say.rates_sentences(frame, rate, None, 0)["chart"]
    )
    bars = [t for t in figures.rates_bars(frame).data if t.type == "bar"]
    assert {b.marker.pattern.shape for b in bars} == {"/", ""}  # the engines differ by pattern, not colour alone


@pytest.mark.parametrize(
    "step_ms, weights, bandwidth, cache, said",
    [
        (2.0, 23 * MB, 6.5e9, 480 * 2**20, "23 MB fit in this machine's 480 MiB last-level cache"),
        (10.0, 538 * MB, 5e9, 32 * 2**20, "do not fit in the 32 MiB cache"),  # the bandwidth was read low
        (10.0, 538 * MB, 5e9, None, "does not report its cache size"),
    ],
)
def test_a_rate_above_its_limit_is_explained_by_where_its_weights_fit(step_ms, weights, bandwidth, cache, said):
    rate = fake_rate(step_ms, weights, bandwidth, cache)
    frame = rates.table(rate)
    gap = say.rates_sentences(frame, rate, None, False)["gap"]
    assert f"goes above its limit ({frame.loc[0, 'share of the limit']:.0%}" in gap and said in gap


def test_the_torch_copies_join_as_transformers_rows_and_spread_timings_say_busy():
    copies = SimpleNamespace(
        results={p: result(p, (r,), w * MB) for p, r, w in [("float32", 99.0, 500), ("int8", 8.0, 160)]}
    )
    rate = fake_rate(50.0, 500 * MB, 25e9, None, quartiles=(0.5, 1.5))
    frame = rates.table(rate, None, copies)
    assert frame["weights"].tolist() == ["float32", "int8 copy"] and frame.loc[0, "measured tokens/s"] == 20.0
    gap = say.rates_sentences(frame, rate, None, True)["gap"]
    assert "int8 copy 5%" in gap and "transformers' middle half of steps differed by" in gap


# -- will it fit, and the KV cache's number types ---------------------------------------------------------------


def test_every_fit_leaves_the_runtime_reserve_free_and_the_calculator_follows_the_same_rule():
    """Issue #23 item 7: Llama-3.1-8B's 16.06 GB in bf16 on a T4's 16.11 GB was called a fit with "0.0 GB left"."""
    cards = load_accelerators()
    bare = fit_table(load_public_models(), DEFAULT_BITS, cards)
    assert bare[(bare["model"] == "Llama-3.1-8B") & (bare["bits"] == 16)].iloc[0]["fits_on"] == "T4 16 GB"
    table = tables.reserved_fit_table(load_public_models(), cards)
    by_label = {c.label: c for c in cards}
    for _, row in table[table["fits_on"].notna()].iterrows():
        assert row["weight_gb"] * GB + tables.RUNTIME_RESERVE_BYTES <= by_label[row["fits_on"]].usable_bytes
        assert tables.smallest_card_after_reserve(round(row["weight_gb"] * GB), cards)[0].label == row["fits_on"]
    said = say.fit_sentences(table, ["T4"], None, 64, 1.0)["sentence"]
    for bits in table["bits"].unique():
        assert f"{int(table[table['bits'] == bits]['fits_on'].notna().sum())} at {bits:g} bits" in said


def test_kv_types_bytes_are_the_block_formula_with_the_measured_flash_attention_row():
    layers, width, context = 6, 128, 512
    measured = pd.DataFrame(
        [
            {"type_k": t, "type_v": t, "flash_attention": fa, "mean_kl_vs_f32": kl}
            | {"top1_agreement_vs_f32": 1.0, "decode_tokens_per_s": 100.0}
            for t, fa, kl in [("f32", False, 0.0), ("f16", False, 1e-6), ("f16", True, 2e-6), ("q4_0", True, 1e-2)]
        ]
    )
    table = tables.kv_types_table(layers, width, context, measured).set_index("cache type")
    assert table["bytes per token"].tolist() == [layers * 2 * n for n in (width * 4, width * 2, 4 * 34, 4 * 18)]
    assert table.at["q8_0", "bits per number"] == 8.5 and table.at["f16", "size vs f16"] == 1.0
    assert table.at["q4_0", "MiB for the full context"] == pytest.approx(layers * 2 * 4 * 18 * context / 2**20)
    assert table.at["f16", "mean KL vs f32 cache"] == 2e-6 and pd.isna(table.at["q8_0", "mean KL vs f32 cache"])
    assert pd.isna(tables.kv_types_table(2, 48, 64).set_index("cache type").at["q8_0", "bytes per token"])


def test_a_dataframe_format_reads_the_same_as_text():
    assert (
        tables.text_format("%.2f×").format(1234.5) == "1,234.50×"
        and tables.text_format("%.1e").format(1.2e-4) == "1.2e-04"
    )
    assert (
        tables.text_format("localized").format(1234) == "1,234" and tables.text_format("percent").format(0.25) == "25%"
    )
