"""KV cache: the real tensors match the formula, and the cache never changes the tokens."""

import json
import os

import pytest
import torch
from streamlit.testing.v1 import AppTest

from inference.core.calculator import model_entry_from_hf_config
from inference.core.model_config import from_public_entry, kv_cache_bytes
from inference.core.run import run_greedy
from inference.lessons.kv_cache.experiments import cache_growth, compare_cache, layer_breakdown
from inference.lessons.kv_cache.repetition import repeated_phrase
from tests.conftest import APP_FILE, open_app_page

pytestmark = pytest.mark.page

# Written for the 6M storyteller's speed and token ids: it is these pages' default model here (a new session
# opens on SmolLM2-135M-Instruct otherwise; tests/test_default_model_page.py covers that).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")

torch.set_num_threads(1)  # a training job may share the machine
PROMPT = "Once upon a time, there was a little dog named Max."


@pytest.fixture(params=["bundled", "gpt2"])
def model_and_tokenizer(request):
    """The bundled Llama and a random GPT-2: the two cache layouts the app meets."""
    loaded = request.getfixturevalue(request.param)
    return (loaded.model, loaded.tokenizer) if request.param == "bundled" else loaded


def prompt_ids(tokenizer):
    return tokenizer(PROMPT)["input_ids"]


def test_measured_kv_bytes_equal_the_formula_at_every_step(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    ids = prompt_ids(tokenizer)
    growth = cache_growth(run_greedy(model, tokenizer, ids, 12))
    assert len(growth) >= 1 and growth["agree"].all()
    assert (growth["measured_bytes"] > 0).all()
    # The cache holds the prompt after step 0 and one more token per step after that.
    assert growth["cache_tokens"].tolist() == [len(ids) + step for step in growth["step"]]


def test_per_layer_bytes_are_equal_and_add_up_to_the_measured_total(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    trace = run_greedy(model, tokenizer, prompt_ids(tokenizer), 5)
    layers = layer_breakdown(trace)
    assert len(layers) == trace.kv_shape.layers
    assert (layers["measured_bytes"] == layers["formula_bytes"]).all()
    assert layers["measured_bytes"].sum() == trace.records[-1].cache_bytes


def test_with_and_without_the_cache_give_the_same_greedy_tokens(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    ids = prompt_ids(tokenizer)
    comparison = compare_cache(model, ids, 16)
    assert comparison.identical
    # ... and the same tokens as the step engine's greedy run (up to where it stopped).
    engine_tokens = run_greedy(model, tokenizer, ids, 16).generated_ids
    assert comparison.tokens_with_cache[: len(engine_tokens)] == engine_tokens


def test_cache_feeds_one_token_per_step_and_recompute_feeds_the_whole_sequence(gpt2):
    model, tokenizer = gpt2
    ids = prompt_ids(tokenizer)
    steps = compare_cache(model, ids, 6).steps
    assert steps["tokens_fed_with_cache"].tolist() == [len(ids)] + [1] * 5
    assert steps["tokens_fed_without_cache"].tolist() == [len(ids) + k for k in range(6)]
    assert steps["with_cache_cumulative_ms"].tolist() == pytest.approx(steps["with_cache_ms"].cumsum().tolist())


def test_compare_cache_refuses_a_run_longer_than_the_context(gpt2):
    model, _ = gpt2
    with pytest.raises(ValueError, match="context of 128"):
        compare_cache(model, list(range(100)), 40)


def test_compare_cache_leaves_the_global_rng_alone(gpt2):
    model, tokenizer = gpt2
    state = torch.get_rng_state()
    compare_cache(model, prompt_ids(tokenizer), 3)
    assert torch.equal(torch.get_rng_state(), state)


def test_calculator_entry_from_the_bundled_config_matches_the_real_cache(bundled):
    """The calculator's formula, fed the bundled config, gives the bytes the tensors hold."""
    entry = model_entry_from_hf_config(bundled.model.config.to_dict(), "bundled", bundled.info.parameters)
    trace = run_greedy(bundled.model, bundled.tokenizer, prompt_ids(bundled.tokenizer), 4)
    last = trace.records[-1]
    assert kv_cache_bytes(from_public_entry(entry), last.cache_tokens, bytes_per_element=4) == last.cache_bytes
    assert entry["kv_heads"] < entry["attention_heads"]  # grouped-query attention


def test_kv_cache_page_runs_and_compares_with_and_without_the_cache():
    at = open_app_page("app_pages/kv-cache.py", timeout=120, home_first=True)
    at.slider(key="kv_new_tokens").set_value(24).run()
    at.button(key="kv_compare").click().run()
    assert not at.exception
    titles = [json.loads(chart.proto.spec)["layout"]["title"]["text"] for chart in at.get("plotly_chart")]
    assert "Time per step" in titles and "Total time so far" in titles and "Memory per model" in titles
    assert any(m.label == "Same tokens?" and m.value == "yes ✓" for m in at.metric)
    assert any(s.value.startswith("Both ways chose exactly the same tokens") for s in at.success)
    assert any("**In this run**" in m.value for m in at.markdown)


def test_a_looping_greedy_text_is_named_with_how_often_it_repeats():
    """The phrase that covers most of the text, said at least three times without overlapping; ordinary text and
    a phrase said twice are no loop."""
    loop = [7, 8, 9, 10, 11, 12]
    ids = [1, 2, 3] + loop + [4] + loop + [5, 6] + loop + loop
    phrase = repeated_phrase(ids)
    assert phrase is not None and phrase.ids == tuple(loop) and phrase.times == 4
    assert repeated_phrase(list(range(50))) is None
    assert repeated_phrase([1, 2] + loop + [3] + loop) is None  # twice: a refrain, not a loop
    assert repeated_phrase([5] * 18).times == 3  # 18 equal tokens: three non-overlapping copies of six


def test_the_page_says_when_the_greedy_text_loops_and_links_to_the_repetition_penalty():
    """The default prompt's 200 greedy tokens loop: the page names the phrase and how often, and links to
    Generate's repetition penalty."""
    at = AppTest.from_file(APP_FILE, default_timeout=300)
    at.run()
    at.switch_page("app_pages/kv-cache.py").run()
    at.button(key="kv_compare").click().run()
    assert not at.exception
    notes = [m.value for m in at.markdown if "The greedy text loops" in m.value]
    assert len(notes) == 1 and " times in these 200 tokens" in notes[0]
    links = [el for el in at.get("page_link") if "repetition penalty" in el.proto.label]
    assert len(links) == 1
