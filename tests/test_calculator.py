"""Tests for inference/calculator.py and assets/public_models.json.

Every expected number below is worked out by hand in the test (as a literal or as
plain arithmetic on the architecture numbers), never by calling the code under test.
"""
import json

import pandas as pd
import pytest

from inference import calculator as calc

GB = 10**9
GIB = 2**30


@pytest.fixture(scope="module")
def models():
    return {m["name"]: m for m in calc.load_public_models()}


# ----------------------------------------------------------------- kv_cache_bytes


def test_llama31_8b_full_context_bf16():
    # 2 (K,V) x 32 layers x 8 kv heads x 128 head_dim x 131072 tokens x 2 bytes
    assert calc.kv_cache_bytes(32, 8, 128, 131_072, batch=1, bytes_per_element=2) == 17_179_869_184
    assert 17_179_869_184 == 16 * GIB  # exactly 16 GiB, i.e. 17.18 GB


def test_gpt2_full_context_fp32():
    # 2 x 12 layers x 12 heads x 64 head_dim x 1024 tokens x 4 bytes = 75,497,472
    assert calc.kv_cache_bytes(12, 12, 64, 1024, bytes_per_element=4) == 75_497_472


def test_batch_and_precision_name_scale_linearly():
    # 2 x 32 x 8 x 128 x 1 token x 1 seq x 2 bytes = 131,072 bytes per token (128 KiB)
    assert calc.kv_cache_bytes(32, 8, 128, 1) == 131_072
    assert calc.kv_cache_bytes(32, 8, 128, 1000, batch=4, bytes_per_element="bfloat16") == 524_288_000
    # int4 is half a byte per element: 2 x 32 x 8 x 128 x 0.5 = 32,768
    assert calc.kv_cache_bytes(32, 8, 128, 1, bytes_per_element="int4") == 32_768


def test_mla_cache_for_deepseek_v3():
    # 61 layers x (512 latent + 64 rope) x 163840 tokens x 2 bytes, with no factor 2 for K/V
    assert calc.mla_kv_cache_bytes(61, 512, 64, 163_840) == 11_513_364_480


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


# --------------------------------------------------------------- weight_fit_table


def test_weight_fit_table_llama(models):
    table = calc.weight_fit_table(
        [models["Llama-3.1-8B"], models["Llama-3.1-70B"]],
        bits_list=(32, 16, 8, 4),
        accelerator_gb=(16, 24, 40, 80, 141),
    )
    assert len(table) == 8
    fit = {(r.model, r.bits): r for r in table.itertuples()}
    # 8B: 32.12 GB -> 40, 16.06 GB -> 24 (just over 16), 8.03 GB -> 16, 4.02 GB -> 16
    assert fit[("Llama-3.1-8B", 32)].fits_in_gb == 40
    assert fit[("Llama-3.1-8B", 16)].weight_gb == pytest.approx(16.060522496)
    assert fit[("Llama-3.1-8B", 16)].fits_in_gb == 24
    assert fit[("Llama-3.1-8B", 8)].fits_in_gb == 16
    assert fit[("Llama-3.1-8B", 4)].fits_in_gb == 16
    # 70B: 16-bit weights are 141.107 GB, just over the 141 GB accelerator -> needs two
    assert fit[("Llama-3.1-70B", 16)].weight_gb == pytest.approx(141.107412992)
    assert pd.isna(fit[("Llama-3.1-70B", 16)].fits_in_gb)
    assert not fit[("Llama-3.1-70B", 16)].fits_on_one
    assert fit[("Llama-3.1-70B", 16)].largest_needed == 2
    assert fit[("Llama-3.1-70B", 32)].largest_needed == 3  # 282.2 GB / 141
    assert fit[("Llama-3.1-70B", 8)].fits_in_gb == 80  # 70.55 GB
    assert fit[("Llama-3.1-70B", 4)].fits_in_gb == 40  # 35.28 GB


def test_weight_fit_table_unsorted_accelerators(models):
    table = calc.weight_fit_table([models["GPT-2 (124M)"]], bits_list=(16,), accelerator_gb=(80, 16))
    assert table.iloc[0]["fits_in_gb"] == 16


# ---------------------------------------------------------------- bad arguments


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"tokens": 0}, "tokens must be a positive whole number, got 0"),
        ({"tokens": -5}, "tokens must be a positive whole number, got -5"),
        ({"layers": 2.5}, "layers must be a positive whole number, got 2.5"),
        ({"kv_heads": 0}, "kv_heads must be a positive whole number, got 0"),
        ({"head_dim": "128"}, "head_dim must be a positive whole number, got '128'"),
        ({"batch": 0}, "batch must be a positive whole number, got 0"),
        ({"batch": True}, "batch must be a positive whole number, got True"),
        ({"bytes_per_element": 0}, "bytes_per_element must be a positive number, got 0"),
        ({"bytes_per_element": "fp13"}, "precision must be one of"),
    ],
)
def test_kv_cache_bytes_rejects_bad_arguments(kwargs, fragment):
    args = {"layers": 32, "kv_heads": 8, "head_dim": 128, "tokens": 10}
    args.update(kwargs)
    with pytest.raises(ValueError) as info:
        calc.kv_cache_bytes(**args)
    assert fragment in str(info.value)


def test_other_functions_reject_bad_arguments(models):
    with pytest.raises(ValueError, match="parameters must be a positive whole number, got 0"):
        calc.weight_bytes(0, 16)
    with pytest.raises(ValueError, match="bits must be a positive number, got -4"):
        calc.weight_bytes(1000, -4)
    with pytest.raises(ValueError, match="context must be a positive whole number, got 0"):
        calc.kv_table([models["GPT-2 (124M)"]], context=0)
    with pytest.raises(ValueError, match="batch must be a positive whole number, got -1"):
        calc.kv_table([models["GPT-2 (124M)"]], context=10, batch=-1)
    with pytest.raises(ValueError, match="precision must be one of"):
        calc.kv_table([models["GPT-2 (124M)"]], context=10, precision="float13")
    with pytest.raises(ValueError, match="accelerator_gb must be a positive number, got 0"):
        calc.weight_fit_table([models["GPT-2 (124M)"]], accelerator_gb=(0, 80))
    with pytest.raises(ValueError, match="bits_list must not be empty"):
        calc.weight_fit_table([models["GPT-2 (124M)"]], bits_list=())


# ------------------------------------------------------------------ model data


REQUIRED = {
    "GPT-2 (124M)", "SmolLM2-135M", "Llama-3.1-8B", "Llama-3.1-70B", "Qwen2.5-7B",
    "Gemma-2-9B", "Qwen2.5-0.5B", "SmolLM2-1.7B", "Llama-3.2-1B", "Mixtral-8x7B",
}


def test_public_models_cover_the_required_list(models):
    assert REQUIRED <= set(models)
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


def test_load_public_models_rejects_broken_entries(tmp_path, models):
    broken = dict(models["GPT-2 (124M)"])
    broken["kv_heads"] = 0
    path = tmp_path / "models.json"
    path.write_text(json.dumps([broken]))
    with pytest.raises(ValueError, match=r"GPT-2 \(124M\).*kv_heads must be a positive whole number, got 0"):
        calc.load_public_models(path)

    missing = {k: v for k, v in models["GPT-2 (124M)"].items() if k != "head_dim"}
    path.write_text(json.dumps([missing]))
    with pytest.raises(ValueError, match="missing field"):
        calc.load_public_models(path)

    dense_with_active = dict(models["GPT-2 (124M)"], active_parameters=1000)
    path.write_text(json.dumps([dense_with_active]))
    with pytest.raises(ValueError, match="dense model"):
        calc.load_public_models(path)


def test_model_entry_from_hf_config():
    config = {
        "num_hidden_layers": 8, "num_attention_heads": 8, "num_key_value_heads": 4,
        "hidden_size": 256, "max_position_embeddings": 512, "vocab_size": 32_000,
    }
    entry = calc.model_entry_from_hf_config(config, name="tiny", parameters=6_000_000)
    assert entry["head_dim"] == 32  # 256 / 8
    assert entry["attention"] == "GQA"
    # 2 x 8 layers x 4 kv heads x 32 x 512 tokens x 4 bytes
    assert calc.model_kv_cache_bytes(entry, 512, 1, 4) == 4_194_304
