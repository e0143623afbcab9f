"""The memory calculator and the project's own JSON (assets/public_models.json, accelerators.json).

Every expected number is worked out by hand here (a literal or plain arithmetic), never by the code under test.
"""

import contextlib
import io
import json

import pytest

from inference.core import calculator as calc
from inference.core.model_config import FULL, SLIDING, from_public_entry
from inference.lessons.moe.scale import weights_read_per_token

pytestmark = pytest.mark.unit

GB, MIB = 10**9, 2**20


@pytest.fixture(scope="module")
def models():
    return {m["name"]: m for m in calc.load_public_models()}


def test_every_public_entry_is_complete_and_consistent(models):
    """The checks the calculator does not run on its own JSON: every field, positive sizes, heads a multiple of KV
    heads, known layer types with a window where one slides, active <= total, experts both set or both null, MLA's
    ranks, each entry's hub config linked, unique names; every card sized."""
    assert len(models) == len(calc.load_public_models())
    sizes = ("parameters", "active_parameters", "layers", "attention_heads", "kv_heads", "head_dim", "hidden_size")
    sizes += ("context", "vocab_size")
    for name, m in models.items():
        assert {*sizes, "hub_id", "experts", "experts_per_token", "source", "notes"} <= set(m) and m["notes"], name
        assert all(isinstance(m[f], int) and m[f] > 0 for f in sizes), name
        assert m["attention_heads"] % m["kv_heads"] == 0 and m["active_parameters"] <= m["parameters"], name
        assert (m["experts"] is None) == (m["experts_per_token"] is None) == (m["active_parameters"] == m["parameters"])
        assert m["source"]["config_json"] == f"https://huggingface.co/{m['hub_id']}/blob/main/config.json", name
        shape = from_public_entry(m)
        assert set(shape.layer_types) <= {FULL, SLIDING} and len(shape.layer_types) == m["layers"], name
        assert SLIDING not in shape.layer_types or shape.sliding_window > 0, name
        assert (m.get("attention") == "MLA") == (shape.mla is not None), name
    assert all(card.usable_bytes > 0 and card.label and card.source for card in calc.load_accelerators())
    assert {"GPT-2 (124M)", "SmolLM2-135M", "Llama-3.1-8B", "Llama-3.1-70B", "Qwen2.5-7B", "Gemma-2-9B"} <= set(models)
    assert {"Mixtral-8x7B", "DeepSeek-V3", "Mistral-7B-v0.1", "Llama-3.2-1B"} <= set(models)


def test_parameter_counts_match_hand_formulas(models):
    # Llama-3.1-8B, untied: embed + lm_head + 32 x (q,o 4096²; k,v 4096x1024; 3 MLP 4096x14336; 2 norms) + final norm
    per_layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    assert models["Llama-3.1-8B"]["parameters"] == 2 * 128_256 * 4096 + 32 * per_layer + 4096 == 8_030_261_248
    # GPT-2, tied: wte + wpe + 12 x (2 LN, qkv+bias, proj+bias, 2 LN, fc+bias, proj+bias) + final LN
    h = 768
    layer = 2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (4 * h * h + 4 * h) + (4 * h * h + h)
    assert models["GPT-2 (124M)"]["parameters"] == 50_257 * h + 1024 * h + 12 * layer + 2 * h == 124_439_808
    mixtral = models["Mixtral-8x7B"]  # active = total - 6 idle experts x 32 layers x 3 x 4096 x 14336
    assert mixtral["active_parameters"] == mixtral["parameters"] - 6 * 32 * 3 * 4096 * 14336


@pytest.mark.parametrize(
    "name, context, batch, precision, kv_gb, without_gqa_gb, weight_gb",
    [
        ("Llama-3.1-8B", 131_072, 1, "bfloat16", 2 * 32 * 8 * 128 * 131_072 * 2 / GB, 4 * 17.179869184, 16.060522496),
        ("GPT-2 (124M)", 1024, 1, "float32", 2 * 12 * 12 * 64 * 1024 * 4 / GB, 0.075497472, 0.497759232),
        ("Qwen2.5-7B", 32_768, 8, "bfloat16", 2 * 28 * 4 * 128 * 32_768 * 8 * 2 / GB, 7 * 15.032385536, None),
        # MLA: 61 layers x 576 latent numbers; uncompressed 128 heads x (128 + 64 key + 128 value)
        ("DeepSeek-V3", 163_840, 1, "bfloat16", 61 * 576 * 163_840 * 2 / GB, 61 * 128 * 320 * 163_840 * 2 / GB, None),
        ("Mixtral-8x7B", 4096, 1, "bfloat16", 2 * 32 * 8 * 128 * 4096 * 2 / GB, None, 93.405585408),  # every expert
        ("Mistral-7B-v0.1", 32_768, 1, "bfloat16", 32 * 4096 * 4096 / GB, None, None),  # the window stops it at 4096
    ],
)
def test_kv_table_follows_the_hand_formula(models, name, context, batch, precision, kv_gb, without_gqa_gb, weight_gb):
    row = calc.kv_table([models[name]], context, batch, precision).iloc[0]
    assert row["kv_gb"] == pytest.approx(kv_gb) and row["notes"] == models[name]["notes"]
    if without_gqa_gb is not None:
        assert row["kv_gb_without_gqa"] == pytest.approx(without_gqa_gb)
        assert row["gqa_saving"] == pytest.approx(without_gqa_gb / kv_gb)
    if weight_gb is not None:
        assert row["weight_gb"] == pytest.approx(weight_gb)
    assert row["exceeds_context"] == (context > models[name]["context"])


def test_weight_bytes_and_a_config_json_entry():
    assert calc.weight_bytes(8_030_261_248, 4) == 4_015_130_624
    assert calc.weight_bytes(3, 4.5) == 2  # 13.5 bits round up to a whole byte
    config = {"num_hidden_layers": 8, "num_attention_heads": 8, "num_key_value_heads": 4, "hidden_size": 256,
              "max_position_embeddings": 512, "vocab_size": 32_000}  # fmt: skip
    entry = calc.model_entry_from_hf_config(config, name="tiny", parameters=6_000_000)
    assert (entry["head_dim"], entry["attention"]) == (32, "GQA")
    assert calc.estimate(entry, 512, 1, "float32", accelerators=()).kv_bytes == 2 * 8 * 4 * 32 * 512 * 4


def test_cards_hold_what_nvidia_smi_reports_and_weights_go_to_the_smallest_that_holds_them(models):
    """An H200 "141 GB" holds 143,771 MiB: Llama-3.1-70B's 16-bit weights fit with 9.65 GB left; Llama-3.1-8B's
    16.06 GB fit a T4's 16.11 GB."""
    cards = {card.label: card for card in calc.load_accelerators()}
    assert cards["H200 141 GB"].usable_bytes == 143_771 * MIB and cards["H100 80 GB"].usable_bytes == 81_559 * MIB
    rows = calc.fit_table([models["Llama-3.1-70B"]], bits_list=(16, 8, 4)).set_index("bits")
    assert rows.at[16, "fits_on"] == "H200 141 GB" and rows.at[16, "largest_needed"] == 1
    assert rows.at[16, "left_gb"] == pytest.approx((143_771 * MIB - 141_107_412_992) / GB)
    assert (rows.at[8, "fits_on"], rows.at[4, "fits_on"]) == ("H100 80 GB", "A100 40 GB")
    assert calc.fit_table([models["Llama-3.1-8B"]], bits_list=(16,)).at[0, "fits_on"] == "T4 16 GB"
    ordered = calc.load_accelerators()
    assert calc.smallest_card(ordered[0].usable_bytes, ordered) is ordered[0]
    assert calc.smallest_card(ordered[0].usable_bytes + 1, ordered) is ordered[1]
    assert calc.smallest_card(ordered[-1].usable_bytes + 1, ordered) is None


def test_estimate_counts_int4_scales_and_splits_across_cards(models):
    result = calc.estimate(models["Llama-3.1-8B"], 8192, 4, "int4", kv_dtype="bfloat16")
    total = 8_030_261_248 // 2 + 8_030_261_248 // 128 * 4 + 2 * 32 * 8 * 128 * 2 * 8192 * 4
    assert result.total_bytes == total and result.scale_bytes == 8_030_261_248 // 128 * 4
    assert result.cards["T4 16 GB"] == 1 and result.left_on_one_card["T4 16 GB"] == 15_360 * MIB - total
    big = calc.estimate(models["Llama-3.1-70B"], 131_072, 1, "bfloat16")  # 141.1 GB + 42.9 GB: two H200s
    assert big.cards["H200 141 GB"] == 2


def call_cli(*args):
    """`calculator.main` as `python -m inference.core.calculator` runs it: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = calc.main(list(args))
        except SystemExit as exit_:
            code = exit_.code
    return code, out.getvalue(), err.getvalue()


def test_cli_json_and_a_local_config_json():
    """Qwen2.5-7B at 32768 tokens x 2 in bf16; the bundled model's config.json with its 5,770,496 parameters
    counted on a meta model."""
    code, out, err = call_cli("Qwen2.5-7B", "--tokens", "32768", "--batch", "2", "--json")
    result = json.loads(out)
    assert code == 0 and result["kv_bytes_per_token"] == 2 * 28 * 4 * 128 * 2 == 57_344
    assert result["kv_bytes"] == 57_344 * 32_768 * 2 and result["weight_bytes"] == 7_615_616_512 * 2
    assert result["cards"]["H100 80 GB"] == 1 and result["cards"]["T4 16 GB"] == 2
    config = calc.PUBLIC_MODELS_FILE.parent / "models" / "storyteller-llama-6m" / "config.json"
    code, out, err = call_cli(str(config), "--tokens", "512", "--dtype", "float32", "--json")
    result = json.loads(out)
    assert result["weight_bytes"] == 5_770_496 * 4 and result["kv_bytes"] == 2 * 6 * 4 * 32 * 512 * 4
    code, out, err = call_cli("Llama-3.1-70B", "--tokens", "8192")
    assert code == 0 and "H200 141 GB: 1 card" in out


@pytest.mark.parametrize(
    "args, named",
    [
        (("No-Such-Model", "--tokens", "10"), "No-Such-Model"),
        (("GPT-2 (124M)", "--tokens", "-3"), "-3"),
        (("GPT-2 (124M)", "--tokens", "1000000000"), "1000000000"),
        (("GPT-2 (124M)", "--tokens", "100", "--batch", "99999999"), "99999999"),
        (("GPT-2 (124M)", "--tokens", "10", "--dtype", "int3"), "int3"),
    ],
)
def test_cli_bad_input_is_one_line_naming_the_value_with_exit_code_2(args, named):
    code, out, err = call_cli(*args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and named in err, err


def test_moe_read_per_token_counts_one_embedding_row(models):
    """Mixtral (untied): active parameters minus the 32,000 x 4,096 input table plus the one row a token looks up."""
    assert weights_read_per_token(models["Mixtral-8x7B"]) == 12_879_925_248 - 32_000 * 4096 + 4096
    assert weights_read_per_token(models["Gemma-2-9B"]) == 9_241_705_984  # tied: the output layer reads it whole
