"""What the Speculative page says about its numbers (issue #23 item 9): one α, c with its spread, the cost the
formula leaves out, the drafter named, and no legend entry for a curve hidden under another."""

import dataclasses

import pandas as pd
import plotly.graph_objects as go
import pytest

from inference.lessons.speculative import speed_figures as spec_fig
from inference.lessons.speculative import summary, verdicts
from inference.lessons.speculative import text as spec_text
from inference.lessons.speculative.comparison import Comparison, PlainTiming
from inference.lessons.speculative.run import RoundRecord

pytestmark = pytest.mark.unit


def _comparison(draft_pass_ms=2.0, outside_ms=(12.0, 12.0, 12.0), drafts=(1, 2, 3, 4)):
    run_summary = summary.RunSummary(
        rounds=4,
        new_tokens=10,
        drafted=16,
        checked=10,
        accepted=8,
        draft_ms=40.0,
        verify_ms=40.0,
        total_ms=100.0,
        draft_pass_ms=draft_pass_ms,
        verify_pass_ms=10.0,
    )
    plain = PlainTiming(forward_ms=[50.0] + [10.0] * 10, step_ms=[51.0] + [11.0] * 10)
    return Comparison(
        run_summary,
        plain,
        gamma=4,
        draft_passes_ms=tuple(float(d) for d in drafts) if draft_pass_ms else (),
        outside_passes_ms=outside_ms,
    )


def test_alpha_is_accepted_over_checked_and_the_metric_says_both_counts():
    """8 accepted of 10 checked (16 drafted): α = 80%, and the help gives accepted ÷ drafted apart, as 50%."""
    result = _comparison()
    label, value, help_text = spec_text.run_metrics(result, 4)[0]
    assert label == "α = accepted ÷ checked" and value == "80% (8 of 10)"
    assert (
        "16 were drafted, 6 of them after a rejection" in help_text and "Accepted ÷ drafted would be 50%" in help_text
    )
    assert "accepted ÷ checked" in spec_text.ALPHA_DEFINITION and "14104" in spec_text.ALPHA_SOURCE  # in the notes


def test_c_is_shown_with_how_it_was_measured_and_its_spread():
    result = _comparison(drafts=(1.0, 2.0, 2.0, 3.0, 4.0))
    low, high = result.cost_ratio_range()
    assert result.cost_ratio == pytest.approx(0.2) and low < 0.2 < high
    sentence = verdicts.cost_sentence(result, sweep_costs=[0.28, 0.52, 0.4])
    assert "c = 0.20" in sentence and "2.00 ms" in sentence and "10.00 ms" in sentence
    assert f"from {low:.2f} to {high:.2f}" in sentence and "from 0.28 to 0.52" in sentence
    table = pd.DataFrame({"temperature": [0.0, 0.8], "gamma": [1, 2], "alpha": [0.9, 0.7],
                          "measured_speedup": [1.5, 0.9], "cost_ratio": [0.28, 0.52]})  # fmt: skip
    assert any("from **0.28** to **0.52**" in line for line in verdicts.sweep_findings(table))


def test_the_formulas_gap_to_the_measurement_is_the_measured_cost_outside_the_model_passes():
    """Prompt lookup: c = 0 in the formula, yet every round searches, samples and keeps books (12 ms = 1.2 target
    passes of 10 ms), while plain decoding draws once per token (1 ms = 0.1 pass)."""
    result = _comparison(draft_pass_ms=None, outside_ms=(12.0,) * 3)
    assert result.overhead_passes_per_round() == pytest.approx(1.2)
    assert result.draw_passes_per_token() == pytest.approx(0.1)
    expected = summary.expected_tokens_per_pass(0.8, 4) * 1.1 / (4 * 0.0 + 1.0 + 1.2)  # verify 10 ms = 1 pass
    assert result.predicted_with_overheads() == pytest.approx(expected)
    assert result.predicted_with_overheads() < result.predicted_speedup(measured_verify=True)
    sentence = verdicts.overhead_sentence(result)
    assert sentence is not None and "1.20 target passes on the lookup's search" in sentence
    assert f"{expected:.2f}×" in sentence and "0.10 per token" in sentence
    assert any(sentence == p for p in verdicts.run_verdict(result))


def test_no_gap_sentence_when_the_prediction_does_not_beat_the_measurement():
    result = _comparison()
    fast = Comparison(summary.RunSummary(4, 10, 16, 10, 8, 1.0, 1.0, 1.0, 2.0, 10.0), result.plain, 4, (), (1.0,))
    assert verdicts.overhead_sentence(fast) is None  # measured 100x: the formula does not beat it


def test_the_sweep_captions_name_the_drafter():
    label = spec_text.drafter_label("storyteller-draft-1m")
    assert "draft model storyteller-draft-1m" in spec_text.sweep_speed_caption(48, label)
    assert "prompt lookup" in spec_text.sweep_tokens_caption(spec_text.drafter_label(None))


def test_a_line_drawn_under_another_says_so_in_its_legend_and_distinct_lines_do_not():
    fig = go.Figure()
    for name, y in (("a", [1.0, 2.0, 3.0]), ("b", [1.0, 2.0, 3.001]), ("c", [1.0, 2.5, 3.0])):
        fig.add_scatter(x=[1, 2, 3], y=y, mode="lines", name=name)
    spec_fig.mark_coinciding(fig)
    assert [t.name for t in fig.data] == ["a", "b (coincides with a)", "c"]


def test_the_theory_chart_marks_its_verify_curve_when_the_measured_verify_is_one_pass():
    fig = spec_fig.theory_figure(4, 0.2, 1.0, 0.8, 1.4)
    names = [t.name for t in fig.data]
    assert sum("coincides" in n for n in names) == 1
    assert fig.layout.xaxis.title.text == "α = accepted ÷ checked"


def test_the_sweep_says_how_many_runs_won_and_where():
    """Both sides of the red line in words: the runs that beat plain decoding and the γ they won at, per temperature."""
    table = pd.DataFrame({"temperature": [0.0, 0.0, 0.0, 0.8, 0.8, 0.8], "gamma": [1, 2, 4, 1, 2, 4],
                          "alpha": [0.9] * 3 + [0.6] * 3, "measured_speedup": [1.3, 1.1, 0.95, 1.02, 0.9, 0.7],
                          "cost_ratio": [0.2] * 6})  # fmt: skip
    line = next(line for line in verdicts.sweep_findings(table) if "beat plain decoding" in line)
    assert "**3 of 6** runs beat plain decoding" in line and "**3** did not" in line
    assert "temperature 0: won at γ = 1, 2" in line and "temperature 0.8: won at γ = 1" in line
    losing = table.assign(measured_speedup=0.8)
    assert "temperature 0.8: won at no γ" in next(
        line for line in verdicts.sweep_findings(losing) if "beat plain decoding" in line
    )


def test_both_sides_name_each_target_its_weights_verify_cost_and_best_run_and_claim_no_win_unmeasured():
    """A sweep on two targets says, per target, its weights, the median verify cost and the best run, from the table,
    and which won only where a median run beat plain decoding; a sweep on one target says nothing of the kind."""
    one = pd.DataFrame({"target": ["a"] * 2, "weight_bytes": [23_300_000] * 2, "verify_cost": [2.4, 2.6],
                        "measured_speedup": [0.9, 0.8]})  # fmt: skip
    assert verdicts.both_sides(one) is None
    two = pd.concat([one, one.assign(target="b", weight_bytes=65_600_000, verify_cost=[1.5, 1.9],
                                     measured_speedup=[1.4, 1.2])])  # fmt: skip
    sentence = verdicts.both_sides(two)
    assert "on **a** (23.3 MB of weights) a verify pass cost **2.50** one-token passes" in sentence
    assert "the median run was **0.85×** (best 0.90×)" in sentence
    assert "on **b** (65.6 MB of weights) a verify pass cost **1.70**" in sentence and "**1.30×**" in sentence
    assert "cheapest verify pass (in its own target's one-token passes) was b's" in sentence
    assert "and the median run beat plain decoding on b." in sentence
    losing = verdicts.both_sides(two.assign(measured_speedup=0.7))
    assert "no target's median run beat plain decoding" in losing


def test_the_verdict_says_what_a_verify_pass_cost_and_where_the_weights_sit(monkeypatch):
    """The "why" paragraph: the measured verify cost in one-token passes, the share of γ + 1 plain passes it is, the
    weights against this machine's cache (as reported), and a pointer to where speculation is made for only when the
    run lost."""
    monkeypatch.setattr(verdicts.machine, "last_level_cache_bytes", lambda: 32 * 2**20)
    lost = verdicts.verify_sentence(4.1, 4, 23_300_000, 0.8, "moe")
    assert "γ + 1 = 5 tokens cost **4.10** one-token passes, 82% of the 5" in lost
    assert "23.3 MB of weights fit in this machine's 32 MiB last-level cache" in lost
    assert verdicts.LARGER_MODEL in lost and "compare moe in the sweep below" in lost
    assert "sweep below" not in verdicts.verify_sentence(4.1, 4, 23_300_000, 0.8)  # no other bundled target
    won = verdicts.verify_sentence(1.2, 4, 540_000_000, 1.6)
    assert "about the price of one" in won and "do not fit in this machine's 32 MiB" in won
    assert verdicts.LARGER_MODEL not in won  # it won: no pointer elsewhere
    paragraphs = verdicts.run_verdict(_comparison(), 23_300_000)
    assert any(p.startswith("**Why:** here a verify pass of γ + 1 = 5 tokens cost **1.00**") for p in paragraphs)


def test_after_round_0_alone_the_verdict_waits_for_a_verify_pass_without_the_prompt():
    """Round 0's verify pass also reads the prompt (14.5 target passes in a screenshot): no 'cannot win' verdict from
    it; the metric says the prompt is in it. From round 1 on, the verdict is made, with the round's cost in passes."""
    base = _comparison()
    first = dataclasses.replace(base.summary, rounds=1, verify_pass_ms=145.0, verify_read_prompt=True)
    early = dataclasses.replace(base, summary=first)
    said = verdicts.run_verdict(early)
    assert said[0].startswith("Only round 0 has run") and "14.50 target passes with it" in said[0]
    assert not any("cannot win" in p or "only wins when" in p for p in said)
    verify_metric = next(m for m in spec_text.run_metrics(early, 4) if m[0] == "Verify ÷ target pass")
    assert verify_metric[1] == "14.50 (with the prompt)"
    later = dataclasses.replace(base, summary=dataclasses.replace(base.summary, verify_pass_ms=145.0))
    verdict = verdicts.run_verdict(later)[0]
    assert "cannot win: a round costs γ·c + verify = 15.30 target passes for at most γ + 1 = 5 tokens" in verdict


def test_a_greedy_rejection_says_the_targets_top_token_took_its_place_and_a_sampled_one_the_residual():
    record = RoundRecord(
        index=3,
        drafter="draft model",
        gamma=2,
        context_tokens=10,
        checks=[],
        accepted=1,
        token_id=7,
        token_text=" the",
        token_kind="residual",
        token_u=None,
        residual_top=[],
        new_tokens=[5, 7],
        draft_ms=[1.0, 1.0],
        verify_ms=10.0,
        verify_positions=3,
        round_ms=13.0,
        target_cache_tokens=12,
        draft_cache_tokens=12,
        greedy=True,
    )
    greedy = spec_text.round_sentence(record, " the")
    assert "draft token 2 was not the target's top token" in greedy and "residual" not in greedy
    sampled = spec_text.round_sentence(dataclasses.replace(record, greedy=False), " the")
    assert "draft token 2 failed its test" in sampled and "from the residual" in sampled
