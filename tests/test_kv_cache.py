"""KV cache: the real tensors match the formula, and the cache never changes the tokens."""

import statistics

import pytest
import torch

from inference.core.calculator import model_entry_from_hf_config
from inference.core.measuring import compare
from inference.core.model_config import from_public_entry, kv_cache_bytes
from inference.core.run import run_greedy
from inference.lessons.kv_cache import text as kv_text
from inference.lessons.kv_cache.experiments import (
    cache_growth,
    compare_cache,
    engine_decode_step,
    layer_breakdown,
    repeated_phrase,
    with_cache_step,
)

pytestmark = pytest.mark.unit

torch.set_num_threads(1)  # a training job may share the machine
PROMPT = "Once upon a time, there was a little dog named Max."


@pytest.fixture(params=["bundled", "gpt2"])
def model_and_tokenizer(request):
    """The bundled Llama and a random GPT-2: the two cache layouts the app meets."""
    loaded = request.getfixturevalue(request.param)
    return (loaded.model, loaded.tokenizer) if request.param == "bundled" else loaded


def prompt_ids(tokenizer):
    return tokenizer(PROMPT)["input_ids"]


def test_measured_kv_bytes_equal_the_formula_at_every_step_and_in_every_layer(model_and_tokenizer):
    """The oracle: bytes read from the cache tensors = the formula, after every step and per layer."""
    model, tokenizer = model_and_tokenizer
    ids = prompt_ids(tokenizer)
    trace = run_greedy(model, tokenizer, ids, 12)
    growth = cache_growth(trace)
    assert growth["agree"].all() and (growth["measured_bytes"] > 0).all()
    # The cache holds the prompt after step 0 and one more token per step after that.
    assert growth["cache_tokens"].tolist() == [len(ids) + step for step in growth["step"]]
    layers = layer_breakdown(trace)
    assert len(layers) == trace.kv_shape.layers and (layers["measured_bytes"] == layers["formula_bytes"]).all()
    assert layers["measured_bytes"].sum() == trace.records[-1].cache_bytes


def test_with_and_without_the_cache_give_the_same_greedy_tokens(model_and_tokenizer):
    """Same tokens both ways and as the step engine's greedy run; one token fed per cached pass, the whole sequence
    without; the global RNG untouched."""
    model, tokenizer = model_and_tokenizer
    ids, state = prompt_ids(tokenizer), torch.get_rng_state()
    comparison = compare_cache(model, ids, 8)
    assert comparison.identical and torch.equal(torch.get_rng_state(), state)
    engine_tokens = run_greedy(model, tokenizer, ids, 8).generated_ids
    assert comparison.tokens_with_cache[: len(engine_tokens)] == engine_tokens
    steps = comparison.steps
    assert steps["tokens_fed_with_cache"].tolist() == [len(ids)] + [1] * 7
    assert steps["tokens_fed_without_cache"].tolist() == [len(ids) + k for k in range(8)]


def test_the_step_figures_are_timings_and_the_sentences_take_their_words_from_them(bundled):
    """Section 1's decode steps and section 2's cached steps are Timings; step 0 and the trend are compared in
    words `measuring.compare` picks from the measured times, never a fixed "the same either way"."""
    trace = run_greedy(bundled.model, bundled.tokenizer, [1, 2, 3, 4, 5], 6, stop_at_eos=False)
    engine = engine_decode_step(trace)
    assert engine.median_ms == statistics.median(r.forward_ms for r in trace.records if r.phase == "decode")
    comparison = compare_cache(bundled.model, [1, 2, 3, 4, 5], 22)
    steps = comparison.steps
    cached = with_cache_step(steps)
    assert cached.median_ms == statistics.median(steps.with_cache_ms.iloc[1:])
    said = kv_text.comparison_sentences(comparison, "m", cached, engine, trend_steps=21)
    first = compare(steps.with_cache_ms.iloc[0], steps.without_cache_ms.iloc[0])
    assert first.words("more with the cache", "less with the cache", "about the same either way") in said["step_time"]
    assert engine.label() in said["step_time"] and cached.label() in said["step_time"]
    late = compare(steps.without_cache_ms.iloc[-10:].tolist(), steps.with_cache_ms.iloc[1:].tolist())
    assert late.words(*kv_text.WORDS) in said["trend"]


def test_compare_cache_refuses_a_run_longer_than_the_context(gpt2):
    with pytest.raises(ValueError, match="context of 128"):
        compare_cache(gpt2[0], list(range(100)), 40)


def test_calculator_entry_from_the_bundled_config_matches_the_real_cache(bundled):
    """The calculator's formula, fed the bundled config, gives the bytes the tensors hold."""
    entry = model_entry_from_hf_config(bundled.model.config.to_dict(), "bundled", bundled.info.parameters)
    trace = run_greedy(bundled.model, bundled.tokenizer, prompt_ids(bundled.tokenizer), 4)
    last = trace.records[-1]
    assert kv_cache_bytes(from_public_entry(entry), last.cache_tokens, bytes_per_element=4) == last.cache_bytes
    assert entry["kv_heads"] < entry["attention_heads"]  # grouped-query attention


def test_a_looping_greedy_text_is_named_with_how_often_it_repeats():
    """The phrase that covers most of the text, said at least three times without overlapping; ordinary text and
    a phrase said twice are no loop."""
    loop = [7, 8, 9, 10, 11, 12]
    ids = [1, 2, 3] + loop + [4] + loop + [5, 6] + loop + loop
    assert repeated_phrase(ids) == (tuple(loop), 4)
    assert repeated_phrase(list(range(50))) is None
    assert repeated_phrase([1, 2] + loop + [3] + loop) is None  # twice: a refrain, not a loop
    assert repeated_phrase([5] * 18)[1] == 3  # 18 equal tokens: three non-overlapping copies of six
