"""Our sampling stages against transformers' own logits processors (the oracle)."""

import itertools

import pytest
import torch
from scipy import stats as scipy_stats
from transformers.generation.logits_process import (
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from inference.sampling.pipeline import (
    SamplingSettings,
    display_order,
    display_rank,
    draw,
    inverse_cdf_index,
    partial_display_order,
    sample_token,
    seen_mask,
    stage_logits,
)
from inference.sampling.stages import (
    apply_min_p,
    apply_repetition_penalty,
    apply_temperature,
    apply_top_k,
    apply_top_p,
    fast_top_p,
)
from inference.sampling.step_view import step_view

pytestmark = pytest.mark.unit

VOCAB = 512
GRID = list(itertools.product([0.3, 1.0, 1.7], [0, 5, 50], [0.5, 0.9, 1.0], [0.0, 0.05, 0.3], [1.0, 1.3, 0.8]))


def random_logits(seed, batch=3, vocab=VOCAB, scale=3.0):
    return torch.randn(batch, vocab, generator=torch.Generator().manual_seed(seed)) * scale


def hf_stages(logits, history, s: SamplingSettings):
    """The same pipeline built from transformers' processors, in generate's order."""
    out = {}
    scores = (
        RepetitionPenaltyLogitsProcessor(s.repetition_penalty)(history, logits.clone())
        if s.repetition_penalty != 1
        else logits
    )
    out["penalty"] = scores
    scores = TemperatureLogitsWarper(s.temperature)(history, scores)
    out["temperature"] = scores
    if s.top_k:
        scores = TopKLogitsWarper(s.top_k)(history, scores)
    out["top_k"] = scores
    if s.top_p < 1:
        scores = TopPLogitsWarper(s.top_p)(history, scores)
    out["top_p"] = scores
    if s.min_p > 0:
        scores = MinPLogitsWarper(s.min_p)(history, scores)
    out["min_p"] = scores
    return out


@pytest.mark.parametrize("temperature,top_k,top_p,min_p,penalty", GRID)
def test_every_stage_equals_transformers_processors(temperature, top_k, top_p, min_p, penalty):
    """Each stage's distribution equals the softmax of transformers' processor output to 1e-6."""
    settings = SamplingSettings(temperature, top_k, top_p, min_p, penalty)
    logits = random_logits(hash((temperature, top_k, top_p, min_p, penalty)) % 10_000)
    history = torch.randint(0, VOCAB, (3, 12), generator=torch.Generator().manual_seed(7))
    ours = stage_logits(logits, settings, seen_mask(history.tolist(), VOCAB))
    theirs = hf_stages(logits, history, settings)
    for stage in ("penalty", "temperature", "top_k", "top_p", "min_p"):
        torch.testing.assert_close(ours[stage].softmax(-1), theirs[stage].softmax(-1), atol=1e-6, rtol=0)


def test_stages_never_edit_their_input():
    """Every stage returns a new tensor and leaves the logits it was given untouched."""
    logits = random_logits(1)
    before = logits.clone()
    seen = seen_mask([[1, 2], [3], []], VOCAB)
    for fn, arg in [(apply_temperature, 0.5), (apply_top_k, 3), (apply_top_p, 0.5), (apply_min_p, 0.2)]:
        assert fn(logits, arg) is not logits
    assert apply_repetition_penalty(logits, seen, 1.5) is not logits
    assert torch.equal(logits, before)


def test_temperature_zero_is_greedy_without_division():
    """T = 0 keeps only the argmax and never produces NaN."""
    logits = random_logits(2)
    probs = apply_temperature(logits, 0).softmax(-1)
    assert not torch.isnan(probs).any()
    assert torch.equal(probs.argmax(-1), logits.argmax(-1))
    assert torch.equal(probs.max(-1).values, torch.ones(3))


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: SamplingSettings(temperature=-0.1), "`temperature`"),
        (lambda: SamplingSettings(temperature=float("nan")), "`temperature`"),
        (lambda: SamplingSettings(top_k=-1), "`top_k`"),
        (lambda: SamplingSettings(top_k=2.5), "`top_k`"),
        (lambda: SamplingSettings(top_p=0.0), "`top_p`"),
        (lambda: SamplingSettings(top_p=1.5), "`top_p`"),
        (lambda: SamplingSettings(min_p=-0.2), "`min_p`"),
        (lambda: SamplingSettings(repetition_penalty=0), "`repetition_penalty`"),
        (lambda: apply_top_p(torch.zeros(4), 2.0), "but is 2.0"),
    ],
)
def test_bad_arguments_are_rejected_with_their_name_and_value(call, message):
    """A bad knob raises ValueError naming the argument and its value."""
    with pytest.raises(ValueError, match=message.replace("`", "\\`").replace(".", "\\.")):
        call()


def test_inverse_cdf_lands_where_u_falls():
    """u in [0, 0.5) picks rank 0, [0.5, 0.8) rank 1, [0.8, 1) rank 2."""
    probs = torch.tensor([0.5, 0.3, 0.2, 0.0], dtype=torch.float64)
    assert [int(inverse_cdf_index(probs, u)) for u in (0.0, 0.49, 0.5, 0.79, 0.8, 0.999999)] == [0, 0, 1, 1, 2, 2]
    # Rounding can leave the total just under 1: never pick a removed token.
    assert int(inverse_cdf_index(torch.tensor([0.6, 0.3999999, 0.0], dtype=torch.float64), 0.9999999999)) == 1


def test_sample_token_draws_where_the_coin_falls_in_display_order():
    """Probabilities 0.2, 0.5, 0.3, 0 rank as ids 1, 2, 0: u below 0.5 picks id 1, up to 0.8 id 2, then id 0; tied
    probabilities rank by id; a removed token is never picked."""
    probs = torch.tensor([0.2, 0.5, 0.3, 0.0], dtype=torch.float64)
    assert [sample_token(probs, u) for u in (0.0, 0.49, 0.5, 0.79, 0.8, 0.9999999999)] == [1, 1, 2, 2, 0, 0]
    tied = torch.tensor([0.25, 0.25, 0.5], dtype=torch.float64)
    assert [sample_token(tied, u) for u in (0.4, 0.6, 0.8)] == [2, 0, 1]


@pytest.mark.parametrize(
    "settings",
    [
        SamplingSettings(temperature=0.8, top_k=50, top_p=0.9, min_p=0.05, repetition_penalty=1.2),
        SamplingSettings(temperature=1.3, typical_p=0.9),
        SamplingSettings(temperature=0),
    ],
)
def test_draw_and_sample_token_are_one_draw(settings):
    """The engine's `draw` and `sample_token` over the final distribution pick the same token for every u: one
    inverse CDF in display order, whichever way the distribution was ranked."""
    logits = random_logits(13, batch=1)[0]
    seen = seen_mask([3, 9, 27], VOCAB)
    final = stage_logits(logits, settings, seen)[settings.pipeline[-1]].double().softmax(-1)
    for u in torch.rand(200, generator=torch.Generator().manual_seed(8), dtype=torch.float64).tolist():
        assert draw(logits, settings, seen, u).token_id == sample_token(final, u), u


# `draw` is a deterministic function of u for fixed logits, so a draw whose law differs from the batch's by
# total variation d disagrees with it on a set of u of measure >= d: DRAW_CHECKED agreeing u leave a chance
# (1 - d)^2000 < 5e-5 of missing d = 0.005, a bias far smaller than the chi-square of 20,000 draws sees.
DRAW_CHECKED = 2000


def test_seeded_draws_match_the_final_probabilities():
    """20,000 seeded u by inverse CDF over the step view follow the final distribution (chi-square, p > 0.001), and
    `draw` picks the same token as the batch for the first 2,000 of them (each `draw` costs a whole pipeline)."""
    logits = random_logits(3, batch=1, vocab=64, scale=1.5)[0]
    settings = SamplingSettings(temperature=0.8, top_k=20, top_p=0.9)
    seen = seen_mask([], 64)
    view = step_view(logits, settings, seen)
    final = stage_logits(logits, settings, seen)["min_p"].softmax(-1).double()
    gen = torch.Generator().manual_seed(42)
    us = torch.rand(20_000, generator=gen, dtype=torch.float64)
    tokens = view.order[inverse_cdf_index(view.final.expand(len(us), -1), us)]
    counts = torch.bincount(tokens, minlength=64).float()
    for u, token in zip(us[:DRAW_CHECKED].tolist(), tokens[:DRAW_CHECKED].tolist()):
        assert draw(logits, settings, seen, u).token_id == token, u
    kept = final > 0
    assert counts[~kept].sum() == 0
    expected = final[kept] / final[kept].sum() * len(us)
    _, p_value = scipy_stats.chisquare(counts[kept].double().numpy(), expected.numpy())
    assert p_value > 0.001
    assert view.kept["min_p"] == int(kept.sum())


def test_view_reports_nucleus_and_other_mass():
    """The view's nucleus, kept counts and the 'other' row add up over the full vocabulary."""
    logits = random_logits(4, batch=1)[0]
    settings = SamplingSettings(temperature=1.0, top_p=0.7)
    view = step_view(logits, settings, seen_mask([], VOCAB), u=0.3)
    full = logits.softmax(-1).sort(descending=True).values.double()
    n = int((full.cumsum(0) < 0.7).sum()) + 1  # smallest prefix whose mass reaches 0.7
    assert view.nucleus_size == n == view.kept["top_p"]
    assert view.nucleus_mass >= 0.7 and view.nucleus_mass - float(full[n - 1]) < 0.7

    class Tok:
        all_special_ids = []

        def decode(self, ids, **kw):
            return f"t{ids[0]}"

        def convert_ids_to_tokens(self, i):
            return f"t{i}"

    table = view.table(Tok(), top_n=10)
    assert len(table) == 11
    assert abs(table["raw"].sum() - 1) < 1e-9 and abs(table["min_p"].sum() - 1) < 1e-9
    assert table.iloc[-1]["raw"] == pytest.approx(1 - float(full[:10].sum()))


def test_partial_display_order_starts_exactly_like_the_full_sort():
    """Sorting only the top gives the same leading ids, ties (broken by id) included."""
    logits = (random_logits(9, batch=1, vocab=6000)[0] * 2).round() / 2  # coarse values: many ties
    full = display_order(logits)
    for at_least in (1, 5, 50, 256, 1000, 2000):
        order, sorted_prefix = partial_display_order(logits, at_least)
        assert sorted_prefix >= min(at_least, 6000)
        assert torch.equal(order[:sorted_prefix], full[:sorted_prefix])
        assert sorted(order.tolist()) == list(range(6000))  # a permutation: nothing lost
    for token in full[[0, 3, 77, 5999]].tolist():
        assert full[display_rank(logits, token)] == token


def test_fast_top_p_paths_equal_the_plain_transformers_style_top_p():
    """The pipeline's top-p (given the display order, or sorting only top-k's survivors)
    keeps exactly the tokens the plain `apply_top_p` keeps, with the same logits."""
    logits = random_logits(10, batch=1, vocab=3000)[0]
    after_top_k = apply_top_k(logits, 40)
    batch = apply_top_k(random_logits(12, batch=4, vocab=3000), 30)
    for p in (0.1, 0.5, 0.9, 0.99):
        assert torch.equal(fast_top_p(logits, p, descending_order=display_order(logits)), apply_top_p(logits, p))
        assert torch.equal(fast_top_p(after_top_k, p), apply_top_p(after_top_k, p))
        assert torch.equal(fast_top_p(batch, p), apply_top_p(batch, p))


@pytest.mark.parametrize(
    "settings",
    [
        SamplingSettings(temperature=0.8, top_k=50, top_p=0.9, min_p=0.05, repetition_penalty=1.2),
        SamplingSettings(temperature=1.0, top_p=0.8),  # top-p over everything: one full sort
        SamplingSettings(temperature=0.7, min_p=0.1),  # no top-k/top-p: only the top is sorted
        SamplingSettings(temperature=1.3),  # nothing removed: the draw may walk the whole order
        SamplingSettings(temperature=0, repetition_penalty=1.5),
    ],
)
def test_fast_view_and_draw_equal_the_plain_full_sort_computation(settings):
    """A view and a draw over a 6,000-token vocabulary, from the one-sort / top-only
    pipeline, equal the straightforward one: every stage softmaxed over the whole
    vocabulary and laid out in the full display order."""
    vocab = 6000
    logits = random_logits(11, batch=1, vocab=vocab)[0]
    seen = seen_mask(list(range(0, vocab, 37)), vocab)
    stages = stage_logits(logits, settings, seen)
    order = display_order(stages["penalty"])
    reference = {name: stages[name].double().softmax(-1)[order] for name in stages}
    view = step_view(logits, settings, seen, u=0.37)
    n = view.sorted_prefix
    assert torch.equal(view.order[:n], order[:n])
    for name in stages:
        torch.testing.assert_close(view.probs[name][:50], reference[name][:50], atol=1e-12, rtol=0)
        assert view.kept[name] == int((reference[name] > 0).sum())
    assert (
        abs(
            view.entropy_final_bits
            - float(
                -(reference["min_p"][reference["min_p"] > 0].log2() * reference["min_p"][reference["min_p"] > 0]).sum()
            )
        )
        < 1e-9
    )
    for u in torch.rand(200, generator=torch.Generator().manual_seed(5), dtype=torch.float64).tolist():
        expected = int(order[0]) if settings.greedy else int(order[inverse_cdf_index(reference["min_p"], u)])
        chosen = draw(logits, settings, seen, u)
        assert chosen.token_id == expected
        assert chosen.rank == int((order == expected).nonzero()[0, 0])
        assert chosen.kept == view.kept["min_p"]
