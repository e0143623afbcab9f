"""The sampling stages against transformers' processors (the oracle) and llama.cpp's definitions worked by hand,
the stage order, display order and the one draw (seeded draws against each computed distribution)."""

import itertools
import math

import pytest
import torch
from scipy import stats as scipy_stats
from transformers.generation.logits_process import (
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
    TypicalLogitsWarper,
)

from inference.sampling.pipeline import (
    LLAMA_CPP_ORDER,
    STAGE_NAMES,
    TRANSFORMERS_ORDER,
    SamplingSettings,
    display_order,
    display_rank,
    draw,
    entropy_bits,
    inverse_cdf_index,
    partial_display_order,
    ranking_logits,
    sample_token,
    seen_mask,
    stage_logits,
)
from inference.sampling.stages import (
    MASK,
    STAGES,
    StepContext,
    apply_dry,
    apply_min_p,
    apply_mirostat,
    apply_repetition_penalty,
    apply_temperature,
    apply_top_k,
    apply_top_n_sigma,
    apply_top_p,
    apply_typical_p,
    apply_xtc,
    dry_penalties,
    mirostat_next_mu,
)
from inference.sampling.step_view import step_view

pytestmark = pytest.mark.unit

VOCAB = 512
GRID = list(itertools.product([0.3, 1.0, 1.7], [0, 5, 50], [0.5, 0.9, 1.0], [0.0, 0.05, 0.3], [1.0, 1.3, 0.8]))
A, B, C, Y = 0, 1, 2, 3  # token ids for the hand-made DRY histories


def random_logits(seed, batch=3, vocab=VOCAB, scale=3.0):
    return torch.randn(batch, vocab, generator=torch.Generator().manual_seed(seed)) * scale


def hf_stages(logits, history, s: SamplingSettings):
    """The same pipeline built from transformers' processors, in generate's order (a neutral knob: no processor)."""
    out, scores = {}, logits.clone()
    for name, processor, on in [
        ("penalty", RepetitionPenaltyLogitsProcessor(s.repetition_penalty), s.repetition_penalty != 1),
        ("temperature", TemperatureLogitsWarper(s.temperature), True),
        ("top_k", TopKLogitsWarper(max(s.top_k, 1)), s.top_k > 0),
        ("top_p", TopPLogitsWarper(s.top_p), s.top_p < 1),
        ("min_p", MinPLogitsWarper(max(s.min_p, 1e-9)), s.min_p > 0),
    ]:
        out[name] = scores = processor(history, scores) if on else scores
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
    logits, seen = random_logits(1), seen_mask([[1, 2], [3], []], VOCAB)
    before = logits.clone()
    for fn, arg in [(apply_temperature, 0.5), (apply_top_k, 3), (apply_top_p, 0.5), (apply_min_p, 0.2)]:
        assert fn(logits, arg) is not logits
    assert apply_repetition_penalty(logits, seen, 1.5) is not logits and torch.equal(logits, before)


def test_temperature_zero_is_greedy_without_division():
    """T = 0 keeps only the argmax and never produces NaN."""
    logits = random_logits(2)
    probs = apply_temperature(logits, 0).softmax(-1)
    assert not torch.isnan(probs).any()
    assert torch.equal(probs.argmax(-1), logits.argmax(-1))
    assert torch.equal(probs.max(-1).values, torch.ones(3))


BAD = [("temperature", -0.1), ("temperature", float("nan")), ("top_k", -1), ("top_k", 2.5), ("top_p", 0.0),
       ("top_p", 1.5), ("min_p", -0.2), ("repetition_penalty", 0), ("typical_p", 0), ("top_n_sigma", -1),
       ("xtc_probability", 1.5), ("xtc_threshold", -0.1), ("dry_multiplier", -1), ("dry_base", 0.5),
       ("dry_allowed_length", 0), ("mirostat_tau", 0), ("mirostat_eta", 2)]  # fmt: skip


@pytest.mark.parametrize("knob,value", BAD)
def test_a_bad_knob_is_refused_naming_the_knob_and_its_value(knob, value):
    with pytest.raises(ValueError, match=f"`{knob}` has to be .*, but is {value}"):
        SamplingSettings(**{knob: value})


def test_a_bad_order_or_a_bad_argument_to_a_stage_is_refused():
    for call, message in [
        (lambda: SamplingSettings(order=("temperature", "nucleus")), "unknown stages"),
        (lambda: SamplingSettings(order=("top_k", "top_k")), "twice"),
        (lambda: apply_top_p(torch.zeros(4), 2.0), "but is 2.0"),
        (lambda: apply_typical_p(torch.zeros(4), 1.5), "but is 1.5"),
    ]:
        with pytest.raises(ValueError, match=message):
            call()


def test_inverse_cdf_lands_where_u_falls():
    """u in [0, 0.5) picks rank 0, [0.5, 0.8) rank 1, [0.8, 1) rank 2."""
    probs = torch.tensor([0.5, 0.3, 0.2, 0.0], dtype=torch.float64)
    assert [int(inverse_cdf_index(probs, u)) for u in (0.0, 0.49, 0.5, 0.79, 0.8, 0.999999)] == [0, 0, 1, 1, 2, 2]
    # Rounding can leave the total just under 1: never pick a removed token.
    assert int(inverse_cdf_index(torch.tensor([0.6, 0.3999999, 0.0], dtype=torch.float64), 0.9999999999)) == 1
    # With the top tokens removed (XTC, typical-p), u near 0 picks the first kept token.
    probs = torch.tensor([0.0, 0.0, 0.6, 0.3999999, 0.0], dtype=torch.float64)
    assert [int(inverse_cdf_index(probs, u)) for u in (0.0, 0.59, 0.61, 0.9999999999)] == [2, 2, 3, 3]


def test_sample_token_draws_where_the_coin_falls_in_display_order():
    """Probabilities 0.2, 0.5, 0.3, 0 rank as ids 1, 2, 0: u below 0.5 picks id 1, up to 0.8 id 2, then id 0; tied
    probabilities rank by id; a removed token is never picked."""
    probs = torch.tensor([0.2, 0.5, 0.3, 0.0], dtype=torch.float64)
    assert [sample_token(probs, u) for u in (0.0, 0.49, 0.5, 0.79, 0.8, 0.9999999999)] == [1, 1, 2, 2, 0, 0]
    tied = torch.tensor([0.25, 0.25, 0.5], dtype=torch.float64)
    assert [sample_token(tied, u) for u in (0.4, 0.6, 0.8)] == [2, 0, 1]


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


@pytest.mark.parametrize("mass", [0.2, 0.5, 0.9, 0.95, 0.99])
def test_typical_p_equals_transformers_typical_warper(mass):
    """Typical-p keeps exactly the tokens transformers' TypicalLogitsWarper keeps, batch and all."""
    logits = random_logits(int(mass * 100))
    ours = apply_typical_p(logits, mass)
    theirs = TypicalLogitsWarper(mass)(torch.zeros(3, 1, dtype=torch.long), logits.clone())
    assert torch.equal(torch.isfinite(ours), torch.isfinite(theirs))
    torch.testing.assert_close(ours.softmax(-1), theirs.softmax(-1), atol=1e-7, rtol=0)


def test_typical_p_may_drop_the_most_likely_token():
    """0.4, 0.3, 0.3: entropy 1.089 nats is nearer the 0.3 tokens' surprise (1.204) than the top's (0.916)."""
    logits = torch.log(torch.tensor([0.4, 0.3, 0.3]))
    assert torch.isfinite(apply_typical_p(logits, 0.5)).tolist() == [False, True, True]


def test_top_n_sigma_keeps_logits_within_n_population_deviations_of_the_max():
    """Logits 3, 2, 1, 0, -1: mean 1, σ = √2; n = 1 cuts at 3 - 1.414 (keeps 2 tokens), n = 2 at
    3 - 2.828 (keeps 3), and dividing by a temperature first keeps the same set."""
    logits = torch.tensor([3.0, 2.0, 1.0, 0.0, -1.0])
    assert torch.isfinite(apply_top_n_sigma(logits, 1.0)).tolist() == [True, True, False, False, False]
    assert torch.isfinite(apply_top_n_sigma(logits, 2.0)).tolist() == [True, True, True, False, False]
    assert torch.isfinite(apply_top_n_sigma(logits / 0.37, 1.0)).tolist() == [True, True, False, False, False]
    # Already-removed tokens are left out of the mean and σ: 3, 2, 1 -> σ = 0.816, cut 2.18.
    partly = torch.tensor([3.0, 2.0, 1.0, float("-inf"), float("-inf")])
    assert torch.isfinite(apply_top_n_sigma(partly, 1.0)).tolist() == [True, False, False, False, False]


def test_xtc_removes_all_top_choices_but_the_least_likely_when_its_draw_says_so():
    """Probabilities 0.4, 0.3, 0.2, 0.1, threshold 0.25: 0.4 and 0.3 reach it, so 0.4 goes and
    0.3 stays; no cut when XTC's u is above its probability, or when one token reaches it."""
    logits = torch.log(torch.tensor([0.4, 0.3, 0.2, 0.1]))
    assert torch.isfinite(apply_xtc(logits, 0.5, 0.25, u=0.3)).tolist() == [False, True, True, True]
    assert torch.isfinite(apply_xtc(logits, 0.5, 0.25, u=0.7)).all()
    assert torch.isfinite(apply_xtc(logits, 1.0, 0.35, u=0.0)).all()
    batch = torch.stack([logits, logits])
    kept = torch.isfinite(apply_xtc(batch, 0.5, 0.15, u=torch.tensor([0.1, 0.9]))).tolist()
    assert kept == [[False, False, True, True], [True, True, True, True]]


def test_dry_penalises_the_tokens_that_would_extend_a_repeat():
    """llama.cpp's example history a b c c b c y a b c: the end "a b c" occurred before and was
    followed by c (repeat 3), "b c" by y (repeat 2), "c" by b (repeat 1). Allowed length 2,
    multiplier 0.8, base 1.75: c loses 0.8·1.75, y loses 0.8, b nothing."""
    history = [A, B, C, C, B, C, Y, A, B, C]
    assert dry_penalties(history, 0.8, 1.75, 2) == pytest.approx({C: 0.8 * 1.75, Y: 0.8})
    # A breaker 2 tokens back (a) caps every repeat at 2; one 1 token back (b) stops DRY.
    assert dry_penalties(history, 0.8, 1.75, 2, frozenset({A})) == pytest.approx({C: 0.8, Y: 0.8})
    assert dry_penalties(history, 0.8, 1.75, 2, frozenset({B})) == {}
    # A breaker is never penalised itself.
    assert dry_penalties(history, 0.8, 1.75, 2, frozenset({Y})) == pytest.approx({C: 0.8 * 1.75})
    out = apply_dry(torch.zeros(5), history, 0.8, 1.75, 2)
    assert out.tolist() == pytest.approx([0.0, 0.0, -1.4, -0.8, 0.0])
    assert dry_penalties(history, 0.0, 1.75, 2) == {}


def test_dry_long_repeat_grows_exponentially():
    """A 6-token phrase repeated: the next token of the phrase loses multiplier·base^(6 - 2)."""
    phrase = [10, 11, 12, 13, 14, 15, 16]
    history = phrase + [99] + phrase[:6]
    assert dry_penalties(history, 1.0, 2.0, 2) == pytest.approx({16: 2.0**4})


def test_mirostat_cuts_at_surprise_mu_and_moves_mu_toward_tau():
    """Probabilities ½, ¼, ⅛, ⅛ have surprise 1, 2, 3, 3 bits: mu 2.5 keeps two, mu 0.5 keeps
    the top one only. Drawing the 2nd (renormalised ⅓, surprise 1.585 bits) with tau 3 and eta
    0.1 moves mu from 2.5 to 2.5 - 0.1·(1.585 - 3) = 2.6415."""
    logits = torch.log(torch.tensor([0.5, 0.25, 0.125, 0.125]))
    assert torch.isfinite(apply_mirostat(logits, 2.5)).tolist() == [True, True, False, False]
    assert torch.isfinite(apply_mirostat(logits, 0.5)).tolist() == [True, False, False, False]
    assert mirostat_next_mu(2.5, 3.0, 0.1, 1 / 3) == pytest.approx(2.5 - 0.1 * (math.log2(3) - 3))


def test_mirostat_through_the_draw_reports_the_next_mu():
    """A draw with mirostat on starts at mu = 2·tau and reports mu after its own surprise."""
    logits = torch.log(torch.tensor([0.5, 0.25, 0.125, 0.125]))
    settings = SamplingSettings(mirostat=True, mirostat_tau=1.25, mirostat_eta=0.5)  # mu starts at 2.5
    chosen = draw(logits, settings, seen_mask([], 4), u=0.9, context=StepContext())
    assert chosen.token_id == 1 and chosen.prob == pytest.approx(1 / 3)
    assert chosen.mirostat_mu_next == pytest.approx(2.5 - 0.5 * (math.log2(3) - 1.25))


def test_stateful_stage_without_its_context_says_what_is_missing():
    """XTC without its recorded uniform is refused with a sentence, not a crash deep inside."""
    with pytest.raises(ValueError, match="XTC"):
        draw(torch.zeros(8), SamplingSettings(xtc_probability=0.5), seen_mask([], 8), 0.3, StepContext())


def test_order_is_completed_and_presets_are_what_the_tools_document():
    """A partial order runs the stages given first; llama.cpp's default runs temperature last."""
    settings = SamplingSettings(order=("temperature", "penalty"))
    assert settings.order[:3] == ("temperature", "penalty", "dry")
    assert settings.pipeline == ("temperature", "penalty", "top_k", "top_p", "min_p")
    llama = SamplingSettings(temperature=0.7, top_p=0.9, order=LLAMA_CPP_ORDER)
    assert llama.pipeline == ("penalty", "top_k", "top_p", "min_p", "temperature")


def test_every_stage_is_one_row_of_the_table_and_every_row_a_stage_of_the_orders():
    """The stages the orders name and the format mask are exactly the rows of `STAGES`, each with a label."""
    assert set(STAGES) == set(TRANSFORMERS_ORDER) | {MASK} == set(LLAMA_CPP_ORDER) | {MASK}
    assert all(STAGE_NAMES[name] == stage.label for name, stage in STAGES.items())
    classic = {name for name, stage in STAGES.items() if stage.classic}
    assert classic == {"penalty", "temperature", "top_k", "top_p", "min_p"}


@pytest.mark.parametrize("name", list(STAGES))
def test_a_stage_its_row_calls_off_hands_on_its_input_or_is_left_out(name):
    """Under the neutral settings every row says it is off: a classic stage then returns a new tensor equal to its
    input; any other is left out of the pipeline."""
    logits = random_logits(31, batch=1, vocab=64)[0]
    settings = SamplingSettings()
    assert STAGES[name].off(settings)
    if STAGES[name].classic:
        out = STAGES[name].apply(logits, settings, seen_mask(list(CONTEXT.history), 64), CONTEXT)
        assert out is not logits and torch.equal(out, logits)
    else:
        assert name not in settings.pipeline


def test_temperature_before_or_after_min_p_keeps_different_tokens():
    """Probabilities ½, ¼, ⅛, ⅛ with min-p 0.3 (cut at 0.3 × ½ = 0.15 at T = 1): llama.cpp cuts
    before dividing by T = 3 and keeps two; transformers divides first, flattening the ratios to
    the top to (½)^(1/3) = 0.79 and (¼)^(1/3) = 0.63, so all four pass."""
    logits = torch.log(torch.tensor([0.5, 0.25, 0.125, 0.125]))
    seen = seen_mask([], 4)
    hf = SamplingSettings(temperature=3.0, min_p=0.3)
    llama = SamplingSettings(temperature=3.0, min_p=0.3, order=LLAMA_CPP_ORDER)
    assert step_view(logits, hf, seen).kept[hf.pipeline[-1]] == 4
    assert step_view(logits, llama, seen).kept[llama.pipeline[-1]] == 2


CONTEXT = StepContext(
    history=tuple([5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7]), breaker_ids=frozenset({40}), xtc_u=0.2, mirostat_mu=4.0
)
NEW_SAMPLER_SETTINGS = [
    SamplingSettings(typical_p=0.9),
    SamplingSettings(temperature=1.2, top_n_sigma=1.5),
    SamplingSettings(xtc_probability=0.5, xtc_threshold=0.08),
    SamplingSettings(dry_multiplier=0.8, dry_base=1.75, dry_allowed_length=2),
    SamplingSettings(mirostat=True, mirostat_tau=3.0),
    SamplingSettings(
        temperature=0.8,
        top_k=40,
        top_p=0.9,
        min_p=0.05,
        typical_p=0.95,
        repetition_penalty=1.3,
        dry_multiplier=0.8,
        xtc_probability=1.0,
        xtc_threshold=0.05,
        order=LLAMA_CPP_ORDER,
    ),  # fmt: skip
    SamplingSettings(temperature=0.7, dry_multiplier=2.0, top_k=30, order=("top_k", "temperature", "dry")),
    SamplingSettings(temperature=0, xtc_probability=1.0, xtc_threshold=0.02, order=LLAMA_CPP_ORDER),
    SamplingSettings(temperature=0.8, top_k=50, top_p=0.9, min_p=0.05, repetition_penalty=1.2),
    SamplingSettings(temperature=1.0, top_p=0.8),  # top-p over the whole vocabulary
    SamplingSettings(temperature=0.7, min_p=0.1),
    SamplingSettings(temperature=1.3),  # nothing removed: the draw may walk the whole order
    SamplingSettings(temperature=0, repetition_penalty=1.5),
]


@pytest.mark.parametrize("settings", NEW_SAMPLER_SETTINGS)
def test_view_and_draw_equal_the_plain_full_sort_computation(settings):
    """With any samplers and order, the view (sorted only as far as it needs) and the draw equal every stage
    softmaxed over the whole vocabulary in the full display order."""
    vocab = 3000
    logits = random_logits(21, batch=1, vocab=vocab, scale=2.0)[0]
    logits[5:9] += 4  # the history's tokens are likely, so DRY and the penalty have work
    seen = seen_mask(list(CONTEXT.history), vocab)
    stages = stage_logits(logits, settings, seen, CONTEXT)
    final = stages[settings.pipeline[-1]].double().softmax(-1)
    view = step_view(logits, settings, seen, u=0.37, context=CONTEXT)
    order = display_order(ranking_logits(logits, settings, seen, CONTEXT))
    n = view.sorted_prefix
    assert torch.equal(view.order[:n], order[:n])
    for name in stages:
        expected = stages[name].double().softmax(-1)[order][:60]
        torch.testing.assert_close(view.probs[name][:60], expected, atol=1e-12, rtol=0)
    assert view.kept[view.final_stage] == int((final > 0).sum())
    ranked = final[order]
    for u in torch.rand(100, generator=torch.Generator().manual_seed(5), dtype=torch.float64).tolist():
        rank = (ranked > 0).nonzero()[0, 0] if settings.greedy else inverse_cdf_index(ranked, u)
        assert draw(logits, settings, seen, u, CONTEXT).token_id == int(order[rank])


def chi_square_p(counts: torch.Tensor, expected_probs: torch.Tensor) -> float:
    kept = expected_probs > 0
    assert counts[~kept].sum() == 0, "a token with probability 0 was drawn"
    expected = expected_probs[kept] / expected_probs[kept].sum() * counts.sum()
    return scipy_stats.chisquare(counts[kept].double().numpy(), expected.numpy()).pvalue


@pytest.mark.parametrize(
    "settings",
    [SamplingSettings(temperature=0.8, top_k=20, top_p=0.9), *NEW_SAMPLER_SETTINGS[:5]],
    ids=["classic", "typical", "top_n_sigma", "xtc", "dry", "mirostat"],
)
def test_20000_seeded_draws_follow_each_samplers_distribution(settings):
    """20,000 seeded draws, batched by inverse CDF, match the computed distribution (chi-square, p > 0.001; XTC's the
    mixture of cut and uncut, each row with its own XTC uniform); the engine's `draw` picks the same token for the
    first 500 (XTC: 1,000), so a `draw` d = 0.01 away in total variation escapes with chance < 0.99^500."""
    vocab = 48
    logits = random_logits(3, batch=1, vocab=vocab, scale=1.5)[0]
    logits[5:8] += 1.5
    seen = seen_mask([], vocab)
    gen = torch.Generator().manual_seed(42)
    us = torch.rand(20_000, generator=gen, dtype=torch.float64)
    xtc_us = torch.rand(20_000, generator=gen, dtype=torch.float64).tolist()
    if settings.xtc_probability > 0:
        rows = [StepContext(xtc_u=xtc_u) for xtc_u in xtc_us]
        batch = stage_logits(logits.expand(len(us), -1), settings, seen.expand(len(us), -1), rows)
        order = display_order(ranking_logits(logits, settings, seen, rows[0]))
        tokens = order[inverse_cdf_index(batch[settings.pipeline[-1]].double().softmax(-1)[:, order], us)]
        counts = torch.bincount(tokens, minlength=vocab).float()
        for u, row, token in list(zip(us.tolist(), rows, tokens.tolist()))[:1000]:
            assert draw(logits, settings, seen, u, row).token_id == token, (u, row.xtc_u)
        cut = stage_logits(logits, settings, seen, StepContext(xtc_u=0.0))[settings.pipeline[-1]].double().softmax(-1)
        uncut = stage_logits(logits, settings, seen, StepContext(xtc_u=1.0))[settings.pipeline[-1]].double().softmax(-1)
        assert not torch.equal(cut, uncut)  # the cut acts on this step
        expected = settings.xtc_probability * cut + (1 - settings.xtc_probability) * uncut
    else:
        expected = stage_logits(logits, settings, seen, CONTEXT)[settings.pipeline[-1]].double().softmax(-1)
        assert int((expected > 0).sum()) < vocab or settings.dry_multiplier > 0  # the stage did something
        view = step_view(logits, settings, seen, context=CONTEXT)
        ranks = inverse_cdf_index(view.final.expand(len(us), -1), us)
        tokens = view.order[ranks]
        counts = torch.bincount(tokens, minlength=vocab).float()
        for u, token in zip(us[:500].tolist(), tokens[:500].tolist()):
            assert draw(logits, settings, seen, u, CONTEXT).token_id == token
    assert chi_square_p(counts, expected) > 0.001


def test_a_certain_distribution_has_zero_bits_never_minus_zero():
    assert [f"{float(b):.2f}" for b in entropy_bits(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))] == ["0.00", "0.00"]
