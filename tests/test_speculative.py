"""Speculative decoding: the output is provably the target's, greedy and sampled, and what the page measures.

Oracles: plain greedy decoding with the step engine, transformers' assisted generation, and the target's own
next-token distributions (20,000 draws against them, chi-square and total variation, with a wrong sampler that the same
check catches)."""

import copy
import functools
import json
import math
import random
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import chisquare

from app_pages.shared.sidebar import source_label
from app_pages.shared.stepper import Stepper
from inference.bench import real_spec
from inference.core import kv_cache
from inference.core.bundled import BundledModel
from inference.core.forward import ShortlistForward, TransformersForward
from inference.core.limits import Limits
from inference.core.loader import encode_prompt, load_model
from inference.core.paths import BUNDLED_MODEL_NAME
from inference.core.routing import BUNDLED_MOE_DIR, BUNDLED_MOE_NAME
from inference.core.run import GREEDY, new_trace
from inference.lessons.speculative import comparison, drafters, drafting, figures, rule, text
from inference.lessons.speculative import run as spec
from inference.lessons.speculative.comparison import Comparison, PlainTiming, summarise
from inference.lessons.speculative.run import DraftCheck, RoundRecord
from inference.sampling.pipeline import SamplingSettings, sample_token, seen_mask
from inference.training.token_frequency import FILE_NAME

pytestmark = pytest.mark.unit

PROMPTS = [
    "Once upon a time, there was a little girl named Lily. She loved to play outside",
    "Tom and his dog went to the park. The dog saw a ball and",
    "The sun was hot. Ben wanted to swim in the lake, but his mom said",
]
NEW_TOKENS = 80
DRAWS = 20_000
MIN_BIN = 0.005  # tokens above 0.5% get their own chi-square bin, the rest share one
P_FLOOR = 0.001
TV_CEILING = 0.02


@pytest.fixture(scope="module")
def draft(bundled):
    return load_model(str(drafting.BUNDLED_DRAFT_DIR))


@pytest.fixture(scope="module")
def counts():
    return drafters.token_counts(drafting.BUNDLED_DRAFT_DIR)


def plain_greedy(bundled, ids, new_tokens, stop_at_eos=False):
    trace = new_trace(bundled.model, bundled.tokenizer, ids, new_tokens, stop_at_eos=stop_at_eos)
    list(trace.run(GREEDY))
    return trace.generated_ids


@pytest.fixture(scope="module")
def plain_texts(bundled):
    """Each prompt's plain greedy tokens, decoded once for every drafter's test."""
    return {prompt: plain_greedy(bundled, encode_prompt(bundled.tokenizer, prompt), NEW_TOKENS) for prompt in PROMPTS}


def speculative_greedy(bundled, drafter, ids, new_tokens, gamma=4, stop_at_eos=False):
    run = spec.new_run(bundled.model, bundled.tokenizer, drafter, ids, new_tokens, gamma=gamma, stop_at_eos=stop_at_eos)
    list(run.run(GREEDY))
    return run


# -- greedy: token for token --------------------------------------------------------------------


@pytest.mark.parametrize("drafter", ["draft", "shortlist 256", "shortlist 1024", "lookup", "self-draft"])
def test_greedy_speculation_equals_plain_greedy_token_for_token(bundled, draft, counts, plain_texts, drafter):
    """Every drafter, 3 prompts: speculative greedy decoding makes plain greedy's tokens, and used its drafts."""
    make = {
        "draft": lambda: drafters.ModelDrafter(draft.model, draft.tokenizer),
        "shortlist 256": lambda: drafters.ModelDrafter(
            draft.model, draft.tokenizer, drafters.most_frequent(counts, 256)
        ),
        "shortlist 1024": lambda: drafters.ModelDrafter(
            draft.model, draft.tokenizer, drafters.most_frequent(counts, 1024)
        ),
        "lookup": lambda: drafters.PromptLookupDrafter(spec.vocabulary_rows(bundled.model)),
        "self-draft": lambda: drafters.self_drafter(bundled.model, bundled.tokenizer, 2, shortlisted=True),
    }[drafter]
    accepted = 0
    for prompt in PROMPTS:
        run = speculative_greedy(bundled, make(), encode_prompt(bundled.tokenizer, prompt), NEW_TOKENS)
        assert run.generated_ids == plain_texts[prompt], prompt
        accepted += summarise(run.rounds).accepted
    assert accepted > 0  # the drafts were really used, not all thrown away


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
        model_drafter = drafters.ModelDrafter(draft.model, draft.tokenizer)
        ours = speculative_greedy(bundled, model_drafter, ids, NEW_TOKENS, stop_at_eos=True).generated_ids
        lookup_drafter = drafters.PromptLookupDrafter(4096)
        ours_lookup = speculative_greedy(bundled, lookup_drafter, ids, NEW_TOKENS, stop_at_eos=True).generated_ids
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
            p = rule.final_probs(target(batch).logits[:, -1].float(), self.settings, seen)
            q_logits = draft(batch).logits[:, -1].float()
            if self.shortlist is not None:  # a shortlist draft: every other token's logit is -inf (q = 0)
                outside = torch.ones(q_logits.shape[-1], dtype=torch.bool)
                outside[self.shortlist] = False
                q_logits[:, outside] = -torch.inf
            q = rule.final_probs(q_logits, self.settings, seen)
        return p, q

    def on_support(self) -> "Tables":
        """The same tables over only the tokens some row can produce (in id order). Every row is zero elsewhere, so
        the library's draws and accept/reject decisions are the same ones
        (`test_draws_on_the_support_are_the_draws_on_the_whole_vocabulary` checks it), and each costs a fraction:
        sorting 4,096 tokens was most of a draw's time."""
        rows = [self.p1, self.q1, *self.p2.values(), *self.q2.values()]
        ids = (torch.stack(rows) > 0).any(dim=0).nonzero().squeeze(-1)
        new_id = {token: i for i, token in enumerate(ids.tolist())}
        on_support = lambda row: row[ids].clone()  # noqa: E731
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
    x1 = sample_token(t.q1, uniform())
    drafted, q_rows, p_rows = [x1], [t.q1], [t.p1, t.p2[x1]]
    if gamma == 2:
        x2 = sample_token(t.q2[x1], uniform())
        drafted.append(x2)
        q_rows.append(t.q2[x1])
        p_rows.append(t.p2[x1])  # stand-in for p(. | x1, x2): only the third token would come from it
    verdict = rule.verify_sampled(torch.stack(p_rows), torch.stack(q_rows), drafted, uniform)
    tokens = drafted[: verdict.accepted] + [verdict.token_id]
    if len(tokens) >= 2:
        return tokens[0], tokens[1]
    first = tokens[0]  # the next round starts after it: draft one token, test it
    x = sample_token(t.q2[first], uniform())
    verdict = rule.verify_sampled(torch.stack([t.p2[first], t.p2[first]]), t.q2[first].unsqueeze(0), [x], uniform)
    return first, (x if verdict.accepted else verdict.token_id)


def accept_every_draft(t: Tables, gamma: int, uniform) -> tuple[int, int]:
    """A deliberately wrong speculative sampler: it keeps every drafted token unchecked."""
    x1 = sample_token(t.q1, uniform())
    return x1, sample_token(t.q2[x1], uniform())


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
    rows = drafters.most_frequent(drafters.token_counts(drafting.BUNDLED_DRAFT_DIR), size[0]) if size else None
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
    """Every recorded check: accepted iff u <= p/q, in order; the new tokens are the kept drafts and one target token."""
    ids = encode_prompt(bundled.tokenizer, PROMPTS[0])
    drafter = drafters.ModelDrafter(draft.model, draft.tokenizer)
    run = spec.new_run(bundled.model, bundled.tokenizer, drafter, ids, 60, gamma=4, seed=7)
    rounds = list(run.run(SamplingSettings(temperature=0.9)))
    assert sum(r.token_kind == "residual" for r in rounds) > 0
    for r in rounds:
        rejected = ["rejected"] + ["unchecked"] * (r.drafted - r.accepted - 1) if r.accepted < r.drafted else []
        assert [c.status for c in r.checks] == ["accepted"] * r.accepted + rejected
        for c in r.checks:
            if c.status != "unchecked":
                assert math.isclose(c.ratio, c.p / c.q) and (c.u <= c.ratio) == (c.status == "accepted")
        assert r.new_tokens == [c.token_id for c in r.checks[: r.accepted]] + [r.token_id]
        if r.token_kind == "residual":
            assert r.residual_top and sum(x[4] for x in r.residual_top) <= 1 + 1e-9
            assert all(res >= max(0.0, p - q) - 1e-12 for _, _, p, q, res in r.residual_top)  # divided by <= 1
            assert r.checks[r.accepted].p < r.checks[r.accepted].q
    assert run.generated_ids == [t for r in rounds for t in r.new_tokens]


def test_same_seed_same_text_and_the_global_rng_is_untouched(bundled, draft):
    """A seed replays a sampled speculative run exactly, drawing only from the run's own generator."""
    ids = encode_prompt(bundled.tokenizer, PROMPTS[1])
    state, texts = torch.get_rng_state(), []
    for _ in range(2):
        drafter = drafters.ModelDrafter(draft.model, draft.tokenizer)
        run = spec.new_run(bundled.model, bundled.tokenizer, drafter, ids, 40, gamma=3, seed=11)
        list(run.run(SamplingSettings(temperature=1.0, top_p=0.95)))
        texts.append(run.generated_ids)
    assert texts[0] == texts[1] and torch.equal(torch.get_rng_state(), state)


def test_after_a_rejection_both_caches_hold_exactly_the_accepted_prefix(bundled, draft):
    """Lengths, bytes and contents: each cache equals a fresh prefill of the text minus its last token."""
    ids = encode_prompt(bundled.tokenizer, PROMPTS[2])
    drafter = drafters.ModelDrafter(draft.model, draft.tokenizer)
    run = spec.new_run(bundled.model, bundled.tokenizer, drafter, ids, 80, gamma=6, seed=3)
    rejections = 0
    for record in run.run(SamplingSettings(temperature=1.0)):
        if record.token_kind != "residual":
            continue
        rejections += 1
        prefix = run.all_ids[:-1]  # every accepted token; the target's own last token is fed next round
        for model, cache in ((bundled.model, run.forward.cache), (draft.model, drafter.forward.cache)):
            assert kv_cache.cache_length(cache) == len(prefix)
            shape = kv_cache.KVShape.from_config(model.config, torch.float32)
            assert kv_cache.measured_bytes(cache) == shape.formula_bytes(len(prefix))
            fresh = TransformersForward(model, None)
            fresh.logits(prefix)
            for (k, v), (fk, fv) in zip(kv_cache.layer_tensors(cache), kv_cache.layer_tensors(fresh.cache)):
                torch.testing.assert_close(k, fk, atol=1e-4, rtol=1e-4)
                torch.testing.assert_close(v, fv, atol=1e-4, rtol=1e-4)
        assert record.target_cache_tokens == record.draft_cache_tokens == len(prefix)
        if rejections >= 3:
            break
    assert rejections >= 3


# -- bad input -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("gamma", [0, 17, -1, 2.5, True])
def test_gamma_outside_1_to_16_is_refused_with_a_message(bundled, gamma):
    with pytest.raises(spec.SpeculationError, match=r"`gamma`.*from 1 to 16"):
        spec.new_run(bundled.model, bundled.tokenizer, drafters.PromptLookupDrafter(4096), [0, 1, 2], 10, gamma=gamma)


def test_a_draft_that_cannot_serve_the_target_is_refused_before_any_forward_pass(bundled, draft, gpt2):
    """Another vocabulary, the same size with other tokens, or a larger draft: refused, and no model runs."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=1000, hidden_size=32, intermediate_size=64, num_hidden_layers=1)
    other = LlamaForCausalLM(
        config.__class__(**config.to_dict() | {"num_attention_heads": 2, "num_key_value_heads": 1})
    )
    calls = []
    handles = [m.register_forward_pre_hook(lambda *_: calls.append(1)) for m in (bundled.model, other)]
    try:
        with pytest.raises(spec.SpeculationError, match=spec.TOKENIZER_MISMATCH):
            spec.new_run(bundled.model, bundled.tokenizer, drafters.ModelDrafter(other, bundled.tokenizer), [0, 1], 10)
    finally:
        for handle in handles:
            handle.remove()
    assert calls == []

    class OtherTokens:
        def __len__(self):
            return len(bundled.tokenizer)

        def get_vocab(self):
            vocab = dict(bundled.tokenizer.get_vocab())
            first, second = list(vocab)[:2]
            vocab[first], vocab[second] = vocab[second], vocab[first]
            return vocab

    with pytest.raises(spec.SpeculationError, match=spec.TOKENIZER_MISMATCH):
        spec.check_pair(bundled.model, bundled.tokenizer, draft.model, OtherTokens())
    small, tokenizer = gpt2
    with pytest.raises(spec.SpeculationError, match="larger than the target"):
        spec.new_run(small, tokenizer, drafters.ModelDrafter(bundled.model, bundled.tokenizer), [0, 1], 10)


def test_drafts_never_push_a_run_past_max_new_tokens(bundled, draft):
    """A run stops at exactly max new tokens, the last rounds drafting fewer tokens and saying why."""
    ids = encode_prompt(bundled.tokenizer, PROMPTS[0])
    run = speculative_greedy(bundled, drafters.ModelDrafter(draft.model, draft.tokenizer), ids, 7, gamma=16)
    assert len(run.generated_ids) == 7 and run.stop_reason == "max_new_tokens"
    assert run.rounds[0].drafted <= 6 and "may add only" in run.rounds[0].note


def test_a_new_gamma_keeps_the_run_and_the_round_shown_is_the_last_that_drafted(bundled):
    ids = encode_prompt(bundled.tokenizer, "Once upon a time there was a cat. Once upon a time there was a")
    run = spec.new_run(bundled.model, bundled.tokenizer, drafters.PromptLookupDrafter(4096), ids, 12, gamma=2)
    run.step(GREEDY)
    run.use_gamma(4)
    list(run.run(GREEDY))
    assert run.rounds[0].gamma == 2 and {r.gamma for r in run.rounds[1:]} == {4}
    with pytest.raises(ValueError, match="gamma"):
        run.use_gamma(0)
    assert run.rounds[-1].drafted == 0  # the run's last token: one left, nothing to draft
    shown = comparison.round_to_show(run.rounds)
    assert run.rounds[shown].drafted > 0 and all(r.drafted == 0 for r in run.rounds[shown + 1 :])
    assert comparison.round_to_show([]) is None


# -- prompt lookup ----------------------------------------------------------------------------------------


def test_prompt_lookup_copies_what_followed_the_latest_match_or_drafts_nothing_and_says_so(bundled):
    assert drafters.find_lookup([5, 1, 2, 3, 9, 8, 1, 2, 3]) == drafters.LookupMatch(3, 1, 4)
    assert drafters.find_lookup([1, 2, 7, 1, 2, 8, 4, 2]) is None  # one token in common is not enough by default
    request = drafters.DraftRequest([5, 1, 2, 3, 9, 8, 1, 2, 3], 3, GREEDY, torch.zeros(10, dtype=torch.bool), None)
    assert drafters.PromptLookupDrafter(10).propose(request).tokens == [9, 8, 1]
    ids = [0, 11, 12, 13, 14, 15]
    run = spec.new_run(bundled.model, bundled.tokenizer, drafters.PromptLookupDrafter(4096), ids, 5)
    record = run.step(GREEDY)
    assert record.drafted == 0 and record.verify_positions == 1 and "drafted nothing" in record.note
    assert run.generated_ids == plain_greedy(bundled, ids, 1)


def test_the_lookup_search_finds_what_a_plain_scan_finds():
    """The byte search (`bytes.rfind`, 4 bytes a token) against a plain backwards scan, on random texts."""

    def scan(ids, max_ngram, min_ngram):
        for n in range(min(max_ngram, len(ids) - 1), min_ngram - 1, -1):
            for start in range(len(ids) - n - 1, -1, -1):
                if ids[start : start + n] == ids[-n:]:
                    return drafters.LookupMatch(n, start, start + n)
        return None

    rng = random.Random(0)
    for _ in range(1000):
        vocab = rng.choice([2, 3, 300, 70_000, 2**24])
        ids = [rng.randrange(vocab) for _ in range(rng.randint(0, 40))]
        for min_ngram in (1, 2, 3):
            assert drafters.find_lookup(ids, 3, min_ngram) == scan(ids, 3, min_ngram), (ids, min_ngram)
    assert drafters.find_lookup([256, 0, 1], min_ngram=1) is None  # a byte hit inside token 256 is no match


# -- the rule, p and q -------------------------------------------------------------------------------------


def test_the_residual_gives_back_exactly_what_the_draft_took_too_much_of():
    """min(p, q) + (1 - sum min(p, q)) * normalise(max(0, p - q)) = p, token by token, a shortlist's q included."""
    generator = torch.Generator().manual_seed(1)
    p = torch.randn(4096, generator=generator, dtype=torch.float64).mul(3).softmax(-1)
    full_q = torch.randn(4096, generator=generator, dtype=torch.float64).mul(3).softmax(-1)
    short_q = full_q.clone()
    short_q[1024:] = 0
    short_q /= short_q.sum()
    for q in (full_q, short_q):
        residual = rule.residual_distribution(p, q)
        kept = torch.minimum(p, q)
        torch.testing.assert_close(kept + (1 - kept.sum()) * residual, p, rtol=0, atol=1e-15)
    assert torch.equal(rule.residual_distribution(p, p), p)


def test_the_penalty_sees_the_drafted_tokens_before_each_position_and_off_nothing_is_built():
    base = seen_mask([3], 8)
    rows = rule.running_seen(base, [5, 6], SamplingSettings(temperature=0.8, repetition_penalty=1.2))
    assert rows.tolist() == [[i in seen for i in range(8)] for seen in ((3,), (3, 5), (3, 5, 6))]
    assert rule.running_seen(base, [5, 6], SamplingSettings(temperature=0.8)) is base


def test_a_rounds_p_is_the_targets_distribution_after_the_text(bundled, draft):
    settings = SamplingSettings(temperature=0.8, top_p=0.9)
    ids = encode_prompt(bundled.tokenizer, PROMPTS[1])
    drafter = drafters.ModelDrafter(draft.model, draft.tokenizer)
    record = spec.new_run(bundled.model, bundled.tokenizer, drafter, ids, 12).step(settings)
    drafted = [c.token_id for c in record.checks]
    with torch.inference_mode():
        logits = bundled.model(input_ids=torch.tensor([ids + drafted])).logits[0, len(ids) - 1 : -1]
    p = rule.final_probs(logits.float(), settings, seen_mask(ids, logits.shape[-1]))
    assert [c.p for c in record.checks] == pytest.approx([float(p[i, t]) for i, t in enumerate(drafted)], abs=1e-5)


@pytest.mark.parametrize("size", [None, 256])
def test_t1_probabilities_are_the_models_softmax_made_only_for_a_drawn_greedy_round(bundled, draft, counts, size):
    """Each record keeps its own rule; a greedy round's T=1 probabilities are made when drawn, from each model's
    forward over the text (a shortlist draft's over its shortlist), and kept; a sampled round comes back as it is."""
    ids = encode_prompt(bundled.tokenizer, PROMPTS[0])
    rows = None if size is None else drafters.most_frequent(counts, size)
    run = spec.new_run(
        bundled.model, bundled.tokenizer, drafters.ModelDrafter(draft.model, draft.tokenizer, rows), ids, 40
    )
    sampled, older, newest = run.step(SamplingSettings(temperature=1.0)), run.step(GREEDY), run.step(GREEDY)
    assert not sampled.greedy and older.greedy and run.with_t1_probabilities(sampled) is sampled
    for record in (older, newest):
        assert record.checks and all(c.p_raw is None and c.q_raw is None for c in record.checks)
        filled = run.with_t1_probabilities(record)
        full = torch.tensor([run.all_ids[: record.context_tokens] + [c.token_id for c in record.checks]])
        with torch.no_grad():
            p, q = bundled.model(full).logits[0].double(), draft.model(full).logits[0].double()
        if rows is not None:
            outside = torch.ones(q.shape[-1], dtype=torch.bool)
            outside[rows] = False
            q[:, outside] = -torch.inf
        start = record.context_tokens - 1
        for i, check in enumerate(filled.checks):
            assert check.p_raw == pytest.approx(float(p[start + i].softmax(-1)[check.token_id]), abs=1e-5)
            assert check.q_raw == pytest.approx(float(q[start + i].softmax(-1)[check.token_id]), abs=1e-5)
        assert run.with_t1_probabilities(record) == filled  # kept once made


# -- shortlists (FR-Spec) and the self-draft ------------------------------------------------------------------


def test_the_bundled_drafts_counts_are_its_training_split_and_rank_the_shortlist(draft, counts, bundled):
    meta = json.loads((drafting.BUNDLED_DRAFT_DIR / "training_meta.json").read_text())
    assert int(counts.sum()) == meta["stats"]["train_tokens_in_corpus"] and len(counts) == 4096
    rows = drafters.most_frequent(counts, 512)
    assert rows == sorted(rows) and counts[rows].min() >= np.delete(counts, rows).max()
    assert drafting.shortlist_sizes(draft) == [256, 512, 1024, 2048]
    assert drafting.shortlist_ids(draft, 300) is None and drafting.shortlist_ids(draft, drafting.SHORTLIST_ALL) is None
    assert drafting.shortlist_sizes(bundled) == []  # another model: no counts read
    assert drafters.usable_sizes(np.ones(100, dtype=np.int64), 4096) == []  # counts of another vocabulary
    assert drafters.token_counts(drafting.BUNDLED_DRAFT_DIR.parent / "storyteller-llama-6m") is None
    assert (drafting.BUNDLED_DRAFT_DIR / FILE_NAME).is_file()


def test_a_shortlist_pass_gives_the_full_passs_logits_of_its_tokens_and_minus_infinity_elsewhere(draft, counts):
    rows = drafters.most_frequent(counts, 256)
    ids = encode_prompt(draft.tokenizer, PROMPTS[0])
    full, short = TransformersForward(draft.model, None), ShortlistForward(draft.model, None, rows)
    outside = torch.ones(full.vocab_size, dtype=torch.bool)
    outside[rows] = False
    for feed, keep in ((ids[:6], 6), (ids[6:7], 1), (ids[7:12], 5)):
        a, b = full.logits(feed, keep), short.logits(feed, keep)
        torch.testing.assert_close(a[:, rows], b[:, rows], rtol=1e-5, atol=1e-5)
        assert torch.isneginf(b[:, outside]).all()
    with pytest.raises(ValueError, match="token ids from 0 to 4095"):
        ShortlistForward(draft.model, None, [1, 4096])


def test_a_shortlist_draft_proposes_only_shortlisted_tokens_and_the_target_still_writes_others(draft, counts, bundled):
    rows = drafters.most_frequent(counts, 256)
    drafter = drafters.ModelDrafter(draft.model, draft.tokenizer, rows)
    run = spec.new_run(bundled.model, bundled.tokenizer, drafter, encode_prompt(bundled.tokenizer, PROMPTS[0]), 80)
    list(run.run(SamplingSettings(temperature=1.3)))
    assert all(c.token_id in set(rows) for r in run.rounds for c in r.checks)
    assert any(token not in set(rows) for token in run.generated_ids)  # from its residual or bonus draws


def test_a_self_draft_shares_the_targets_weights_and_refuses_a_bad_depth(bundled):
    before = {name: p.clone() for name, p in bundled.model.named_parameters()}
    draft = drafters.layer_draft(bundled.model, 2)
    target_storage = {p.data_ptr() for p in bundled.model.parameters()}
    assert all(p.data_ptr() in target_storage for p in draft.parameters()) and draft.config.num_hidden_layers == 2
    list(speculative_greedy(bundled, drafters.ModelDrafter(draft, bundled.tokenizer), [1, 2, 3], 8).rounds)
    assert all(torch.equal(p, before[name]) for name, p in bundled.model.named_parameters())
    for k in (0, bundled.model.config.num_hidden_layers, True):
        with pytest.raises(drafters.SelfDraftError):
            drafters.layer_draft(bundled.model, k)
    assert drafters.layer_choices(4) == [1, 2, 3] and drafters.layer_choices(30) == [4, 6, 8, 12, 15, 16, 20, 24, 28]


# -- plain decoding, timed, and the comparison ------------------------------------------------------------------


@pytest.mark.parametrize(
    "settings",
    [GREEDY, SamplingSettings(temperature=0.9, top_k=40, top_p=0.9, min_p=0.05, repetition_penalty=1.2)],
    ids=["greedy", "all-filters"],
)
def test_the_benchmarks_lean_plain_decoding_writes_the_apps_trace_tokens(bundled, settings):
    prompt = encode_prompt(bundled.tokenizer, "Once upon a time")
    trace = new_trace(bundled.model, bundled.tokenizer, prompt, 30, seed=3, stop_at_eos=False)
    list(trace.run(settings))
    assert comparison.plain_decode(bundled.model, prompt, 30, settings, seed=3) == trace.generated_ids


def test_the_plain_timer_times_each_token_once_and_starts_over_after_back(bundled, monkeypatch):
    """Timing a round at a time feeds what timing at once feeds; a text that is not a continuation starts over."""
    drawn, real = [], comparison.choose_token
    monkeypatch.setattr(comparison, "choose_token", lambda logits, *a: drawn.append(logits.clone()) or real(logits, *a))
    prompt = encode_prompt(bundled.tokenizer, "Once upon a time")
    tokens = [int(t) for t in encode_prompt(bundled.tokenizer, " there was a little girl who liked")]
    settings = SamplingSettings(temperature=0.8)
    comparison.PlainTimer(bundled.model, prompt, settings).extend(tokens)
    at_once, drawn[:] = list(drawn), []
    timer = comparison.PlainTimer(bundled.model, prompt, settings)
    first = timer.extend(tokens[:3])
    second = timer.extend(tokens)
    assert len(drawn) == len(tokens) == len(second.step_ms) and second.forward_ms[:3] == first.forward_ms
    assert all(torch.equal(a, b) for a, b in zip(at_once, drawn, strict=True))
    assert len(timer.extend(tokens[:2] + [tokens[0]]).step_ms) == 3 and len(drawn) == len(tokens) + 3


def test_a_summary_says_when_its_verify_pass_is_round_0s_with_the_prompt(bundled, draft):
    ids = encode_prompt(bundled.tokenizer, "Once upon a time")
    run = spec.new_run(bundled.model, bundled.tokenizer, drafters.ModelDrafter(draft.model, draft.tokenizer), ids, 20)
    run.step(GREEDY)
    assert summarise(run.rounds).verify_read_prompt and summarise(run.rounds).verify_pass_ms == run.rounds[0].verify_ms
    run.step(GREEDY)
    assert not summarise(run.rounds).verify_read_prompt
    assert summarise(run.rounds).verify_pass_ms == run.rounds[1].verify_ms  # round 0's pass left out


def test_the_formula_is_the_geometric_sum_over_the_rounds_cost():
    assert comparison.expected_tokens_per_pass(0.5, 4) == pytest.approx(1.9375)
    assert comparison.expected_tokens_per_pass(1.0, 4) == 5 and comparison.expected_tokens_per_pass(0.0, 4) == 1
    expected = comparison.expected_tokens_per_pass(0.8, 4) / 1.4
    assert comparison.predicted_speedup(0.8, 4, 0.1) == pytest.approx(expected)
    alpha = comparison.break_even_alpha(4, 0.3)
    assert comparison.predicted_speedup(alpha, 4, 0.3) == pytest.approx(1.0, abs=1e-9)
    assert comparison.break_even_alpha(4, 1.5) is None  # 5 tokens at best for the cost of 7 passes


def record(index, round_ms, tokens=2, accepted=1, drafted=2, verify_ms=10.0):
    checks = [DraftCheck(i, 1, "a", 1.0, 1.0, None, None, 1.0, None, "accepted") for i in range(drafted)]
    return RoundRecord(index, drafters.DRAFT_MODEL, 2, 5, checks, accepted, 1, "a", "bonus", None, [], [1] * tokens,
                       [2.0, 2.0], verify_ms, 3, round_ms, 0, 0)  # fmt: skip


@pytest.mark.parametrize(
    ("round_ms", "words"),
    [([10.0, 10.0, 10.0], "2.0x faster"), ([12.0, 40.0, 12.0, 40.0], "within this machine's noise"),
     ([40.0, 40.0, 40.0], "2.0x slower")],
)  # fmt: skip
def test_the_verdicts_comparison_words_come_from_the_rounds_speedups(round_ms, words, monkeypatch):
    """Each round's time against plain decoding's for its tokens: the words say faster or slower only where the
    rounds' middle half is clear of 1, and the metric and the theory quote the same measured speed-up."""
    rounds = tuple(record(i, ms) for i, ms in enumerate(round_ms))
    plain = PlainTiming([10.0] * (2 * len(rounds)), [10.0] * (2 * len(rounds)))
    result = Comparison(summarise(list(rounds)), plain, 2, rounds)
    said = text.run_verdict(result, 1_000)
    assert words in said
    assert f"{result.measured_speedup:.2f}×" in said and text.run_metrics(result)[2][1] in said
    assert result.verify_against_one().ratio == pytest.approx(result.verify_cost)


def test_the_sweep_runs_on_every_side_with_one_progress_bar(bundled, monkeypatch):
    moe = load_model(str(BUNDLED_MOE_DIR))
    seen, progress = [], []

    def fake_sweep(target, tokenizer, make_drafter, prompt_ids, progress=None):
        seen.append(target)
        for done in range(3):
            progress(done, 2, f"run {done}")
        return pd.DataFrame({"gamma": [1, 2], "measured_speedup": [0.9, 1.1]})

    monkeypatch.setattr(comparison, "sweep", fake_sweep)
    sides = [(BUNDLED_MODEL_NAME, bundled.model, bundled.tokenizer), (BUNDLED_MOE_NAME, moe.model, moe.tokenizer)]
    table = comparison.sweep_sides(sides, lambda: None, [1, 2, 3], progress=lambda *a: progress.append(a))
    assert seen == [bundled.model, moe.model]
    assert table["target"].tolist() == [BUNDLED_MODEL_NAME] * 2 + [BUNDLED_MOE_NAME] * 2
    assert table["weight_bytes"].iloc[0] == bundled.model.num_parameters() * 4 < table["weight_bytes"].iloc[2]
    done = [p[0] for p in progress]
    assert done == sorted(done) and {p[1] for p in progress} == {4} and progress[-1][2].startswith(BUNDLED_MOE_NAME)
    assert drafting.other_side(BUNDLED_MODEL_NAME) == (BUNDLED_MOE_NAME, str(BUNDLED_MOE_DIR))
    assert drafting.other_side(BUNDLED_MOE_NAME) == (BUNDLED_MODEL_NAME, "")


def test_a_verify_cost_is_two_timings_of_one_cache_compared_pass_by_pass(bundled):
    cost = comparison.measure_verify_cost(bundled.model, "storyteller", positions=5, repeats=3)
    assert cost.one.repeats == cost.many.repeats == 3 and cost.cost == cost.many.median_ms / cost.one.median_ms
    said = text.why_they_differ(cost, cost, cache=10**9)
    assert "within this machine's noise" in said and "fit in it" in said


def test_the_bench_runs_on_the_apps_threads_and_gives_the_process_its_own_back(bundled, monkeypatch):
    before = torch.get_num_threads()
    torch.set_num_threads(Limits.from_env().torch_threads + 1)
    seen = []
    monkeypatch.setattr(real_spec, "benchmark", lambda *a, **k: seen.append(torch.get_num_threads()) or {})
    monkeypatch.setattr(real_spec, "pair_figures", lambda *a, **k: seen.append(torch.get_num_threads()) or {})
    try:
        figures = real_spec.bundled_benchmark(bundled.model, bundled.tokenizer, [1, 2, 3])
        assert seen == [Limits.from_env().torch_threads] * 2 and figures["spec_torch_threads"] == seen[0]
        monkeypatch.setattr(real_spec, "benchmark", lambda *a, **k: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            real_spec.bundled_benchmark(bundled.model, bundled.tokenizer, [1, 2, 3], threads=1)
        assert torch.get_num_threads() == Limits.from_env().torch_threads + 1
    finally:
        torch.set_num_threads(before)


def test_the_text_shows_the_prompts_last_tokens_and_counts_those_it_leaves_out(bundled):
    ids = bundled.tokenizer.encode("Once upon a time there was a little cat.")
    shown = figures.text_html(bundled.tokenizer, ids, [], prompt_tail=4)
    assert f"… {len(ids) - 4} earlier prompt tokens" in shown and shown.count("prompt token ") == 4
    assert "earlier prompt" not in figures.text_html(bundled.tokenizer, ids, [])


def test_only_a_sessions_first_empty_run_opens_with_a_round():
    stepper = Stepper("spec", "spec_run", lambda run: len(run.rounds))
    state, empty = {}, SimpleNamespace(rounds=[])
    assert stepper.opens_with_a_step(empty, state) and state["spec_opened"]
    assert not stepper.opens_with_a_step(SimpleNamespace(rounds=[]), state)  # Reset: starts empty
    assert not stepper.opens_with_a_step(empty, {"spec_steps_in_url": 3})  # a link replays its 3


def test_the_sidebar_names_a_loaded_folder_not_its_path(tmp_path):  # (a sidebar check, kept from a review round)
    moe = tmp_path / "storyteller-moe-16m"
    assert source_label(str(moe), [BundledModel("storyteller-moe-16m", moe, "Mixture of Experts")]) == moe.name
    assert source_label(str(tmp_path / "my-model"), []) == "my-model"
    assert source_label("HuggingFaceTB/SmolLM2-135M", []) == "HuggingFaceTB/SmolLM2-135M"
