"""Speculative decoding: the output is provably the target's, greedy and sampled.

Oracles: plain greedy decoding with the step engine, transformers' assisted generation, and the
target's own next-token distributions (20,000 draws against them, chi-square and total variation).
"""

import copy
import ctypes
import functools
import math
import types

import numpy as np
import pytest
import torch
from scipy.stats import chisquare
from transformers import DynamicCache

from inference.core import kv_cache
from inference.core.loader import encode_prompt, load_model
from inference.core.measuring import GREEDY
from inference.core.run import new_trace
from inference.lessons.speculative import run as spec
from inference.lessons.speculative import shortlist
from inference.sampling import pipeline
from inference.sampling.pipeline import SamplingSettings, seen_mask

pytestmark = pytest.mark.unit

PROMPTS = [
    "Once upon a time, there was a little girl named Lily. She loved to play outside",
    "Tom and his dog went to the park. The dog saw a ball and",
    "The sun was hot. Ben wanted to swim in the lake, but his mom said",
    "One day, a big red bird flew into the garden. The bird was sad because",
]
NEW_TOKENS = 150
DRAWS = 20_000
MIN_BIN = 0.005  # tokens above 0.5% get their own chi-square bin, the rest share one
P_FLOOR = 0.001
TV_CEILING = 0.02


@pytest.fixture(scope="module")
def draft(bundled):
    return load_model(str(spec.BUNDLED_DRAFT_DIR))


def plain_greedy(bundled, ids, new_tokens, stop_at_eos=False):
    trace = new_trace(bundled.model, bundled.tokenizer, ids, new_tokens, stop_at_eos=stop_at_eos)
    list(trace.run(GREEDY))
    return trace.generated_ids


@pytest.fixture(scope="module")
def plain_texts(bundled):
    """Each prompt's 150 plain greedy tokens, decoded once for both drafters' tests."""
    return {prompt: plain_greedy(bundled, encode_prompt(bundled.tokenizer, prompt), NEW_TOKENS) for prompt in PROMPTS}


def speculative_greedy(bundled, drafter, ids, new_tokens, gamma=4, stop_at_eos=False):
    run = spec.new_run(bundled.model, bundled.tokenizer, drafter, ids, new_tokens, gamma=gamma, stop_at_eos=stop_at_eos)
    list(run.run(GREEDY))
    return run


# -- greedy: token for token --------------------------------------------------------------------


def test_greedy_speculation_with_the_draft_model_equals_plain_greedy_token_for_token(bundled, draft, plain_texts):
    """4 prompts x 150 tokens: speculative greedy decoding with the draft model makes plain greedy's tokens."""
    accepted = 0
    for prompt in PROMPTS:
        ids = encode_prompt(bundled.tokenizer, prompt)
        run = speculative_greedy(bundled, spec.ModelDrafter(draft.model, draft.tokenizer), ids, NEW_TOKENS)
        assert run.generated_ids == plain_texts[prompt], prompt
        accepted += spec.summarise(run.rounds).accepted
    assert accepted > 0  # the drafts were really used, not all thrown away


def test_greedy_speculation_with_prompt_lookup_equals_plain_greedy_token_for_token(bundled, plain_texts):
    """4 prompts x 150 tokens: speculative greedy decoding with prompt lookup makes plain greedy's tokens."""
    accepted = 0
    for prompt in PROMPTS:
        ids = encode_prompt(bundled.tokenizer, prompt)
        run = speculative_greedy(
            bundled, spec.PromptLookupDrafter(spec.vocabulary_rows(bundled.model)), ids, NEW_TOKENS
        )
        assert run.generated_ids == plain_texts[prompt], prompt
        accepted += spec.summarise(run.rounds).accepted
    assert accepted > 0


def test_transformers_assisted_generation_makes_our_greedy_tokens(bundled, draft):
    """transformers' `assistant_model=` and `prompt_lookup_num_tokens=` give the tokens our greedy speculation gives."""
    for prompt in PROMPTS[:2]:
        ids = encode_prompt(bundled.tokenizer, prompt)
        input_ids = torch.tensor([ids])
        common = dict(
            attention_mask=torch.ones_like(input_ids),
            do_sample=False,
            max_new_tokens=NEW_TOKENS,
            pad_token_id=bundled.tokenizer.eos_token_id,
        )
        with torch.inference_mode():
            assisted = bundled.model.generate(input_ids, assistant_model=draft.model, **common)[0, len(ids) :].tolist()
            lookup = bundled.model.generate(input_ids, prompt_lookup_num_tokens=4, **common)[0, len(ids) :].tolist()
        ours = speculative_greedy(
            bundled, spec.ModelDrafter(draft.model, draft.tokenizer), ids, NEW_TOKENS, stop_at_eos=True
        ).generated_ids
        ours_lookup = speculative_greedy(
            bundled, spec.PromptLookupDrafter(4096), ids, NEW_TOKENS, stop_at_eos=True
        ).generated_ids
        assert ours == assisted == lookup == ours_lookup, prompt


# -- sampled: the target's own distribution ------------------------------------------------------


class Tables:
    """Final next-token distributions (the app's pipeline) of target and draft after a context, and
    after the context plus any one token that can come first: everything the first two tokens need."""

    def __init__(self, target, draft, ids, settings, shortlist=None):
        self.settings, self.shortlist = settings, shortlist
        self.p1, self.q1 = self._rows(target, draft, [ids])
        vocab = len(self.p1[0])
        support = ((self.p1[0] > 0) | (self.q1[0] > 0)).nonzero().squeeze(-1).tolist()
        p2, q2 = self._rows(target, draft, [ids + [a] for a in support])
        self.p2 = dict(zip(support, p2))
        self.q2 = dict(zip(support, q2))
        self.p1, self.q1 = self.p1[0], self.q1[0]
        # The target's own law of the second token: sum over a of p1(a) p(. | a).
        self.second = sum(float(self.p1[a]) * self.p2[a] for a in support if self.p1[a] > 0)
        assert len(support) < vocab // 4  # the settings keep few tokens, so the tables stay small

    def _rows(self, target, draft, contexts):
        batch = torch.tensor(contexts)
        seen = torch.stack([seen_mask(c, target.config.vocab_size) for c in contexts])
        with torch.inference_mode():
            p = spec.final_probs(target(batch).logits[:, -1].float(), self.settings, seen)
            q_logits = draft(batch).logits[:, -1].float()
            if self.shortlist is not None:  # a shortlist draft: every other token's logit is -inf (q = 0)
                outside = torch.ones(q_logits.shape[-1], dtype=torch.bool)
                outside[self.shortlist] = False
                q_logits[:, outside] = -torch.inf
            q = spec.final_probs(q_logits, self.settings, seen)
        return p, q

    def on_support(self) -> "Tables":
        """The same tables over only the tokens some row can produce (in id order), padded with zeros to just
        past the size where `sample_index` starts its draw in the head, as it does on the real vocabulary.
        Every row is zero elsewhere, so the library's draws and accept/reject decisions are the same ones
        (`test_draws_on_the_support_are_the_draws_on_the_whole_vocabulary` checks it), and each costs a
        fraction: the head's `argpartition` over 4,096 tokens was most of a draw's time."""
        rows = [self.p1, self.q1, *self.p2.values(), *self.q2.values()]
        ids = (torch.stack(rows) > 0).any(dim=0).nonzero().squeeze(-1)
        padding = torch.zeros(max(0, spec.SHORT_ROW + 1 - len(ids)), dtype=self.p1.dtype)
        new_id = {token: i for i, token in enumerate(ids.tolist())}
        on_support = lambda row: torch.cat([row[ids], padding])  # noqa: E731
        small = copy.copy(self)
        small.ids = ids
        small.p1, small.q1, small.second = on_support(self.p1), on_support(self.q1), on_support(self.second)
        small.p2 = {new_id[a]: on_support(row) for a, row in self.p2.items()}
        small.q2 = {new_id[a]: on_support(row) for a, row in self.q2.items()}
        return small


def speculative_first_two(t: Tables, gamma: int, uniform) -> tuple[int, int]:
    """The first two new tokens of a speculative run, with the library's own draw and accept/reject
    rule on the real models' rows. gamma 2 reaches the second draft's test and its residual; gamma 1
    the bonus token. A third token is never looked at, so its row is a stand-in."""
    x1 = spec.sample_index(t.q1, uniform())
    drafted, q_rows, p_rows = [x1], [t.q1], [t.p1, t.p2[x1]]
    if gamma == 2:
        x2 = spec.sample_index(t.q2[x1], uniform())
        drafted.append(x2)
        q_rows.append(t.q2[x1])
        p_rows.append(t.p2[x1])  # stand-in for p(. | x1, x2): only the third token would come from it
    verdict = spec.verify_sampled(torch.stack(p_rows), torch.stack(q_rows), drafted, uniform)
    tokens = drafted[: verdict.accepted] + [verdict.token_id]
    if len(tokens) >= 2:
        return tokens[0], tokens[1]
    first = tokens[0]  # the next round starts after it: draft one token, test it
    x = spec.sample_index(t.q2[first], uniform())
    verdict = spec.verify_sampled(torch.stack([t.p2[first], t.p2[first]]), t.q2[first].unsqueeze(0), [x], uniform)
    return first, (x if verdict.accepted else verdict.token_id)


def accept_every_draft(t: Tables, gamma: int, uniform) -> tuple[int, int]:
    """A deliberately wrong speculative sampler: it keeps every drafted token unchecked."""
    x1 = spec.sample_index(t.q1, uniform())
    return x1, spec.sample_index(t.q2[x1], uniform())


def agreement(samples: list[int], expected: torch.Tensor) -> tuple[float, float]:
    """(chi-square p-value, total-variation distance) of draws against a distribution, over bins:
    every token above 0.5%, plus one 'other' bin for the rest."""
    big = (expected > MIN_BIN).nonzero().squeeze(-1).tolist()
    index = {token: i for i, token in enumerate(big)}
    observed = torch.zeros(len(big) + 1, dtype=torch.float64)
    for token in samples:
        observed[index.get(token, len(big))] += 1
    probs = torch.cat([expected[big], (1 - expected[big].sum()).clamp(min=0).reshape(1)])
    observed, probs = observed.numpy(), probs.numpy()
    if probs[-1] <= 1e-12:  # the settings leave nothing outside the big tokens: no draw may land there
        if observed[-1] > 0:  # some did, on tokens the target cannot produce: the draws are not the target's
            return 0.0, 0.5 * float(abs(observed / len(samples) - probs).sum())
        observed, probs = observed[:-1], probs[:-1]
    p_value = chisquare(observed, probs / probs.sum() * len(samples)).pvalue
    return float(p_value), 0.5 * float(abs(observed / len(samples) - probs).sum())


CASES = {
    "T=1, top-k 40, gamma 2": ("Once upon a time, there was a little", SamplingSettings(temperature=1.0, top_k=40), 2),
    "T=0.7, top-p 0.9, penalty 1.3, gamma 1": (
        "Tom and his dog went to the park. The dog",
        SamplingSettings(temperature=0.7, top_p=0.9, repetition_penalty=1.3),
        1,
    ),
    # A draft scoring its 256 most frequent tokens only (q = 0 elsewhere): the target's tokens outside them can only
    # come from the residual, and the text must still follow p.
    "T=1, top-k 40, gamma 2, draft shortlist 256": (
        "Once upon a time, there was a little",
        SamplingSettings(temperature=1.0, top_k=40),
        2,
        256,
    ),
}


@pytest.fixture(scope="module", params=list(CASES))
def case(request, bundled, draft):
    prompt, settings, gamma, *size = CASES[request.param]
    rows = shortlist.most_frequent(shortlist.token_counts(spec.BUNDLED_DRAFT_DIR), size[0]) if size else None
    tables = Tables(bundled.model, draft.model, encode_prompt(bundled.tokenizer, prompt), settings, rows)
    if rows is not None:  # the case tests what it says: the target wants tokens the draft cannot propose
        outside = [t for t in (tables.p1 > 0).nonzero().squeeze(-1).tolist() if t not in set(rows)]
        assert outside and float(tables.q1[outside].sum()) == 0.0
    return tables, gamma


def seeded_uniforms(seed: int):
    """`uniform()` for the samplers: float64 uniforms from one seeded generator, made 4,096 at a time."""
    gen = torch.Generator().manual_seed(seed)

    def stream():
        while True:
            yield from torch.rand(4096, generator=gen, dtype=torch.float64).tolist()

    return functools.partial(next, stream())


def draws(sampler, tables, gamma, seed=0, n=DRAWS):
    uniform = seeded_uniforms(seed)
    pairs = [sampler(tables, gamma, uniform) for _ in range(n)]
    return [a for a, _ in pairs], [b for _, b in pairs]


def test_draws_on_the_support_are_the_draws_on_the_whole_vocabulary(case):
    """The first 500 speculative (and unchecked) draws on the support-only tables are the same tokens, renumbered,
    as on the real 4,096-token rows: the 20,000-draw checks below run on the cheaper tables."""
    tables, gamma = case
    small = tables.on_support()
    for sampler in (speculative_first_two, accept_every_draft):
        whole = draws(sampler, tables, gamma, n=500)
        support = draws(sampler, small, gamma, n=500)
        assert [small.ids[tokens].tolist() for tokens in support] == list(whole)


def test_speculative_draws_of_the_first_and_second_token_follow_the_targets_distribution(case):
    """20,000 speculative draws: chi-square p > 0.001 and TV < 0.02 against the target's own first- and second-token law."""
    tables, gamma = case
    tables = tables.on_support()
    first, second = draws(speculative_first_two, tables, gamma)
    for samples, expected in ((first, tables.p1), (second, tables.second)):
        p_value, tv = agreement(samples, expected)
        assert p_value > P_FLOOR and tv < TV_CEILING, (p_value, tv)


def test_accepting_every_draft_token_fails_the_same_check(case):
    """The same check catches a wrong sampler that never rejects (its text follows the draft, not the target)."""
    tables, gamma = case
    tables = tables.on_support()
    first, second = draws(accept_every_draft, tables, gamma)
    for samples, expected in ((first, tables.p1), (second, tables.second)):
        p_value, tv = agreement(samples, expected)
        assert p_value < P_FLOOR or tv > TV_CEILING, (p_value, tv)


def test_a_round_record_obeys_the_rule_it_shows(bundled, draft):
    """Every recorded check: accepted iff u <= p/q, in order; the round's new tokens are the kept drafts and one target token."""
    ids = encode_prompt(bundled.tokenizer, PROMPTS[0])
    run = spec.new_run(
        bundled.model, bundled.tokenizer, spec.ModelDrafter(draft.model, draft.tokenizer), ids, 60, gamma=4, seed=7
    )
    rounds = list(run.run(SamplingSettings(temperature=0.9)))
    assert sum(r.token_kind == "residual" for r in rounds) > 0
    for r in rounds:
        statuses = [c.status for c in r.checks]
        assert statuses == ["accepted"] * r.accepted + (
            ["rejected"] + ["unchecked"] * (r.drafted - r.accepted - 1) if r.accepted < r.drafted else []
        )
        for c in r.checks:
            if c.status != "unchecked":
                assert math.isclose(c.ratio, c.p / c.q) and (c.u <= c.ratio) == (c.status == "accepted")
        assert r.new_tokens[:-1] == [c.token_id for c in r.checks[: r.accepted]]
        assert r.new_tokens[-1] == r.token_id
        if r.token_kind == "residual":
            assert r.residual_top and abs(sum(x[4] for x in r.residual_top)) <= 1 + 1e-9
            rejected = r.checks[r.accepted]
            assert all(
                res >= max(0.0, p - q) - 1e-12 for _, _, p, q, res in r.residual_top
            )  # normalised: divided by <= 1
            assert rejected.p < rejected.q
    assert run.generated_ids == [t for r in rounds for t in r.new_tokens]


def test_same_seed_same_text_and_the_global_rng_is_untouched(bundled, draft):
    """A seed replays a sampled speculative run exactly, drawing only from the run's own generator."""
    ids = encode_prompt(bundled.tokenizer, PROMPTS[1])
    state = torch.get_rng_state()
    texts = []
    for _ in range(2):
        run = spec.new_run(
            bundled.model, bundled.tokenizer, spec.ModelDrafter(draft.model, draft.tokenizer), ids, 40, gamma=3, seed=11
        )
        list(run.run(SamplingSettings(temperature=1.0, top_p=0.95)))
        texts.append(run.generated_ids)
    assert texts[0] == texts[1]
    assert torch.equal(torch.get_rng_state(), state)


# -- caches ------------------------------------------------------------------------------------------


def test_after_a_rejection_both_caches_hold_exactly_the_accepted_prefix(bundled, draft):
    """Lengths, bytes and contents: each cache equals a fresh prefill of the text minus its last token."""
    ids = encode_prompt(bundled.tokenizer, PROMPTS[2])
    drafter = spec.ModelDrafter(draft.model, draft.tokenizer)
    run = spec.new_run(bundled.model, bundled.tokenizer, drafter, ids, 80, gamma=6, seed=3)
    rejections = 0
    for record in run.run(SamplingSettings(temperature=1.0)):
        if record.token_kind != "residual":
            continue
        rejections += 1
        prefix = run.all_ids[:-1]  # every accepted token; the target's own last token is fed next round
        for model, cache in ((bundled.model, run.cache), (draft.model, drafter.cache)):
            assert kv_cache.cache_length(cache) == len(prefix)
            shape = kv_cache.KVShape.from_config(model.config, torch.float32)
            assert kv_cache.measured_bytes(cache) == shape.formula_bytes(len(prefix))
            fresh = DynamicCache(config=model.config)
            with torch.inference_mode():
                model(input_ids=torch.tensor([prefix]), cache=fresh, use_cache=True)
            for (k, v), (fk, fv) in zip(kv_cache.layer_tensors(cache), kv_cache.layer_tensors(fresh)):
                torch.testing.assert_close(k, fk, atol=1e-4, rtol=1e-4)
                torch.testing.assert_close(v, fv, atol=1e-4, rtol=1e-4)
        assert record.target_cache_tokens == record.draft_cache_tokens == len(prefix)
        if rejections >= 3:
            break
    assert rejections >= 3


# -- bad input -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("gamma", [0, 17, -1, 2.5, True])
def test_gamma_outside_1_to_16_is_refused_with_a_message(bundled, gamma):
    """gamma must be an integer from 1 to 16; the message names it and the value."""
    with pytest.raises(spec.SpeculationError, match=r"`gamma`.*from 1 to 16"):
        spec.new_run(bundled.model, bundled.tokenizer, spec.PromptLookupDrafter(4096), [0, 1, 2], 10, gamma=gamma)


class CountingForward:
    def __init__(self, *models):
        self.calls = 0
        self.handles = [m.register_forward_pre_hook(self.count) for m in models]

    def count(self, *_):
        self.calls += 1

    def remove(self):
        for h in self.handles:
            h.remove()


def test_a_draft_with_another_vocabulary_is_refused_before_any_forward_pass(bundled):
    """A draft scoring other tokens gets "the draft must use the target's tokenizer", and no model runs."""
    from transformers import LlamaConfig, LlamaForCausalLM

    other = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=1000,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
        )
    ).eval()
    counter = CountingForward(bundled.model, other)
    try:
        with pytest.raises(spec.SpeculationError, match=spec.TOKENIZER_MISMATCH):
            spec.new_run(bundled.model, bundled.tokenizer, spec.ModelDrafter(other, bundled.tokenizer), [0, 1], 10)
    finally:
        counter.remove()
    assert counter.calls == 0


def test_a_draft_with_the_same_size_but_other_tokens_is_refused(bundled, draft):
    """Same vocabulary size is not enough: the token strings must be the same."""

    class OtherTokens:
        def get_vocab(self):
            vocab = dict(bundled.tokenizer.get_vocab())
            first, second = list(vocab)[:2]
            vocab[first], vocab[second] = vocab[second], vocab[first]
            return vocab

    with pytest.raises(spec.SpeculationError, match=spec.TOKENIZER_MISMATCH):
        spec.check_pair(bundled.model, bundled.tokenizer, draft.model, OtherTokens())


def test_a_draft_larger_than_its_target_is_refused(bundled, gpt2):
    """The bundled model cannot draft for a smaller model with the same tokenizer."""
    small, tokenizer = gpt2
    with pytest.raises(spec.SpeculationError, match="larger than the target"):
        spec.new_run(small, tokenizer, spec.ModelDrafter(bundled.model, bundled.tokenizer), [0, 1], 10)


def test_prompt_lookup_on_text_without_repeats_drafts_nothing_and_says_so(bundled):
    """No earlier occurrence of the last tokens: the round drafts nothing, says so, and is one plain step."""
    ids = [0, 11, 12, 13, 14, 15]
    run = spec.new_run(bundled.model, bundled.tokenizer, spec.PromptLookupDrafter(4096), ids, 5)
    record = run.step(GREEDY)
    assert record.drafted == 0 and record.verify_positions == 1
    assert "drafted nothing" in record.note
    assert run.generated_ids == plain_greedy(bundled, ids, 1)


def test_prompt_lookup_copies_what_followed_the_latest_match():
    """The last 3 tokens (then fewer) are searched backwards; the tokens after the match are the draft."""
    assert spec.find_lookup([5, 1, 2, 3, 9, 8, 1, 2, 3]) == spec.LookupMatch(3, 1, 4)
    assert spec.find_lookup([1, 2, 7, 1, 2, 8, 4, 2], min_ngram=1) == spec.LookupMatch(1, 4, 5)
    assert spec.find_lookup([1, 2, 7, 1, 2, 8, 4, 2]) is None  # one token in common is not enough by default
    assert spec.find_lookup([1, 2, 7, 1, 2, 8, 4, 1, 2]) == spec.LookupMatch(2, 3, 5)
    assert spec.find_lookup([1, 2, 3]) is None
    drafter = spec.PromptLookupDrafter(10)
    request = spec.DraftRequest([5, 1, 2, 3, 9, 8, 1, 2, 3], 3, GREEDY, torch.zeros(10, dtype=torch.bool), lambda: 0.5)
    proposal = drafter.propose(request)
    assert proposal.tokens == [9, 8, 1]


def test_drafts_never_push_a_run_past_max_new_tokens(bundled, draft):
    """A run stops at exactly max new tokens, the last rounds drafting fewer tokens and saying why."""
    ids = encode_prompt(bundled.tokenizer, PROMPTS[0])
    run = speculative_greedy(bundled, spec.ModelDrafter(draft.model, draft.tokenizer), ids, 7, gamma=16)
    assert len(run.generated_ids) == 7 and run.stop_reason == "max_new_tokens"
    assert run.rounds[0].drafted <= 6 and "may add only" in run.rounds[0].note


# -- theory --------------------------------------------------------------------------------------------


def test_expected_tokens_per_pass_is_the_geometric_sum():
    """(1 - a^(g+1)) / (1 - a): 1 at a = 0, g + 1 at a = 1, 1.9375 at a = 0.5, g = 4."""
    assert spec.expected_tokens_per_pass(0.0, 4) == 1
    assert spec.expected_tokens_per_pass(1.0, 4) == 5
    assert spec.expected_tokens_per_pass(0.5, 4) == pytest.approx(1.9375)
    assert spec.expected_tokens_per_pass(0.8, 3) == pytest.approx(sum(0.8**i for i in range(4)))


def test_predicted_speedup_and_break_even():
    """Speed-up = tokens per pass / (g c + 1); break-even alpha gives exactly 1; a costly draft always loses."""
    assert spec.predicted_speedup(0.8, 4, 0.1) == pytest.approx(spec.expected_tokens_per_pass(0.8, 4) / 1.4)
    alpha = spec.break_even_alpha(4, 0.3)
    assert spec.predicted_speedup(alpha, 4, 0.3) == pytest.approx(1.0, abs=1e-9)
    assert spec.break_even_alpha(4, 1.5) is None  # 5 tokens at best for the cost of 7 passes


def test_sample_index_picks_what_the_whole_display_order_picks():
    """The draw decided in the head (the most likely tokens and their ties) is the draw over the whole stable
    order: peaked and flat distributions, many exact ties, filtered (zero) tokens, u at both ends."""
    from inference.sampling.pipeline import inverse_cdf_index

    def whole_order(probs, u):
        order = torch.sort(probs, descending=True, stable=True).indices
        return int(order[inverse_cdf_index(probs[order], u)])

    generator = torch.Generator().manual_seed(0)
    for trial in range(150):
        logits = torch.randn(4096, generator=generator, dtype=torch.float64) * (0.3 + trial % 7)
        if trial % 3 == 0:
            logits = logits.round()  # thousands of exact ties, some across the head's cut
        if trial % 5 == 0:
            logits[torch.rand(4096, generator=generator) < 0.6] = -math.inf
        probs = logits.softmax(-1)
        for u in torch.rand(12, generator=generator, dtype=torch.float64).tolist() + [0.0, 1 - 1e-12]:
            assert spec.sample_index(probs, u) == whole_order(probs, u), (trial, u)


def test_the_penalty_sees_the_drafted_tokens_before_each_position_and_off_nothing_is_built():
    base = seen_mask([3], 8)
    rows = spec.running_seen(base, [5, 6], SamplingSettings(temperature=0.8, repetition_penalty=1.2))
    assert rows.tolist() == [
        [i == 3 for i in range(8)],
        [i in (3, 5) for i in range(8)],
        [i in (3, 5, 6) for i in range(8)],
    ]
    assert spec.running_seen(base, [5, 6], SamplingSettings(temperature=0.8)) is base  # penalty 1 reads no seen


def test_with_the_penalty_off_a_rounds_p_is_the_targets_distribution_after_the_text(bundled, draft):
    """p of each drafted token, recorded by a round without the penalty, is the target's own final distribution
    after the text so far and the drafts before it (one pass of the whole text, transformers' forward)."""
    settings = SamplingSettings(temperature=0.8, top_p=0.9)
    ids = encode_prompt(bundled.tokenizer, PROMPTS[1])
    run = spec.new_run(bundled.model, bundled.tokenizer, spec.ModelDrafter(draft.model, draft.tokenizer), ids, 12)
    record = run.step(settings)
    drafted = [c.token_id for c in record.checks]
    with torch.inference_mode():
        logits = bundled.model(input_ids=torch.tensor([ids + drafted])).logits[0, len(ids) - 1 : -1]
    p = spec.final_probs(logits.float(), settings, seen_mask(ids, logits.shape[-1]))
    expected = [float(p[i, t]) for i, t in enumerate(drafted)]
    assert [c.p for c in record.checks] == pytest.approx(expected, abs=1e-5)


def test_the_lookup_search_finds_what_a_plain_scan_finds():
    """The byte search (`bytes.rfind` over 4 bytes a token) against the plain backwards scan it replaced, on random
    texts over tiny and huge vocabularies (hits across token boundaries are only possible in the bytes)."""
    import random

    def scan(ids, max_ngram, min_ngram):
        for n in range(min(max_ngram, len(ids) - 1), min_ngram - 1, -1):
            for start in range(len(ids) - n - 1, -1, -1):
                if ids[start : start + n] == ids[-n:]:
                    return spec.LookupMatch(n, start, start + n)
        return None

    rng = random.Random(0)
    for _ in range(3000):
        vocab = rng.choice([2, 3, 300, 70_000, 2**24])
        ids = [rng.randrange(vocab) for _ in range(rng.randint(0, 40))]
        for min_ngram in (1, 2, 3):
            assert spec.find_lookup(ids, 3, min_ngram) == scan(ids, 3, min_ngram), (ids, min_ngram)
    # bytes 00 01 00 00 | 00 00 00 00 | 01 00 00 00: the last token's bytes start at byte 1, inside token 256
    assert spec.find_lookup([256, 0, 1], min_ngram=1) is None


def test_a_summary_says_when_its_verify_pass_is_round_0s_with_the_prompt(bundled, draft):
    ids = encode_prompt(bundled.tokenizer, "Once upon a time")
    run = spec.new_run(bundled.model, bundled.tokenizer, spec.ModelDrafter(draft.model, draft.tokenizer), ids, 20)
    run.step(GREEDY)
    assert spec.summarise(run.rounds).verify_read_prompt
    assert spec.summarise(run.rounds).verify_pass_ms == run.rounds[0].verify_ms
    run.step(GREEDY)
    assert not spec.summarise(run.rounds).verify_read_prompt
    assert spec.summarise(run.rounds).verify_pass_ms == run.rounds[1].verify_ms  # round 0's pass left out


@pytest.mark.parametrize("size", [None, 256])
def test_each_record_keeps_its_own_rule_and_t1_probabilities_are_made_only_for_a_drawn_round(bundled, draft, size):
    """A run whose settings change between rounds: each record says whether it was greedy. A greedy round's T=1
    probabilities are not made in the round; `with_t1_probabilities` makes them, from the newest round's own logits
    or, for an older round, from each model's forward over the text: both the models' softmax of the drafted tokens.
    A sampled round comes back as it is (its chart shows p and q). A shortlist draft's q is over its shortlist."""
    ids = encode_prompt(bundled.tokenizer, PROMPTS[0])
    rows = None if size is None else shortlist.most_frequent(shortlist.token_counts(spec.BUNDLED_DRAFT_DIR), size)
    drafter = spec.ModelDrafter(draft.model, draft.tokenizer, rows)
    run = spec.new_run(bundled.model, bundled.tokenizer, drafter, ids, 40)
    sampled = run.step(SamplingSettings(temperature=1.0))
    older, newest = run.step(GREEDY), run.step(GREEDY)
    assert not sampled.greedy and older.greedy and newest.greedy
    assert run.with_t1_probabilities(sampled) is sampled
    for record in (older, newest):
        assert record.checks and all(c.p_raw is None and c.q_raw is None for c in record.checks)
        filled = run.with_t1_probabilities(record)
        committed = (ids + run.generated_ids)[: record.context_tokens]
        text = torch.tensor([committed + [c.token_id for c in record.checks]])
        with torch.inference_mode():
            p, q = bundled.model(text).logits[0].double(), draft.model(text).logits[0].double()
            if rows is not None:
                outside = torch.ones(q.shape[-1], dtype=torch.bool)
                outside[rows] = False
                q[:, outside] = -torch.inf
        start = record.context_tokens - 1
        for i, check in enumerate(filled.checks):
            assert check.p_raw == pytest.approx(float(p[start + i].softmax(-1)[check.token_id]), abs=1e-5)
            assert check.q_raw == pytest.approx(float(q[start + i].softmax(-1)[check.token_id]), abs=1e-5)
        assert run.with_t1_probabilities(record) == filled  # kept once made


def test_the_head_draw_in_c_picks_what_numpy_picks_on_ties_zeros_and_long_tails():
    """draws.c against the numpy head draw (and both against the whole display order): rows with many exact ties,
    top-k's zeros (the head then holds every zero), a flat row (every token ties), long tails whose head rarely
    reaches u (both say -1: the caller orders the whole row), and peaked softmax rows."""
    gen = torch.Generator().manual_seed(0)
    rows = []
    for vocab in (257, 4096):
        rows.append(torch.rand(vocab, generator=gen, dtype=torch.float64))  # long tail
        tied = torch.randint(0, 5, (vocab,), generator=gen).double()  # many exact ties
        rows.append(tied)
        sparse = torch.zeros(vocab, dtype=torch.float64)
        sparse[torch.randperm(vocab, generator=gen)[:40]] = torch.rand(40, generator=gen, dtype=torch.float64)
        rows.append(sparse)  # top-k 40: the head holds every zero too
        rows.append(torch.ones(vocab, dtype=torch.float64))  # flat: every token ties with the head's last
        rows.append(torch.randn(vocab, generator=gen, dtype=torch.float64).mul(4).softmax(-1))
    rows = [row / row.sum() for row in rows]
    uniforms = torch.rand(200, generator=gen, dtype=torch.float64).tolist() + [0.0, 0.999999]
    decided = 0
    for row in rows:
        order = torch.sort(row, descending=True, stable=True).indices
        for u in uniforms:
            in_c, in_numpy = spec.head_draw_in_c(row.numpy(), u), spec.head_draw_numpy(row.numpy(), u)
            assert in_c == in_numpy, (len(row), u)
            if in_c >= 0:
                decided += 1
                assert in_c == int(order[pipeline.inverse_cdf_index(row[order], u)])
            assert spec.sample_index(row, u) == int(order[pipeline.inverse_cdf_index(row[order], u)])
    assert decided > len(rows) * len(uniforms) // 2  # most draws were decided in the head


@pytest.mark.parametrize(
    "settings",
    [
        SamplingSettings(temperature=0.8),
        SamplingSettings(temperature=1.3),
        SamplingSettings(temperature=1.0),
        SamplingSettings(temperature=0.8, top_k=40),  # other stages acting: the whole pipeline runs
        SamplingSettings(temperature=0.8, top_p=0.9, repetition_penalty=1.3),
    ],
)
def test_final_probs_when_temperature_alone_acts_are_the_whole_pipelines_bit_for_bit(settings):
    """The short cut skips the switched-off stages (each a copy): the same float64 numbers as every stage run."""
    from inference.sampling.pipeline import final_stage, stage_logits

    generator = torch.Generator().manual_seed(3)
    logits = torch.randn(5, 4096, generator=generator) * 4
    logits[:, ::7] = -math.inf  # a shortlist draft's rows
    seen = seen_mask([1, 2, 3, 700], 4096)
    whole = stage_logits(logits, settings, seen)[final_stage(settings)].double().softmax(dim=-1)
    assert torch.equal(spec.final_probs(logits, settings, seen), whole)
    assert torch.equal(spec.final_probs(logits[2], settings, seen), whole[2])


def _rows_a_draw_meets():
    """[6, 4096] logits: plain rows, a shortlist draft's rows (-inf outside 1,024 tokens), a row with a logit more
    than 700 below the top (libm's exp in draws.c) and a peaked one."""
    generator = torch.Generator().manual_seed(5)
    logits = torch.randn(6, 4096, generator=generator) * 4
    outside = torch.ones(4096, dtype=torch.bool)
    outside[torch.randperm(4096, generator=generator)[:1024]] = False
    logits[2:4, outside] = -math.inf
    logits[4, :7] = -2000.0
    logits[5] *= 6
    return logits


@pytest.mark.parametrize("temperature", [0.3, 0.8, 1.0, 1.7])
def test_the_c_softmax_at_a_temperature_is_final_probs_to_float_rounding(temperature):
    """draws.c's temperature_softmax against the pipeline's float64 softmax: every row within 1e-15 (absolute) and
    1e-12 (relative) of it, exactly 0 where the logit is -inf; the pipeline itself where temperature is not alone."""
    from inference.core import small_matmul

    if not small_matmul.available():
        pytest.skip(small_matmul.unavailable())
    settings = SamplingSettings(temperature=temperature)
    logits = _rows_a_draw_meets()
    seen = seen_mask([1, 2], 4096)
    exact = spec.final_probs(logits, settings, seen)
    fast = spec.probs_for_draw(logits, settings, seen)
    assert fast.dtype == torch.float64 and fast.shape == exact.shape
    assert (fast - exact).abs().max() < 1e-15
    positive = exact > 1e-200
    assert ((fast[positive] - exact[positive]).abs() / exact[positive]).max() < 1e-12
    assert torch.equal(fast[logits == -math.inf], torch.zeros(int((logits == -math.inf).sum()), dtype=torch.float64))
    assert torch.equal(spec.probs_for_draw(logits[3], settings, seen), fast[3])  # one row as in a batch
    greedy_or_filtered = [SamplingSettings(temperature=0.0), SamplingSettings(temperature=temperature, top_k=40)]
    for other in greedy_or_filtered:  # not temperature alone: the pipeline itself
        assert torch.equal(spec.probs_for_draw(logits, other, seen), spec.final_probs(logits, other, seen))


def test_the_c_draw_picks_what_sample_index_picks_from_final_probs(monkeypatch):
    """`draw` (softmax and head draw in one C call) against `sample_index` on `final_probs`: the same token for 3,000
    uniforms over the rows above, q equal to `probs_for_draw`'s; with the library off, final_probs itself."""
    from inference.core import small_matmul

    if not small_matmul.available():
        pytest.skip(small_matmul.unavailable())
    settings = SamplingSettings(temperature=0.8)
    logits, seen = _rows_a_draw_meets(), seen_mask([1, 2], 4096)
    generator = torch.Generator().manual_seed(9)
    for i, u in enumerate(torch.rand(3000, generator=generator, dtype=torch.float64).tolist()):
        row = logits[i % len(logits)]
        q, token = spec.draw(row, settings, seen, u)
        assert token == spec.sample_index(spec.final_probs(row, settings, seen), u), (i, u)
        if i < len(logits):
            assert torch.equal(q, spec.probs_for_draw(row, settings, seen))
    assert spec.draw(logits[0], settings, seen, 0.999999999)[1] >= 0  # the tail: the whole order decides
    monkeypatch.setattr(small_matmul, "available", lambda: False)
    q, token = spec.draw(logits[2], settings, seen, 0.5)
    assert torch.equal(q, spec.final_probs(logits[2], settings, seen))
    assert token == spec.sample_index(q, 0.5)


def test_the_c_residual_draw_is_the_residual_and_its_draw(monkeypatch):
    """draws.c's residual_draw against `residual_distribution` then `sample_index`: the residual within 1e-15, the
    same token for 2,000 uniforms (a shortlist draft's q, zero outside its tokens; q = p, where p itself is left);
    with the library off, the torch path itself."""
    from inference.core import small_matmul

    if not small_matmul.available():
        pytest.skip(small_matmul.unavailable())
    settings = SamplingSettings(temperature=0.8)
    logits = _rows_a_draw_meets()
    p_rows, q_rows = (
        spec.final_probs(logits[[0, 1, 4]], settings, None),
        spec.final_probs(logits[[2, 3, 4]], settings, None),
    )
    generator = torch.Generator().manual_seed(11)
    for i, u in enumerate(torch.rand(2000, generator=generator, dtype=torch.float64).tolist()):
        p, q = p_rows[i % 3], q_rows[i % 3]
        residual, token = spec.residual_draw(p, q, u)
        exact = spec.residual_distribution(p, q)
        assert (residual - exact).abs().max() < 1e-15
        assert token == spec.sample_index(exact, u), (i, u)
    same, _ = spec.residual_draw(p_rows[2], p_rows[2], 0.5)
    assert torch.equal(same, p_rows[2])
    monkeypatch.setattr(small_matmul, "available", lambda: False)
    residual, token = spec.residual_draw(p_rows[0], q_rows[0], 0.5)
    assert torch.equal(residual, spec.residual_distribution(p_rows[0], q_rows[0]))


def test_top_tokens_are_the_largest_values_ties_by_id():
    """draws.c's top_tokens against a stable sort, on rows with exact ties, zeros, fewer values than k."""
    from inference.core import small_matmul

    if not small_matmul.available():
        pytest.skip(small_matmul.unavailable())
    generator = torch.Generator().manual_seed(2)
    rows = [
        torch.rand(4096, generator=generator, dtype=torch.float64),
        torch.randint(0, 4, (4096,), generator=generator).double(),  # many ties
        torch.zeros(300, dtype=torch.float64),
        torch.rand(5, generator=generator, dtype=torch.float64),
    ]
    for row in rows:
        expected = torch.sort(row, descending=True, stable=True).indices[: spec.RESIDUAL_TOP].tolist()
        assert spec.top_tokens(row, spec.RESIDUAL_TOP) == expected


def test_the_uniform_stream_gives_the_numbers_single_draws_give():
    """`UniformStream` draws blocks: the numbers, read one at a time or ahead and skipped, are those of one
    `torch.rand` call a number on a generator with the same seed, across block boundaries."""
    from inference.lessons.speculative.uniforms import BLOCK, UniformStream

    single = torch.Generator().manual_seed(4)
    expected = [float(torch.rand((), generator=single, dtype=torch.float64)) for _ in range(3 * BLOCK + 7)]
    stream, got = UniformStream(4), []
    while len(got) < len(expected):
        if len(got) % 3 == 0:
            got.append(stream())
        else:
            wanted = min(len(got) % 7 + 1, len(expected) - len(got))
            address = stream.ahead(wanted + 2)  # more than is used: the rest stays for the next reads
            ahead = np.ctypeslib.as_array((ctypes.c_double * (wanted + 2)).from_address(address)).tolist()
            used = stream.skip(wanted)
            assert used == ahead[:wanted]
            got.extend(used)
    assert got == expected


@pytest.mark.parametrize("temperature", [0.5, 0.8, 1.3])
def test_the_round_check_in_c_is_the_python_check(temperature, monkeypatch):
    """`check_round` (draws.c's verify_round) against `probs_for_draw` then `verify_sampled` on the same uniforms:
    the same p rows bit for bit, the same verdict (ratios, uniforms, token, kind, residual), the same p and q of each
    draft and residual chart as the record makes from them, and the same numbers left in the stream, over 300 rounds
    of 0-5 drafts with rejections at every position, every draft kept, and shortlist rows; with the library off,
    the Python check itself."""
    from inference.core import small_matmul
    from inference.lessons.speculative.uniforms import UniformStream

    if not small_matmul.available():
        pytest.skip(small_matmul.unavailable())
    settings, rows = SamplingSettings(temperature=temperature), _rows_a_draw_meets()
    tokenizer = types.SimpleNamespace(decode=lambda ids, **_: f"<{ids[0]}>")  # the chart's texts are not compared
    buffers = spec.CheckBuffers(rows.shape[-1])  # reused every round, as a run reuses them
    generator = torch.Generator().manual_seed(12)
    kinds = set()
    for case in range(300):
        n = case % 6
        picked = torch.randint(0, 6, (n + 1,), generator=generator)
        # every other round the draft's rows are mostly the target's own (p = q: kept), so late rejections happen too
        drafts = (
            torch.where(torch.rand(n, generator=generator) < 0.8, picked[:n], picked[1:]) if case % 2 else picked[1:]
        )
        target, q_rows = rows[picked], spec.probs_for_draw(rows[drafts], settings, None)
        drafted = [spec.sample_index(q, float(torch.rand((), generator=generator))) for q in q_rows]
        in_c, in_python = UniformStream(case), UniformStream(case)
        check = spec.check_round(target, settings, None, q_rows, drafted, in_c, buffers)
        verdict = check.verdict
        expected_p = spec.probs_for_draw(target, settings, None)
        expected = spec.verify_sampled(expected_p, q_rows, drafted, in_python)
        assert torch.equal(check.p_rows, expected_p)
        assert (verdict.accepted, verdict.token_id, verdict.kind) == (
            expected.accepted,
            expected.token_id,
            expected.kind,
        )
        assert (verdict.ratios, verdict.uniforms, verdict.final_u) == (
            expected.ratios,
            expected.uniforms,
            expected.final_u,
        )
        at_drafts = range(n), drafted
        assert check.p_drafted == expected_p[at_drafts].tolist() and check.q_drafted == q_rows[at_drafts].tolist()
        assert (verdict.residual is None) == (expected.residual is None) == (check.chart is None)
        if verdict.residual is not None:
            assert torch.equal(verdict.residual, expected.residual)
            i = verdict.accepted
            chart = spec._residual_top(expected.residual, expected_p[i], q_rows[i], tokenizer)
            assert check.chart == [(t, p, q, r) for t, _, p, q, r in chart]
        assert in_c() == in_python()
        kinds.add((verdict.kind, verdict.accepted))
    assert {("target", 0), ("bonus", 5), ("residual", 0), ("residual", 3)} <= kinds
    monkeypatch.setattr(small_matmul, "available", lambda: False)
    check = spec.check_round(rows[:3], settings, None, q_rows[:2], drafted[:2], UniformStream(1))
    assert torch.equal(check.p_rows, spec.final_probs(rows[:3], settings, None))
