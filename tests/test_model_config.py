"""The one config reader and the one KV formula: equal to transformers' own configs and caches.

Expected byte counts are worked out by hand in each test, never by calling the code under test.
"""

import json

import pytest
import torch
import transformers as tf

from inference.core import calculator, kv_cache
from inference.core.model_config import FULL, SLIDING, from_config, from_public_entry, kv_cache_bytes
from inference.core.paths import BUNDLED_MODEL_DIR

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def public():
    return {m["name"]: m for m in calculator.load_public_models()}


def tiny(config_class, **extra):
    return config_class(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, **extra)  # fmt: skip


def test_gpt2_keys_are_read_like_llama_keys():
    """GPT-2's n_layer / n_head / n_embd / n_positions give the same fields as Llama-style keys."""
    shape = from_config(tf.GPT2Config(n_layer=3, n_head=4, n_embd=64, n_positions=128, vocab_size=100))
    assert (shape.layers, shape.attention_heads, shape.kv_heads, shape.head_dim) == (3, 4, 4, 16)
    assert (shape.context, shape.vocab_size, shape.attention) == (128, 100, "MHA")
    as_dict = from_config({"n_layer": 3, "n_head": 4, "n_embd": 64, "n_positions": 128, "vocab_size": 100})
    assert as_dict == shape


def test_config_json_dict_and_config_object_read_the_same():
    """The bundled model's config.json as a dict and as transformers' config object give one shape."""
    raw = json.loads((BUNDLED_MODEL_DIR / "config.json").read_text())
    assert from_config(raw) == from_config(tf.LlamaConfig(**{k: v for k, v in raw.items() if k != "model_type"}))
    assert from_config(raw).layer_types == (FULL,) * raw["num_hidden_layers"]


def test_gemma2_alternates_local_and_global_layers_even_when_config_json_does_not_say_so():
    """Gemma-2's hub config.json has no layer_types: transformers' class fills in local, global, local, ..."""
    raw = {"model_type": "gemma2", "num_hidden_layers": 4, "sliding_window": 4096, "head_dim": 256}
    assert from_config(raw).layer_types == (SLIDING, FULL, SLIDING, FULL)
    assert from_config(raw).sliding_window == 4096


def test_mistral_window_covers_every_layer_and_qwen2_window_is_off_unless_used():
    """Mistral's sliding_window applies to all layers; Qwen2's sliding_window with use_sliding_window false to none."""
    assert from_config(tiny(tf.MistralConfig, sliding_window=4096)).layer_types == (SLIDING,) * 4
    qwen = {"model_type": "qwen2", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 10, "max_position_embeddings": 100, "sliding_window": 131072,
            "use_sliding_window": False}  # fmt: skip
    assert from_config(qwen).layer_types == (FULL, FULL) and from_config(qwen).sliding_window is None
    assert from_config(tiny(tf.Qwen2Config)).sliding_layers == 0


def test_public_gemma2_entry_equals_transformers_reading_of_the_same_numbers(public):
    """The JSON's layer_types_pattern gives the layers transformers' tf.Gemma2Config gives for the published config."""
    entry = public["Gemma-2-9B"]
    config = tf.Gemma2Config(num_hidden_layers=42, num_attention_heads=16, num_key_value_heads=8, head_dim=256,
                          hidden_size=3584, max_position_embeddings=8192, vocab_size=256000, sliding_window=4096)  # fmt: skip
    assert from_public_entry(entry) == from_config(config)


def test_deepseek_v3_mla_ranks_from_a_config_dict(public):
    """MLA ranks are read from config keys and match the public entry's."""
    shape = from_config({"model_type": "deepseek_v3"})  # transformers' defaults are DeepSeek-V3's
    assert shape.mla == from_public_entry(public["DeepSeek-V3"]).mla
    assert shape.attention == "MLA"


def test_sliding_layers_count_min_tokens_window(public):
    """Mistral-7B-v0.1 stops at 4096 on all 32 layers; Gemma-2-9B on its 21 local layers only."""
    mistral = from_public_entry(public["Mistral-7B-v0.1"])
    # 32 layers x 4096 tokens x 2 (K,V) x 8 kv heads x 128 dims x 2 bytes
    assert kv_cache_bytes(mistral, 32_768, 1, 2) == 32 * 4096 * 2 * 8 * 128 * 2 == 536_870_912
    assert kv_cache_bytes(mistral, 1000, 1, 2) == 32 * 1000 * 4096
    gemma = from_public_entry(public["Gemma-2-9B"])
    # 21 global layers x 8192 + 21 local layers x 4096 tokens, x 2 x 8 x 256 x 2 bytes
    assert kv_cache_bytes(gemma, 8192, 1, 2) == (21 * 8192 + 21 * 4096) * 8192 == 2_113_929_216


def test_mla_cache_is_the_latent_and_uncompressed_is_per_head(public):
    """DeepSeek-V3: 576 numbers per layer and token; uncompressed, 128 heads x (128 + 64 + 128)."""
    shape = from_public_entry(public["DeepSeek-V3"])
    assert kv_cache_bytes(shape, 163_840, 1, 2) == 61 * 576 * 163_840 * 2 == 11_513_364_480
    assert kv_cache_bytes(shape, 1, 1, 2, one_kv_head_per_query_head=True) == 61 * 128 * 320 * 2


@pytest.mark.parametrize(
    "model_class, config_class", [(tf.Gemma2ForCausalLM, tf.Gemma2Config), (tf.MistralForCausalLM, tf.MistralConfig)]
)
def test_sliding_layers_read_from_the_config_are_the_ones_transformers_cache_trims(model_class, config_class):
    """A real forward pass: layers we count as sliding are those whose cache stops at the window."""
    config = tiny(config_class, sliding_window=6, **({"head_dim": 8} if config_class is tf.Gemma2Config else {}))
    torch.manual_seed(0)
    model = model_class(config).eval()
    cache = kv_cache.new_cache(config)
    with torch.no_grad():
        model(input_ids=torch.randint(0, 64, (1, 11)), past_key_values=cache, use_cache=True)
    stored = [keys.shape[-2] for keys, _ in kv_cache.layer_tensors(cache)]
    counted = from_config(config).cached_tokens_per_layer(11)
    # transformers keeps window - 1 between steps and attends over window with the new token; we count the window
    assert counted == [tokens + 1 if tokens < 11 else tokens for tokens in stored]
    assert [c < 11 for c in counted] == [kind == SLIDING for kind in from_config(config).layer_types]
    assert any(c == 11 for c in counted) == (config_class is tf.Gemma2Config)
