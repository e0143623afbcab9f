"""Inside the engine's first live result, before any server starts: what section 1's requests ask of the engine
(`prefix_cache.request_plan`, computed exactly from the model's shapes) and the sentence that says it."""

import pytest

from inference.lessons.engine_internals import prefix_cache, served, text
from inference.lessons.serving.roofline import ServedModel

pytestmark = pytest.mark.unit

SMALL = ServedModel(matmul_parameters=1_000_000, other_parameters=0, layers=4, query_width=256, kv_width=64)


def test_a_prompts_kv_bytes_are_its_tokens_times_every_layers_float32_key_and_value_rows():
    plan = prefix_cache.request_plan(SMALL, context=2048, prefix_tokens=512, own_tokens=16, requests=4)
    assert plan.prompt_tokens == 528
    assert plan.kv_bytes_per_token == 4 * 2 * 64 * 4  # layers x (key + value) x width x 4 bytes
    assert plan.kv_bytes == 528 * 2048


def test_a_warm_prefill_is_the_cold_one_less_what_the_cached_prefix_saves():
    plan = prefix_cache.request_plan(SMALL, context=2048, prefix_tokens=512, own_tokens=16, requests=4)
    assert plan.cold_flops == pytest.approx(prefix_cache.prefill_flops(SMALL, 528))
    saved = prefix_cache.prefill_flops_saved(SMALL, prompt_tokens=528, cached_tokens=512)
    assert plan.warm_flops == pytest.approx(plan.cold_flops - saved)
    assert plan.warm_flops < plan.cold_flops / 10  # 16 tokens of 528 evaluated


def test_the_sentence_quotes_the_plans_numbers_and_shows_token_text_literally():
    plan = prefix_cache.request_plan(SMALL, context=2048, prefix_tokens=512, own_tokens=16, requests=3)
    said = text.plan_sentence(plan, "tiny", ["␣**b**", "<script>", "`x`"])
    assert "3 prompts of 528 tokens" in said and "512-token prefix then 16" in said
    assert f"{plan.kv_bytes / 2**20:,.1f} MiB" in said and f"{plan.kv_bytes_per_token:,} bytes a token" in said
    assert f"{1 - plan.warm_flops / plan.cold_flops:.0%} less" in said
    assert "<script>" not in said and "**b**" not in said and "`" not in said  # token text is no syntax
    assert "␣&#42;&#42;b&#42;&#42; · &#60;script&#62; · &#96;x&#96; …" in said  # (references render as the text)
    assert "filler ids" in text.plan_sentence(plan, "tiny", None)


def test_the_bundled_model_is_named_and_its_prompts_are_filler():
    model = served.engine_model(served.BUNDLED)
    assert model.name == "storyteller-llama-6m"
    assert served.prompt_start(served.BUNDLED, 512) is None
