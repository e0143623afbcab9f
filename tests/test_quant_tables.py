"""The Quantization page's fit chart and calculator keep a stated runtime reserve on every card, and its KV-cache
types table (issue #27) is the Inside-the-engine lesson's formula for the loaded model."""

import pandas as pd
import pytest

from inference.core.calculator import DEFAULT_BITS, GB, fit_table, load_accelerators, load_public_models
from inference.lessons.engine_internals import kv_precision
from inference.lessons.quantization import tables as fit
from inference.lessons.quantization import text as say

pytestmark = pytest.mark.unit


def _cell(table: pd.DataFrame, model: str, bits: int) -> pd.Series:
    return table[(table["model"] == model) & (table["bits"] == bits)].iloc[0]


def test_llama_8b_in_bf16_no_longer_fits_a_t4_with_0_gb_left():
    """Issue #23 item 7: 16.06 GB of weights on a T4's 16.11 GB was called a fit with "0.0 GB left"."""
    cards = load_accelerators()
    bare = _cell(fit_table(load_public_models(), DEFAULT_BITS, cards), "Llama-3.1-8B", 16)
    assert bare["fits_on"] == "T4 16 GB" and bare["left_gb"] < 0.1  # what the page said before
    kept = _cell(fit.reserved_fit_table(load_public_models(), cards), "Llama-3.1-8B", 16)
    assert kept["fits_on"] != "T4 16 GB"
    card = next(c for c in cards if c.label == kept["fits_on"])
    assert kept["left_gb"] == pytest.approx((card.usable_bytes - fit.RUNTIME_RESERVE_BYTES) / GB - kept["weight_gb"])


def test_every_fit_leaves_the_reserve_free_and_the_calculator_follows_the_same_rule():
    cards = load_accelerators()
    table = fit.reserved_fit_table(load_public_models(), cards)
    by_label = {c.label: c for c in cards}
    for _, row in table[table["fits_on"].notna()].iterrows():
        assert row["weight_gb"] * GB + fit.RUNTIME_RESERVE_BYTES <= by_label[row["fits_on"]].usable_bytes
        holds, _ = fit.smallest_card_after_reserve(round(row["weight_gb"] * GB), cards)
        assert holds.label == row["fits_on"]


def test_a_reserve_larger_than_a_card_is_refused():
    with pytest.raises(ValueError, match="leaves nothing"):
        fit.after_reserve(load_accelerators(), 10**12)


def test_kv_types_bytes_are_the_block_formula_for_the_loaded_model():
    layers, width, context = 6, 128, 512
    table = fit.kv_types_table(layers, width, context).set_index("cache type")
    assert list(table.index) == list(fit.KV_TYPES)
    assert table.at["f32", "bytes per token"] == layers * 2 * width * 4
    assert table.at["f16", "bytes per token"] == layers * 2 * width * 2
    assert table.at["q8_0", "bytes per token"] == layers * 2 * (width // 32) * 34
    assert table.at["q4_0", "bytes per token"] == layers * 2 * (width // 32) * 18
    assert table.at["q8_0", "bits per number"] == 8.5 and table.at["q4_0", "bits per number"] == 4.5
    assert table.at["q4_0", "MiB for the full context"] == pytest.approx(layers * 2 * 4 * 18 * context / 2**20)
    assert table.at["f16", "size vs f16"] == 1.0
    assert table.at["f16", "bytes per token"] == kv_precision.kv_bytes_per_token(layers, width, "f16")
    odd = fit.kv_types_table(2, 48, 64).set_index("cache type")  # 48 numbers a row: not whole blocks of 32
    assert odd.at["f16", "bytes per token"] == 2 * 2 * 48 * 2 and pd.isna(odd.at["q8_0", "bytes per token"])


def test_measured_kv_figures_come_from_the_flash_attention_row_where_both_ran():
    measured = pd.DataFrame(
        [
            {
                "type_k": t,
                "type_v": t,
                "flash_attention": fa,
                "mean_kl_vs_f32": kl,
                "top1_agreement_vs_f32": 1.0,
                "decode_tokens_per_s": 100.0,
            }
            for t, fa, kl in [
                ("f32", False, 0.0),
                ("f16", False, 1e-6),
                ("f16", True, 2e-6),
                ("q8_0", True, 1e-4),
                ("q4_0", True, 1e-2),
            ]
        ]
    )
    table = fit.kv_types_table(6, 128, 512, measured).set_index("cache type")
    assert table.at["f16", "mean KL vs f32 cache"] == 2e-6 and table.at["q4_0", "mean KL vs f32 cache"] == 1e-2
    assert table.at["f32", "mean KL vs f32 cache"] == 0.0 and table.at["q8_0", "decode tokens/s"] == 100.0


def test_the_fit_charts_text_counts_the_models_that_fit_at_each_width_from_the_table_it_draws():
    table = fit.reserved_fit_table(load_public_models(), load_accelerators())
    said = say.fit_sentences(table, ["T4"], None, 64, 1.0)["sentence"]
    for bits in table["bits"].unique():
        fitting = int(table[table["bits"] == bits]["fits_on"].notna().sum())
        assert f"{fitting} at {bits:g} bits" in said
    largest = table.loc[table["parameters"].idxmax()]
    assert f"The largest, {largest['model']}," in said and f"{table['model'].nunique()} models" in said
    assert "× H200" in said  # the largest public model needs several of the largest card at 32 bits


def test_a_dataframe_format_reads_the_same_as_text():
    assert (
        fit.text_format("%.2f×").format(1234.5) == "1,234.50×" and fit.text_format("%.1e").format(0.00012) == "1.2e-04"
    )
    assert fit.text_format("localized").format(1234) == "1,234" and fit.text_format("percent").format(0.25) == "25%"
