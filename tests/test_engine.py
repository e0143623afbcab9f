"""The step engine against transformers' own `generate`, the KV formula, a golden greedy text, and itself (a page's
kept ranking of the coming step changes no record by a bit, and ranks the vocabulary once a step)."""

import copy
import dataclasses
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from inference.core.kv_cache import KVShape
from inference.core.loader import encode_prompt
from inference.core.run import GREEDY, STOP_CONTEXT, STOP_EOS, STOP_MAX_NEW_TOKENS, new_trace, run_uniforms, warm_up
from inference.sampling import pipeline
from inference.sampling.pipeline import SamplingSettings
from inference.sampling.step_view import step_view
from tests.conftest import transformers_greedy

pytestmark = pytest.mark.unit

WARM = SamplingSettings(temperature=0.9, top_p=0.9, top_k=50)


def prompt_ids(tokenizer, text="Once upon a time, there was a little"):
    return encode_prompt(tokenizer, text)


def run_tokens(model, tokenizer, settings, n=20, seed=0, ids=None):
    trace = new_trace(model, tokenizer, ids or prompt_ids(tokenizer), n, seed)
    return [r.token_id for r in trace.run(settings)], trace


@pytest.fixture(params=["bundled", "gpt2"])
def any_model(request, bundled, gpt2):
    return (bundled.model, bundled.tokenizer) if request.param == "bundled" else gpt2


def test_greedy_equals_model_generate_token_for_token(any_model):
    """Temperature 0 reproduces `model.generate(do_sample=False)` exactly, EOS included."""
    model, tokenizer = any_model
    ids = prompt_ids(tokenizer)
    ours, _ = run_tokens(model, tokenizer, GREEDY, n=40, ids=ids)
    mask = torch.ones(1, len(ids), dtype=torch.long)
    theirs = model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=40, attention_mask=mask)
    assert ours == theirs[0, len(ids) :].tolist()


def test_long_greedy_runs_on_the_kv_cache_equal_model_generate(bundled):
    ids = encode_prompt(bundled.tokenizer, "Tom and his dog went to the")
    trace = new_trace(bundled.model, bundled.tokenizer, ids, 150, stop_at_eos=False)
    assert [r.token_id for r in trace.run(GREEDY)] == transformers_greedy(bundled.model, ids, 150)


def test_measured_kv_bytes_equal_the_formula_every_step(any_model):
    """Bytes read from the cache tensors = 2 x layers x kv_heads x head_dim x tokens x bytes."""
    model, tokenizer = any_model
    _, trace = run_tokens(model, tokenizer, WARM, n=12)
    shape = KVShape.from_config(model.config, torch.float32)
    for r in trace.records:
        assert r.cache_tokens == len(trace.prompt_ids) + r.index
        assert r.cache_bytes == shape.formula_bytes(r.cache_tokens) > 0


def test_seeded_runs_reproduce_and_peeking_or_running_change_nothing(bundled):
    """Same prompt, settings and seed: the same tokens and uniforms, with or without a peek before each step; the
    model's weights untouched."""
    model, tokenizer = bundled.model, bundled.tokenizer
    before = {k: v.clone() for k, v in model.state_dict().items()}
    a, ta = run_tokens(model, tokenizer, WARM, n=15, seed=123)
    c, _ = run_tokens(model, tokenizer, WARM, n=15, seed=124)
    peeked = new_trace(model, tokenizer, prompt_ids(tokenizer), 15, seed=123)
    while not peeked.finished:
        peeked.peek()
        peeked.step(WARM)
    assert peeked.generated_ids == a and [r.u for r in peeked.records] == [r.u for r in ta.records] and a != c
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    frame = ta.to_frame()  # the CSV: one row a step
    assert list(frame["step"]) == list(range(15)) and frame.loc[0, "phase"] == "prefill"
    assert set(frame.loc[1:, "phase"]) == {"decode"}


def test_rewind_then_continue_equals_a_fresh_run_and_back_then_step_redoes_it(bundled):
    """Fork at step 6 with new settings = a fresh run that used those settings from step 6."""
    model, tokenizer = bundled.model, bundled.tokenizer
    other = SamplingSettings(temperature=1.3, min_p=0.05, repetition_penalty=1.2)
    trace = new_trace(model, tokenizer, prompt_ids(tokenizer), 20, seed=5)
    list(trace.run(WARM, max_steps=12))
    trace.peek()  # a waiting forward pass must not confuse the rewind
    trace.rewind(6)
    forked = list(trace.run(other, max_steps=8))
    assert forked[0].reused_forward and not forked[1].reused_forward

    fresh = new_trace(model, tokenizer, prompt_ids(tokenizer), 20, seed=5)
    list(fresh.run(WARM, max_steps=6))
    fresh_rest = list(fresh.run(other, max_steps=8))
    assert trace.generated_ids == fresh.generated_ids
    for a, b in zip(forked, fresh_rest):
        torch.testing.assert_close(a.logits, b.logits, atol=1e-5, rtol=1e-5)
        assert a.cache_tokens == b.cache_tokens

    before = trace.generated_ids
    trace.back()
    assert trace.generated_ids == before[:-1]
    trace.step(other)
    assert trace.generated_ids == before


def test_stops_at_max_new_tokens_at_eos_and_at_the_context_and_says_why(bundled, gpt2):
    trace = new_trace(bundled.model, bundled.tokenizer, prompt_ids(bundled.tokenizer), 7)
    assert len(list(trace.run(WARM))) == 7 and trace.stop_reason == STOP_MAX_NEW_TOKENS
    assert trace.step(WARM) is None

    model, tokenizer = gpt2
    first, _ = run_tokens(model, tokenizer, GREEDY, n=1)
    eos_model = copy.deepcopy(model)  # its own generation config: the first greedy token is its EOS
    eos_model.generation_config.eos_token_id = [first[0]]
    tokens, trace = run_tokens(eos_model, tokenizer, GREEDY, n=30)
    assert tokens == first and trace.stop_reason == STOP_EOS

    # a 128-token context: a 120-token prompt gets exactly 8 of the 100 tokens asked
    trace = new_trace(model, tokenizer, (prompt_ids(tokenizer) * 20)[:120], 100, stop_at_eos=False)
    assert len(list(trace.run(WARM))) == 8 and trace.stop_reason == STOP_CONTEXT and len(trace.all_ids) == 128
    with pytest.raises(ValueError, match="context holds 128"):
        new_trace(model, tokenizer, [1] * 128, 5)


def test_two_threads_on_one_model_each_equal_their_solo_run(bundled):
    """The shared model holds no per-run state: concurrent runs don't disturb each other."""
    model, tokenizer = bundled.model, bundled.tokenizer

    def tokens(seed):
        return run_tokens(model, tokenizer, WARM, n=20, seed=seed)[0]

    with ThreadPoolExecutor(2) as pool:
        assert list(pool.map(tokens, (1, 2))) == [tokens(1), tokens(2)]


def test_run_uniforms_depend_only_on_the_seed():
    """Each seed has its own sequence; a longer run extends it without changing its start."""
    a, b = run_uniforms(7, 50), run_uniforms(8, 50)
    assert torch.equal(run_uniforms(7, 10), a[:10]) and not torch.equal(a, b)
    assert ((a >= 0) & (a < 1)).all()
    for bad in (-1, 2**32, 1.5, "3"):
        with pytest.raises(ValueError, match="`seed`"):
            run_uniforms(bad, 3)


def test_warm_up_only_reads_the_model_and_leaves_the_global_rng_alone(gpt2):
    model, tokenizer = gpt2
    before = {name: p.clone() for name, p in model.state_dict().items()}
    rng = torch.get_rng_state()
    warm_up(model, tokenizer)
    assert torch.equal(torch.get_rng_state(), rng)
    assert all(torch.equal(before[name], p) for name, p in model.state_dict().items())


GOLDEN_PROMPT = "Once upon a time, there was a little dog named Max."
GOLDEN = (
    " Max loved to play with his ball. He would run and jump all day long. One day, Max saw a big box in the yard."
    " He wanted to know what was inside.\nMax tried"
)


def test_greedy_continuation_of_the_bundled_model_is_unchanged(bundled):
    """Any change to the weights, tokenizer, engine or sampling math that alters one token fails here (a model
    retrained on purpose: put its new 40 tokens here with its weights)."""
    trace = new_trace(bundled.model, bundled.tokenizer, prompt_ids(bundled.tokenizer, GOLDEN_PROMPT), 40)
    list(trace.run(GREEDY))
    assert bundled.tokenizer.decode(trace.generated_ids) == GOLDEN


RANKED = {
    "top-p (sorts everything)": SamplingSettings(temperature=0.7, top_p=0.9),
    "top-p with a penalty": SamplingSettings(temperature=1.1, top_p=0.95, repetition_penalty=1.3),
    "top-k (a partial sort)": SamplingSettings(temperature=0.8, top_k=20),
    "greedy": SamplingSettings(temperature=0.0),
    "min-p": SamplingSettings(temperature=1.0, min_p=0.05),
}


def record_fields(trace) -> list[tuple]:
    return [(r.token_id, r.rank, r.prob, r.u, tuple(r.alternatives), r.entropy_bits, r.kept) for r in trace.records]


@pytest.mark.parametrize("name,change_at", [(name, None) for name in RANKED] + [("top-p (sorts everything)", 10)])
def test_a_kept_ranking_gives_the_same_records_to_the_last_bit(bundled, name, change_at):
    """What Generate does (view the coming step with the kept ranking, then Step, the settings maybe changed in
    between) gives the records of a trace that never kept one."""
    model, tokenizer, settings = bundled.model, bundled.tokenizer, RANKED[name]
    plain, paged = (new_trace(model, tokenizer, prompt_ids(tokenizer, "Once upon a time"), 25, 3) for _ in "ab")
    for step in range(25):
        now = dataclasses.replace(settings, temperature=1.3) if step == change_at else settings
        plain.step(now)
        if not paged.finished:
            kept = step_view(paged.peek(), settings, paged.seen_now(), u=paged.next_uniform(),
                             ranked=paged.ranked_next(settings))  # fmt: skip
            assert (
                kept.chosen_id == step_view(paged.peek(), settings, paged.seen_now(), u=paged.next_uniform()).chosen_id
            )
            paged.step(now)
    assert record_fields(paged) == record_fields(plain)


def test_the_vocabulary_is_ranked_once_a_step_where_top_p_sorts_it(bundled, monkeypatch):
    calls, real = [], pipeline.ranked_stages
    import inference.core.run as run

    counted = lambda *a, **k: calls.append(1) or real(*a, **k)
    monkeypatch.setattr(pipeline, "ranked_stages", counted)  # the draw's own ranking
    monkeypatch.setattr(run, "ranked_stages", counted)  # ranked_next's
    trace = new_trace(bundled.model, bundled.tokenizer, prompt_ids(bundled.tokenizer, "Once upon a time"), 10, 3)
    settings = RANKED["top-p (sorts everything)"]
    for _ in range(10):
        trace.ranked_next(settings)
        trace.step(settings)
    assert len(calls) == 10  # ranked_next's; each draw reused it
    calls.clear()
    trace.back()
    trace.ranked_next(settings)
    trace.back()  # the pass it ranked is gone: the draw must rank its own
    trace.step(settings)
    assert len(calls) == 2
