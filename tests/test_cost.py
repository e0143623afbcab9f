"""Cost: answer timing arithmetic, batched decoding, MoE parameter accounting, the page."""

import json
import os
import re
import statistics

import pandas as pd
import pytest
import torch
from transformers import MixtralConfig, MixtralForCausalLM

from app_pages.shared.shared_results import shared_results
from inference.core.calculator import load_public_models
from inference.core.kv_cache import KVShape
from inference.core.measuring import compare
from inference.lessons.cost import batching
from inference.lessons.cost import text as cost_text
from inference.lessons.cost.batching import batch_sizes_for, measure_batches
from inference.lessons.cost.experiments import AnswerCost, cost_per_million_tokens, measure_answer
from inference.lessons.moe import scale as moe
from inference.lessons.prefill_decode.timing import Crossover, Sweep, summarise_runs
from tests.conftest import open_app_page

pytestmark = pytest.mark.page

# Written for the 6M storyteller's speed and token ids: it is these pages' default model here (a new session
# opens on SmolLM2-135M-Instruct otherwise; tests/test_default_model_page.py covers that).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")

SMALL = moe.MoEDesign(
    hidden=64, layers=2, heads=4, kv_heads=2, expert_width=48, experts=4, experts_per_token=2, vocab=256, context=64
)


def test_answer_cost_arithmetic():
    answer = AnswerCost(prompt_tokens=200, reply_tokens=101, prefill_ms=50.0, decode_ms=400.0)
    assert answer.total_ms == 450.0
    assert answer.ms_per_input_token == 0.25
    assert answer.ms_per_output_token == 4.0  # 100 decode passes: the first reply token came from prefill
    assert answer.output_vs_input == 16.0
    assert answer.decode_share == pytest.approx(400 / 450)


def test_cost_per_million_tokens():
    """$1 an hour, 3.6 ms per token: a million tokens take 3,600 s = one hour = $1."""
    assert cost_per_million_tokens(3.6, 1.0) == pytest.approx(1.0)
    assert cost_per_million_tokens(0.36, 2.5) == pytest.approx(0.25)


def test_batched_decode_cache_holds_every_sequence(bundled):
    """One row per batch size; the measured cache = the KV formula x batch x tokens."""
    frame = measure_batches(bundled.model, (1, 4), prompt_tokens=16, steps=3, rounds=2)
    assert frame["batch"].tolist() == [1, 4]
    shape = KVShape.from_config(bundled.model.config, torch.float32)
    tokens = 16 + 1 + 2 * 3  # prompt, warm-up pass, two rounds of three passes
    assert frame["kv_cache_bytes"].tolist() == [shape.formula_bytes(tokens, batch=b) for b in (1, 4)]
    assert frame["tokens_per_s"].tolist() == pytest.approx((frame["batch"] / frame["ms_per_pass"] * 1000).tolist())
    assert frame["ms_per_pass"].tolist() == [statistics.median(times) for times in frame["pass_ms"]]


def test_batch_sizes_shrink_for_big_models():
    assert batch_sizes_for(5_770_496) == list(batching.BATCH_SIZES)
    assert batch_sizes_for(124_439_808) == [1, 2, 4, 8, 16]
    assert batch_sizes_for(7_000_000_000) == [1, 2, 4]


def test_moe_parameter_counts_match_mixtral_8x7b_published_numbers():
    """Built on the meta device (no memory): 46,702,792,704 total and 12,879,925,248 per token,
    the numbers in assets/public_models.json (Mistral AI: 46.7B total, 12.9B active)."""
    entry = next(m for m in load_public_models() if m["name"] == "Mixtral-8x7B")
    config = MixtralConfig(
        vocab_size=32000,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        num_local_experts=8,
        num_experts_per_tok=2,
        tie_word_embeddings=False,
    )
    with torch.device("meta"):
        model = MixtralForCausalLM(config)
    assert moe.parameter_counts(model) == (entry["parameters"], entry["active_parameters"])


def test_the_three_models_differ_only_in_their_feed_forward_blocks_and_are_seeded_privately():
    """Parameter counts by hand; same seed, same weights, the global RNG untouched; a tied table counted once;
    one token reads exactly k experts and a batch at most all (hooks taken off again); k > E refused."""
    before = torch.random.get_rng_state()
    models = {name: moe.random_model(config, seed=1) for name, config in SMALL.configs().items()}
    assert torch.equal(before, torch.random.get_rng_state())
    again = moe.random_model(SMALL.configs()[moe.MOE], seed=1)
    assert all(torch.equal(p, q) for p, q in zip(models[moe.MOE].parameters(), again.parameters()))
    counts = {name: moe.parameter_counts(m) for name, m in models.items()}
    mlp = 3 * SMALL.hidden * SMALL.expert_width * SMALL.layers  # one expert (gate, up, down) in every layer
    router = SMALL.experts * SMALL.hidden * SMALL.layers
    assert counts[moe.DENSE_TOTAL][0] - counts[moe.DENSE_ACTIVE][0] == (SMALL.experts - SMALL.experts_per_token) * mlp
    assert counts[moe.MOE] == (counts[moe.DENSE_TOTAL][0] + router, counts[moe.DENSE_ACTIVE][0] + router)
    dense = models[moe.DENSE_ACTIVE]
    assert dense.lm_head.weight.data_ptr() == dense.model.embed_tokens.weight.data_ptr()
    separate = sum(p.numel() for _, p in dense.named_parameters(remove_duplicate=False))
    assert counts[moe.DENSE_ACTIVE] == (separate - SMALL.vocab * SMALL.hidden,) * 2
    assert moe.experts_read_per_pass(models[moe.MOE], 1) == SMALL.experts_per_token
    assert SMALL.experts_per_token <= moe.experts_read_per_pass(models[moe.MOE], 32) <= SMALL.experts
    assert all(not layer.mlp.gate._forward_hooks for layer in models[moe.MOE].model.layers)
    with pytest.raises(ValueError, match="experts_per_token"):
        moe.MoEDesign(experts=4, experts_per_token=5)


def test_moe_measurement_rows_and_the_public_moe_table():
    frame = moe.measure(SMALL, prompt_tokens=8, decode_steps=2, repeats=1, batch=4)
    assert frame["model"].tolist() == [moe.DENSE_ACTIVE, moe.MOE, moe.DENSE_TOTAL]
    assert (frame["weight_bytes"] == frame["total_parameters"] * 4).all()  # float32
    assert frame["decode_vs_dense_active"].iloc[0] == frame["batch_vs_dense_active"].iloc[0] == 1.0
    assert frame.set_index("model").loc[moe.MOE, "experts_read_alone"] == SMALL.experts_per_token
    table = moe.public_moe_table(load_public_models())
    assert set(table["model"]) == {"Mixtral-8x7B", "Qwen3-30B-A3B", "DeepSeek-V3"}
    assert ((table["active_share"] > 0) & (table["active_share"] < 1)).all()


def test_a_wait_past_the_context_is_said_to_be_no_prompt_the_model_can_read():
    """1 ms per input token, 1,552 ms of decode: in proportion a 1,552-token prompt, past a 512-token context; the
    sentence says no prompt this model can read takes as long, and what its whole context would take."""
    answer = AnswerCost(prompt_tokens=256, reply_tokens=129, prefill_ms=256.0, decode_ms=1552.0)
    beyond = cost_text.answer_sentences(answer, 10**6, 512, None)
    assert "no prompt this model can read takes as long" in beyond and "about 512 ms" in beyond
    assert "a prompt of about **1,552 tokens**" in cost_text.answer_sentences(answer, 10**6, 2048, None)
    swept = cost_text.answer_sentences(answer, 10**6, 512, Crossover(128, 1552.0, 608.0, "extrapolated"))
    assert "no prompt this model can read" in swept and "about 608 tokens" in swept


def test_the_output_token_is_the_median_of_its_decode_passes(bundled):
    """Exactly the asked reply; its output token is the median of its decode passes, quoted with its label."""
    answer = measure_answer(bundled.model, bundled.tokenizer, prompt_tokens=16, reply_tokens=9)
    assert (answer.prompt_tokens, answer.reply_tokens) == (16, 9) and answer.prefill_ms > 0
    step = answer.decode_step
    assert step.repeats == 8 and answer.ms_per_output_token == step.median_ms == statistics.median(answer.step_ms)
    assert sum(answer.step_ms) == pytest.approx(answer.decode_ms) and "at 17–24 tokens of context" in step.what
    assert step.label() in cost_text.output_token_help(answer)


def test_the_batching_and_context_sentences_take_their_words_from_the_measurements():
    """'each token took 4.6x less machine time' follows the passes timed (13.8 ms against 24.0 / 8), and a step at a
    longer context within the runs' noise is called about the same, not dearer."""
    batches = pd.DataFrame(
        {"batch": [1, 8], "ms_per_pass": [13.8, 24.0], "pass_ms": [(13.5, 13.8, 14.1), (23.5, 24.0, 24.5)]}
    )
    batches["ms_per_token"] = batches.ms_per_pass / batches.batch
    batches["kv_cache_bytes"], batches["tokens_per_sequence"] = 10**6, 40
    said = cost_text.batching_sentence(batches, 13.0, 10**6)
    words = compare([ms / 8 for ms in (23.5, 24.0, 24.5)], [13.5, 13.8, 14.1]).words("more", "less")
    assert f"**{words}**" in said and words.endswith("x less")
    runs = pd.DataFrame({"prompt_tokens": [8] * 3 + [448] * 3, "decode_ms_per_token": [2.0, 2.2, 2.4, 2.1, 2.3, 2.5]})
    sweep = Sweep(
        runs=runs,
        summary=summarise_runs(runs.assign(prefill_ms=1.0, prefill_tokens_per_s=1.0)),
        repeats=3,
        decode_tokens=8,
    )
    assert "about the same (within this machine's noise)" in cost_text.context_sentence(sweep)


def test_cost_page_measures_keeps_its_context_run_apart_and_a_price_change_does_not_measure_again(monkeypatch):
    """Both buttons fill their charts and tables; Cost's decode-against-context run is kept apart from the Prefill vs
    decode sweep; no sentence is said twice; typing a price only re-renders."""
    at = open_app_page("app_pages/cost.py", timeout=180, home_first=True)
    assert [m.label for m in at.metric] == ["Per input token", "Per output token", "Output ÷ input"]
    sweeps_before = {k for k in shared_results() if isinstance(k, tuple) and k[0] == "sweep"}
    at.button(key="cost_batches").click().run()
    at.button(key="cost_context").click().run()
    assert not at.exception
    assert {k for k in shared_results() if isinstance(k, tuple) and k[0] == "sweep"} == sweeps_before
    titles = [json.loads(c.proto.spec)["layout"].get("title", {}).get("text") for c in at.get("plotly_chart")]
    assert len(titles) == 3 and "Decode step time against context" in titles
    sentences = [s.strip() for m in at.markdown for s in re.split(r"(?<=[.:;])\s+", m.value) if len(s.strip()) > 40]
    assert len(sentences) == len(set(sentences))
    calls = []
    original = batching.measure_batches
    monkeypatch.setattr(batching, "measure_batches", lambda *a, **k: calls.append(1) or original(*a, **k))
    before = at.dataframe[0].value["cost per 1M output tokens ($)"].tolist()
    at.number_input(key="cost_price").set_value(2.0).run()
    after = at.dataframe[0].value["cost per 1M output tokens ($)"].tolist()
    assert calls == [] and after == pytest.approx([2 * c for c in before])
