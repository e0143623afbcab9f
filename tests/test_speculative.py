"""Speculative decoding: the output is provably the target's, greedy and sampled.

Oracles: plain greedy decoding with the step engine, transformers' assisted generation, and the
target's own next-token distributions (20,000 draws against them, chi-square and total variation).
"""

import copy
import functools
import math

import pytest
import torch
from scipy.stats import chisquare
from transformers import DynamicCache

from inference.core import kv_cache
from inference.core.loader import encode_prompt, load_model
from inference.core.run import GREEDY, new_trace
from inference.lessons.speculative import drafters, rule, shortlist, summary
from inference.lessons.speculative import run as spec
from inference.sampling.pipeline import SamplingSettings, sample_token, seen_mask

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
        run = speculative_greedy(bundled, drafters.ModelDrafter(draft.model, draft.tokenizer), ids, NEW_TOKENS)
        assert run.generated_ids == plain_texts[prompt], prompt
        accepted += summary.summarise(run.rounds).accepted
    assert accepted > 0  # the drafts were really used, not all thrown away


def test_greedy_speculation_with_prompt_lookup_equals_plain_greedy_token_for_token(bundled, plain_texts):
    """4 prompts x 150 tokens: speculative greedy decoding with prompt lookup makes plain greedy's tokens."""
    accepted = 0
    for prompt in PROMPTS:
        ids = encode_prompt(bundled.tokenizer, prompt)
        run = speculative_greedy(
            bundled, drafters.PromptLookupDrafter(spec.vocabulary_rows(bundled.model)), ids, NEW_TOKENS
        )
        assert run.generated_ids == plain_texts[prompt], prompt
        accepted += summary.summarise(run.rounds).accepted
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
            bundled, drafters.ModelDrafter(draft.model, draft.tokenizer), ids, NEW_TOKENS, stop_at_eos=True
        ).generated_ids
        ours_lookup = speculative_greedy(
            bundled, drafters.PromptLookupDrafter(4096), ids, NEW_TOKENS, stop_at_eos=True
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
        bundled.model, bundled.tokenizer, drafters.ModelDrafter(draft.model, draft.tokenizer), ids, 60, gamma=4, seed=7
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
            bundled.model,
            bundled.tokenizer,
            drafters.ModelDrafter(draft.model, draft.tokenizer),
            ids,
            40,
            gamma=3,
            seed=11,
        )
        list(run.run(SamplingSettings(temperature=1.0, top_p=0.95)))
        texts.append(run.generated_ids)
    assert texts[0] == texts[1]
    assert torch.equal(torch.get_rng_state(), state)


# -- caches ------------------------------------------------------------------------------------------


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
        spec.new_run(bundled.model, bundled.tokenizer, drafters.PromptLookupDrafter(4096), [0, 1, 2], 10, gamma=gamma)


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
            spec.new_run(bundled.model, bundled.tokenizer, drafters.ModelDrafter(other, bundled.tokenizer), [0, 1], 10)
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
        spec.new_run(small, tokenizer, drafters.ModelDrafter(bundled.model, bundled.tokenizer), [0, 1], 10)


def test_prompt_lookup_on_text_without_repeats_drafts_nothing_and_says_so(bundled):
    """No earlier occurrence of the last tokens: the round drafts nothing, says so, and is one plain step."""
    ids = [0, 11, 12, 13, 14, 15]
    run = spec.new_run(bundled.model, bundled.tokenizer, drafters.PromptLookupDrafter(4096), ids, 5)
    record = run.step(GREEDY)
    assert record.drafted == 0 and record.verify_positions == 1
    assert "drafted nothing" in record.note
    assert run.generated_ids == plain_greedy(bundled, ids, 1)


def test_prompt_lookup_copies_what_followed_the_latest_match():
    """The last 3 tokens (then fewer) are searched backwards; the tokens after the match are the draft."""
    assert drafters.find_lookup([5, 1, 2, 3, 9, 8, 1, 2, 3]) == drafters.LookupMatch(3, 1, 4)
    assert drafters.find_lookup([1, 2, 7, 1, 2, 8, 4, 2], min_ngram=1) == drafters.LookupMatch(1, 4, 5)
    assert drafters.find_lookup([1, 2, 7, 1, 2, 8, 4, 2]) is None  # one token in common is not enough by default
    assert drafters.find_lookup([1, 2, 7, 1, 2, 8, 4, 1, 2]) == drafters.LookupMatch(2, 3, 5)
    assert drafters.find_lookup([1, 2, 3]) is None
    drafter = drafters.PromptLookupDrafter(10)
    request = drafters.DraftRequest(
        [5, 1, 2, 3, 9, 8, 1, 2, 3], 3, GREEDY, torch.zeros(10, dtype=torch.bool), lambda: 0.5
    )
    proposal = drafter.propose(request)
    assert proposal.tokens == [9, 8, 1]


def test_drafts_never_push_a_run_past_max_new_tokens(bundled, draft):
    """A run stops at exactly max new tokens, the last rounds drafting fewer tokens and saying why."""
    ids = encode_prompt(bundled.tokenizer, PROMPTS[0])
    run = speculative_greedy(bundled, drafters.ModelDrafter(draft.model, draft.tokenizer), ids, 7, gamma=16)
    assert len(run.generated_ids) == 7 and run.stop_reason == "max_new_tokens"
    assert run.rounds[0].drafted <= 6 and "may add only" in run.rounds[0].note


# -- theory --------------------------------------------------------------------------------------------


def test_expected_tokens_per_pass_is_the_geometric_sum():
    """(1 - a^(g+1)) / (1 - a): 1 at a = 0, g + 1 at a = 1, 1.9375 at a = 0.5, g = 4."""
    assert summary.expected_tokens_per_pass(0.0, 4) == 1
    assert summary.expected_tokens_per_pass(1.0, 4) == 5
    assert summary.expected_tokens_per_pass(0.5, 4) == pytest.approx(1.9375)
    assert summary.expected_tokens_per_pass(0.8, 3) == pytest.approx(sum(0.8**i for i in range(4)))


def test_predicted_speedup_and_break_even():
    """Speed-up = tokens per pass / (g c + 1); break-even alpha gives exactly 1; a costly draft always loses."""
    assert summary.predicted_speedup(0.8, 4, 0.1) == pytest.approx(summary.expected_tokens_per_pass(0.8, 4) / 1.4)
    alpha = summary.break_even_alpha(4, 0.3)
    assert summary.predicted_speedup(alpha, 4, 0.3) == pytest.approx(1.0, abs=1e-9)
    assert summary.break_even_alpha(4, 1.5) is None  # 5 tokens at best for the cost of 7 passes


def test_the_residual_gives_back_exactly_what_the_draft_took_too_much_of():
    """min(p, q) + (1 - sum min(p, q)) * normalise(max(0, p - q)) = p, token by token: accepted drafts and residual
    draws together are the target's distribution. A shortlist's q (zero on most tokens) and q = p included."""
    generator = torch.Generator().manual_seed(1)
    p = torch.randn(4096, generator=generator, dtype=torch.float64).mul(3).softmax(-1)
    full_q = torch.randn(4096, generator=generator, dtype=torch.float64).mul(3).softmax(-1)
    short_q = full_q.clone()
    short_q[1024:] = 0
    short_q /= short_q.sum()
    for q in (full_q, short_q):
        residual = rule.residual_distribution(p, q)
        assert (residual >= 0).all() and float(residual.sum()) == pytest.approx(1.0, abs=1e-12)
        kept = torch.minimum(p, q)
        torch.testing.assert_close(kept + (1 - kept.sum()) * residual, p, rtol=0, atol=1e-15)
        assert torch.equal(residual[1024:] > 0, p[1024:] > 0) or q is full_q  # q = 0: the residual holds p's tokens
    assert torch.equal(rule.residual_distribution(p, p), p)


def test_the_penalty_sees_the_drafted_tokens_before_each_position_and_off_nothing_is_built():
    base = seen_mask([3], 8)
    rows = rule.running_seen(base, [5, 6], SamplingSettings(temperature=0.8, repetition_penalty=1.2))
    assert rows.tolist() == [
        [i == 3 for i in range(8)],
        [i in (3, 5) for i in range(8)],
        [i in (3, 5, 6) for i in range(8)],
    ]
    assert rule.running_seen(base, [5, 6], SamplingSettings(temperature=0.8)) is base  # penalty 1 reads no seen


def test_with_the_penalty_off_a_rounds_p_is_the_targets_distribution_after_the_text(bundled, draft):
    """p of each drafted token, recorded by a round without the penalty, is the target's own final distribution
    after the text so far and the drafts before it (one pass of the whole text, transformers' forward)."""
    settings = SamplingSettings(temperature=0.8, top_p=0.9)
    ids = encode_prompt(bundled.tokenizer, PROMPTS[1])
    run = spec.new_run(bundled.model, bundled.tokenizer, drafters.ModelDrafter(draft.model, draft.tokenizer), ids, 12)
    record = run.step(settings)
    drafted = [c.token_id for c in record.checks]
    with torch.inference_mode():
        logits = bundled.model(input_ids=torch.tensor([ids + drafted])).logits[0, len(ids) - 1 : -1]
    p = rule.final_probs(logits.float(), settings, seen_mask(ids, logits.shape[-1]))
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
                    return drafters.LookupMatch(n, start, start + n)
        return None

    rng = random.Random(0)
    for _ in range(3000):
        vocab = rng.choice([2, 3, 300, 70_000, 2**24])
        ids = [rng.randrange(vocab) for _ in range(rng.randint(0, 40))]
        for min_ngram in (1, 2, 3):
            assert drafters.find_lookup(ids, 3, min_ngram) == scan(ids, 3, min_ngram), (ids, min_ngram)
    # bytes 00 01 00 00 | 00 00 00 00 | 01 00 00 00: the last token's bytes start at byte 1, inside token 256
    assert drafters.find_lookup([256, 0, 1], min_ngram=1) is None


def test_a_summary_says_when_its_verify_pass_is_round_0s_with_the_prompt(bundled, draft):
    ids = encode_prompt(bundled.tokenizer, "Once upon a time")
    run = spec.new_run(bundled.model, bundled.tokenizer, drafters.ModelDrafter(draft.model, draft.tokenizer), ids, 20)
    run.step(GREEDY)
    assert summary.summarise(run.rounds).verify_read_prompt
    assert summary.summarise(run.rounds).verify_pass_ms == run.rounds[0].verify_ms
    run.step(GREEDY)
    assert not summary.summarise(run.rounds).verify_read_prompt
    assert summary.summarise(run.rounds).verify_pass_ms == run.rounds[1].verify_ms  # round 0's pass left out


@pytest.mark.parametrize("size", [None, 256])
def test_each_record_keeps_its_own_rule_and_t1_probabilities_are_made_only_for_a_drawn_round(bundled, draft, size):
    """A run whose settings change between rounds: each record says whether it was greedy. A greedy round's T=1
    probabilities are not made in the round; `with_t1_probabilities` makes them, from the newest round's own logits
    or, for an older round, from each model's forward over the text: both the models' softmax of the drafted tokens.
    A sampled round comes back as it is (its chart shows p and q). A shortlist draft's q is over its shortlist."""
    ids = encode_prompt(bundled.tokenizer, PROMPTS[0])
    rows = None if size is None else shortlist.most_frequent(shortlist.token_counts(spec.BUNDLED_DRAFT_DIR), size)
    drafter = drafters.ModelDrafter(draft.model, draft.tokenizer, rows)
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
