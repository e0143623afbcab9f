"""Speculative decoding: the output is provably the target's, greedy and sampled, and what the page measures.

Oracles: plain greedy decoding, transformers' assisted generation, and the target's own next-token distributions
(20,000 draws against them, chi-square and total variation, with a wrong sampler that the same check catches)."""

import functools
import math
import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from inference.core import kv_cache
from inference.core.forward import ShortlistForward, TransformersForward
from inference.core.loader import encode_prompt, load_model
from inference.core.run import GREEDY
from inference.lessons.speculative import comparison, drafters, drafting, rule
from inference.lessons.speculative import run as spec
from inference.lessons.speculative.comparison import plain_decode, summarise
from inference.sampling.pipeline import SamplingSettings, sample_token, seen_mask

pytestmark = pytest.mark.unit

PROMPTS = [
    "Once upon a time, there was a little girl named Lily. She loved to play outside",
    "Tom and his dog went to the park. The dog saw a ball and",
]
NEW_TOKENS = 60
DRAWS, MIN_BIN, P_FLOOR, TV_CEILING = 20_000, 0.005, 0.001, 0.02  # bins: tokens above 0.5%, the rest share one


@pytest.fixture(scope="module")
def draft(bundled):
    return load_model(str(drafting.BUNDLED_DRAFT_DIR))


@pytest.fixture(scope="module")
def counts():
    return drafters.token_counts(drafting.BUNDLED_DRAFT_DIR)


def outside(rows: list[int], vocab: int) -> torch.Tensor:
    mask = torch.ones(vocab, dtype=torch.bool)
    mask[rows] = False
    return mask


def speculate(bundled, drafter, ids, new_tokens=NEW_TOKENS, settings=GREEDY, stop_at_eos=False, **options):
    run = spec.new_run(bundled.model, bundled.tokenizer, drafter, ids, new_tokens, stop_at_eos=stop_at_eos, **options)
    list(run.run(settings))
    return run


# -- greedy: token for token --------------------------------------------------------------------


@pytest.mark.parametrize("drafter", ["draft", "shortlist 256", "lookup", "self-draft"])
def test_greedy_speculation_equals_plain_greedy_token_for_token(bundled, draft, counts, drafter):
    make = {
        "draft": lambda: drafters.ModelDrafter(draft.model, draft.tokenizer),
        "shortlist 256": lambda: drafters.ModelDrafter(
            draft.model, draft.tokenizer, drafters.most_frequent(counts, 256)
        ),
        "lookup": lambda: drafters.PromptLookupDrafter(spec.vocabulary_rows(bundled.model)),
        "self-draft": lambda: drafters.self_drafter(bundled.model, bundled.tokenizer, 2, shortlisted=True),
    }[drafter]
    accepted = 0
    for prompt in PROMPTS:
        ids = encode_prompt(bundled.tokenizer, prompt)
        run = speculate(bundled, make(), ids)
        assert run.generated_ids == plain_decode(bundled.model, ids, NEW_TOKENS, GREEDY), prompt
        accepted += summarise(run.rounds).accepted
    assert accepted > 0  # the drafts were really used, not all thrown away


def test_transformers_assisted_generation_makes_our_greedy_tokens(bundled, draft):
    ids = encode_prompt(bundled.tokenizer, PROMPTS[0])
    input_ids = torch.tensor([ids])
    common = dict(attention_mask=torch.ones_like(input_ids), do_sample=False, max_new_tokens=NEW_TOKENS,
                  pad_token_id=bundled.tokenizer.eos_token_id)  # fmt: skip
    with torch.inference_mode():
        assisted = bundled.model.generate(input_ids, assistant_model=draft.model, **common)[0, len(ids) :].tolist()
        lookup = bundled.model.generate(input_ids, prompt_lookup_num_tokens=4, **common)[0, len(ids) :].tolist()
    ours = speculate(bundled, drafters.ModelDrafter(draft.model, draft.tokenizer), ids, stop_at_eos=True)
    ours_lookup = speculate(bundled, drafters.PromptLookupDrafter(4096), ids, stop_at_eos=True)
    assert ours.generated_ids == assisted == lookup == ours_lookup.generated_ids


# -- sampled: the target's own distribution ------------------------------------------------------


def tables(target, draft, ids, settings, shortlist=None) -> SimpleNamespace:
    """The final next-token distributions (the app's pipeline) of target and draft after the context, and after it
    plus any one token that can come first: all the first two tokens need; `second` the target's law of the second."""

    def rows(contexts):
        batch, seen = torch.tensor(contexts), torch.stack([seen_mask(c, target.config.vocab_size) for c in contexts])
        with torch.inference_mode():
            q_logits = draft(batch).logits[:, -1].float()
            if shortlist is not None:  # a shortlist draft: every other token's logit is -inf (q = 0)
                q_logits[:, outside(shortlist, q_logits.shape[-1])] = -torch.inf
            return rule.final_probs(target(batch).logits[:, -1].float(), settings, seen), rule.final_probs(
                q_logits, settings, seen
            )

    (p1,), (q1,) = rows([ids])
    support = ((p1 > 0) | (q1 > 0)).nonzero().squeeze(-1).tolist()
    assert len(support) < len(p1) // 4  # the settings keep few tokens, so the tables stay small
    p2, q2 = rows([ids + [a] for a in support])
    t = SimpleNamespace(p1=p1, q1=q1, p2=dict(zip(support, p2)), q2=dict(zip(support, q2)))
    t.second = sum(float(p1[a]) * t.p2[a] for a in support if p1[a] > 0)
    return t


def on_support(t: SimpleNamespace) -> SimpleNamespace:
    """The same tables over only the tokens some row can produce (in id order): the same draws, renumbered (checked
    on 500 draws), each a fraction of the cost (sorting 4,096 tokens was most of a draw's time)."""
    ids = (torch.stack([t.p1, t.q1, *t.p2.values(), *t.q2.values()]) > 0).any(dim=0).nonzero().squeeze(-1)
    new_id = {token: i for i, token in enumerate(ids.tolist())}
    return SimpleNamespace(ids=ids, p1=t.p1[ids], q1=t.q1[ids], second=t.second[ids],
                           p2={new_id[a]: r[ids] for a, r in t.p2.items()}, q2={new_id[a]: r[ids] for a, r in t.q2.items()})  # fmt: skip


def speculative_first_two(t, gamma: int, uniform) -> tuple[int, int]:
    """The first two tokens of a speculative run by the library's draw and rule on the real rows. γ 2 reaches the
    second draft's test and its residual, γ 1 the bonus token. A third token's row is never read: a stand-in."""
    x1 = sample_token(t.q1, uniform())
    drafted, q_rows, p_rows = [x1], [t.q1], [t.p1, t.p2[x1]]
    if gamma == 2:
        drafted.append(sample_token(t.q2[x1], uniform()))
        q_rows.append(t.q2[x1])
        p_rows.append(t.p2[x1])
    verdict = rule.verify_sampled(torch.stack(p_rows), torch.stack(q_rows), drafted, uniform)
    tokens = drafted[: verdict.accepted] + [verdict.token_id]
    if len(tokens) >= 2:
        return tokens[0], tokens[1]
    x = sample_token(t.q2[tokens[0]], uniform())  # the next round: draft one token, test it
    p = t.p2[tokens[0]]
    verdict = rule.verify_sampled(torch.stack([p, p]), t.q2[tokens[0]].unsqueeze(0), [x], uniform)
    return tokens[0], (x if verdict.accepted else verdict.token_id)


def accept_every_draft(t, gamma: int, uniform) -> tuple[int, int]:
    """A deliberately wrong sampler: it keeps every drafted token unchecked."""
    x1 = sample_token(t.q1, uniform())
    return x1, sample_token(t.q2[x1], uniform())


def agreement(samples: list[int], expected: torch.Tensor) -> tuple[float, float]:
    """(chi-square p-value, total variation) of draws against a distribution, every token above 0.5% its own bin."""
    big = (expected > MIN_BIN).nonzero().squeeze(-1).tolist()
    index = {token: i for i, token in enumerate(big)}
    observed = np.bincount([index.get(token, len(big)) for token in samples], minlength=len(big) + 1).astype(float)
    probs = torch.cat([expected[big], (1 - expected[big].sum()).clamp(min=0).reshape(1)]).numpy()
    tv = 0.5 * float(abs(observed / len(samples) - probs).sum())
    if probs[-1] <= 1e-12:  # nothing outside the big tokens: a draw there is not the target's
        if observed[-1] > 0:
            return 0.0, tv
        observed, probs = observed[:-1], probs[:-1]
    return float(chisquare(observed, probs / probs.sum() * len(samples)).pvalue), tv


def draws(sampler, t, gamma, n=DRAWS):
    generator = torch.Generator().manual_seed(0)
    stream = (u for _ in iter(int, 1) for u in torch.rand(4096, generator=generator, dtype=torch.float64).tolist())
    uniform = functools.partial(next, stream)
    pairs = [sampler(t, gamma, uniform) for _ in range(n)]
    return [a for a, _ in pairs], [b for _, b in pairs]


CASES = {  # prompt, settings, γ, a draft shortlist (q = 0 outside: those tokens come only from the residual)
    "T=1, top-k 40, gamma 2": ("Once upon a time, there was a little", SamplingSettings(temperature=1.0, top_k=40), 2, 0),
    "T=0.7, top-p 0.9, penalty 1.3, gamma 1": (
        "Tom and his dog went to the park. The dog",
        SamplingSettings(temperature=0.7, top_p=0.9, repetition_penalty=1.3), 1, 0,
    ),
    "T=1, top-k 40, gamma 2, shortlist 256": (
        "Once upon a time, there was a little", SamplingSettings(temperature=1.0, top_k=40), 2, 256,
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_speculative_draws_follow_the_targets_distribution_and_accepting_every_draft_does_not(bundled, draft, case):
    """20,000 draws of the first two tokens: chi-square p > 0.001 and TV < 0.02 against the target's own law; the
    same check catches a sampler that never rejects."""
    prompt, settings, gamma, size = CASES[case]
    rows = drafters.most_frequent(drafters.token_counts(drafting.BUNDLED_DRAFT_DIR), size) if size else None
    whole = tables(bundled.model, draft.model, encode_prompt(bundled.tokenizer, prompt), settings, rows)
    if rows is not None:  # the case tests what it says: the target wants tokens the draft cannot propose
        outside = [t for t in (whole.p1 > 0).nonzero().squeeze(-1).tolist() if t not in set(rows)]
        assert outside and float(whole.q1[outside].sum()) == 0.0
    small = on_support(whole)
    for sampler, follows in ((speculative_first_two, True), (accept_every_draft, False)):
        renumbered = [small.ids[tokens].tolist() for tokens in draws(sampler, small, gamma, n=500)]
        assert renumbered == list(draws(sampler, whole, gamma, n=500))
        for samples, expected in zip(draws(sampler, small, gamma), (small.p1, small.second)):
            p_value, tv = agreement(samples, expected)
            assert (p_value > P_FLOOR and tv < TV_CEILING) == follows, (sampler.__name__, p_value, tv)


def test_a_round_record_obeys_the_rule_it_shows_and_a_seed_replays_it(bundled, draft):
    """Every check: accepted iff u <= p/q, in order; new tokens = kept drafts + one target token; the same seed gives
    the same text, the global RNG untouched."""
    ids, state, drafter = encode_prompt(bundled.tokenizer, PROMPTS[0]), torch.get_rng_state(), drafters.ModelDrafter
    runs = [speculate(bundled, drafter(draft.model, draft.tokenizer), ids, 60, SamplingSettings(temperature=0.9), seed=7)
            for _ in "ab"]  # fmt: skip
    assert runs[0].generated_ids == runs[1].generated_ids and torch.equal(torch.get_rng_state(), state)
    rounds = runs[0].rounds
    assert any(r.token_kind == "residual" for r in rounds)
    for r in rounds:
        rejected = ["rejected"] + ["unchecked"] * (r.drafted - r.accepted - 1) if r.accepted < r.drafted else []
        assert [c.status for c in r.checks] == ["accepted"] * r.accepted + rejected
        for c in r.checks[: r.checked]:
            assert math.isclose(c.ratio, c.p / c.q) and (c.u <= c.ratio) == (c.status == "accepted")
        assert r.new_tokens == [c.token_id for c in r.checks[: r.accepted]] + [r.token_id]
        if r.token_kind == "residual":
            assert sum(x[4] for x in r.residual_top) <= 1 + 1e-9 and r.checks[r.accepted].p < r.checks[r.accepted].q
            assert all(res >= max(0.0, p - q) - 1e-12 for _, _, p, q, res in r.residual_top)  # divided by <= 1


@pytest.mark.parametrize("size", [None, 256])
def test_a_greedy_rounds_t1_probabilities_are_each_models_softmax(bundled, draft, counts, size):
    rows = None if size is None else drafters.most_frequent(counts, size)
    run = spec.new_run(bundled.model, bundled.tokenizer, drafters.ModelDrafter(draft.model, draft.tokenizer, rows),
                       encode_prompt(bundled.tokenizer, PROMPTS[0]), 40)  # fmt: skip
    sampled, record = run.step(SamplingSettings(temperature=1.0)), run.step(GREEDY)
    assert not sampled.greedy and all(c.p_raw is None for c in sampled.checks) and record.checks
    with torch.no_grad():
        full = torch.tensor([run.all_ids[: record.context_tokens] + [c.token_id for c in record.checks]])
        p, q = bundled.model(full).logits[0].double(), draft.model(full).logits[0].double()
    if rows is not None:
        q[:, outside(rows, q.shape[-1])] = -torch.inf
    for c in record.checks:
        position = record.context_tokens - 1 + c.position
        assert c.p_raw == pytest.approx(float(p[position].softmax(-1)[c.token_id]), abs=1e-5)
        assert c.q_raw == pytest.approx(float(q[position].softmax(-1)[c.token_id]), abs=1e-5)


def test_after_a_rejection_both_caches_hold_exactly_the_accepted_prefix(bundled, draft):
    """Lengths, bytes and contents: each cache equals a fresh prefill of the text minus its last token."""
    drafter = drafters.ModelDrafter(draft.model, draft.tokenizer)
    ids = encode_prompt(bundled.tokenizer, PROMPTS[1])
    run = spec.new_run(bundled.model, bundled.tokenizer, drafter, ids, 80, gamma=6, seed=3)
    rejections = 0
    for record in run.run(SamplingSettings(temperature=1.0)):
        if record.token_kind != "residual":
            continue
        rejections, prefix = rejections + 1, run.all_ids[:-1]  # the target's own last token is fed next round
        for model, cache in ((bundled.model, run.forward.cache), (draft.model, drafter.forward.cache)):
            assert kv_cache.cache_length(cache) == len(prefix)
            shape = kv_cache.KVShape.from_config(model.config, torch.float32)
            assert kv_cache.measured_bytes(cache) == shape.formula_bytes(len(prefix))
            fresh = TransformersForward(model, None)
            fresh.logits(prefix)
            for mine, theirs in zip(kv_cache.layer_tensors(cache), kv_cache.layer_tensors(fresh.cache)):
                torch.testing.assert_close(mine, theirs, atol=1e-4, rtol=1e-4)
        if rejections == 2:
            break
    assert rejections == 2


# -- bad input, the run's limits, prompt lookup ------------------------------------------------------------------


@pytest.mark.parametrize("gamma", [0, 17, 2.5, True])
def test_gamma_outside_1_to_16_is_refused_with_a_message(bundled, gamma):
    with pytest.raises(spec.SpeculationError, match=r"`gamma`.*from 1 to 16"):
        spec.new_run(bundled.model, bundled.tokenizer, drafters.PromptLookupDrafter(4096), [0, 1, 2], 10, gamma=gamma)


def test_a_draft_that_cannot_serve_the_target_is_refused_before_any_forward_pass(bundled, draft, gpt2):
    """Another vocabulary, the same size with other tokens, or a larger draft: refused, and no model runs."""
    from transformers import LlamaConfig, LlamaForCausalLM

    other = LlamaForCausalLM(LlamaConfig(vocab_size=1000, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1))  # fmt: skip
    calls = []
    handles = [m.register_forward_pre_hook(lambda *_: calls.append(1)) for m in (bundled.model, other)]
    with pytest.raises(spec.SpeculationError, match=spec.TOKENIZER_MISMATCH):
        spec.new_run(bundled.model, bundled.tokenizer, drafters.ModelDrafter(other, bundled.tokenizer), [0, 1], 10)
    for handle in handles:
        handle.remove()
    assert calls == []
    vocab = dict(bundled.tokenizer.get_vocab())
    first, second = list(vocab)[:2]
    vocab[first], vocab[second] = vocab[second], vocab[first]
    other_tokens = type("OtherTokens", (), {"__len__": lambda self: len(vocab), "get_vocab": lambda self: vocab})()
    with pytest.raises(spec.SpeculationError, match=spec.TOKENIZER_MISMATCH):
        spec.check_pair(bundled.model, bundled.tokenizer, draft.model, other_tokens)
    small, tokenizer = gpt2
    with pytest.raises(spec.SpeculationError, match="larger than the target"):
        spec.new_run(small, tokenizer, drafters.ModelDrafter(bundled.model, bundled.tokenizer), [0, 1], 10)


def test_a_run_stops_at_max_new_tokens_its_last_rounds_drafting_fewer_and_saying_why(bundled, draft):
    run = speculate(bundled, drafters.ModelDrafter(draft.model, draft.tokenizer), [1, 2, 3], 7, gamma=16)
    assert len(run.generated_ids) == 7 and run.stop_reason == "max_new_tokens"
    assert run.rounds[0].drafted <= 6 and "may add only" in run.rounds[0].note
    with pytest.raises(ValueError, match="gamma"):
        run.use_gamma(0)
    assert comparison.round_to_show([]) is None and run.rounds[comparison.round_to_show(run.rounds)].drafted > 0


def test_the_lookup_search_finds_what_a_plain_backwards_scan_finds():
    def scan(ids, max_ngram, min_ngram):
        for n in range(min(max_ngram, len(ids) - 1), min_ngram - 1, -1):
            for start in range(len(ids) - n - 1, -1, -1):
                if ids[start : start + n] == ids[-n:]:
                    return drafters.LookupMatch(n, start, start + n)
        return None

    rng = random.Random(0)
    for _ in range(1000):
        ids = [rng.randrange(rng.choice([2, 3, 300, 70_000, 2**24])) for _ in range(rng.randint(0, 40))]
        for min_ngram in (1, 2, 3):
            assert drafters.find_lookup(ids, 3, min_ngram) == scan(ids, 3, min_ngram), (ids, min_ngram)
    assert drafters.find_lookup([256, 0, 1], min_ngram=1) is None  # a byte hit inside token 256 is no match


# -- the rule's pieces, shortlists (FR-Spec) and the self-draft ----------------------------------------------------


def test_the_residual_gives_back_exactly_what_the_draft_took_too_much_of():
    """min(p, q) + (1 - sum min(p, q)) * normalise(max(0, p - q)) = p, token by token, a shortlist's q included."""
    generator = torch.Generator().manual_seed(1)
    p, full_q = torch.randn(2, 4096, generator=generator, dtype=torch.float64).mul(3).softmax(-1)
    short_q = torch.cat([full_q[:1024], torch.zeros(3072, dtype=torch.float64)])
    for q in (full_q, short_q / short_q.sum()):
        kept = torch.minimum(p, q)
        torch.testing.assert_close(kept + (1 - kept.sum()) * rule.residual_distribution(p, q), p, rtol=0, atol=1e-15)
    assert torch.equal(rule.residual_distribution(p, p), p)


def test_the_penalty_sees_the_drafted_tokens_before_each_position_and_off_nothing_is_built():
    base = seen_mask([3], 8)
    rows = rule.running_seen(base, [5, 6], SamplingSettings(temperature=0.8, repetition_penalty=1.2))
    assert rows.tolist() == [[i in seen for i in range(8)] for seen in ((3,), (3, 5), (3, 5, 6))]
    assert rule.running_seen(base, [5, 6], SamplingSettings(temperature=0.8)) is base


def test_the_bundled_drafts_shortlists_rank_its_counts_and_score_only_those_tokens(draft, counts, bundled):
    rows = drafters.most_frequent(counts, 256)
    assert rows == sorted(rows) and counts[rows].min() >= np.delete(counts, rows).max()
    assert drafting.shortlist_sizes(draft) == [256, 512, 1024, 2048] and drafting.shortlist_sizes(bundled) == []
    assert drafting.shortlist_ids(draft, 300) is None and drafting.shortlist_ids(draft, drafting.SHORTLIST_ALL) is None
    ids = encode_prompt(draft.tokenizer, PROMPTS[0])
    full, short = TransformersForward(draft.model, None), ShortlistForward(draft.model, None, rows)
    for feed, keep in ((ids[:6], 6), (ids[6:7], 1), (ids[7:12], 5)):
        a, b = full.logits(feed, keep), short.logits(feed, keep)
        torch.testing.assert_close(a[:, rows], b[:, rows], rtol=1e-5, atol=1e-5)
        assert torch.isneginf(b[:, outside(rows, full.vocab_size)]).all()
    with pytest.raises(ValueError, match="token ids from 0 to 4095"):
        ShortlistForward(draft.model, None, [1, 4096])
    run = speculate(
        bundled, drafters.ModelDrafter(draft.model, draft.tokenizer, rows), ids, 80, SamplingSettings(temperature=1.3)
    )
    assert all(c.token_id in set(rows) for r in run.rounds for c in r.checks)
    assert any(token not in set(rows) for token in run.generated_ids)  # from its residual or bonus draws


def test_a_self_draft_shares_the_targets_weights_and_refuses_a_bad_depth(bundled):
    before = {name: p.clone() for name, p in bundled.model.named_parameters()}
    draft = drafters.layer_draft(bundled.model, 2)
    target_storage = {p.data_ptr() for p in bundled.model.parameters()}
    assert all(p.data_ptr() in target_storage for p in draft.parameters()) and draft.config.num_hidden_layers == 2
    speculate(bundled, drafters.ModelDrafter(draft, bundled.tokenizer), [1, 2, 3], 8)
    assert all(torch.equal(p, before[name]) for name, p in bundled.model.named_parameters())
    for k in (0, bundled.model.config.num_hidden_layers, True):
        with pytest.raises(drafters.SelfDraftError):
            drafters.layer_draft(bundled.model, k)
    assert drafters.layer_choices(4) == [1, 2, 3] and drafters.layer_choices(30) == [4, 6, 8, 12, 15, 16, 20, 24, 28]
