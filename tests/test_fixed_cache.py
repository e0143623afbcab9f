"""A KV cache allocated once (`inference.core.fixed_cache`): the same numbers as transformers' DynamicCache path.

Oracles: `FastDecodeForward` and `ShortlistForward` on a DynamicCache, pass for pass (logits and cache bit for bit),
and the KV formula for the block's size."""

import pytest
import torch

from inference.core import fixed_cache
from inference.core.fixed_cache import FixedCacheForward, FixedKV
from inference.core.forward import FastDecodeForward, ShortlistForward
from inference.core.loader import encode_prompt, load_model
from inference.lessons.speculative import drafting, shortlist
from inference.lessons.speculative import run as spec

pytestmark = pytest.mark.unit

PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun"

# (method, token ids or a crop length, positions kept): a prompt, decode steps, verify passes (more than the C pass's
# 8 rows too), crops after rejections, and several tokens through `logits` (transformers' arithmetic: the block
# moves back to a DynamicCache for it)
PASSES = [
    ("few_tokens", None, 1),
    ("logits", [5], 1),
    ("few_tokens", [7, 8, 9, 10, 11], 5),
    ("crop", 3, None),
    ("logits", [12], 1),
    ("few_tokens", list(range(20, 31)), 4),
    ("crop", 2, None),
    ("few_tokens", [3, 4], 2),
    ("logits", [1, 2, 3], 2),
    ("logits", [9], 1),
]


@pytest.fixture(scope="module")
def draft():
    return load_model(str(spec.BUNDLED_DRAFT_DIR))


def replay(reference, fixed, prompt_ids):
    """Run PASSES on both forwards; each pass's logits and the cached length must be equal."""
    for method, ids, keep in PASSES:
        if method == "crop":
            reference.crop_to(len(prompt_ids) + ids)
            fixed.crop_to(len(prompt_ids) + ids)
            continue
        ids = prompt_ids if ids is None else ids
        a, b = getattr(reference, method)(ids, keep), getattr(fixed, method)(ids, keep)
        assert a.shape == b.shape and torch.equal(a, b), (method, len(ids), keep)
        assert fixed.cached_tokens == reference.cached_tokens
    for (keys, values), (fixed_keys, fixed_values) in zip(
        [(layer.keys, layer.values) for layer in reference.cache.layers],
        [(layer.keys, layer.values) for layer in fixed.cache.layers],
    ):
        assert torch.equal(keys, fixed_keys) and torch.equal(values, fixed_values)


def test_the_target_on_a_fixed_block_gives_the_dynamic_caches_logits_bit_for_bit(bundled):
    ids = encode_prompt(bundled.tokenizer, PROMPT)
    fixed = FixedCacheForward(bundled.model, None)
    replay(FastDecodeForward(bundled.model, None), fixed, ids)
    assert fixed.fixed is not None  # the passes after the prompt ran on the block


@pytest.mark.parametrize("size", [None, 256])
def test_the_draft_on_a_fixed_block_gives_the_same_logits_with_and_without_a_shortlist(draft, size):
    ids = encode_prompt(draft.tokenizer, PROMPT)
    rows = None if size is None else shortlist.most_frequent(shortlist.token_counts(spec.BUNDLED_DRAFT_DIR), size)
    reference = FastDecodeForward(draft.model, None) if rows is None else ShortlistForward(draft.model, None, rows)
    replay(reference, FixedCacheForward(draft.model, None, rows), ids)


def test_the_block_grows_past_its_first_capacity_and_refuses_past_the_context(draft, monkeypatch):
    monkeypatch.setattr(fixed_cache, "FIRST_CAPACITY", 8)
    ids = encode_prompt(draft.tokenizer, PROMPT)[:5]
    reference, fixed = FastDecodeForward(draft.model, None), FixedCacheForward(draft.model, None)
    reference.few_tokens(ids), fixed.few_tokens(ids)
    first = fixed.fixed.capacity
    for token in range(40):  # one token at a time, past several doublings
        assert torch.equal(reference.logits([token]), fixed.logits([token]))
    assert fixed.fixed.capacity > first and fixed.cached_tokens == 45
    with pytest.raises(ValueError, match="context"):
        fixed.few_tokens([1] * (fixed.context - fixed.cached_tokens + 1), keep=1)


def test_the_block_holds_what_the_kv_formula_says_per_position(bundled):
    ids = encode_prompt(bundled.tokenizer, PROMPT)
    fixed = FixedCacheForward(bundled.model, None)
    fixed.few_tokens(ids)
    block = fixed.fixed.block
    assert block.nbytes == fixed.kv_shape.formula_bytes(fixed.fixed.capacity)
    assert sum(fixed.cache_layer_bytes()) == fixed.kv_shape.formula_bytes(len(ids))


def test_without_the_fused_pass_it_stays_on_the_dynamic_cache(bundled, gpt2, monkeypatch):
    """The C pass switched off, or a model it cannot run (GPT-2): every pass is FastDecodeForward's own."""
    model, tokenizer = gpt2
    ids = encode_prompt(tokenizer, PROMPT)[:20]
    for target, off in ((bundled.model, True), (model, False)):
        if off:
            monkeypatch.setenv("INFERENCE_LAB_FUSED_STEP", "0")
        fixed = FixedCacheForward(target, None)
        replay(FastDecodeForward(target, None), fixed, ids)
        assert fixed.fixed is None
        monkeypatch.delenv("INFERENCE_LAB_FUSED_STEP", raising=False)


def test_a_fixed_kv_copies_a_dynamic_cache_and_gives_it_back(bundled):
    ids = encode_prompt(bundled.tokenizer, PROMPT)
    dynamic = FastDecodeForward(bundled.model, None)
    dynamic.few_tokens(ids)
    dynamic.crop_to(len(ids) - 3)  # a cropped cache is a strided view
    kv = FixedKV.of(dynamic.cache, bundled.model.config.head_dim, capacity=4)
    assert kv.length == len(ids) - 3 and kv.capacity >= kv.length
    back = kv.to_cache(bundled.model.config)
    for layer, copied in zip(dynamic.cache.layers, back.layers):
        assert torch.equal(layer.keys, copied.keys) and torch.equal(layer.values, copied.values)
    keys, values, strides = kv.past  # what the C pass reads: each layer's K and V in the block, heads capacity apart
    for layer in range(kv.layers):
        assert keys[layer] == kv.block[0, layer].ctypes.data and values[layer] == kv.block[1, layer].ctypes.data
        assert strides[layer] == kv.capacity * kv.head_dim


def test_a_trace_on_the_fixed_block_records_what_it_records_on_the_dynamic_cache(bundled):
    """The step engine's run (the Generate page's): every step's logits, token and measured cache bytes equal, through
    a rewind and new steps after it."""
    from inference.core.run import Trace, new_trace
    from inference.sampling.pipeline import SamplingSettings

    settings = SamplingSettings(temperature=0.8, top_p=0.95)
    ids = encode_prompt(bundled.tokenizer, PROMPT)
    fixed = new_trace(bundled.model, bundled.tokenizer, ids, 14, seed=4)
    dynamic = Trace(
        model=bundled.model,
        tokenizer=bundled.tokenizer,
        prompt_ids=ids,
        max_new_tokens=14,
        seed=4,
        forward=FastDecodeForward(bundled.model, bundled.tokenizer),
    )
    assert isinstance(fixed.forward, FixedCacheForward)
    for trace in (fixed, dynamic):
        list(trace.run(settings, max_steps=8))
        trace.rewind(5)
        list(trace.run(settings))
    assert fixed.forward.fixed is not None
    assert fixed.generated_ids == dynamic.generated_ids
    for a, b in zip(fixed.records, dynamic.records, strict=True):
        assert torch.equal(a.logits, b.logits)
        assert (a.cache_tokens, a.cache_bytes, a.phase) == (b.cache_tokens, b.cache_bytes, b.phase)
    assert fixed.cache_layer_bytes() == dynamic.cache_layer_bytes()


def _loop_in_python(forward, first, gamma, temperature, uniforms, stops):
    """The ModelDrafter's Python loop: choose each token from its row (the first largest logit, or `run.draw`), then
    a one-token pass, stopping after the last token or a stop id."""
    from inference.sampling.pipeline import SamplingSettings

    settings = SamplingSettings(temperature=temperature)
    tokens, rows, qs, logits = [], [], [], first
    for i in range(gamma):
        if temperature == 0:
            token = int(logits.numpy().argmax())
        else:
            q, token = spec.draw(logits, settings, None, uniforms[i])
            qs.append(q)
        tokens.append(token)
        rows.append(logits)
        if i == gamma - 1 or token in stops:
            break
        logits = forward.logits([token])[0]
    return tokens, torch.stack(rows), torch.stack(qs) if qs else None


@pytest.mark.parametrize("temperature", [0.0, 0.8, 1.5])
@pytest.mark.parametrize("size", [None, 512])
def test_a_draft_round_in_c_drafts_what_the_python_loop_drafts(draft, temperature, size):
    """`draft_round` (the whole round in one C call) against the loop it replaces, on the same block after the same
    prompt: the same tokens, each row's logits and q bit for bit, the same cache afterwards; and a stop id ends it."""
    rows = None if size is None else shortlist.most_frequent(drafting.draft_counts(draft), size)
    ids = encode_prompt(draft.tokenizer, PROMPT)
    uniforms = [0.13, 0.92, 0.55, 0.31, 0.77, 0.05]
    gamma, tokens = 6, []
    for stop_at_the_second in (False, True):  # then stop at the second token the round without stops drafted
        in_c, in_python = FixedCacheForward(draft.model, None, rows), FixedCacheForward(draft.model, None, rows)
        first = in_c.few_tokens(ids)[0]
        assert torch.equal(first, in_python.few_tokens(ids)[0])
        stops = {tokens[1]} if stop_at_the_second else ()
        made = in_c.draft_round(first, gamma, temperature, uniforms, stops)
        tokens, logits, q = _loop_in_python(in_python, first, gamma, temperature, uniforms, stops)
        assert made.tokens == tokens and len(made.pass_seconds) == len(tokens) - 1
        assert torch.equal(made.logits, logits)
        assert (made.q is None) == (q is None) and (q is None or torch.equal(made.q, q))
        assert in_c.cached_tokens == in_python.cached_tokens == len(ids) + len(tokens) - 1
        assert torch.equal(in_c.logits([3])[0], in_python.logits([3])[0])  # the same cache after it
    assert len(tokens) == 2  # the stop id ended the last round
    # the catch-up pass in the same call: two unseen tokens, then the round
    made = in_c.draft_round([5, 9], 4, temperature, uniforms, ())
    tokens, logits, q = _loop_in_python(in_python, in_python.few_tokens([5, 9])[0], 4, temperature, uniforms, ())
    assert made.tokens == tokens and torch.equal(made.logits, logits) and len(made.pass_seconds) == len(tokens)
    assert (made.q is None) == (q is None) and (q is None or torch.equal(made.q, q))
    assert torch.equal(in_c.logits([3])[0], in_python.logits([3])[0])
    assert in_c.draft_round(list(range(9)), 4, temperature, uniforms, ()) is None  # more than one pass: Python's


def test_a_speculative_run_drafting_in_c_records_what_the_python_loop_records(bundled, draft, monkeypatch):
    """Whole sampled and greedy runs with the draft's rounds in C and in Python: the same text and the same q and p
    of every check. Also where the draft stops mid-round (its stop ids made three frequent tokens): the C round uses
    one uniform per drafted token, as the loop does, so the runs stay the same after an early stop."""
    from inference.sampling.pipeline import SamplingSettings

    ids = encode_prompt(bundled.tokenizer, PROMPT)
    counts = drafting.draft_counts(draft)
    rows = shortlist.most_frequent(counts, 1024)
    frequent = set(shortlist.most_frequent(counts, 3))

    def run(settings, stops=None):
        drafter = spec.ModelDrafter(draft.model, draft.tokenizer, rows)
        if stops is not None:
            drafter.eos_ids = stops
        made = spec.new_run(bundled.model, bundled.tokenizer, drafter, ids, 40, seed=3)
        records = list(made.run(settings))
        stopped_early = sum(bool(stops and 0 < r.drafted < r.gamma and r.checks[-1].token_id in stops) for r in records)
        checks = [[(c.token_id, c.q, c.p, c.status) for c in r.checks] for r in records]
        return made.generated_ids, checks, stopped_early

    sampled, greedy = SamplingSettings(temperature=0.8), SamplingSettings(temperature=0.0)
    for settings, stops in ((sampled, None), (greedy, None), (sampled, frequent)):
        in_c = run(settings, stops)
        with monkeypatch.context() as patched:
            patched.setattr(spec.ModelDrafter, "_round_in_c", lambda self, first, request: None)
            assert run(settings, stops) == in_c
        if stops:
            assert in_c[2] > 0  # rounds that stopped drafting early happened
