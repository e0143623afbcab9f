"""Tests for inference/core/calculator.py and assets/public_models.json.

Every expected number below is worked out by hand in the test (as a literal or as
plain arithmetic on the architecture numbers), never by calling the code under test.
"""

import contextlib
import io
import json
import subprocess
import sys

import pytest

from inference.core import calculator as calc
from inference.core import model_config

pytestmark = pytest.mark.unit

GB = 10**9
MIB = 2**20


@pytest.fixture(scope="module")
def models():
    return {m["name"]: m for m in calc.load_public_models()}


# ------------------------------------------------------------------- weight_bytes


def test_weight_bytes():
    assert calc.weight_bytes(8_030_261_248, 16) == 16_060_522_496
    assert calc.weight_bytes(8_030_261_248, 4) == 4_015_130_624
    assert calc.weight_bytes(124_439_808, 32) == 497_759_232
    # fractional bits round up to a whole byte: 3 params x 4.5 bits = 13.5 bits -> 2 bytes
    assert calc.weight_bytes(3, 4.5) == 2


# ----------------------------------------------------------------------- kv_table


def test_kv_table_llama31_8b_and_gqa_saving(models):
    table = calc.kv_table([models["Llama-3.1-8B"]], context=131_072, batch=1, precision="bfloat16")
    row = table.set_index("model").loc["Llama-3.1-8B"]
    assert row["kv_gb"] == pytest.approx(17.179869184)
    # without GQA every one of the 32 query heads keeps K and V: 2 x 32 x 32 x 128 x 131072 x 2
    assert row["kv_gb_without_gqa"] == pytest.approx(68.719476736)
    assert row["gqa_saving"] == pytest.approx(4.0)  # 32 heads / 8 kv heads
    assert row["weight_gb"] == pytest.approx(16.060522496)  # 8,030,261,248 x 2 bytes
    assert row["kv_per_token_mb"] == pytest.approx(0.131072)
    assert not row["exceeds_context"]


def test_kv_table_gpt2_has_no_gqa_saving(models):
    table = calc.kv_table([models["GPT-2 (124M)"]], context=1024, batch=1, precision="float32")
    row = table.iloc[0]
    assert row["kv_gb"] == pytest.approx(0.075497472)
    assert row["kv_gb_without_gqa"] == pytest.approx(0.075497472)
    assert row["gqa_saving"] == pytest.approx(1.0)
    assert row["weight_gb"] == pytest.approx(0.497759232)  # 124,439,808 x 4 bytes
    assert row["attention"] == "MHA"


def test_kv_table_qwen_batch_and_context_flag(models):
    # Qwen2.5-7B: 2 x 28 layers x 4 kv heads x 128 x 32768 tokens x batch 8 x 2 bytes
    table = calc.kv_table([models["Qwen2.5-7B"], models["GPT-2 (124M)"]], context=32_768, batch=8)
    by_name = table.set_index("model")
    assert by_name.loc["Qwen2.5-7B", "kv_gb"] == pytest.approx(15.032385536)
    assert by_name.loc["Qwen2.5-7B", "gqa_saving"] == pytest.approx(7.0)  # 28 / 4
    assert not by_name.loc["Qwen2.5-7B", "exceeds_context"]
    assert by_name.loc["GPT-2 (124M)", "exceeds_context"]  # GPT-2 stops at 1024 positions


def test_kv_table_uses_mla_formula_for_deepseek(models):
    table = calc.kv_table([models["DeepSeek-V3"]], context=163_840, precision="bfloat16")
    row = table.iloc[0]
    assert row["attention"] == "MLA"
    assert row["kv_gb"] == pytest.approx(11.51336448)
    # uncompressed: 61 layers x 128 heads x (128 + 64 key + 128 value) x 163840 x 2 bytes
    assert row["kv_gb_without_gqa"] == pytest.approx(818.7281408)
    assert row["gqa_saving"] == pytest.approx(40_960 / 576)


def test_kv_table_weights_count_every_expert(models):
    table = calc.kv_table([models["Mixtral-8x7B"]], context=4096, precision="bfloat16")
    assert table.iloc[0]["weight_gb"] == pytest.approx(93.405585408)  # 46,702,792,704 x 2
    # attention is shared across experts: same KV per token as Mistral-7B (2 x 32 x 8 x 128 x 2)
    assert table.iloc[0]["kv_per_token_mb"] == pytest.approx(0.131072)


# ------------------------------------------------------------------ model data


REQUIRED = {
    "GPT-2 (124M)",
    "SmolLM2-135M",
    "Llama-3.1-8B",
    "Llama-3.1-70B",
    "Qwen2.5-7B",
    "Gemma-2-9B",
    "Qwen2.5-0.5B",
    "SmolLM2-1.7B",
    "Llama-3.2-1B",
    "Mixtral-8x7B",
}


def test_public_models_cover_the_required_list(models):
    assert set(models) >= REQUIRED
    assert any(name.startswith("Mistral-7B") for name in models)
    assert {"Qwen3-30B-A3B", "DeepSeek-V3"} & set(models)


def test_every_entry_links_its_hub_config(models):
    for model in models.values():
        url = model["source"]["config_json"]
        assert url == f"https://huggingface.co/{model['hub_id']}/blob/main/config.json", model["name"]
        assert model["notes"]


def test_architecture_numbers_from_configs(models):
    llama = models["Llama-3.1-8B"]
    assert (llama["layers"], llama["attention_heads"], llama["kv_heads"], llama["head_dim"]) == (32, 32, 8, 128)
    assert (llama["context"], llama["vocab_size"]) == (131_072, 128_256)
    gemma = models["Gemma-2-9B"]
    assert (gemma["attention_heads"], gemma["kv_heads"], gemma["head_dim"], gemma["hidden_size"]) == (16, 8, 256, 3584)
    smol = models["SmolLM2-135M"]
    assert (smol["layers"], smol["attention_heads"], smol["kv_heads"], smol["hidden_size"]) == (30, 9, 3, 576)


def test_parameter_counts_match_hand_formula(models):
    # Llama-3.1-8B, untied: embed + lm_head + 32 x (q,o 4096x4096; k,v 4096x1024; 3 MLP 4096x14336; 2 norms) + final norm
    per_layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    assert models["Llama-3.1-8B"]["parameters"] == 2 * 128_256 * 4096 + 32 * per_layer + 4096 == 8_030_261_248
    # GPT-2, tied: wte + wpe + 12 x (2 LN, qkv+bias, proj+bias, 2 LN, fc+bias, proj+bias) + final LN
    h = 768
    layer = 2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (4 * h * h + 4 * h) + (4 * h * h + h)
    assert models["GPT-2 (124M)"]["parameters"] == 50_257 * h + 1024 * h + 12 * layer + 2 * h == 124_439_808


def test_moe_entries_have_active_below_total(models):
    mixtral = models["Mixtral-8x7B"]
    assert (mixtral["experts"], mixtral["experts_per_token"]) == (8, 2)
    # active = total - 6 idle experts x 32 layers x 3 x 4096 x 14336
    assert mixtral["active_parameters"] == mixtral["parameters"] - 6 * 32 * 3 * 4096 * 14336
    for model in models.values():
        if model["experts"] is None:
            assert model["active_parameters"] == model["parameters"], model["name"]
        else:
            assert model["active_parameters"] < model["parameters"], model["name"]


def test_every_public_entry_is_complete_and_consistent(models):
    """The checks the calculator no longer runs on its own JSON: every field, positive sizes, active <= total,
    experts both set or both null, MLA's latent sizes, a shape the one config reader accepts, unique names."""
    assert len(models) == len(calc.load_public_models())  # no name twice
    sizes = ("parameters", "active_parameters", "layers", "attention_heads", "kv_heads", "head_dim", "hidden_size")
    sizes += ("context", "vocab_size")
    for name, model in models.items():
        assert {*sizes, "name", "hub_id", "experts", "experts_per_token", "source", "notes"} <= set(model), name
        assert all(isinstance(model[f], int) and model[f] > 0 for f in sizes), name
        assert (model["experts"] is None) == (model["experts_per_token"] is None), name
        if model["experts"] is not None:
            assert 0 < model["experts_per_token"] <= model["experts"], name
        if model.get("attention") == "MLA":
            assert {"kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"} <= set(model["mla"]), name
        model_config.from_public_entry(model)  # kv_heads divides heads, windows, layer pattern
    for card in calc.load_accelerators():
        assert card.usable_bytes > 0 and card.label and card.source


def test_model_entry_from_hf_config():
    """A config.json dict becomes an entry whose KV bytes follow the hand formula."""
    config = {
        "num_hidden_layers": 8,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "hidden_size": 256,
        "max_position_embeddings": 512,
        "vocab_size": 32_000,
    }
    entry = calc.model_entry_from_hf_config(config, name="tiny", parameters=6_000_000)
    assert entry["head_dim"] == 32  # 256 / 8
    assert entry["attention"] == "GQA"
    # 2 x 8 layers x 4 kv heads x 32 x 512 tokens x 4 bytes
    assert calc.estimate(entry, 512, 1, "float32", accelerators=()).kv_bytes == 4_194_304


# ------------------------------------------------------------------ accelerators


def test_accelerators_hold_the_bytes_nvidia_smi_reports():
    """Cards are sized by nvidia-smi's MiB, not by their label: an H200 "141 GB" holds 143,771 MiB."""
    cards = {card.label: card for card in calc.load_accelerators()}
    assert cards["H200 141 GB"].usable_bytes == 143_771 * MIB == 150_754_820_096
    assert cards["H100 80 GB"].usable_bytes == 81_559 * MIB
    assert [c.usable_bytes for c in calc.load_accelerators()] == sorted(c.usable_bytes for c in cards.values())
    assert {"T4 16 GB", "A10 24 GB", "A100 40 GB"} <= set(cards)
    assert all(card.source for card in cards.values())


def test_llama_70b_16_bit_weights_fit_one_h200_with_about_9_gb_left(models):
    """141,107,412,992 bytes of weights on 150,754,820,096 usable: one card, 9.65 GB left."""
    fit = calc.fit_table([models["Llama-3.1-70B"]], bits_list=(16, 8, 4))
    rows = fit.set_index("bits")
    assert rows.at[16, "weight_gb"] == pytest.approx(141.107412992)
    assert rows.at[16, "fits_on"] == "H200 141 GB"
    assert rows.at[16, "left_gb"] == pytest.approx((150_754_820_096 - 141_107_412_992) / GB)
    assert rows.at[16, "largest_needed"] == 1
    assert rows.at[8, "fits_on"] == "H100 80 GB"  # 70.55 GB < 85.52 GB
    assert rows.at[4, "fits_on"] == "A100 40 GB"  # 35.28 GB < 42.95 GB


def test_smallest_card_is_the_first_that_holds_the_bytes_exactly_at_its_edge():
    cards = calc.load_accelerators()
    assert calc.smallest_card(cards[0].usable_bytes, cards) is cards[0]
    assert calc.smallest_card(cards[0].usable_bytes + 1, cards) is cards[1]
    assert calc.smallest_card(cards[-1].usable_bytes + 1, cards) is None


def test_fit_table_uses_usable_bytes_at_the_edge(models):
    """Llama-3.1-8B in 16 bits (16.06 GB) fits a T4's 16.11 GB of nvidia-smi memory."""
    fit = calc.fit_table([models["Llama-3.1-8B"]], bits_list=(32, 16))
    assert fit.set_index("bits").at[16, "fits_on"] == "T4 16 GB"
    assert fit.set_index("bits").at[32, "fits_on"] == "A100 40 GB"  # 32.12 GB


# ---------------------------------------------------------------------- estimate


def test_estimate_counts_weights_int4_scales_and_kv_for_the_cards(models):
    """Llama-3.1-8B, 8192 tokens x 4 in int4: 0.5 byte weights + 4 bytes per 128 weights + int4 cache."""
    result = calc.estimate(models["Llama-3.1-8B"], 8192, 4, "int4", kv_dtype="bfloat16")
    assert result.weight_bytes == 8_030_261_248 // 2
    assert result.scale_bytes == 8_030_261_248 // 128 * 4  # 8,030,261,248 is a multiple of 128
    assert result.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2
    assert result.kv_bytes == 131_072 * 8192 * 4
    total = 4_015_130_624 + 250_945_664 + 4_294_967_296
    assert result.total_bytes == total
    assert result.cards["T4 16 GB"] == 1 and result.cards["H200 141 GB"] == 1
    assert result.left_on_one_card["T4 16 GB"] == 15_360 * MIB - total


def test_estimate_splits_across_cards_when_one_is_not_enough(models):
    """Llama-3.1-70B in bf16 with 128K tokens: 141.1 GB weights + 42.9 GB cache need two H200s."""
    result = calc.estimate(models["Llama-3.1-70B"], 131_072, 1, "bfloat16")
    assert result.kv_bytes == 2 * 80 * 8 * 128 * 2 * 131_072
    assert result.cards["H200 141 GB"] == 2
    assert result.cards["H100 80 GB"] == -(-(141_107_412_992 + 42_949_672_960) // (81_559 * MIB))


@pytest.mark.parametrize(
    "tokens, batch, message",
    [
        (-1, 1, "tokens must be a positive whole number, got -1"),
        (10**9, 1, "tokens must be at most"),
        (10, 0, "batch must be a positive whole number, got 0"),
        (10, 10**7, "batch must be at most"),
    ],
)
def test_estimate_refuses_bad_sizes_naming_the_value(models, tokens, batch, message):
    """Negative, zero and absurd sizes are refused with the value in the message."""
    with pytest.raises(ValueError, match=message):
        calc.estimate(models["GPT-2 (124M)"], tokens, batch)


def test_kv_table_counts_sliding_windows_and_keeps_notes(models):
    """Mistral-7B-v0.1's cache stops growing at 4096 tokens; each row carries the model's notes."""
    table = calc.kv_table([models["Mistral-7B-v0.1"]], context=32_768).set_index("model")
    assert table.at["Mistral-7B-v0.1", "kv_gb"] == pytest.approx(32 * 4096 * 4096 / GB)
    assert table.at["Mistral-7B-v0.1", "sliding_layers"] == 32
    assert "4096" in table.at["Mistral-7B-v0.1", "notes"]


# ------------------------------------------------------------------ command line


def run_cli(*args):
    """The command as `python -m inference.core.calculator` runs it (one test), its exit code and output."""
    return subprocess.run(
        [sys.executable, "-m", "inference.core.calculator", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"},
    )


def call_cli(*args) -> subprocess.CompletedProcess:
    """`calculator.main` called here (a new Python for each case cost seconds of imports): the same exit code and
    output as the command, argparse's own exits included."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = calc.main(list(args))
        except SystemExit as exit_:
            code = exit_.code
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def test_cli_json_has_the_documented_keys_and_hand_computed_numbers():
    """--json prints one object: Qwen2.5-7B at 32768 tokens x 2 in bf16, numbers worked out here."""
    done = run_cli("Qwen2.5-7B", "--tokens", "32768", "--batch", "2", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert {"model", "tokens", "batch", "dtype", "kv_bytes_per_token", "kv_bytes", "weight_bytes", "cards"} <= set(
        result
    )
    assert (result["model"], result["tokens"], result["batch"], result["dtype"]) == ("Qwen2.5-7B", 32768, 2, "bfloat16")
    assert result["kv_bytes_per_token"] == 2 * 28 * 4 * 128 * 2 == 57_344
    assert result["kv_bytes"] == 57_344 * 32_768 * 2
    assert result["weight_bytes"] == 7_615_616_512 * 2
    assert result["cards"]["H100 80 GB"] == 1 and result["cards"]["T4 16 GB"] == 2


def test_cli_reads_a_local_config_json_and_counts_its_parameters():
    """A local config.json works: the bundled model's, with its 5,770,496 parameters counted on a meta model."""
    done = call_cli(
        str(calc.PUBLIC_MODELS_FILE.parent / "models" / "storyteller-llama-6m" / "config.json"),
        "--tokens",
        "512",
        "--dtype",
        "float32",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["weight_bytes"] == 5_770_496 * 4
    assert result["kv_bytes"] == 2 * 6 * 4 * 32 * 512 * 4


@pytest.mark.parametrize(
    "args, named",
    [
        (("No-Such-Model", "--tokens", "10"), "No-Such-Model"),
        (("GPT-2 (124M)", "--tokens", "-3"), "-3"),
        (("GPT-2 (124M)", "--tokens", "100", "--batch", "99999999"), "99999999"),
        (("GPT-2 (124M)", "--tokens", "10", "--dtype", "int3"), "int3"),
    ],
)
def test_cli_bad_input_is_one_line_naming_the_value_with_exit_code_2(args, named):
    """Unknown model, negative or absurd sizes, unknown dtype: exit code 2 and one line that names the value."""
    done = call_cli(*args)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], done.stderr


def test_moe_read_per_token_counts_one_embedding_row(models):
    """Mixtral (untied): active parameters minus the 32,000 x 4,096 input table plus the one row a token looks up."""
    from inference.lessons.moe.scale import public_moe_table, weights_read_per_token

    assert weights_read_per_token(models["Mixtral-8x7B"]) == 12_879_925_248 - 32_000 * 4096 + 4096
    assert weights_read_per_token(models["Gemma-2-9B"]) == 9_241_705_984  # tied: the output layer reads it whole
    table = public_moe_table(list(models.values())).set_index("model")
    assert table.at["Mixtral-8x7B", "weights_read_per_token_gb_bf16"] == pytest.approx(
        (12_879_925_248 - 32_000 * 4096 + 4096) * 2 / GB
    )
