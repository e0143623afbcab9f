"""Shared-draw A/B: two settings on the same u at every step, and the many-seed comparison."""

import numpy as np
import pandas as pd
import pytest
import torch

from inference.core.loader import encode_prompt
from inference.lessons.compare.shared_draws import (
    ManySeeds,
    batched_runs,
    bootstrap_interval,
    distinct_n,
    first_difference,
    many_seeds,
    order_lesson,
    recorded_view,
    repetition_rate,
    run_to_end,
    shared_draw_pair,
    summarize,
)
from inference.sampling.pipeline import SamplingSettings

pytestmark = pytest.mark.unit

PROMPT = "Once upon a time"


def prompt_ids(bundled):
    return encode_prompt(bundled.tokenizer, PROMPT)


def bundled_pair(bundled, a_settings, b_settings, seed: int, max_new_tokens: int):
    """A and B both on the bundled model, from PROMPT, on one seed's shared draws."""
    model, tokenizer = bundled.model, bundled.tokenizer
    return shared_draw_pair(model, model, tokenizer, prompt_ids(bundled), a_settings, b_settings, seed, max_new_tokens)


def test_same_seed_and_settings_in_a_and_b_give_bit_identical_runs(bundled):
    """A and B with one seed and one setting: every token, u, probability and logit is equal."""
    settings = SamplingSettings(temperature=0.9, top_p=0.9, xtc_probability=0.5, dry_multiplier=0.8, mirostat=True)
    pair = bundled_pair(bundled, settings, settings, seed=11, max_new_tokens=30)
    a, b = pair.trace_a.records, pair.trace_b.records
    assert pair.parting is None and len(a) == len(b) > 0
    for x, y in zip(a, b):
        assert (x.token_id, x.u, x.prob, x.xtc_u, x.mirostat_mu) == (y.token_id, y.u, y.prob, y.xtc_u, y.mirostat_mu)
        assert torch.equal(x.logits, y.logits)


def final_distribution(view) -> dict[int, float]:
    """token id -> final probability, for the tokens a step's settings keep."""
    ids, probs = view.order[: view.sorted_prefix].tolist(), view.probs[view.final_stage].tolist()
    return {i: p for i, p in zip(ids, probs) if p > 0}


def test_a_setting_that_cannot_change_a_step_does_not_part_the_texts_there(bundled):
    """B adds top-k 50 to A's min-p 0.05: where min-p kept 50 tokens or fewer they are the top 50 anyway and min-p's
    cut (a share of the top token's) does not move when top-k renormalises, so the texts cannot part there."""
    a_settings = SamplingSettings(temperature=1.0, min_p=0.05)
    b_settings = SamplingSettings(temperature=1.0, min_p=0.05, top_k=50)
    checked = 0
    for seed in range(3):
        pair = bundled_pair(bundled, a_settings, b_settings, seed=seed, max_new_tokens=40)
        a, b = pair.trace_a, pair.trace_b
        last = len(a.records) - 1 if pair.parting is None else pair.parting.step
        for step in range(last + 1):  # the same context in A and B up to here
            record_a, record_b = a.records[step], b.records[step]
            assert torch.equal(record_a.logits, record_b.logits) and record_a.u == record_b.u
            if record_a.kept > 50:
                continue
            checked += 1
            final_a, final_b = final_distribution(recorded_view(a, step)), final_distribution(recorded_view(b, step))
            assert final_a.keys() == final_b.keys() and record_b.kept == record_a.kept
            # Two computation paths (B renormalises after top-k, then cuts): equal within float64 rounding.
            assert [final_b[i] for i in final_a] == pytest.approx(list(final_a.values()), rel=1e-9, abs=1e-12)
            assert record_b.token_id == record_a.token_id
        if pair.parting is None:
            assert a.generated_ids == b.generated_ids
        else:
            assert a.records[pair.parting.step].kept > 50
    assert checked >= 20, "too few steps where min-p kept 50 tokens or fewer to check the claim"


def test_parting_is_explained_by_the_stage_that_removed_a_token_or_by_the_moved_curve(bundled):
    """A (T = 1.2) and B (T = 1.2, top-k 3) part: where A's token is outside B's top 3 the sentence names B's
    top-k, else top-k's renormalising moved B's curve under the same u. Seeds are tried until both are seen."""
    a_settings, b_settings = SamplingSettings(temperature=1.2), SamplingSettings(temperature=1.2, top_k=3)
    seen = set()
    for seed in range(5, 45):
        pair = bundled_pair(bundled, a_settings, b_settings, seed=seed, max_new_tokens=40)
        parting = pair.parting
        if parting is None:
            continue
        step = parting.step
        record_a, record_b = pair.trace_a.records[step], pair.trace_b.records[step]
        assert pair.trace_a.generated_ids[:step] == pair.trace_b.generated_ids[:step]
        assert record_a.u == record_b.u and record_a.token_id != record_b.token_id
        assert f"{parting.u:.3f}" in parting.reason
        in_b = final_distribution(parting.view_b)
        assert len(in_b) == 3
        if record_a.token_id in in_b:
            assert parting.reason.startswith("Both kept both tokens, but B's settings moved the curve"), seed
            seen.add("moved")
        else:
            assert record_a.rank >= 3 and parting.reason.startswith("B's top-k removed"), seed
            seen.add("removed")
        if seen == {"moved", "removed"}:
            break
    assert seen == {"moved", "removed"}, f"only {seen} partings in seeds 5 to {seed}"


def test_order_lesson_finds_a_step_where_the_orders_keep_different_tokens(bundled):
    """At T = 1.5 with min-p 0.1, cutting before (llama.cpp) or after (transformers) dividing by T
    keeps different token sets at some step; the lesson's two views show exactly that."""
    trace = run_to_end(bundled.model, bundled.tokenizer, prompt_ids(bundled), SamplingSettings(temperature=0.8), 2, 20)
    lesson = order_lesson(trace, SamplingSettings(temperature=1.5, min_p=0.1))
    assert lesson is not None
    kept_t = lesson.transformers.kept[lesson.transformers.final_stage]
    kept_l = lesson.llama_cpp.kept[lesson.llama_cpp.final_stage]
    assert kept_t - lesson.only_transformers == kept_l - lesson.only_llama_cpp  # the tokens both keep
    assert lesson.only_transformers + lesson.only_llama_cpp > 0


def test_batched_runs_equal_single_runs_with_the_same_seeds(bundled):
    """Row i of the batch draws seed i's u's: it writes what a single run with that seed writes."""
    settings = SamplingSettings(temperature=0.8, top_p=0.95)
    seeds = [0, 1, 2, 3]
    runs = batched_runs(bundled.model, bundled.tokenizer, prompt_ids(bundled), settings, seeds, 30)
    for seed, run in zip(seeds, runs):
        single = run_to_end(bundled.model, bundled.tokenizer, prompt_ids(bundled), settings, seed, 30)
        assert run == single.generated_ids


def test_text_statistics_on_a_hand_counted_example():
    """1 2 3 4 1 2 3 4 1: 6 four-grams of which 2 repeat an earlier one; 8 bigrams, 4 distinct."""
    ids = [1, 2, 3, 4, 1, 2, 3, 4, 1]
    assert repetition_rate(ids) == pytest.approx(2 / 6)
    assert distinct_n(ids, 2) == pytest.approx(0.5)
    assert np.isnan(repetition_rate([1, 2, 3]))
    assert first_difference([1, 2, 3], [1, 2, 4]) == 2 and first_difference([1, 2], [1, 2]) is None
    assert first_difference([1, 2], [1, 2, 3]) == 2


def test_bootstrap_interval_is_seeded_and_brackets_the_mean():
    """Same seed, same interval; the interval holds the sample mean and shrinks with more data."""
    values = [0.1, 0.4, 0.35, 0.2, 0.5, 0.3, 0.25, 0.45]
    low, high = bootstrap_interval(values, seed=3)
    assert (low, high) == bootstrap_interval(values, seed=3)
    assert low < np.mean(values) < high
    wide = high - low
    low4, high4 = bootstrap_interval(values * 4, seed=3)
    assert high4 - low4 < wide


def test_verdict_only_where_the_intervals_do_not_overlap():
    """A tiny fixed example: B repeats far more (intervals apart: one verdict); the lengths overlap (no verdict)."""
    stats_a = pd.DataFrame({"repetition_rate": [0.0, 0.05, 0.02, 0.01, 0.03, 0.0], "distinct_2": [0.9] * 6,
                            "mean_logprob": [-2.0, -2.1, -1.9, -2.2, -2.0, -2.05], "length": [20, 30, 25, 40, 35, 28],
                            "stopped": [True] * 6})  # fmt: skip
    stats_b = pd.DataFrame({"repetition_rate": [0.5, 0.6, 0.55, 0.45, 0.62, 0.58], "distinct_2": [0.9] * 6,
                            "mean_logprob": [-2.0, -2.1, -1.95, -2.15, -2.0, -2.1], "length": [22, 31, 27, 38, 33, 29],
                            "stopped": [True] * 6})  # fmt: skip
    summary = summarize(stats_a, stats_b, bootstrap_seed=0)
    result = ManySeeds(list(range(6)), [], [], stats_a, stats_b, summary, 0.0)
    verdicts = result.verdicts()
    assert summary.set_index("metric").loc["repetition_rate", "differs"]
    assert not summary.set_index("metric").loc["length", "differs"]
    assert len(verdicts) == 1 and verdicts[0].startswith("B has the higher repeated 4-grams")
    # The intervals are computed from these recorded values: the means are theirs.
    assert summary.set_index("metric").loc["repetition_rate", "mean_b"] == pytest.approx(
        stats_b["repetition_rate"].mean()
    )


def test_the_length_is_left_out_only_when_every_run_hit_the_cap():
    """48 tokens for every run of A and B (none chose the stop token): "tokens to the stop token" compares 48 with
    48, so it is not a statistic; one run that stopped brings it back, and the other intervals never move."""

    def stats(stopped):
        return pd.DataFrame({"repetition_rate": [0.0, 0.1, 0.2, 0.05], "distinct_2": [0.9, 0.8, 0.85, 0.95],
                             "mean_logprob": [-2.0, -2.1, -1.9, -2.2], "length": [48 if not s else 30 for s in stopped],
                             "stopped": stopped})  # fmt: skip

    capped = summarize(stats([False] * 4), stats([False] * 4))
    assert "length" not in set(capped["metric"]) and len(capped) == 3
    result = ManySeeds(list(range(4)), [], [], stats([False] * 4), stats([False] * 4), capped, 0.0)
    assert result.every_run_capped and "length" not in result.metrics
    one_stopped = summarize(stats([False] * 4), stats([False, True, False, False]))
    assert "length" in set(one_stopped["metric"])
    pd.testing.assert_frame_equal(one_stopped[one_stopped.metric != "length"].reset_index(drop=True), capped)


def test_many_seeds_statistics_come_from_the_recorded_runs(bundled):
    """Each run's statistics are recomputed from its recorded tokens, and A = B gives equal rows; the progress bar
    moves forward and reaches its total only at the last stage."""
    settings, calls, model = SamplingSettings(temperature=1.0, top_p=0.9), [], bundled.model
    result = many_seeds(model, model, bundled.tokenizer, model, prompt_ids(bundled), settings, settings, [0, 1, 2, 3, 4, 5],
                        24, progress=lambda done, total, what: calls.append((done, total, what)))  # fmt: skip
    assert {total for _, total, _ in calls} == {2 * 24 + 3}
    assert [what for _, _, what in calls][-3:] == ["scoring A's texts with the float32 model",
                                                   "scoring B's texts with the float32 model", "bootstrap intervals"]  # fmt: skip
    assert [done for done, _, _ in calls] == sorted(done for done, _, _ in calls) and calls[-1][0] < 2 * 24 + 3
    assert result.runs_a == result.runs_b
    pd.testing.assert_frame_equal(result.stats_a, result.stats_b)
    for run, (_, row) in zip(result.runs_a, result.stats_a.iterrows()):
        assert row["length"] == len(run)
        assert row["distinct_2"] == pytest.approx(distinct_n(run, 2), nan_ok=True)
    assert not result.summary["differs"].any() and result.verdicts() == []


def test_the_shared_u_charts_text_puts_each_runs_draw_on_its_own_curve(bundled):
    """The chart's sentence named A's marker with B's panel title (annotations and traces were paired in order):
    each curve and each u marker now carry their run's name, and each marker sits at that run's chosen token."""
    from inference.lessons.chart_text import describe
    from inference.lessons.compare.figures import shared_u_cdfs

    a_settings, b_settings = SamplingSettings(temperature=1.2), SamplingSettings(temperature=1.2, top_k=3)
    parting = next(p for seed in range(5, 45) if (p := bundled_pair(bundled, a_settings, b_settings, seed, 40).parting))
    said = describe(shared_u_cdfs(parting, bundled.tokenizer))
    for side, view in (("A", parting.view_a), ("B", parting.view_b)):
        assert f"{side}'s cumulative curve: " in said
        marker = said.split(f"u = {parting.u:.3f} on {side}'s curve: ")[1].split(";")[0]
        assert marker.startswith(f"{parting.u:.1%} at {view.chosen_rank + 1}. "), said
